"""The question log's records: redaction of secrets, retention, and the outcome read from an answer."""

from __future__ import annotations

from ragsieve.agent.core.state import ConformalRecord, TraceEvent
from ragsieve.agent.reply import Answer
from ragsieve.insights.log import FILE_NAME, QuestionLog
from ragsieve.insights.record import Outcome, QuestionRecord, Surface, record_of
from ragsieve.insights.redact import redact
from tests.support.insights_fakes import DAY, START, FakeClock


def test_redact_patterns():
    text = redact(
        "mail a.b+c@mail.example.co.uk, call (555) 123-4567, token ghp_abcdefghij0123456789, "
        "Authorization: Bearer abc.DEF-123_456789, password=hunter22, key AKIAIOSFODNN7EXAMPLE, "
        "hash 9f86d081884c7d659a2feaa0c55ad015"
    )
    for leaked in ("a.b+c", "123-4567", "ghp_", "abc.DEF", "hunter22", "AKIA", "9f86d0"):
        assert leaked not in text
    kept = "How do I set the rate limit to 1000 requests per 60 s in v2.3.1 since 2026-01-05?"
    assert redact(kept) == kept


def _record(at: float, question: str) -> QuestionRecord:
    return QuestionRecord(
        index="lumen", surface=Surface.ASK, at=at, plan="fast", outcome=Outcome.ANSWERED, question=question, latency_s=0.1
    )


def test_retention_deletes_old_rows_and_their_bytes(tmp_path):
    clock = FakeClock(START)
    log = QuestionLog(tmp_path / FILE_NAME, retention_days=7, clock=clock)
    log.write([_record(START - 10 * DAY, "an old question about zebras"), _record(START - DAY, "a recent one")])
    assert [r.question for r in log.rows()] == ["a recent one"]  # the write pruned what retention excludes
    clock.advance(7 * DAY)
    assert log.prune() == 1 and log.rows() == []
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"zebras" not in raw and b"a recent one" not in raw  # secure_delete + checkpoint: the bytes are gone


def test_outcomes_from_answers():
    base = {"question": "q", "answer": "a", "plan": "fast"}
    assert (
        record_of(Answer(**base, abstention="no_evidence"), index="i", surface="ask", at=0, latency_s=0).outcome
        is Outcome.ABSTAINED_CALIBRATION
    )
    assert (
        record_of(Answer(**base, abstention="passages"), index="i", surface="mcp", at=0, latency_s=0).outcome is Outcome.PASSAGES
    )
    mixed = record_of(Answer(**base, abstention="mixed"), index="i", surface="widget", at=0, latency_s=0, keep_answer=True)
    assert mixed.outcome is Outcome.ANSWERED and mixed.low_confidence and mixed.answer == "a"
    trace = [
        TraceEvent(step="conformal", outcome="next", summary={"status": "applied", "best": 0.31, "qhat": 0.4}),
        TraceEvent(
            step="answer", outcome="next", summary={"answerability": {"answerable": False, "score": 0.42, "threshold": 0.55}}
        ),
    ]
    calibrated = record_of(
        Answer(
            **base,
            abstention="model",
            trace=trace,
            evidence="fast",
            conformal=ConformalRecord(kind="raw", alpha=0.1, qhat=0.4, calibration_n=50, coverage=0.9),
        ),
        index="i",
        surface="ask",
        at=0,
        latency_s=0,
    )
    assert (calibrated.score, calibrated.threshold, calibrated.conformal_best, calibrated.qhat) == (0.42, 0.55, 0.31, 0.4)
    weak = record_of(
        Answer(
            **base, evidence="fast", conformal=ConformalRecord(kind="raw", alpha=0.1, qhat=0.4, calibration_n=50, coverage=0.9)
        ),
        index="i",
        surface="ask",
        at=0,
        latency_s=0,
    )
    assert weak.outcome is Outcome.ANSWERED and weak.low_confidence  # answered without passing the cutoff


def test_the_log_is_bounded_by_rows_as_well_as_age(tmp_path):
    clock = FakeClock(START)
    log = QuestionLog(tmp_path / FILE_NAME, retention_days=90, clock=clock, max_rows=100)
    for batch in range(3):  # 180 recent rows in three writes: the oldest beyond 100 go as they pass the bound
        log.write([_record(START - DAY + batch * 100 + n, f"question {batch}-{n}") for n in range(60)])
    rows = log.rows()
    assert len(rows) == 100 and rows[-1].question == "question 2-59" and rows[0].question == "question 1-20"
