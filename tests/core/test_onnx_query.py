"""Queries embedded from an ONNX export without torch (issue 44 item 6): the same vectors as the encoder
that built the index, and a `ragsieve search` process that never imports torch or sentence-transformers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from ragsieve.tools.index.embedders.local_embedder import Embedder  # noqa: E402
from ragsieve.tools.index.embedders.onnx_query import OnnxQueryEmbedder  # noqa: E402
from ragsieve.tools.index.embedders.providers import open_embedder  # noqa: E402

TEXTS = [
    "How do I rotate the API key of a Lumen workspace?",
    "x",
    "Rate limits apply per workspace, across all of its API keys. " * 60,
]  # past max_seq_length


@pytest.fixture(scope="module")
def int8(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("RAGSIEVE_CACHE")
    os.environ["RAGSIEVE_CACHE"] = str(cache)
    try:
        yield cache, Embedder(encoder="onnx-int8")
    finally:
        if old is None:
            os.environ.pop("RAGSIEVE_CACHE", None)
        else:
            os.environ["RAGSIEVE_CACHE"] = old


def test_the_light_embedder_gives_the_exporting_encoders_vectors(int8):
    _, full = int8
    for encoder in ("onnx-int8", "onnx"):
        light = OnnxQueryEmbedder.find(full.name, encoder)
        assert light is not None and light.dimension == full.dimension == 384
        reference = full.embed(TEXTS) if encoder == "onnx-int8" else Embedder(encoder="onnx").embed(TEXTS)
        assert np.abs(light.embed(TEXTS) - reference).max() < 1e-5
    record = {"provider": "sentence-transformers", "model": full.name, "encoder": "onnx-int8"}
    assert isinstance(open_embedder(record), OnnxQueryEmbedder)
    assert OnnxQueryEmbedder.find(full.name, "torch") is None  # torch-built indexes load the full model
    assert OnnxQueryEmbedder.find("some/other-model", "onnx-int8") is None


def test_no_export_means_no_light_embedder(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSIEVE_CACHE", str(tmp_path))
    assert OnnxQueryEmbedder.find("sentence-transformers/all-MiniLM-L6-v2", "onnx-int8") is None


def test_search_never_imports_torch(int8, tmp_path):
    cache, full = int8
    from ragsieve.tools.index.building.builder import IndexBuilder

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keys.md").write_text("# Keys\n\nRotate the API key every ninety days.\n")
    IndexBuilder(tmp_path / "idx", embedder=full, progress=False).build([tmp_path / "docs"])
    probe = (
        "import sys, json\nfrom ragsieve.cli.main import main\n"
        "code = main(['search', 'rotate the key', '--index', sys.argv[1], '--json'])\n"
        "print(json.dumps({'code': code, 'torch': 'torch' in sys.modules,"
        " 'st': 'sentence_transformers' in sys.modules}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "RAGSIEVE_CACHE": str(cache)},
    )
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.strip().split("\n")[-1])
    hits = json.loads(done.stdout[: done.stdout.rindex("\n{")])["hits"]
    assert last == {"code": 0, "torch": False, "st": False}
    assert hits and "ninety days" in hits[0]["text"]


def test_the_first_export_shows_no_tracer_warnings(tmp_path, monkeypatch):
    import warnings

    monkeypatch.setenv("RAGSIEVE_CACHE", str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Embedder(encoder="onnx")
    assert list(tmp_path.rglob("model.onnx"))  # it did export
    shown = [w for w in caught if "Tracer" in type(w.message).__name__ or "onnx" in str(w.filename)]
    assert not shown, [str(w.message)[:120] for w in shown]


def test_call_counts_are_pluralised():
    from ragsieve.cli.common import plural

    assert [plural(n, "LLM call") for n in (0, 1, 2)] == ["0 LLM calls", "1 LLM call", "2 LLM calls"]
