"""Steps' outcomes are types mypy checks, END is its own value, and typed summaries leave the trace's JSON as it was."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from ragsieve.agent.config import Config
from ragsieve.agent.core.state import JudgeRoundReport, TraceEvent
from ragsieve.agent.core.step import END, End
from ragsieve.agent.core.summaries import (
    ConformalSummary,
    DraftSummary,
    GrewSummary,
    OutliersSummary,
    RankedHit,
    RerankedHit,
    RerankSummary,
    RetrieveSummary,
    SegmentsSummary,
)
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.agent.plan.plans import BUILTIN_PLANS, STEPS
from ragsieve.testing import FakeChat
from tests.core.test_full_plan import QUESTION, calibrated_index, fake_model  # noqa: F401  (calibrated_index: a fixture)

REPO = Path(__file__).resolve().parents[2]


def test_outcomes_are_read_from_each_steps_type():
    assert STEPS["expand"].outcomes == ("grew", "converged")
    assert STEPS["validate"].outcomes == ("resolved", "unresolved", "exhausted")
    assert {STEPS[n].outcomes for n in ("retrieve", "judge", "answer")} == {("next",)}
    assert STEPS["fallback"].outcomes == ("next", "unchanged")  # unchanged: nothing added, the run ends (issue 56)


def test_end_is_a_value_of_its_own():
    assert isinstance(END, End) and END != "end" and "end" not in STEPS
    full = BUILTIN_PLANS["full"]
    assert full.transitions["validate"] == {"resolved": END, "unresolved": "fallback", "exhausted": END}
    assert full.spec.transitions["validate"]["resolved"] == "end"  # the plan as data spells it "end"


def test_typed_summaries_leave_the_trace_json_unchanged(calibrated_index):  # noqa: F811
    """In memory the judge's summary is its `JudgeRoundReport`; retrieve's, expand's `grew`, conformal's, outliers'
    and segments' are their `StepSummary` models; the `--json` shape is byte for byte what the same trace with dict
    summaries (the old in-memory form) gives."""
    with Orchestrator.open(calibrated_index, Config(), chat=FakeChat(default=fake_model)) as orch:
        answer = orch.ask(QUESTION, plan="full")
    judged = [e for e in answer.trace if e.step == "judge"]
    assert judged and all(isinstance(e.summary, JudgeRoundReport) for e in judged)
    typed = {
        "retrieve": RetrieveSummary,
        "conformal": ConformalSummary,
        "outliers": OutliersSummary,
        "segments": SegmentsSummary,
        **({"expand": GrewSummary} if any(e.outcome == "grew" for e in answer.trace) else {}),
    }
    for step, model in typed.items():
        events = [e for e in answer.trace if e.step == step and (step != "expand" or e.outcome == "grew")]
        assert events and all(isinstance(e.summary, model) for e in events), step
    as_dicts = answer.model_copy(
        update={
            "trace": [
                TraceEvent(**{**dict(e), "summary": e.summary.model_dump() if isinstance(e.summary, BaseModel) else e.summary})
                for e in answer.trace
            ]
        }
    )
    assert not any(isinstance(e.summary, BaseModel) for e in as_dicts.trace)
    typed, plain = json.dumps(answer.public(), default=str), json.dumps(as_dicts.public(), default=str)
    assert typed == plain
    assert json.loads(typed)["trace"][1]["summary"]["mode"] == judged[0].summary.mode.value


def test_a_summary_dumps_the_keys_its_step_set_in_the_dict_forms_order():
    """A `StepSummary` field left unset is absent, as the dict form's optional keys were; the keys keep the
    order the steps wrote them in (each dict below is what the step built before its summary was typed)."""
    top = [RankedHit(id="a#0", score=0.5, bm25_rank=1, dense_rank=None)]
    retrieved = RetrieveSummary(retrieved=3, pool=2, searched="all", top=top)
    assert json.dumps(retrieved.model_dump()) == json.dumps(
        {"retrieved": 3, "pool": 2, "searched": "all", "top": [{"id": "a#0", "score": 0.5, "bm25_rank": 1, "dense_rank": None}]}
    )
    embedded = RetrieveSummary(embedded="onnx-int8 on cpu", retrieved=3, pool=2, searched="all", top=[])
    assert list(embedded.model_dump()) == ["embedded", "retrieved", "pool", "searched", "top"]
    failed = DraftSummary(context=["a#0"], error="LLMError: down")
    assert failed.model_dump() == {"context": ["a#0"], "error": "LLMError: down"}
    drafted = DraftSummary(context=["a#0"], chars=12, cited=[], fallback_context=False)
    assert list(drafted.model_dump()) == ["context", "chars", "cited", "fallback_context"]
    assert OutliersSummary(status="disabled", kept=["a#0"], removed=[]).model_dump() == {
        "status": "disabled",
        "kept": ["a#0"],
        "removed": [],
    }
    reranked = RerankSummary(
        reranker="flashrank",
        provider="flashrank",
        scored=1,
        kept=1,
        not_scored=0,
        ranks=[RerankedHit(id="a", before=None, after=1, score=0.1)],
    )
    assert reranked.model_dump()["ranks"] == [{"id": "a", "before": None, "after": 1, "score": 0.1}]
    # a field set again keeps its place, as a dict key does (segments' no_segment path resets `status`)
    unsegmented = SegmentsSummary(status="applied", preset="default", params={}, relevance="cosine", values={})
    unsegmented.status = "no_segment"
    unsegmented.kept, unsegmented.removed = ["a#0"], []
    unsegmented.note = "no segment reached minimum_value=0.2: context left unchanged"
    assert list(unsegmented.model_dump()) == ["status", "preset", "params", "relevance", "values", "kept", "removed", "note"]
    assert unsegmented.status == "no_segment"
    # the keys in the order given, not the order declared (conformal's empty path names its kind last)
    empty = ConformalSummary(status="empty", kept=[], removed=[], kind="raw")
    assert json.dumps(empty.model_dump()) == json.dumps({"status": "empty", "kept": [], "removed": [], "kind": "raw"})
    event = TraceEvent(step="draft", outcome="next", summary=failed)
    assert event.model_dump()["summary"] == {"context": ["a#0"], "error": "LLMError: down"} == event.summary_dict()


BAD = """
from typing import Literal, TypedDict

from ragsieve.agent.core.step import END, Next, Step, StepResult, Target
from ragsieve.agent.steps.expand import Expand
from ragsieve.agent.steps.validate import Validate

Grown = Literal["grew", "converged"]


class GrownEdges(TypedDict):
    grew: Target
    converged: Target


class Grow(Step[Grown, GrownEdges]):
    name = "grow"

    def run(self, state, deps) -> StepResult[Grown]:
        return StepResult("stalled")  # BAD-RETURN


class Finish(Step[Next]):
    name = "finish"


GOOD = (
    Grow.on({"grew": Grow, "converged": Finish}),
    Finish.on({"next": END}),
    Expand.on({"grew": Grow, "converged": END}),
    Validate.on({"resolved": END, "unresolved": Grow, "exhausted": END}),
)
WRONG = Grow.on({"grew": Grow, "converged": Finish, "stalled": Finish})  # BAD-EDGE
SHIPPED = Expand.on({"grew": Grow, "converged": END, "stopped": END})  # BAD-SHIPPED
PARTIAL = Grow.on({"grew": Grow})  # BAD-UNMAPPED
SHIPPED_PARTIAL = Validate.on({"resolved": END, "exhausted": END})  # BAD-SHIPPED-UNMAPPED
NONE = Finish.on({})  # BAD-NO-EDGE
"""


def _tree(tmp: Path) -> Path:
    """The installed layout as links (the Makefile's `typecheck-tree`), so mypy finds `ragsieve.agent`."""
    pkg = tmp / "tree" / "ragsieve"
    pkg.mkdir(parents=True)
    for folder in ("agent", "tools", "prompts"):
        (pkg / folder).symlink_to(REPO / folder)
    for entry in (REPO / "ragsieve").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    return pkg.parent


def test_mypy_refuses_an_outcome_the_step_does_not_declare_or_the_plan_leaves_unmapped(tmp_path):
    """A step returning, or a plan mapping, an outcome outside the step's outcome type fails mypy; so does a
    plan whose edges leave one of the step's outcomes unmapped (the step could return it and the run would
    stop there). The complete maps (`GOOD`) pass."""
    pytest.importorskip("mypy")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(BAD), encoding="utf-8")
    # the heavy third-party packages read as Any, as in pyproject.toml's [tool.mypy] (minutes to seconds)
    heavy = ",".join(f"{m},{m}.*" for m in ("torch", "transformers", "sentence_transformers", "huggingface_hub", "ray"))
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\n[mypy-{heavy}]\nfollow_imports = skip\n", encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-error-summary",
            "--follow-imports=silent",
            "--ignore-missing-imports",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--config-file",
            str(config),
            snippet.name,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"MYPYPATH": str(_tree(tmp_path)), "PATH": "/usr/bin:/bin"},
        timeout=900,
    )
    lines = BAD.splitlines()
    flagged = {
        lines[int(line.split(":")[1]) - 1].split("# ")[-1]
        for line in done.stdout.splitlines()
        if line.startswith(f"{snippet.name}:") and ": error:" in line
    }
    assert flagged == {
        "BAD-RETURN",
        "BAD-EDGE",
        "BAD-SHIPPED",
        "BAD-UNMAPPED",
        "BAD-SHIPPED-UNMAPPED",
        "BAD-NO-EDGE",
    }, done.stdout + done.stderr


def test_a_step_whose_edges_and_outcomes_differ_is_refused_when_its_class_is_made():
    """mypy checks a plan against a step's edges type; that the edges list exactly the outcomes is checked when
    the class is made (a step declaring outcomes but keeping the default `NextEdges`, or one edge too few)."""
    from typing import Literal, TypedDict

    from ragsieve.agent.core.step import Step, Target

    with pytest.raises(TypeError, match=r"edges NextEdges map \['next'\], its outcomes are \['a', 'b'\]"):

        class Forgot(Step[Literal["a", "b"]]):
            name = "forgot"

    class OnlyA(TypedDict):
        a: Target

    with pytest.raises(TypeError, match="edges OnlyA map"):

        class Short(Step[Literal["a", "b"], OnlyA]):
            name = "short"
