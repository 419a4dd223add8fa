"""The OpenTelemetry side of tracing (the `[otel]` extra): a tracer provider, a batching OTLP/HTTP exporter
that never slows or fails an answer, and the live spans `ragsieve.tools.tracing.spans` hands out.

OpenTelemetry is imported when an `OtelTracer` is made (`setup.configure`, after its `require` check), so this
package itself imports without the extra (`export`: the exporter wrapper; `records`: the spans). The application's own tracer provider is used when it has set one (or
passes one): ragsieve then adds nothing to it and never replaces it. Otherwise ragsieve keeps a provider of its
own, private (never installed as the global one), with a `BatchSpanProcessor`: spans wait in a queue bounded by
`[tracing] max_queue` (beyond it they are dropped) and a background thread makes and sends them, each export bounded by
`export_timeout_s`. A collector that is down, slow or refusing costs the queue and one warning line
(`GuardedExporter`); the SDK's own per-batch error lines are folded into it. A span the sampler drops
(`OTEL_TRACES_SAMPLER`) is not recording: its attributes and text are never built, and on ragsieve's own
provider its children are not opened at all (`NULL`), so a question sampled out costs about one span.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ragsieve.tools.tracing.conventions import MAX_DOCUMENTS, SPAN_KIND
from ragsieve.tools.tracing.otel.export import GuardedExporter, log
from ragsieve.tools.tracing.otel.records import Ended, LiveSpan, QuickSpan, attributes
from ragsieve.tools.tracing.settings import Resolved
from ragsieve.tools.tracing.spans import NULL, Kind, Span, current

if TYPE_CHECKING:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider


SCOPE = "ragsieve"
_KIND_VALUES = {kind: kind.value for kind in Kind}  # read once: an enum's value is a property
ATTRIBUTE_LIMIT = 3 * MAX_DOCUMENTS + 64  # a retrieval span's ids, scores and texts (the SDK's default is 128)


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
        self.otel_context = context.get_current
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
        # on our own provider every sampled span is a QuickSpan (its samplers keep a sampled local parent's
        # children, and are asked for any other span); the application's provider gets every span through its
        # own SDK tracer
        self.quick = self.prune and self.processor is not None and hasattr(self.tracer, "id_generator")
        if self.quick:
            from time import time_ns

            sdk_tracer: Any = self.tracer  # the SDK's Tracer (checked above): its id generator and resource

            from opentelemetry.sdk.trace import Event, ReadableSpan
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
            from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, TraceFlags

            ids = sdk_tracer.id_generator
            self.now, self.non_recording, self.new_span_id = time_ns, NonRecordingSpan, ids.generate_span_id
            self.span_context, self._ids, self._sampler = SpanContext, ids, sdk_tracer.sampler
            self._trace_flags, self._random = TraceFlags, getattr(TraceFlags, "RANDOM_TRACE_ID", 0)  # W3C level 2
            self._random_ids = getattr(ids, "is_trace_id_random", lambda: False)  # the SDK's random-id flag
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
            self.readable,
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
        """A QuickSpan's `Ended` record to the batching processor (`readable` turns it into a span at export)."""
        self.processor.on_end(span.ended(end))

    def readable(self, spans: Sequence[Any]) -> list[Any]:
        """The exporter's batch with each `Ended` record as the SDK's `ReadableSpan`: `later`'s attributes
        built (one that fails is left out, the span kept), within the provider's limits. The exporter's thread."""
        return [self._readable_span(s) if type(s) is Ended else s for s in spans]

    def _readable_span(self, span: Ended) -> Any:
        limits, attrs = self.limits, span.attrs
        for build in span.deferred or ():
            try:
                attributes(build(), attrs)
            except Exception:  # noqa: BLE001 - a builder's fault costs its attributes, never the span or the batch
                log.debug("tracing: the attributes of %s could not be built", span.name, exc_info=True)
        most = limits.max_span_attributes
        if most is not None and len(attrs) > most:  # as BoundedAttributes: the earliest set go first
            attrs = dict(list(attrs.items())[-most:])
        longest = limits.max_attribute_length
        if longest is not None:
            attrs = {k: v[:longest] if isinstance(v, str) else v for k, v in attrs.items()}
        events = [self._event(name, pairs, stamp) for name, pairs, stamp in span.events[: limits.max_events]]
        return self._readable(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=self._resource,
            attributes=attrs,
            events=events,
            kind=span.kind,
            status=span.status or self._unset,
            start_time=span.start,
            end_time=span.end,
            instrumentation_scope=self._scope,
        )

    def open(self, name: str, kind: Kind, pairs: Mapping[str, Any] | None) -> Span:
        if self.prune:
            parent = current.get()
            if parent is not None and not parent.recording:
                return NULL  # the child of a span the sampler dropped: dropped too, so nothing is built
        else:
            parent = None
        value = _KIND_VALUES.get(kind) or kind.value
        cleaned = attributes(pairs, {SPAN_KIND: value}) if pairs else {SPAN_KIND: value}
        if self.quick:
            if type(parent) is QuickSpan and parent.entered is self.otel_context():
                context = parent.context  # the OTel context is still the one it entered: a sampled local parent
            else:
                context = self.current_span().get_span_context()
                if not (context.is_valid and not context.is_remote and context.trace_flags.sampled):
                    return self._sampled(name, None, self.internal, cleaned)  # no sampled local parent
            own = self.span_context(context.trace_id, self.new_span_id(), False, context.trace_flags, context.trace_state)
            return QuickSpan(self, name, own, context, cleaned, self.internal)  # a sampled parent's child is sampled
        return LiveSpan(self, self.tracer.start_span(name, kind=self.internal, attributes=cleaned))

    def open_request(self, name: str, headers: Mapping[str, str], pairs: Mapping[str, Any]) -> Span:
        """A SERVER span continuing the caller's W3C `traceparent` (a new trace when there is none); inside a
        span the application's own instrumentation opened (FastAPI's, an ASGI middleware's), a child of it."""
        inside = self.current_span().get_span_context().is_valid
        parent = None if inside else self.propagator.extract(carrier=dict(headers))
        cleaned = attributes(pairs, {SPAN_KIND: Kind.CHAIN.value})
        if self.quick:
            return self._sampled(name, parent, self.server, cleaned)
        return LiveSpan(self, self.tracer.start_span(name, context=parent, kind=self.server, attributes=cleaned))

    def _sampled(self, name: str, context: Any, kind: Any, cleaned: dict[str, Any]) -> Span:
        """A span with no local sampled parent (a root, a caller's remote parent) on our own provider: the
        sampler asked as the SDK's tracer asks it (the same arguments; the same trace id, span id and flags
        made), sampled a QuickSpan, else a span that records nothing (the SDK's non-recording span)."""
        parent: Any = self.current_span(context).get_span_context()
        if parent.is_valid:
            trace_id, random = parent.trace_id, parent.trace_flags & self._random
        else:
            parent, trace_id = None, self._ids.generate_trace_id()
            random = self._random if self._random_ids() else 0
        result = self._sampler.should_sample(context, trace_id, name, kind, cleaned, ())
        sampled = result.decision.is_sampled()
        flags = self._trace_flags((self._trace_flags.SAMPLED if sampled else self._trace_flags.DEFAULT) | random)
        own = self.span_context(trace_id, self.new_span_id(), False, flags, result.trace_state)
        if not sampled:  # the built-in samplers' only other decision is DROP
            return LiveSpan(self, self.non_recording(own))
        return QuickSpan(self, name, own, parent, dict(result.attributes), kind)

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
