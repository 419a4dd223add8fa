"""`ragsieve eval`: run plans side by side on a BEIR-layout dataset and measure them.

One row per (plan, question) is appended to `per_question.jsonl` as soon as it
is scored, so an interrupted run resumes where it stopped; `run.json` keeps the
settings that change results (config, dataset fingerprint, split, mode) and a
resume with different ones is refused. Rows carry retrieval metrics on the
first stage and on the final context, answer metrics (SQuAD EM/F1, abstention,
optional LLM judge) and cost. Datasets and sampling: `ragsieve.eval.data`; aggregates,
the report: `ragsieve.eval.report`; files: `ragsieve.eval.outputs`; one row: `ragsieve.eval.scoring`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from ragsieve.agent.config import Config
from ragsieve.agent.errors import IndexMissingError, UsageError
from ragsieve.agent.llm.client import LLM
from ragsieve.eval.data import Dataset, Question, load_dataset, sample_questions
from ragsieve.eval.outputs import write_outputs
from ragsieve.eval.report import assemble_results, json_differences, running_postfix
from ragsieve.eval.scoring import NoLLM, score_question
from ragsieve.tools import metrics as m

log = logging.getLogger(__name__)

FIRST_STAGE = "first_stage"  # the row `plan` of --retrieval-only runs
ROWS_FILE, RUN_FILE = "per_question.jsonl", "run.json"


class Evaluation:
    """Configured once, `run()` evaluates and writes results.json, report.md and plots under `out`."""

    def __init__(
        self,
        dataset: str | Path,
        index_dir: str | Path,
        *,
        plans: list[str] | None = None,
        config: Config | None = None,
        out: str | Path | None = None,
        limit: int | None = None,
        seed: int = 0,
        split: str = "test",
        retrieval_only: bool = False,
        judge: bool = False,
        cache: bool = True,
        chat=None,
        progress: bool = True,
        command: str = "",
        build_missing: bool = True,
    ):
        from ragsieve.agent.plan.plans import get_plan

        self.config = config or Config()
        if retrieval_only and plans:
            raise UsageError("--retrieval-only measures first-stage retrieval only; it runs no plan, so drop --plan")
        if retrieval_only and judge:
            raise UsageError("--judge needs answers; it cannot be combined with --retrieval-only")
        if limit is not None and limit < 1:
            raise UsageError(f"invalid --limit {limit}: expected a positive number of questions")
        self.plans = [FIRST_STAGE] if retrieval_only else list(dict.fromkeys(plans or [self.config.plan]))
        for name in self.plans if not retrieval_only else []:
            get_plan(name, self.config)  # refuse unknown plans before any work
        self.dataset_dir, self.index_dir = Path(dataset), Path(index_dir)
        self.out = Path(out) if out else Path("ragsieve-eval") / f"{self.dataset_dir.name}-{split}"
        self.limit, self.seed, self.split = limit, seed, split
        self.retrieval_only, self.judge, self.cache = retrieval_only, judge, cache
        self.chat, self.progress, self.command = chat, progress, command
        self.build_missing = build_missing  # False: a missing index is refused, not built from the corpus
        self.index_report: str | None = None  # the build summary when this run indexed the corpus

    def _run_key(self, ds: Dataset, manifest: dict[str, Any]) -> dict[str, Any]:
        """What must not change between a run and its resumption (no secrets, no cache path)."""
        config = self.config.model_dump(mode="json")
        config["llm"] = {k: v for k, v in config["llm"].items() if k not in ("api_key", "cache_dir")}
        return {
            "dataset_fingerprint": ds.fingerprint,
            "split": self.split,
            "retrieval_only": self.retrieval_only,
            "judge": self.judge,
            "config": config,
            "chat_model": None if self.retrieval_only or self.chat is None else self.chat.model_name,
            "index": {k: manifest.get(k) for k in ("corpus_fingerprint", "settings")},
        }

    def _check_resume(self, key: dict[str, Any]) -> None:
        path = self.out / RUN_FILE
        if not path.is_file():
            self.out.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(key, indent=2, sort_keys=True), encoding="utf-8")
            return
        diff = json_differences(json.loads(path.read_text(encoding="utf-8")), json.loads(json.dumps(key)))
        if diff:
            raise UsageError(
                f"{self.out} holds an earlier run with other settings ({'; '.join(diff[:6])}): resuming "
                f"would mix results; pass another --out, or delete {self.out} to start over"
            )

    def _load_rows(self) -> dict[tuple[str, str], dict[str, Any]]:
        path = self.out / ROWS_FILE
        raw = path.read_bytes() if path.is_file() else b""
        if raw and not raw.endswith(b"\n"):  # the last write was cut short by the interruption
            raw = raw[: raw.rfind(b"\n") + 1]
            path.write_bytes(raw)
        rows = (json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip())
        return {(r["plan"], r["qid"]): r for r in rows}

    def _open(self, ds: Dataset):
        from ragsieve.agent.orchestrator import Orchestrator

        config = self.config
        llm: LLM | None = LLM(NoLLM())
        if not self.retrieval_only:
            cache_dir = (config.llm.cache_dir or str(self.out / "llm-cache")) if self.cache else None
            config = config.model_copy(update={"llm": config.llm.model_copy(update={"cache_dir": cache_dir})})
            llm = None
            if self.chat is not None:
                from ragsieve.agent.llm.cache import DiskCache

                llm = LLM(
                    self.chat,
                    cache=DiskCache(cache_dir) if cache_dir else None,
                    max_tokens=config.llm.max_tokens,
                    temperature=config.llm.temperature,
                )
        try:
            orch = Orchestrator.open(self.index_dir, config, llm=llm)
        except IndexMissingError as exc:
            if not self.build_missing:
                raise UsageError(
                    f"no index at {self.index_dir} ({exc}): name the index to measure with --index "
                    f"(its folder, not its served name)"
                ) from None
            self._build_index(ds)
            orch = Orchestrator.open(self.index_dir, config, llm=llm)
        judged = {d for q in ds.questions for d in m.relevant_set(q.qrels)}
        missing = sorted(judged - set(orch.index.store.documents()))
        if missing:
            orch.close()
            raise UsageError(
                f"index {self.index_dir} lacks {len(missing)} of the {len(judged)} judged documents of "
                f"{self.dataset_dir} (e.g. {missing[:3]}): it was built from another corpus; "
                f"pass another --index (a missing one is built from {ds.corpus})"
            )
        return orch

    def _build_index(self, ds: Dataset) -> None:
        from ragsieve.tools.index.building.builder import IndexBuilder

        ic = self.config.index
        log.info("no index at %s: indexing %s", self.index_dir, ds.corpus)
        self.index_report = (
            IndexBuilder(
                self.index_dir,
                chunk_tokens=ic.chunk_tokens,
                embedding_model=ic.embedding_model,
                faiss_index=ic.faiss_index,
                bm25_engine=ic.bm25_engine,
                batch_size=ic.embed_batch_size,
                sparse_percentile=ic.sparse_percentile,
                progress=self.progress,
                device=ic.device,
            )
            .build([ds.corpus])
            .summary()
        )

    def _evaluate(self, orch, plan: str, q: Question) -> dict[str, Any]:
        return score_question(
            orch, plan, q, retrieval_only=self.retrieval_only, candidate_k=self.config.retrieval.candidate_k, judge=self.judge
        )

    def run(self) -> dict[str, Any]:
        from tqdm import tqdm

        started = time.time()
        ds = load_dataset(self.dataset_dir, self.split)
        if self.judge and not ds.has_answers:
            raise UsageError(f"--judge needs gold answers: {self.dataset_dir} has no qa.jsonl")
        questions = sample_questions(ds.questions, self.limit, self.seed)
        wanted = [(p, q) for q in questions for p in self.plans]
        self.index_report = None
        with self._open(ds) as orch:
            manifest = dict(orch.index.manifest)
            key = self._run_key(ds, manifest)
            self._check_resume(key)
            rows = self._load_rows()
            todo = [(p, q) for p, q in wanted if (p, q.qid) not in rows]
            warmup = time.perf_counter()
            if todo:  # load the embedder (and start the LLM) before timing questions
                orch.retrieve(todo[0][1].text, top_k=1)
                _ = None if self.retrieval_only else orch.llm
            warmup = time.perf_counter() - warmup
            keys = {(p, q.qid) for p, q in wanted}
            bar = tqdm(
                total=len(wanted),
                initial=len(wanted) - len(todo),
                desc="eval",
                unit="q",
                disable=not self.progress or not todo,
                dynamic_ncols=True,
            )
            shown = 0.0
            with open(self.out / ROWS_FILE, "a", encoding="utf-8") as sink:
                for plan, q in todo:
                    row = self._evaluate(orch, plan, q)
                    rows[(plan, q.qid)] = row
                    sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                    sink.flush()
                    bar.update(1)
                    if self.progress and time.monotonic() - shown > 1.0:  # running averages, at most once a second
                        bar.set_postfix_str(running_postfix([r for k, r in rows.items() if k in keys], self.plans))
                        shown = time.monotonic()
            bar.close()
        kept = [rows[(p, q.qid)] for p, q in wanted]
        dataset = ds.describe(questions) | {"limit": self.limit, "seed": self.seed}
        settings = {
            "plans": self.plans,
            "retrieval_only": self.retrieval_only,
            "judge": self.judge,
            "cache": self.cache,
            "index": str(self.index_dir),
            "out": str(self.out),
            "indexed_now": self.index_report,
            "rows_this_session": len(todo),
            "warmup_s": round(warmup, 3),
        }
        results = assemble_results(
            command=self.command,
            started=started,
            dataset=dataset,
            settings=settings,
            manifest=manifest,
            config=key["config"],
            rows=kept,
            plans=self.plans,
        )
        write_outputs(results, kept, self.out)
        return results
