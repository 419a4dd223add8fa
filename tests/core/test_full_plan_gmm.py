"""GMM outliers (Bulgakov 2024) running inside the `full` plan, on a real index with a planted off-topic chunk.

The examples corpus plus one planted file: a harvest-festival note stuffed with the question's words, so BM25
puts it in the fast context while its meaning is far from the question. The judge is the scripted one that
calls every chunk relevant, so it fails its decoy check and is not trusted: the context is the conformal set
joined to the fast context (`retrieval.top_k` = 10 here, so the planted chunk is in it), and what GMM may remove
is the fast context outside the conformal set. GMM runs at the paper's features and rule (interaction,
alpha 0.5, PCA 2 and 3, 15th percentile) with one component, flagged in both runs, the top-4 exemption off:
with the paper's K 4-6 an isolated chunk gets a component of its own and is not flagged (tests/core/test_gmm.py),
and what is flagged depends on the pool (here K 4-6 also removes the best dense chunk, api-keys.md#4); one
component is where the rule reliably puts an off-topic chunk in the tail.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragsieve.agent.calibration import Calibrator, save_calibration
from ragsieve.agent.config import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.agent.llm.templates import PromptRenderer
from ragsieve.testing import FakeChat
from tests.core.test_full_plan import QUESTION, assert_conformal_set_kept, check_trace, fake_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLANTED = (
    "Harvest festival notes. Rotate the API key? Rotate the Lumen workspace key? At the fair, the old key of "
    "the old barn opens the workspace where Lumen keeps pumpkins; rotate, key, old key, API key, Lumen "
    "workspace: the fiddlers sang these words all night while pies cooled on the windowsill.\n"
)
PLANTED_ID = "corpus/planted.md#0"
ONE_COMPONENT = {
    "enabled": True,
    "method": "interaction",
    "alpha": 0.5,
    "pca_dims": [2, 3],
    "n_components": [1],
    "percentile": 15.0,
    "min_outlier_freq": 2,
    "protect_top": 0,
}


@pytest.fixture(scope="module")
def planted_index(tmp_path_factory, embedder):
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    tmp_path = tmp_path_factory.mktemp("planted")
    corpus = tmp_path / "corpus"
    shutil.copytree(EXAMPLES, corpus / "examples")
    (corpus / "planted.md").write_text(PLANTED, encoding="utf-8")
    folder = tmp_path / "index"
    IndexBuilder(folder, embedder=embedder, progress=False).build([str(corpus)])
    with HybridIndex.open(folder) as index:
        cal = Calibrator(index, llm=LLM(FakeChat(default=fake_model)), prompts=PromptRenderer(), alpha=0.2, depth=10, seed=0).run(
            questions=12
        )
        save_calibration(cal, folder)
    return folder


def ask_full(folder, **outliers):
    from ragsieve.agent.orchestrator import Orchestrator

    config = Config()
    config.retrieval = config.retrieval.model_copy(update={"top_k": 10})
    config.outliers = config.outliers.model_copy(update=outliers)
    with Orchestrator.open(folder, config, chat=FakeChat(default=fake_model)) as orch:
        answer = orch.ask(QUESTION, plan="full")
    return answer, check_trace(answer)


def test_gmm_in_the_full_plan_removes_the_planted_chunk_and_keeps_every_conformal_member(planted_index):
    answer, s = ask_full(planted_index, **ONE_COMPONENT)
    conf, out, seg = s["conformal"], s["outliers"], s["segments"]
    members = set(conf["passing"])
    # the planted chunk reached the context through the fast context, not the conformal set
    assert PLANTED_ID in conf["kept"] and PLANTED_ID not in members and members
    assert out["status"] == "applied" and out["fit_size"] == 20 and out["runs_completed"] == 2
    assert out["flag_counts"][PLANTED_ID] == 2
    assert out["removed"] == [PLANTED_ID]
    assert PLANTED_ID not in out["kept"] and PLANTED_ID not in {h.chunk_id for h in answer.context}
    # a conformal member is flagged too, in both runs: kept, and said so
    flagged_members = {i for i in members if out["flag_counts"].get(i, 0) >= 2}
    assert flagged_members and flagged_members <= set(out["kept_by_conformal"]) & set(out["kept"])
    assert not flagged_members & set(out["removed"])
    assert_conformal_set_kept(answer, seg)


def test_gmm_disabled_in_the_full_plan_keeps_the_planted_chunk(planted_index):
    """The control: the same question with the filter off, so the removal above is GMM's doing."""
    _, s = ask_full(planted_index, enabled=False)
    assert s["outliers"]["status"] == "disabled" and PLANTED_ID in s["outliers"]["kept"]
