"""Score combination rules on recorded judge verdicts (no LLM, seconds).

The judge/expand loop's verdicts do not depend on the combination rule: the
rule only runs once the loop has stopped (`ragsieve.agent.judging.combine.select_context`).
So the `selection_inputs` that `benchmarks/pipeline/agentic.py` records per agentic
row (first-stage ranking, trusted verdicts, discovery order, neighbours)
let every rule be scored on exactly the same verdicts: both-gold recall at
the `final_k` = 5 context chunks, and the questions where the rule is worse
or better than `fast` (the first-stage top 5).

    python -m benchmarks.pipeline.combine_replay benchmarks/results/agentic-oracle.json ...

Writes `benchmarks/results/combine-replay.json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from benchmarks.bench_io import header  # noqa: E402
from benchmarks.pipeline.agentic import both_gold, docs_of  # noqa: E402  (this folder: the benchmark whose rows are replayed)
from ragsieve.agent.judging.combine import evidence_keys, select_context  # noqa: E402

DATA = REPO.parent / "shared" / "data"
ANCHORS = (0, 1, 2, 3, 4)  # capped at final_k - 1 = 4
DEPTHS = (0, 10, 20)


def load_gold(set_name: str) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    with open(DATA / set_name / "qa.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if "gold_doc_ids" in r:
                gold[r["id"]] = list(r["gold_doc_ids"])
            elif not r.get("is_impossible"):
                gold[r["id"]] = [r["gold_doc_id"]]
    return gold


def replay(rows: list[dict], gold: dict[str, list[str]], final_k: int) -> dict:
    usable = [r for r in rows if r["plan"] == "agentic" and r.get("selection_inputs") and gold.get(r["qid"])]
    rules: dict[str, dict] = {}
    fast_hits = {r["qid"]: both_gold(docs_of(r["selection_inputs"]["first_stage"][:final_k]), gold[r["qid"]]) for r in usable}
    for anchor in ANCHORS:
        for depth in DEPTHS:
            worse, better, hits = [], [], 0
            for r in usable:
                s = r["selection_inputs"]
                keys = evidence_keys(s["first_stage"], s["discovered"], s["neighbour_of"])
                chosen, _ = select_context(s["first_stage"], keys, s["trusted"], final_k, anchor_k=anchor, admit_depth=depth)
                hit = both_gold(docs_of(chosen), gold[r["qid"]])
                hits += hit
                if hit < fast_hits[r["qid"]]:
                    worse.append(r["qid"])
                elif hit > fast_hits[r["qid"]]:
                    better.append(r["qid"])
            rules[f"anchor_k={anchor},admit_depth={depth}"] = {
                "anchor_k": anchor,
                "admit_depth": depth,
                "both_gold@5": hits / len(usable) if usable else None,
                "worse": len(worse),
                "better": len(better),
                "worse_qids": worse,
            }
    fast = sum(fast_hits.values()) / len(usable) if usable else None
    return {"questions": len(usable), "fast_both_gold@5": fast, "rules": rules}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="benchmarks/pipeline/agentic.py result files")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "combine-replay.json"))
    args = ap.parse_args(argv)
    report: dict = {**header(), "files": {}}
    for path in args.results:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        final_k = data["config"]["loop"]["final_k"]
        for set_name, block in data["sets"].items():
            result = replay(block["rows"], load_gold(set_name), final_k)
            if not result["questions"]:
                print(f"{path} [{set_name}]: no rows with selection_inputs (rerun benchmarks/pipeline/agentic.py)")
                continue
            report["files"][f"{Path(path).name}:{set_name}"] = {"llm": data.get("llm"), **result}
            print(
                f"\n{Path(path).name} [{set_name}] {data.get('llm')}: {result['questions']} questions, "
                f"fast both-gold@5 {result['fast_both_gold@5']:.3f}"
            )
            print("  anchor_k  admit_depth  both-gold@5  worse  better")
            for rule in result["rules"].values():
                print(
                    f"  {rule['anchor_k']:8d}  {rule['admit_depth']:11d}  {rule['both_gold@5']:11.3f}  "
                    f"{rule['worse']:5d}  {rule['better']:6d}"
                )
    Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
