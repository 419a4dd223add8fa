"""OpenTelemetry spans of questions, plan steps, model calls, retrievals, embedding batches and index builds.

The lowest layer (tools/ code opens spans too); OpenTelemetry itself is imported only when tracing is on
(`setup.configure`, or an OTLP endpoint variable at the first span). Off, every span is a no-op. docs/tracing.md.
"""
from __future__ import annotations

from ragsieve.tools.tracing.settings import TracingConfig, resolve
from ragsieve.tools.tracing.setup import configure, flush, reset
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

__all__ = ["NULL", "Kind", "Span", "TracingConfig", "configure", "count", "enabled", "event", "flush",
           "request_span", "reset", "resolve", "span", "trace_id", "traced"]
