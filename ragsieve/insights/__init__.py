"""What the questions reveal: a redacted question log and the insights computed from it (pure functions)."""

from ragsieve.insights.log import QuestionLog
from ragsieve.insights.record import Outcome, QuestionRecord, record_of
from ragsieve.insights.redact import redact

__all__ = ["QuestionLog", "QuestionRecord", "Outcome", "record_of", "redact"]
