"""One judge pass: order-keeping batches, the schema each reply must match, failed batches, and the verdicts
split from the decoys (`ragsieve.agent.judging.rounds` says what a round makes of them)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from ragsieve.agent.config import LoopConfig
from ragsieve.agent.errors import LLMError
from ragsieve.tools.types import Hit

log = logging.getLogger(__name__)


def make_batches(hits: list[Hit], batch_size: int, max_chars: int, chunk_chars: int) -> list[list[Hit]]:
    """Greedy, order-keeping split: a batch closes at `batch_size` chunks or `max_chars` text."""
    batches: list[list[Hit]] = []
    current: list[Hit] = []
    used = 0
    for hit in hits:
        size = min(len(hit.chunk.text), chunk_chars)
        if current and (len(current) >= batch_size or used + size > max_chars):
            batches.append(current)
            current, used = [], 0
        current.append(hit)
        used += size
    if current:
        batches.append(current)
    return batches


@lru_cache(maxsize=64)
def batch_schema(n: int) -> type[BaseModel]:
    """A model with required boolean fields "1".."n" and no other keys allowed."""
    fields: dict[str, Any] = {f"i{i}": (bool, Field(..., alias=str(i))) for i in range(1, n + 1)}
    return create_model(f"Relevance{n}", __config__=ConfigDict(extra="forbid"), **fields)


def render_judge_prompt(prompts: Any, question: str, hits: list[Hit], chunk_chars: int) -> str:
    chunks = {str(i): hit.chunk.text[:chunk_chars] for i, hit in enumerate(hits, start=1)}
    return prompts.render("judge", question=question, chunks=chunks)


@dataclass
class BatchReport:
    ids: list[str]
    verdicts: dict[str, bool] | None  # None: the batch failed
    error: str = ""

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"size": len(self.ids)}
        if self.verdicts is None:
            out["failed"] = self.error
        else:
            out["true"] = sum(self.verdicts.values())
        return out


def judge_batch(question: str, hits: list[Hit], *, llm: Any, prompts: Any, chunk_chars: int) -> BatchReport:
    ids = [h.chunk_id for h in hits]
    schema = batch_schema(len(hits))
    prompt = render_judge_prompt(prompts, question, hits, chunk_chars)
    try:
        reply = llm.structured([{"role": "user", "content": prompt}], schema, max_tokens=16 + 8 * len(hits))
    except LLMError as exc:  # malformed JSON after the re-ask, refusal, endpoint down after retries
        log.warning("judge batch of %d failed (%s): %s", len(hits), type(exc).__name__, exc)
        return BatchReport(ids, None, f"{type(exc).__name__}: {str(exc)[:300]}")
    values = reply.model_dump(by_alias=True)
    return BatchReport(ids, {cid: bool(values[str(i)]) for i, cid in enumerate(ids, start=1)})


def run_pass(question: str, items: list[Hit], *, llm: Any, prompts: Any, loop: LoopConfig) -> list[BatchReport]:
    """Judge `items` in order-keeping batches on a bounded thread pool."""
    batches = make_batches(items, loop.judge_batch_size, loop.judge_batch_chars, loop.judge_chunk_chars)
    workers = min(loop.judge_concurrency, len(batches))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="judge") as pool:
        # each batch in a copy of the step's context: its model call's span is a child of the step's span
        futures = [
            pool.submit(
                copy_context().run, judge_batch, question, b, llm=llm, prompts=prompts, chunk_chars=loop.judge_chunk_chars
            )
            for b in batches
        ]
        return [f.result() for f in futures]


def split_verdicts(reports: list[BatchReport], decoy_ids: set[str]) -> tuple[dict[str, bool], list[str], int, int]:
    """(verdicts on real chunks, ids of failed batches, decoys shown, decoys called relevant)."""
    verdicts: dict[str, bool] = {}
    failed: list[str] = []
    shown = called = 0
    for report in reports:
        if report.verdicts is None:
            failed.extend(c for c in report.ids if c not in decoy_ids)
            continue
        for cid, verdict in report.verdicts.items():
            if cid in decoy_ids:
                shown, called = shown + 1, called + int(verdict)
            else:
                verdicts[cid] = verdict
    return verdicts, failed, shown, called


def split_reports(reports: list[BatchReport], ids: set[str]) -> tuple[list[BatchReport], list[BatchReport]]:
    """(the part of each batch on `ids`, the rest): one pass that judged two rounds' chunks, told apart."""
    mine: list[BatchReport] = []
    rest: list[BatchReport] = []
    for report in reports:
        for keep, out in ((lambda c: c in ids, mine), (lambda c: c not in ids, rest)):
            part = [c for c in report.ids if keep(c)]
            if part:
                verdicts = None if report.verdicts is None else {c: report.verdicts[c] for c in part}
                out.append(BatchReport(part, verdicts, report.error))
    return mine, rest
