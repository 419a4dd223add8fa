"""What the questions reveal: a redacted question log and the insights computed from it (pure functions)."""
from ragsieve.agent.insights.log import QuestionLog
from ragsieve.agent.insights.record import Outcome, QuestionRecord, record_of
from ragsieve.agent.insights.redact import redact

__all__ = ["QuestionLog", "QuestionRecord", "Outcome", "record_of", "redact"]
