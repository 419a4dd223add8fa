"""Data, indexes, calibration folds and the scripted oracle for `benchmarks/pipeline/main.py`.

Calibration never sees the questions it is evaluated on:
- SciFact: two folds of the test claims, each evaluated on an index copy calibrated on the other
  half (exchangeable, as CONFLARE assumes); `scifact_calibration="train"` calibrates on the train
  qrels (809 claims) instead, which measures what a shift between calibration and use costs.
- HotpotQA (103 questions, one qrels file): two folds; each half is evaluated on an index copy
  calibrated on the other half, one calibration record per gold paragraph (both hops matter).
- SQuAD 2.0: calibrated on answerable questions outside the evaluated sample.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import random
import re
import shutil
from pathlib import Path

from benchmarks.pipeline.oracle_texts import ChunkTexts
from ragsieve.agent.calibration import Calibrator, load_calibration, save_calibration
from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.local.index import HybridIndex

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
ABSTAIN = "The context does not contain the answer."


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


class OracleChat:
    """A scripted model that knows the gold: judge, reader and validator (each judge verdict
    flipped with probability `flip`, seeded per question and chunk).

    Judge: a chunk is relevant iff its document is gold (documents that carry the same text are all its
    documents: `oracle_texts.ChunkTexts`). Reader: it answers with the gold
    answer when some passage in its prompt contains it (for SciFact, when a gold abstract is
    in the prompt: "supported"), else abstains - so EM/F1 measure whether the context holds
    the answer, not a model's reading. Validator: resolved iff the reader's condition holds.
    Prompts are parsed only for the judge's one-line JSON mapping of indexes to texts.
    """

    accepts_deadline = False

    def __init__(self, chunks: ChunkTexts, flip: float):
        self.chunks, self.flip = chunks, flip
        self.q: dict = {}

    @property
    def model_name(self) -> str:
        return f"oracle-flip{int(self.flip * 100)}" if self.flip else "oracle"

    def _supported(self, prompt: str) -> str | None:
        low = prompt.lower()
        for answer in self.q.get("answers") or []:
            if answer and answer.lower() in low:
                return answer
        if not self.q.get("answers"):
            for doc in self.q.get("gold") or []:
                if (self.chunks.text_of(doc) or "\0")[:120].lower() in low:
                    return "The claim is supported"
        return None

    def complete(self, messages, *, json_schema=None, schema_name="reply", max_tokens=None, temperature=None):
        from ragsieve.agent.llm.chat import ChatReply

        prompt = "\n".join(m.get("content", "") for m in messages)
        keys = list(((json_schema or {}).get("properties") or {}).keys())
        if keys and "resolved" in keys:
            text = json.dumps({"resolved": self._supported(prompt) is not None, "reason": "oracle"})
        elif keys:
            mapping = _mapping_line(prompt, keys)
            verdicts = {}
            for key in keys:
                body = mapping.get(key, "")
                truth = bool(self.chunks.docs(body) & set(self.q.get("gold") or []))
                draw = random.Random(f"{self.q.get('id')}|{body[:200]}").random()
                verdicts[key] = (not truth) if draw < self.flip else truth
            text = json.dumps(verdicts)
        else:
            found = self._supported(prompt.split("Question:")[0])
            text = f"{found} [{self._cited(prompt)}]." if found else ABSTAIN
        return ChatReply(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()))

    def _cited(self, prompt: str) -> int:
        """The number of the first source of the answer prompt (`prompts/answer.j2`) that holds what the reader
        answers from, as a capable model cites it (until this change every answer cited [1], so a validator reading
        the cited passages found the gold only when it came first)."""
        for number, text in SOURCE.findall(prompt):
            if self._supported(text) is not None:
                return int(number)
        return 1


# one source of the answer prompt: its number and its text (up to the fence's END line)
SOURCE = re.compile(r"^\S+ SOURCE \[(\d+)\] from [^\n]*\n(.*?)^\S+ END$", re.MULTILINE | re.DOTALL)


def _mapping_line(prompt: str, keys: list[str]) -> dict[str, str]:
    for line in prompt.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and set(keys) <= set(obj):
                return {k: str(v) for k, v in obj.items()}
    return {}


class GullibleChat(OracleChat):
    """The oracle's judge with a reader that can be fooled (issue 46): it answers with the gold answer when
    its prompt holds one, else with a *plausible* (wrong) answer of an unanswerable SQuAD 2.0 question
    (`plausible_answers`) when its prompt holds one, and abstains only when neither is there. So a plan that
    stuffs its context with near-miss text answers more unanswerable questions, and abstention measures what
    the plan put in the context, not the reader's construction. The validator is the same reader (resolved
    iff it would answer): a model fooled by the text it read is fooled when it checks its answer. Its model name is
    the judge's (`oracle`, `oracle-flipN`): the judge, and so its measured reliability, is the oracle's."""

    def _supported(self, prompt: str) -> str | None:
        found = super()._supported(prompt)
        if found is not None:
            return found
        low = prompt.lower()
        for answer in self.q.get("plausible") or []:
            if answer and answer.lower() in low:
                return answer
        return None
