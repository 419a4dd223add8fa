"""Turning tracing on or off: `configure` (front ends call it at start; the first span calls it with the
environment alone when nobody did)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ragsieve.tools.errors import UsageError
from ragsieve.tools.extras import Extra, require
from ragsieve.tools.tracing import spans
from ragsieve.tools.tracing.settings import Resolved, TracingSection, resolve

log = logging.getLogger(__name__)
_lock = threading.Lock()
_running: tuple[Resolved, Any, Any] | None = None  # (settings, redact, provider) of the installed tracer
_by_caller = False  # configure was called by a front end or the application (not only the first span's decision)


def configure(
    config: TracingSection | None = None,
    *,
    redact: Callable[[str], str] | None = None,
    tracer_provider: Any = None,
    environ: dict[str, str] | None = None,
) -> bool:
    """Tracing as `config` and the environment say (see `settings.resolve`); True when on.

    `redact` (text -> text) is applied to every captured text; `capture_content` is refused without one.
    `tracer_provider`: the application's OTel provider to use (by default the global one when the
    application has set it; ragsieve never installs one globally). Asking again with the same settings
    keeps the running tracer; other settings replace it. A bad setting raises UsageError; tracing asked for
    without the `[otel]` extra raises the one-line MissingExtraError."""
    global _running, _by_caller
    _by_caller = True
    resolved = resolve(config, environ)
    with _lock:
        if resolved is None:
            _stop()
            spans.install(None)
            return False
        if resolved.capture_content and redact is None:
            raise UsageError(
                "[tracing] capture_content needs a redaction function: ragsieve's front ends pass the "
                "question log's; an application calling configure() passes redact=..."
            )
        if _running is not None and _running == (resolved, redact, tracer_provider):
            return True
        require(Extra.OTEL, "opentelemetry.sdk", f"tracing (turned on by {resolved.source})")
        require(Extra.OTEL, "opentelemetry.exporter.otlp.proto.http", f"tracing (turned on by {resolved.source})")
        from ragsieve.tools.tracing.otel import OtelTracer

        _stop()
        tracer = OtelTracer(resolved, redact, tracer_provider)
        spans.install(tracer)
        _running = (resolved, redact, tracer_provider)
        where = resolved.endpoint if tracer.own is not None else "the application's tracer provider"
        log.info(
            "tracing on (%s): spans to %s%s", resolved.source, where, ", with redacted text" if tracer.content is not None else ""
        )
        return True


def decide_from_environment() -> None:
    """The first span's decision when nobody configured tracing: the environment alone (a later front end's
    `configure` still applies its own settings)."""
    global _by_caller
    configure()
    _by_caller = False


def configured() -> bool:
    """Whether a front end or the application called `configure` in this process."""
    return _by_caller


def _stop() -> None:
    global _running
    tracer = spans._tracer
    if tracer is not None and tracer is not spans._UNSET:
        tracer.shutdown()
    _running = None


def flush(timeout_s: float = 5.0) -> bool:
    """Send the spans waiting in ragsieve's own exporter queue now (tests, benchmarks, a CLI about to exit)."""
    tracer = spans._tracer
    flush_fn = getattr(tracer, "flush", None)
    return bool(flush_fn(timeout_s)) if flush_fn is not None else True


def reset() -> None:
    """Back to undecided (the next span asks the environment again): for tests."""
    global _by_caller
    _by_caller = False
    with _lock:
        _stop()
        spans.install(spans._UNSET)
