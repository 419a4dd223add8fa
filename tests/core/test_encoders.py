"""The faster encoder paths: the same MiniLM exported once to ONNX (offline) and run by ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ragsieve.tools.errors import UsageError  # noqa: E402
from ragsieve.tools.index.embedders.local_embedder import Embedder  # noqa: E402

TEXTS = [
    "How do I rotate the API key of a Lumen workspace?",
    "Rotation issues a new secret; the old one keeps working for 24 hours.",
    "Rate limits apply per workspace, across all of its API keys. " * 20,
    "def rotate_key(client, key_id):\n    return client.post(f'/keys/{key_id}/rotate')",
]


def test_onnx_agrees_with_torch_and_is_cached(tmp_path, monkeypatch, embedder):
    monkeypatch.setenv("RAGSIEVE_CACHE", str(tmp_path))
    reference = embedder.embed(TEXTS)
    onnx = Embedder(encoder="onnx")
    exported = list(tmp_path.rglob("model.onnx"))
    assert len(exported) == 1
    mtime = exported[0].stat().st_mtime_ns
    vectors = onnx.embed(TEXTS)
    assert vectors.shape == reference.shape
    assert float((vectors * reference).sum(1).min()) > 0.9999  # the same model: float-precision agreement
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    Embedder(encoder="onnx")  # the export is reused, not redone
    assert exported[0].stat().st_mtime_ns == mtime
    int8 = Embedder(encoder="onnx-int8").embed(TEXTS)
    cos = (int8 * reference).sum(1)
    assert cos.mean() > 0.98 and cos.min() > 0.95  # int8 weights: close, not equal (a separate space)


def test_unknown_encoder_is_refused():
    with pytest.raises(UsageError, match="invalid encoder"):
        Embedder(encoder="tpu")


def test_index_records_its_encoder_and_queries_use_it(tmp_path, monkeypatch):
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    monkeypatch.setenv("RAGSIEVE_CACHE", str(tmp_path / "cache"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Keys\n\nRotate keys every ninety days.\n", encoding="utf-8")
    IndexBuilder(tmp_path / "idx", encoder="onnx", progress=False).build([docs])
    with HybridIndex.open(tmp_path / "idx") as index:
        assert index.manifest["embedding"]["encoder"] == "onnx"
        assert index.embedder.encoder == "onnx"
        q = index.embed_query("how often are keys rotated?")
        assert float(index.vectors[0] @ q) > 0.3


def test_the_embedding_cache_keeps_int8_and_fp32_vectors_apart(tmp_path):
    import numpy as np

    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.building.embed_cache import EmbeddingCache, cache_model, text_key

    assert cache_model("m", "torch") == cache_model("m", "onnx") == "m"  # the same fp32 vectors: caches stay valid
    assert cache_model("m", "onnx-int8") != "m"
    keys = {
        enc: IndexBuilder(tmp_path / enc, encoder=enc, progress=False)._cache_model() for enc in ("torch", "onnx", "onnx-int8")
    }
    assert keys["torch"] == keys["onnx"] != keys["onnx-int8"]
    fp32 = EmbeddingCache(tmp_path / "e.sqlite", keys["onnx"], 4)
    fp32.put_many([text_key("a")], np.ones((1, 4), dtype=np.float32))
    int8 = EmbeddingCache(tmp_path / "e.sqlite", keys["onnx-int8"], 4)
    assert int8.get_many([text_key("a")]) == {}  # an int8 build embeds again rather than reusing fp32 vectors
    assert list(fp32.get_many([text_key("a")])) == [text_key("a")]
    fp32.close()
    int8.close()
