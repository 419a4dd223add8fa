"""The judge measured on each fold's calibration questions, as `ragsieve calibrate --judge N` does."""

from __future__ import annotations

import random
from pathlib import Path

from ragsieve.agent.calibration import load_calibration, save_calibration


def measure_judge_on_folds(folds: dict[int, Path], orchs: dict, llm, chat, n: int) -> dict:
    """Measure the judge (ragsieve.agent.judging.reliability) on each fold's calibration questions and store
    it in that fold's calibration.json, as `ragsieve calibrate --judge N` does: `loop.combine = auto` reads it.
    For the scripted oracle, the record's answer-bearing chunk's document is the gold it knows."""
    from ragsieve.agent.judging.checks import pick_decoys

    try:
        from ragsieve.agent.judging.measure import JudgeReliability, llm_judge, measure_judge
    except ImportError:  # a baseline tree (judges_run.py) from before the module was split
        from ragsieve.agent.judging.reliability import JudgeReliability, llm_judge, measure_judge  # type: ignore[no-redef]
    from ragsieve.tools.metrics import chunk_doc_id

    near_misses = "near_misses" in JudgeReliability.model_fields  # a baseline tree (judges_run.py) predates them
    out = {}
    for fold, path in folds.items():
        orch = orchs[fold]
        cal, _ = load_calibration(path)
        store, pool, loop = orch.index.store, orch.config.retrieval.pool, orch.config.loop
        judge = llm_judge(llm, orch.prompts, loop)
        records = [r for r in cal.records if r.found and r.positive_row is not None]
        random.Random(fold).shuffle(records)
        golds = _question_golds(path)

        def items():
            for r in records[:n]:  # noqa: B023
                positive = store.get(r.positive_row).chunk_id  # noqa: B023
                gold = golds.get(r.qid.split(":")[0], set()) | {chunk_doc_id(positive)}  # noqa: B023
                if chat is not None:  # the oracle knows every gold document of the question, as when it is asked
                    chat.q = {"id": f"cal-{r.qid}", "gold": sorted(gold), "answers": []}
                hits = orch.retrieve(r.question, top_k=pool)  # noqa: B023
                # the question's other answer-bearing chunks (a second hop, another gold abstract): no near misses
                others = {h.chunk_id for h in hits if chunk_doc_id(h.chunk_id) in gold} - {positive}
                yield (r.question, {positive}, hits, others) if near_misses else (r.question, {positive}, hits)

        model = str(llm.chat.model_name or "unknown")
        measured = measure_judge(
            items(),
            judge,
            model=model,
            pool=pool,
            top_k=orch.config.retrieval.top_k,
            decoys=lambda q, ex: pick_decoys(orch.index, q, ex, loop.judge_decoys),  # noqa: B023
            **_order_k(measure_judge, loop),
        )
        save_calibration(cal.model_copy(update={"judges": {**cal.judges, model: measured}}), path)
        out[str(fold)] = measured.model_dump()
    return out


def _order_k(measure, loop) -> dict:
    """`measure_judge`'s order pass where the code measures one (a baseline tree's does not)."""
    import inspect

    if "order_k" not in inspect.signature(measure).parameters or not loop.judge_order_check:
        return {}
    return {"order_k": loop.final_k}


def _question_golds(path: Path) -> dict[str, set[str]]:
    """Question id (HotpotQA's `id:doc` records joined) -> its gold documents, from the fold's calibration qrels."""
    qrels = path / "cal-qrels.tsv"
    out: dict[str, set[str]] = {}
    if qrels.is_file():
        for line in qrels.read_text(encoding="utf-8").splitlines()[1:]:
            qid, doc, _ = line.split("\t")
            out.setdefault(qid.split(":")[0], set()).add(doc)
    return out
