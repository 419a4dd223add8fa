"""Long code chunks embedded whole (tools/index/building/windows.py), on the CPython standard library: a chunk longer than
the encoder's window is found by what only its tail says; the setting is recorded, kept by existing indexes,
and refused where it cannot apply."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.building.report import indexed_text
from ragsieve.tools.index.building.windows import (
    LongCode,
    code_headers,
    embed_windowed,
    tokenizer_of,
    window_texts,
    windowed_rows,
)
from ragsieve.tools.index.local.generations import current_generation, read_manifest
from ragsieve.tools.index.local.index import HybridIndex

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("long-code") / "stdlib" / "http"
    folder.mkdir(parents=True)
    shutil.copy(STDLIB / "http" / "client.py", folder / "client.py")
    return folder.parent


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, source, embedder) -> dict[str, Path]:
    out = {}
    for mode in ("windows", "head"):
        out[mode] = tmp_path_factory.mktemp(f"idx-{mode}")
        IndexBuilder(out[mode], embedder=embedder, progress=False, long_code=mode).build([source])
    return out


def long_chunks(index_dir: Path, embedder):
    with HybridIndex.open(index_dir) as index:
        chunks = index.store.get_many(range(len(index)))
    texts = [indexed_text(c, True, True) for c in chunks]
    headers = code_headers(chunks, texts)
    return [(row, chunks[row], texts[row], headers[row]) for row in windowed_rows(embedder, chunks, texts)]


def test_windows_cover_the_body_once_each_under_the_header_and_within_the_window(indexes, embedder):
    tokenizer, window = tokenizer_of(embedder)
    found = long_chunks(indexes["windows"], embedder)
    assert found, "http/client.py has code chunks longer than the encoder's window"
    for _, _chunk, text, header in found:
        parts = window_texts(tokenizer, text, header, window)
        head = text[:header].rstrip("\n")
        assert all(p.startswith(head + "\n") for p in parts)
        assert all(len(tokenizer(p, add_special_tokens=False)["input_ids"]) <= window for p in parts)
        bodies = "".join(p[len(head) + 1 :] for p in parts)
        assert "".join(bodies.split()) == "".join(text[header:].split())  # nothing dropped, nothing twice
    short = "stdlib/x.py f\nf\ndef f():\n    return 1\n"
    assert window_texts(tokenizer, short, 14, window) == [short]


def test_a_long_functions_tail_is_found_by_the_dense_vector_only_with_windows(indexes, embedder):
    tokenizer, window = tokenizer_of(embedder)
    found = long_chunks(indexes["windows"], embedder)
    ranks = {"windows": [], "head": []}
    for row, chunk, text, header in found:
        tail = window_texts(tokenizer, text, header, window)[-1].split("\n", text[:header].count("\n"))[-1]
        query = " ".join(tail.split()[-40:])  # words of the chunk's last window only
        for mode, folder in indexes.items():
            with HybridIndex.open(folder) as index:
                assert index.store.get_many([row])[0].text == chunk.text  # same rows in both indexes
                hits = [r for r, _ in index.dense.search(index.embed_query(query), len(index))]
            ranks[mode].append(hits.index(row) + 1)
    # the tail's own words: the windowed vector reads them, the truncated one never saw them
    assert np.mean(ranks["windows"]) < np.mean(ranks["head"])
    assert sum(r == 1 for r in ranks["windows"]) > sum(r == 1 for r in ranks["head"])


def test_short_chunks_keep_their_vectors_and_the_mean_is_normalised(indexes, embedder):
    with HybridIndex.open(indexes["windows"]) as w, HybridIndex.open(indexes["head"]) as h:
        vw, vh = np.asarray(w.vectors), np.asarray(h.vectors)
    longs = {row for row, *_ in long_chunks(indexes["windows"], embedder)}
    short = [r for r in range(len(vw)) if r not in longs]
    assert np.allclose(vw[short], vh[short], atol=1e-5)
    assert not np.allclose(vw[sorted(longs)], vh[sorted(longs)], atol=1e-3)
    assert np.allclose(np.linalg.norm(vw, axis=1), 1.0, atol=1e-4)
    tokenizer, window = tokenizer_of(embedder)
    v = embed_windowed(embedder.embed, tokenizer, window, ["a b", "x " * 600], [None, 0])
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5) and np.allclose(v[0], embedder.embed(["a b"])[0], atol=1e-5)


def test_the_way_is_recorded_and_an_existing_index_keeps_its_own(tmp_path, indexes, embedder):
    assert read_manifest(current_generation(indexes["windows"]))["settings"]["chunking"]["long_code"] == LongCode.WINDOWS.value
    small = tmp_path / "stdlib" / "json"
    small.mkdir(parents=True)
    shutil.copy(STDLIB / "json" / "decoder.py", small / "decoder.py")
    root = tmp_path / "idx"
    IndexBuilder(root, embedder=embedder, progress=False, long_code="head").build([small.parent])
    assert "long_code" not in read_manifest(current_generation(root))["settings"]["chunking"]  # as built before
    (small / "extra.py").write_text("def extra():\n    return 1\n", encoding="utf-8")
    report = IndexBuilder(root, embedder=embedder, progress=False).build([small.parent])  # no setting given
    assert "long_code" not in read_manifest(current_generation(root))["settings"]["chunking"]
    assert 0 < report.chunks_embedded < report.chunks_total  # kept its way: only the new file embedded
    report = IndexBuilder(root, embedder=embedder, progress=False, long_code="windows").build([small.parent])
    assert read_manifest(current_generation(root))["settings"]["chunking"]["long_code"] == "windows"
    assert report.chunks_embedded == report.chunks_total  # every vector re-made the new way, none from the cache


def test_bad_values_and_endpoints_are_refused(tmp_path):
    with pytest.raises(UsageError, match="long_code"):
        IndexBuilder(tmp_path / "a", long_code="max", encoder="torch")

    class Endpoint:  # an embedding provider reading whole texts (no local tokenizer)
        provider, name, encoder, dimension = "openai", "text-embedding-3-small", "endpoint", 4

        def embed(self, texts):
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(STDLIB / "json" / "__init__.py", source / "json_init.py")
    with pytest.raises(UsageError, match="tokenizer"):
        IndexBuilder(tmp_path / "b", embedder=Endpoint(), progress=False, long_code="windows").build([source])
    IndexBuilder(tmp_path / "c", embedder=Endpoint(), progress=False).build([source])
    manifest = read_manifest(current_generation(tmp_path / "c"))
    assert "long_code" not in manifest["settings"]["chunking"], json.dumps(manifest["settings"])


def test_the_cli_applies_long_code_and_keeps_the_recorded_one(tmp_path):
    from ragsieve.cli.main import main

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(STDLIB / "json" / "scanner.py", src / "scanner.py")
    root = tmp_path / "idx"
    assert main(["index", str(src), "--index", str(root), "--no-progress", "--long-code", "head"]) == 0
    assert "long_code" not in read_manifest(current_generation(root))["settings"]["chunking"]
    assert main(["index", str(src), "--index", str(root), "--no-progress"]) == 0  # unchanged: nothing written
    assert "long_code" not in read_manifest(current_generation(root))["settings"]["chunking"]
    assert main(["index", str(src), "--index", str(root), "--no-progress", "--long-code", "windows"]) == 0
    assert read_manifest(current_generation(root))["settings"]["chunking"]["long_code"] == "windows"
    with pytest.raises(SystemExit):
        main(["index", str(src), "--index", str(root), "--no-progress", "--long-code", "max"])
