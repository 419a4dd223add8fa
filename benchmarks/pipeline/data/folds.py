"""The questions of each set, the index, and the calibrated copies each fold is evaluated on (calibration
never sees the questions it is evaluated on: `benchmarks.pipeline.data`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import random
import shutil
from pathlib import Path

from ragsieve.agent.calibration import Calibrator, load_calibration, save_calibration
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex

REPO = Path(__file__).resolve().parents[3]
DATA = REPO.parent / "shared" / "data"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def _qrels(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in open(path, encoding="utf-8").read().splitlines()[1:]:
        qid, doc, grade = line.split("\t")
        if int(grade) > 0:
            out.setdefault(qid, []).append(doc)
    return out


def load_questions(
    name: str, *, squad_answerable: int, squad_unanswerable: int, seed: int, scifact_calibration: str = "crossfit"
) -> list[dict]:
    """Rows {id, question, answers, gold (doc ids), impossible, fold}; SQuAD 2.0 rows also carry `plausible`
    (an unanswerable question's `plausible_answers`: the wrong answers a careless reader would give)."""
    folder = DATA / name
    if name == "hotpotqa":
        rows = _jsonl(folder / "qa.jsonl")
        return [
            {
                "id": r["id"],
                "question": r["question"],
                "answers": r["answers"],
                "gold": r["gold_doc_ids"],
                "impossible": False,
                "fold": i % 2,
            }
            for i, r in enumerate(rows)
        ]
    if name == "squad2":
        rows = _jsonl(folder / "qa.jsonl")
        rng = random.Random(seed)
        picked = rng.sample([r for r in rows if not r["is_impossible"]], squad_answerable) + rng.sample(
            [r for r in rows if r["is_impossible"]], squad_unanswerable
        )
        return [
            {
                "id": r["id"],
                "question": r["question"],
                "answers": r["answers"],
                "gold": [] if r["is_impossible"] else [r["gold_doc_id"]],
                "impossible": bool(r["is_impossible"]),
                "plausible": list(r.get("plausible_answers") or []),
                "fold": 0,
            }
            for r in picked
        ]
    queries = {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")}
    gold = _qrels(folder / "qrels" / "test.tsv")
    two = scifact_calibration == "crossfit"
    return [
        {"id": qid, "question": queries[qid], "answers": [], "gold": docs, "impossible": False, "fold": i % 2 if two else 0}
        for i, (qid, docs) in enumerate(q for q in gold.items() if q[0] in queries)
    ]


def build_index(name: str, root: Path, embedder) -> Path:
    folder = root / name
    if not (folder / "CURRENT").exists():
        corpus = DATA / name / ("corpus.jsonl.gz" if name == "scifact" else "corpus.jsonl")
        IndexBuilder(folder, embedder=embedder, progress=False).build([str(corpus)])
    return folder


def calibrated_copies(
    name: str, index_dir: Path, questions: list[dict], alpha: float, scifact_calibration: str = "crossfit"
) -> dict[int, Path]:
    """fold -> an index folder calibrated without that fold's questions (qrels calibration)."""
    folder = DATA / name
    out: dict[int, Path] = {}
    train = name == "scifact" and scifact_calibration == "train"
    for fold in sorted({q["fold"] for q in questions}):
        plain = index_dir.parent / f"{index_dir.name}-cal{'train' if train else ''}{fold}"
        evaluated = {q["id"] for q in questions if q["fold"] == fold}
        with _copy_lock(plain):  # two runs sharing --index-root create a copy one at a time
            # a copy is used when it was calibrated without every question now evaluated (`held-out.json`); one
            # that was not gets a sibling keyed by this held-out set, so a run using it keeps its files
            target = copy_for(plain, evaluated)
            if not _usable(target, evaluated):
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(index_dir, target)
                qrels_path, queries_path = _calibration_set(name, folder, evaluated, target, train)
                with HybridIndex.open(target) as index:
                    cal = Calibrator(index, alpha=alpha, depth=200, seed=0).run(
                        queries_path=queries_path,
                        qrels_path=qrels_path,
                        unanswerable=_unanswerable_outside(name, folder, evaluated),
                    )
                save_calibration(cal, target)
                (target / "held-out.json").write_text(json.dumps(sorted(evaluated)), encoding="utf-8")
        out[fold] = target
    return out


def _usable(target: Path, evaluated: set[str]) -> bool:
    """Calibrated with the hybrid score kinds and abstention, and without any of the questions now evaluated."""
    if not (target / "calibration.json").exists():
        return False
    cal = load_calibration(target)[0]
    return cal.hybrid_k is not None and cal.abstention is not None and _held_out_covers(target, evaluated)


def _key(evaluated: set[str]) -> str:
    return hashlib.sha256("\n".join(sorted(evaluated)).encode()).hexdigest()[:10]


@contextlib.contextmanager
def _copy_lock(target: Path):
    """An exclusive file lock beside `target` (`fcntl.flock`; released when the block ends and the file closes)."""
    with open(target.parent / f".{target.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def copy_for(plain: Path, evaluated: set[str], usable=None) -> Path:
    """The calibrated copy to use for `evaluated`: the plain one when usable, else a sibling keyed by the set."""
    usable = usable or _usable
    return plain if usable(plain, evaluated) else plain.with_name(f"{plain.name}-{_key(evaluated)}")


def _held_out_covers(target: Path, evaluated: set[str]) -> bool:
    """Whether a calibrated copy was calibrated without every question now evaluated (`held-out.json`);
    a copy written before that record is trusted as is."""
    path = target / "held-out.json"
    return not path.is_file() or evaluated <= set(json.loads(path.read_text(encoding="utf-8")))


def _unanswerable_outside(name: str, folder: Path, evaluated: set[str]) -> list[str] | None:
    """SQuAD 2.0: the labelled unanswerable questions outside the evaluated sample (abstention
    calibration); other sets: None (the held-out-document proxy)."""
    if name != "squad2":
        return None
    return [r["question"] for r in _jsonl(folder / "qa.jsonl") if r["is_impossible"] and r["id"] not in evaluated]


def _calibration_set(name: str, folder: Path, evaluated: set[str], target: Path, train: bool = False) -> tuple[Path, Path]:
    if train:
        return folder / "qrels" / "train.tsv", folder / "queries.jsonl"
    qrels_lines = ["query-id\tcorpus-id\tscore"]
    queries = []
    if name == "scifact":  # the other fold's test claims: one record per claim, any gold abstract
        texts = {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")}
        for qid, docs in _qrels(folder / "qrels" / "test.tsv").items():
            if qid in texts and qid not in evaluated:
                qrels_lines.extend(f"{qid}\t{d}\t1" for d in docs)
                queries.append({"_id": qid, "text": texts[qid]})
    elif name == "squad2":
        for r in _jsonl(folder / "qa.jsonl"):
            if not r["is_impossible"] and r["id"] not in evaluated:
                qrels_lines.append(f"{r['id']}\t{r['gold_doc_id']}\t1")
                queries.append({"_id": r["id"], "text": r["question"]})
    else:
        # two-hop: one calibration record per gold paragraph, so the cutoff keeps *each* with 1 - alpha
        for r in _jsonl(folder / "qa.jsonl"):
            if r["id"] not in evaluated:
                for d in r["gold_doc_ids"]:
                    qrels_lines.append(f"{r['id']}:{d}\t{d}\t1")
                    queries.append({"_id": f"{r['id']}:{d}", "text": r["question"]})
    (target / "cal-qrels.tsv").write_text("\n".join(qrels_lines) + "\n", encoding="utf-8")
    (target / "cal-queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    return target / "cal-qrels.tsv", target / "cal-queries.jsonl"
