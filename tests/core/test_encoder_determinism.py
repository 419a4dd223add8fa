"""The same text gets the same vector, whatever batch it is embedded in, and a rebuild reproduces the index (issue 46)."""

from __future__ import annotations

import numpy as np
import pytest

from ragsieve.tools.index.embedders.local_embedder import Embedder

TEXTS = [
    "How do I rotate the API key of a Lumen workspace?",
    "Rotation issues a new secret; the old one keeps working for 24 hours.",
    "Rate limits apply per workspace, across all of its API keys. " * 20,
    "def rotate_key(client, key_id):\n    return client.post(f'/keys/{key_id}/rotate')",
    "short",
    "Backups are encrypted at rest and kept in a cold bucket for ninety days.",
]


def _encoders() -> list[str]:
    names = ["torch"]
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return names
    return names + ["onnx", "onnx-int8"]


@pytest.mark.parametrize("encoder", _encoders())
def test_a_text_alone_and_in_mixed_batches_gets_the_same_vector(encoder, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSIEVE_CACHE", str(tmp_path))
    embedder = Embedder(encoder=encoder)
    alone = np.stack([embedder.embed([text])[0] for text in TEXTS])
    batches = [TEXTS, TEXTS[::-1], TEXTS[2:] + TEXTS[:2], [TEXTS[2]] * 3 + TEXTS]
    for batch in batches:
        vectors = embedder.embed(batch)
        for text, vector in zip(batch, vectors):
            assert np.abs(vector - alone[TEXTS.index(text)]).max() <= 1e-6, (encoder, text[:30])
    # a query is embedded like a document: the index's query path gives the same vector
    assert np.abs(embedder.embed([TEXTS[0]])[0] - embedder.embed(TEXTS[:4])[0]).max() <= 1e-6


def test_an_incremental_build_and_a_fresh_build_give_identical_indexes(tmp_path, monkeypatch):
    """A document added later is embedded in another batch than in a fresh build: its vectors must not change."""
    pytest.importorskip("onnxruntime")
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    monkeypatch.setenv("RAGSIEVE_CACHE", str(tmp_path / "cache"))
    docs = tmp_path / "docs"
    docs.mkdir()

    def write(i: int) -> None:  # texts of different lengths, so that batches mix short and long ones
        (docs / f"d{i:02d}.md").write_text(
            f"# Topic {i}\n\n" + f"Paragraph {i} about keys and backups. " * (1 + 7 * (i % 4)), encoding="utf-8"
        )

    for i in range(11):
        write(i)
    IndexBuilder(tmp_path / "grown", encoder="onnx-int8", progress=False).build([docs])
    write(11)
    IndexBuilder(tmp_path / "grown", encoder="onnx-int8", progress=False).build([docs])
    IndexBuilder(tmp_path / "fresh", encoder="onnx-int8", progress=False).build([docs])
    built = []
    for name in ("grown", "fresh"):
        with HybridIndex.open(tmp_path / name) as index:
            rows = list(range(len(index)))
            built.append({index.store.get(r).chunk_id: np.array(index.vectors[r]) for r in rows})
    assert sorted(built[0]) == sorted(built[1])
    assert all(np.array_equal(built[0][cid], built[1][cid]) for cid in built[0])
