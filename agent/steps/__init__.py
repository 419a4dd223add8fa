"""Plan steps, one per file; importing this package registers every step."""
from ragsieve.agent.steps import answer, conformal, draft, expand, fallback, judge, outliers, rerank, retrieve, segments, validate

__all__ = ["answer", "conformal", "draft", "expand", "fallback", "judge", "outliers", "rerank", "retrieve", "segments",
           "validate"]
