"""The scripted judge family reads only the rendered judge prompt, and the paired promise tests (issue 56)."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from benchmarks.pipeline.judges import FAMILY, judge_reply, parse
from benchmarks.pipeline.judges_stats import cost_rows, mcnemar_one_sided, promises
from ragsieve.agent.llm.templates import PromptRenderer

QUESTION = "Which river flows through the capital of Austria?"
CHUNKS = {
    "1": "Vienna, the capital of Austria, lies on the Danube river.",
    "2": "Bread is baked in ovens.",
    "3": "The capital city hosts a river festival.",
}


def _prompt() -> str:
    return PromptRenderer().render("judge", question=QUESTION, chunks=CHUNKS)


def test_family_judges_decide_from_the_prompt_text_alone():
    prompt, keys = _prompt(), list(CHUNKS)
    assert judge_reply("eager", prompt, keys) == {"1": True, "2": False, "3": True}  # any shared content word
    assert judge_reply("strict", prompt, keys) == {"1": True, "2": False, "3": False}  # three shared words
    assert judge_reply("primacy", prompt, keys) == {"1": True, "2": True, "3": False}  # position, not text
    assert judge_reply("lexical70", prompt, keys) == {"1": True, "2": False, "3": False}
    noisy = judge_reply("eager-noise10", prompt, keys)
    assert noisy == judge_reply("eager-noise10", prompt, keys)  # seeded by question and text
    assert len(FAMILY) == 12 and parse("strict-noise10") == ("strict", 0.1)
    with pytest.raises(ValueError):
        parse("oracle")


def test_mcnemar_is_the_exact_binomial_tail_and_a_promise_breaks_on_it():
    assert mcnemar_one_sided(18, 3) == pytest.approx(binomtest(18, 21, 0.5, alternative="greater").pvalue)
    assert mcnemar_one_sided(0, 0) == 1.0
    rows = []
    for i in range(40):  # fast abstains on 18 unanswerable questions full answers, the reverse on 3
        fast, full = (i < 18), (18 <= i < 21)
        for plan, abstained in (("fast", fast), ("full", full)):
            rows.append(
                {
                    "dataset": "squad2",
                    "judge": "j",
                    "plan": plan,
                    "qid": str(i),
                    "impossible": True,
                    "abstained": abstained,
                    "gold_recall": None,
                    "llm_calls": 1,
                    "seconds": 0.0,
                    "context_tokens": 0,
                }
            )
    got = [p for p in promises(rows) if "unanswerable" in p["promise"]][0]
    assert got["holds"] is False and got["statistic"]["only_fast"] == 18 and got["statistic"]["only_full"] == 3
    assert got["promise"].startswith("squad2: ") and got["n"] == 40


def test_a_recall_loss_row_names_the_barred_judge_and_the_cost_rows_split_tokens_by_step():
    rows = []
    for i in range(20):  # the baseline trusted the judge's stuffed context; today it is barred and loses 4 golds
        for code, rule, recall, ctx in (
            ("baseline", "auto: relevant", 1.0, 900),
            ("current", "auto: judge barred (x)", 0.0 if i < 4 else 1.0, 300),
        ):
            for plan in ("fast", "full"):
                rows.append(
                    {
                        "code": code,
                        "dataset": "hotpotqa",
                        "judge": "eager",
                        "plan": plan,
                        "qid": str(i),
                        "impossible": False,
                        "abstained": False,
                        "gold_recall": recall,
                        "llm_calls": 2,
                        "prompt_tokens": 100,
                        "completion_tokens": 10,
                        "step_tokens": {"judge": 80, "answer": 30} if code == "current" else {"judge": 200},
                        "seconds": 0.0,
                        "context_tokens": ctx,
                        "rule": rule,
                    }
                )
    lost = [p for p in promises(rows) if "gold recall against the baseline" in p["promise"]][0]
    assert lost["holds"] is False
    assert "breaks for eager: barred at calibration today" in lost["why"] and "auto: relevant: 900 context tokens" in lost["why"]
    tokens = [p for p in promises(rows) if "fewer tokens" in p["promise"]][0]  # 110 vs 110: breaks, and says where
    assert tokens["holds"] is False and tokens["why"].endswith(
        "breaks for eager: rule today 'auto: judge barred (x)', baseline 'auto: relevant'; answer 30 vs 0 tokens"
    )
    cost = cost_rows(rows)[0]
    assert cost["step_tokens"] == {"baseline": {"judge": 200.0}, "current": {"answer": 30.0, "judge": 80.0}}
