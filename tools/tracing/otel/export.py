"""The exporter wrapper of ragsieve's own provider: a collector that is down, slow or refusing costs the queue
and one warning line; the SDK's own per-batch error lines are folded into it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger("ragsieve.tools.tracing.otel")  # the package's logger: operators filter on it

# the SDK loggers whose per-batch lines GuardedExporter's one warning replaces
_QUIET = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.sdk._shared_internal")


class _Fold(logging.Filter):
    """Drops the SDK's export error lines (and keeps the last, for the one warning that replaces them)."""

    def __init__(self) -> None:
        super().__init__()
        self.last = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            try:
                self.last = record.getMessage()[:300]
            except Exception:  # noqa: BLE001 - a bad format string: nothing to keep
                self.last = str(record.msg)[:300]
            return False
        return True


class GuardedExporter:
    """A span exporter (the SDK's interface) that fails quietly: the first failed export logs one warning, a
    recovery one info line. `prepare` turns the queue's records into the spans `inner` sends (in the
    exporter's thread: `OtelTracer.readable`)."""

    def __init__(
        self,
        inner: "SpanExporter",
        endpoint: str,
        max_queue: int,
        prepare: Callable[[Sequence[Any]], Sequence["ReadableSpan"]] | None = None,
    ) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.inner, self.endpoint, self.max_queue, self.prepare = inner, endpoint, max_queue, prepare
        self.failure = SpanExportResult.FAILURE
        self.failures = 0
        self.dropped = 0
        self._failing = False
        self._warned = False
        self.fold = _Fold()
        for name in _QUIET:
            logging.getLogger(name).addFilter(self.fold)

    def export(self, spans: Sequence["ReadableSpan"]) -> "SpanExportResult":
        try:
            result = self.inner.export(spans if self.prepare is None else self.prepare(spans))
        except Exception as exc:  # noqa: BLE001 - the exporter's fault must never reach an answer
            self.fold.last = f"{type(exc).__name__}: {exc}"[:300]
            result = self.failure
        if result is self.failure:
            self.failures += 1
            self.dropped += len(spans)
            if not self._warned:
                log.warning(
                    "tracing: the collector at %s is not taking spans (%s); answers are unaffected, spans "
                    "wait in a queue of at most %d and are dropped while it stays away (said once)",
                    self.endpoint,
                    self.fold.last or "export failed",
                    self.max_queue,
                )
                self._warned = True
            self._failing = True
        elif self._failing:
            log.info("tracing: the collector at %s takes spans again (%d spans were dropped)", self.endpoint, self.dropped)
            self._failing = False
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()
        for name in _QUIET:
            logging.getLogger(name).removeFilter(self.fold)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
