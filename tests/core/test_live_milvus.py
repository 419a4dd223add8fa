"""Live indexes on the Milvus backend: a served index follows `ragsieve migrate`'s pointer switch (milvus-lite)."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from ragsieve import Config, Orchestrator  # noqa: E402
from ragsieve.service.indexes.live import LiveOrchestrator  # noqa: E402
from ragsieve.tools.index.building.builder import IndexBuilder  # noqa: E402
from ragsieve.tools.index.milvus.publish import publish  # noqa: E402


def test_a_served_milvus_index_switches_to_the_new_collection(examples_index, tmp_path, embedder):
    folder = tmp_path / "idx"
    shutil.copytree(examples_index, folder)
    publish(folder)
    live = LiveOrchestrator(folder, lambda emb: Orchestrator.open(folder, Config(), embedder=emb or embedder))
    try:
        assert live.index.backend.value == "milvus"
        before = live.generation
        assert not any("heliograph" in h.chunk.text for h in live.retrieve("heliograph signalling tower", top_k=5))
        docs = tmp_path / "extra"
        docs.mkdir()
        (docs / "tower.md").write_text("# Tower\n\nThe heliograph signalling tower is on the north ridge.\n", encoding="utf-8")
        IndexBuilder(folder, embedder=embedder, progress=False).build([docs])
        assert not live.refresh(force=True)  # a local generation alone does not move a Milvus-served index
        publish(folder)
        assert live.refresh(force=True) and live.generation != before
        assert any("heliograph" in h.chunk.text for h in live.retrieve("heliograph signalling tower", top_k=5))
    finally:
        live.close()
