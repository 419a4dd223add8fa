"""OpenTelemetry spans of questions, plan steps, model calls, retrievals, embedding batches and index builds.

The lowest layer (tools/ code opens spans too); OpenTelemetry itself is imported only when tracing is on
(`setup.configure`, or an OTLP endpoint variable at the first span). Off, every span is a no-op. docs/tracing.md.
"""

from __future__ import annotations

from ragsieve.tools.tracing import spans
from ragsieve.tools.tracing.settings import Defaults, resolve
from ragsieve.tools.tracing.setup import configure, configured, decide_from_environment, flush, reset
from ragsieve.tools.tracing.spans import (
    NULL,
    Kind,
    Span,
    count,
    enabled,
    event,
    request_span,
    span,
    trace_id,
    traced,
)

spans.decide_with(decide_from_environment)  # the first span decides from the environment when nobody configured tracing

__all__ = [
    "NULL",
    "Kind",
    "Span",
    "Defaults",
    "configure",
    "configured",
    "count",
    "enabled",
    "event",
    "flush",
    "request_span",
    "reset",
    "resolve",
    "span",
    "trace_id",
    "traced",
]
