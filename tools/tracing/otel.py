"""The OpenTelemetry side of tracing (the `[otel]` extra): a tracer provider, a batching OTLP/HTTP exporter
that never slows or fails an answer, and the live spans `ragsieve.tools.tracing.spans` hands out.

OpenTelemetry is imported when an `OtelTracer` is made (`setup.configure`, after its `require` check), so this
module itself imports without the extra. The application's own tracer provider is used when it has set one (or
passes one): ragsieve then adds nothing to it and never replaces it. Otherwise ragsieve keeps a provider of its
own, private (never installed as the global one), with a `BatchSpanProcessor`: spans wait in a queue bounded by
`[tracing] max_queue` (beyond it they are dropped) and a background thread sends them, each export bounded by
`export_timeout_s`. A collector that is down, slow or refusing costs the queue and one warning line
(`GuardedExporter`); the SDK's own per-batch error lines are folded into it. A span the sampler drops
(`OTEL_TRACES_SAMPLER`) is not recording: its attributes and text are never built, and on ragsieve's own
provider its children are not opened at all (`NULL`), so a question sampled out costs about one span.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ragsieve.tools.tracing.conventions import MAX_DOCUMENTS, SPAN_KIND
from ragsieve.tools.tracing.settings import Resolved
from ragsieve.tools.tracing.spans import NULL, Kind, Span, current

if TYPE_CHECKING:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

SCOPE = "ragsieve"
# the SDK loggers whose per-batch lines GuardedExporter's one warning replaces
_QUIET = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.sdk._shared_internal")
_PLAIN = frozenset((str, bool, int, float))  # attribute values the SDK takes as they are
ATTRIBUTE_LIMIT = 3 * MAX_DOCUMENTS + 64  # a retrieval span's ids, scores and texts (the SDK's default is 128)


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
    recovery one info line."""

    def __init__(self, inner: "SpanExporter", endpoint: str, max_queue: int) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.inner, self.endpoint, self.max_queue = inner, endpoint, max_queue
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
            result = self.inner.export(spans)
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


def attribute(value: Any) -> Any:
    """`value` as an OTel attribute (str, bool, int, float or a tuple of one of them); None when there is none."""
    if value is None or type(value) in _PLAIN:
        return value
    if isinstance(value, Kind):
        return value.value
    if isinstance(value, (list, tuple)):
        items = [v for v in value if v is not None]
        if all(isinstance(v, str) for v in items) or all(isinstance(v, bool) for v in items):
            return tuple(items)  # a tuple, as the SDK keeps a sequence
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            return tuple(float(v) for v in items) if any(isinstance(v, float) for v in items) else tuple(items)
    if isinstance(value, (str, bool, int, float)):  # a subclass (a str enum, a numpy scalar's Python twin)
        return value
    return json.dumps(value, default=str, ensure_ascii=False)[:4000]


def attributes(pairs: Mapping[str, Any], into: dict[str, Any]) -> dict[str, Any]:
    """`into` with each of `pairs` as an attribute (`attribute`), those without a value left out."""
    for key, value in pairs.items():
        if value is not None and type(value) not in _PLAIN:
            value = attribute(value)
        if value is not None:
            into[key] = value
    return into


class LiveSpan:
    """One open span: current (for children, `event` and `count`) between `__enter__` and `__exit__`.
    `recording` is False for a span the sampler dropped (every method then returns at once); `captures` says
    whether `text` keeps text, so callers build none otherwise."""

    __slots__ = ("span", "owner", "recording", "captures", "_tokens", "_counts")

    def __init__(self, owner: "OtelTracer", span: "trace.Span") -> None:
        self.span, self.owner = span, owner
        self.recording = span.is_recording()
        self.captures = self.recording and owner.content is not None
        self._tokens: tuple[Any, Any] | None = None
        self._counts: dict[str, int] | None = None

    def __enter__(self) -> "LiveSpan":
        owner = self.owner
        self._tokens = (owner.attach(owner.in_context(self.span)), current.set(self))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None and self.recording:
            from opentelemetry.trace import Status, StatusCode

            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:300]))
        if self._tokens is not None:
            current.reset(self._tokens[1])
            self.owner.detach(self._tokens[0])
        self.span.end()

    def set(self, key: str, value: Any) -> None:
        if self.recording:
            if value is not None and type(value) not in _PLAIN:
                value = attribute(value)
            if value is not None:
                self.span.set_attribute(key, value)

    def update(self, pairs: Mapping[str, Any]) -> None:
        if self.recording:
            self.span.set_attributes(attributes(pairs, {}))

    def text(self, key: str, value: str | None) -> None:
        if value is not None and self.captures:
            self.span.set_attribute(key, self.owner.content(str(value)))  # type: ignore[misc]

    def event(self, name: str, pairs: Mapping[str, Any] | None = None) -> None:
        if self.recording:
            self.span.add_event(name, attributes(pairs or {}, {}))

    def count(self, key: str, by: int = 1) -> None:
        if self.recording:
            counts = self._counts = self._counts or {}
            counts[key] = counts.get(key, 0) + by
            self.span.set_attribute(key, counts[key])

    def ids(self) -> tuple[str, str]:
        ctx = self.span.get_span_context()
        return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


class QuickSpan:
    """A child span on ragsieve's own provider, recorded without the SDK's per-span machinery: its context
    (the parent's trace id, flags and trace state, a span id from the provider's id generator, as the SDK's
    built-in samplers would give a child of a sampled parent) goes into the OTel context like a live span's,
    so code inside it (the application's instrumentation too) nests under it; its attributes (already plain,
    `attribute`), events and times are kept in a dict and a list, and at `__exit__` it becomes one
    `ReadableSpan` handed to the batching processor (a full queue drops it there, as the SDK's spans are).
    The SDK would check every attribute again (`BoundedAttributes`), ~100 us a span: ragsieve's values are
    cleaned once, here, with the provider's count and length limits applied at the end."""

    __slots__ = (
        *("owner", "name", "context", "parent", "start", "attrs", "events", "status", "recording", "captures"),
        *("_tokens", "_counts"),
    )

    def __init__(self, owner: "OtelTracer", name: str, parent: "trace.SpanContext", attrs: dict[str, Any]) -> None:
        from opentelemetry.trace import SpanContext

        self.owner, self.name, self.parent, self.attrs = owner, name, parent, attrs
        self.context = SpanContext(parent.trace_id, owner.new_span_id(), False, parent.trace_flags, parent.trace_state)
        self.events: list[Any] = []
        self.status: Any = None
        self.recording, self.captures = True, owner.content is not None
        self._tokens: tuple[Any, Any] | None = None
        self._counts: dict[str, int] | None = None
        self.start = owner.now()

    def __enter__(self) -> "QuickSpan":
        owner = self.owner
        self._tokens = (owner.attach(owner.in_context(owner.non_recording(self.context))), current.set(self))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        owner = self.owner
        if exc is not None:
            import traceback

            from opentelemetry.trace import Status, StatusCode

            module, qualname = type(exc).__module__, type(exc).__qualname__
            self.event(
                "exception",
                {
                    "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
                    "exception.message": str(exc),
                    "exception.stacktrace": "".join(traceback.format_exception(exc)),
                    "exception.escaped": "False",
                },
            )
            self.status = Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:300])
        if self._tokens is not None:
            current.reset(self._tokens[1])
            owner.detach(self._tokens[0])
        owner.finish(self, owner.now())

    def set(self, key: str, value: Any) -> None:
        if value is not None and type(value) not in _PLAIN:
            value = attribute(value)
        if value is not None:
            self.attrs[key] = value

    def update(self, pairs: Mapping[str, Any]) -> None:
        attributes(pairs, self.attrs)

    def text(self, key: str, value: str | None) -> None:
        content = self.owner.content
        if value is not None and content is not None:
            self.attrs[key] = content(str(value))

    def event(self, name: str, pairs: Mapping[str, Any] | None = None) -> None:
        self.events.append((name, attributes(pairs or {}, {}), self.owner.now()))

    def count(self, key: str, by: int = 1) -> None:
        counts = self._counts = self._counts or {}
        counts[key] = self.attrs[key] = counts.get(key, 0) + by

    def ids(self) -> tuple[str, str]:
        return format(self.context.trace_id, "032x"), format(self.context.span_id, "016x")


class OtelTracer:
    """Spans on the application's provider, or on ragsieve's own exporting one (`own` is then set)."""

    def __init__(
        self, resolved: Resolved, redact: Callable[[str], str] | None, provider: "trace.TracerProvider | None" = None
    ) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.resolved = resolved
        self.own: TracerProvider | None = None
        self.exporter: GuardedExporter | None = None
        self.processor: Any = None  # our own provider's batching processor (QuickSpan hands its spans to it)
        self.limits: Any = None
        self.attach, self.detach, self.in_context = context.attach, context.detach, trace.set_span_in_context
        self.current_span, self.propagator = trace.get_current_span, TraceContextTextMapPropagator()
        self.internal, self.server = trace.SpanKind.INTERNAL, trace.SpanKind.SERVER
        if provider is None:
            global_provider = trace.get_tracer_provider()
            if not isinstance(global_provider, trace.ProxyTracerProvider):
                provider = global_provider  # the application's: its processors decide where spans go
        if provider is None:
            provider = self.own = self._own_provider(resolved)
        # the samplers the SDK reads from OTEL_TRACES_SAMPLER (always_*, traceidratio, parentbased_*) drop every
        # child of a dropped span; a plug-in sampler, or the application's provider, decides for itself
        self.prune = self.own is not None and type(self.own.sampler).__module__ == "opentelemetry.sdk.trace.sampling"
        self.provider = provider
        self.tracer = provider.get_tracer(SCOPE)
        # children of a recording span on our own provider are QuickSpans (its samplers keep a sampled
        # parent's children); the application's provider gets every span through its own SDK tracer
        self.quick = self.prune and self.processor is not None and hasattr(self.tracer, "id_generator")
        if self.quick:
            from time import time_ns

            sdk_tracer: Any = self.tracer  # the SDK's Tracer (checked above): its id generator and resource

            from opentelemetry.sdk.trace import Event, ReadableSpan
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
            from opentelemetry.trace import NonRecordingSpan, Status

            self.now, self.non_recording, self.new_span_id = time_ns, NonRecordingSpan, sdk_tracer.id_generator.generate_span_id
            self._readable, self._event, self._unset = ReadableSpan, Event, Status()
            self._scope, self._resource = InstrumentationScope(SCOPE), sdk_tracer.resource
        chars = resolved.content_chars
        self.content: Callable[[str], str] | None = None
        if resolved.capture_content and redact is not None:
            self.content = lambda text: redact(text)[:chars]

    def _own_provider(self, resolved: Resolved) -> "TracerProvider":
        """A provider of ragsieve's own (its sampler from `OTEL_TRACES_SAMPLER`, as the SDK reads it), batching
        to the OTLP/HTTP endpoint through `GuardedExporter`."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanLimits, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.exporter = GuardedExporter(
            OTLPSpanExporter(endpoint=resolved.endpoint, timeout=resolved.export_timeout_s),
            resolved.endpoint,
            resolved.max_queue,
        )
        limits = None  # the operator's OTEL_*ATTRIBUTE_COUNT_LIMIT, else room for a retrieval's documents with their text
        if not any(name in os.environ for name in ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT")):
            limits = SpanLimits(max_span_attributes=ATTRIBUTE_LIMIT)
        self.limits = limits or SpanLimits()
        own = TracerProvider(resource=Resource.create({"service.name": resolved.service_name}), span_limits=limits)
        self.processor = BatchSpanProcessor(
            self.exporter,  # type: ignore[arg-type]  # the exporter interface, not its base class
            max_queue_size=resolved.max_queue,
            max_export_batch_size=resolved.batch_size,
            schedule_delay_millis=resolved.batch_delay_s * 1000,
            export_timeout_millis=resolved.export_timeout_s * 1000,
        )
        own.add_span_processor(self.processor)
        return own

    def finish(self, span: QuickSpan, end: int) -> None:
        """A QuickSpan as the SDK's `ReadableSpan`, within the provider's limits, to the batching processor."""
        limits, attrs = self.limits, span.attrs
        most = limits.max_span_attributes
        if most is not None and len(attrs) > most:  # as BoundedAttributes: the earliest set go first
            attrs = dict(list(attrs.items())[-most:])
        longest = limits.max_attribute_length
        if longest is not None:
            attrs = {k: v[:longest] if isinstance(v, str) else v for k, v in attrs.items()}
        events = [self._event(name, pairs, stamp) for name, pairs, stamp in span.events[: limits.max_events]]
        span.attrs, span.events = {}, []  # a set after the end is lost, as the SDK ignores it
        self.processor.on_end(
            self._readable(
                name=span.name,
                context=span.context,
                parent=span.parent,
                resource=self._resource,
                attributes=attrs,
                events=events,
                kind=self.internal,
                status=span.status or self._unset,
                start_time=span.start,
                end_time=end,
                instrumentation_scope=self._scope,
            )
        )

    def open(self, name: str, kind: Kind, pairs: Mapping[str, Any] | None) -> Span:
        if self.prune:
            parent = current.get()
            if parent is not None and not parent.recording:
                return NULL  # the child of a span the sampler dropped: dropped too, so nothing is built
        cleaned = attributes(pairs, {SPAN_KIND: kind.value}) if pairs else {SPAN_KIND: kind.value}
        if self.quick:
            context = self.current_span().get_span_context()
            if context.is_valid and not context.is_remote and context.trace_flags.sampled:
                return QuickSpan(self, name, context, cleaned)  # a sampled local parent: its child is sampled
        return LiveSpan(self, self.tracer.start_span(name, kind=self.internal, attributes=cleaned))

    def open_request(self, name: str, headers: Mapping[str, str], pairs: Mapping[str, Any]) -> LiveSpan:
        """A SERVER span continuing the caller's W3C `traceparent` (a new trace when there is none); inside a
        span the application's own instrumentation opened (FastAPI's, an ASGI middleware's), a child of it."""
        inside = self.current_span().get_span_context().is_valid
        parent = None if inside else self.propagator.extract(carrier=dict(headers))
        cleaned = attributes(pairs, {SPAN_KIND: Kind.CHAIN.value})
        return LiveSpan(self, self.tracer.start_span(name, context=parent, kind=self.server, attributes=cleaned))

    def trace_id(self) -> str | None:
        ctx = self.current_span().get_span_context()
        return format(ctx.trace_id, "032x") if ctx.is_valid else None

    def flush(self, timeout_s: float = 5.0) -> bool:
        if self.own is None:
            return True
        return self.own.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        """Our own provider's queue sent (bounded by the export timeout) and its thread stopped."""
        if self.own is not None:
            own, self.own = self.own, None
            threading.Thread(target=own.shutdown, name="ragsieve-trace-shutdown", daemon=True).start()
