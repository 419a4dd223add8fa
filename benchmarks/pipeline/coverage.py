"""`benchmarks/pipeline/main.py --coverage`: held-out coverage of the conformal set on the final context, with no
judge (CONFLARE's guarantee measured on the context the answer is written from - with no trusted judge the
conformal set joins the fast context - and on the passing set alone, before the context budget cut it)."""

from __future__ import annotations

from benchmarks.pipeline.data.readers import OracleChat
from benchmarks.pipeline.oracle_texts import ChunkTexts
from benchmarks.pipeline.rows import size_distribution, summary_of
from ragsieve.agent.llm.client import LLM
from ragsieve.tools.metrics import chunk_doc_id, mean


def coverage(questions, orchs, chunks: ChunkTexts, config_for, kinds) -> dict:
    """Held-out coverage of the conformal set on the final context (no judge), for each conformal score kind in
    `kinds` (None: the calibrated kind; raw: CONFLARE's own score); `config_for` is the benchmark's plan config."""
    out = {}
    chat = OracleChat(chunks, 0.0)
    for alpha in (0.05, 0.1, 0.2):
        for kind in kinds:
            covered, every, paragraphs, sizes = [], [], [], []
            passed, passed_paragraphs, passed_sizes, cut = [], [], [], []  # the passing set alone, before the budget
            for q in questions:
                if not q["gold"]:
                    continue
                orch = orchs[q["fold"]]
                # no judge: the context is the conformal set joined to the fast context; `relevant` so that the
                # rule's choice cannot differ between runs
                orch.config, orch._llm = config_for("coverage", alpha, kind, combine="relevant"), LLM(chat)
                chat.q = q
                answer = orch.ask(q["question"], plan="coverage")
                docs = {chunk_doc_id(h.chunk_id) for h in answer.context}
                covered.append(float(bool(docs & set(q["gold"]))))
                every.append(float(set(q["gold"]) <= docs))
                paragraphs.extend(float(d in docs) for d in q["gold"])
                sizes.append(len(answer.context))
                step = next((summary_of(t) for t in answer.trace if t.step == "conformal"), {})
                passing = {chunk_doc_id(c) for c in step.get("passing", [])}
                passed.append(float(bool(passing & set(q["gold"]))))
                passed_sizes.append(len(step.get("passing", [])))
                passed_paragraphs.extend(float(d in passing) for d in q["gold"])
                cut.append(float(bool(step.get("budget_note"))))
            # coverage: any gold document in the context (the event calibrated on SQuAD and SciFact);
            # per_gold: over (question, gold document) pairs (calibrated on HotpotQA: one record per hop)
            out[f"alpha={alpha}|{kind or 'calibrated'}"] = {
                "n": len(covered),
                "coverage": mean(covered),
                "all_gold": mean(every),
                "per_gold": mean(paragraphs),
                "mean_context": mean(sizes),
                "target": 1 - alpha,
                "set_size": size_distribution(sizes),
                "passing_coverage": mean(passed),
                "passing_per_gold": mean(passed_paragraphs),
                "passing_size": size_distribution(passed_sizes),
                "budget_cut": mean(cut),
            }
    return out
