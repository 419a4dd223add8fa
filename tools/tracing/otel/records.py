"""The spans `OtelTracer` hands out: `LiveSpan` around an SDK span, `QuickSpan` recorded plainly for a sampled
span on ragsieve's own provider (its `Ended` record waits for the exporter's thread), and the attribute
cleaning both share."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from ragsieve.tools.tracing.spans import Kind, current

if TYPE_CHECKING:
    from opentelemetry import trace

_PLAIN = frozenset((str, bool, int, float))  # attribute values the SDK takes as they are


class Owner(Protocol):
    """What a span reads of the tracer that opened it (`ragsieve.tools.tracing.otel.OtelTracer`)."""

    @property
    def attach(self) -> Callable[..., Any]: ...
    @property
    def detach(self) -> Callable[..., Any]: ...
    @property
    def in_context(self) -> Callable[..., Any]: ...
    @property
    def content(self) -> Callable[[str], str] | None: ...
    @property
    def now(self) -> Callable[[], int]: ...
    @property
    def non_recording(self) -> Callable[..., Any]: ...

    def finish(self, span: QuickSpan, end: int) -> None: ...


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

    def __init__(self, owner: Owner, span: "trace.Span") -> None:
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

    def later(self, build: Callable[[], Mapping[str, Any]]) -> None:
        if self.recording:  # an SDK span: its attributes are set before it ends
            self.update(build())

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
    """A sampled span on ragsieve's own provider, recorded without the SDK's per-span machinery: its context
    (made by `OtelTracer` as the SDK's tracer makes it: a child of a sampled local parent takes the parent's
    trace id, flags and trace state, any other span asks the sampler first; a span id from the provider's id
    generator) goes into the OTel context like a live span's,
    so code inside it (the application's instrumentation too) nests under it; its attributes (already plain,
    `attribute`), events and times are kept in a dict and a list, and at `__exit__` they go, as one `Ended`
    record, to the batching processor's queue (a full queue drops it there, as the SDK's spans are). The
    exporter's thread makes it the SDK's `ReadableSpan` (`OtelTracer.readable`): `later`'s attributes built,
    the provider's count and length limits applied. The SDK would check every attribute again
    (`BoundedAttributes`), ~100 us a span: ragsieve's values are cleaned once, here."""

    __slots__ = (
        *("owner", "name", "context", "parent", "start", "attrs", "events", "status", "recording", "captures"),
        *("kind", "deferred", "entered", "_tokens", "_counts"),
    )

    def __init__(
        self,
        owner: Owner,
        name: str,
        context: "trace.SpanContext",
        parent: "trace.SpanContext | None",
        attrs: dict[str, Any],
        kind: "trace.SpanKind",
    ) -> None:
        self.owner, self.name, self.context, self.parent, self.attrs, self.kind = owner, name, context, parent, attrs, kind
        self.events: list[Any] = []
        self.deferred: list[Callable[[], Mapping[str, Any]]] | None = None  # `later`'s builders
        self.status: Any = None
        self.recording, self.captures = True, owner.content is not None
        self._tokens: tuple[Any, Any] | None = None
        self._counts: dict[str, int] | None = None
        self.entered: Any = None  # the OTel context naming this span while it is current
        self.start = owner.now()

    def __enter__(self) -> "QuickSpan":
        owner = self.owner
        self.entered = owner.in_context(owner.non_recording(self.context))
        self._tokens = (owner.attach(self.entered), current.set(self))
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

    def ended(self, end: int) -> "Ended":
        """The span as it stands at its end; later sets are lost, as the SDK ignores a set after the end."""
        record = Ended(self, end)
        self.attrs, self.events, self.deferred = {}, [], None
        return record

    def set(self, key: str, value: Any) -> None:
        if value is not None and type(value) not in _PLAIN:
            value = attribute(value)
        if value is not None:
            self.attrs[key] = value

    def update(self, pairs: Mapping[str, Any]) -> None:
        attributes(pairs, self.attrs)

    def later(self, build: Callable[[], Mapping[str, Any]]) -> None:
        if self.deferred is None:
            self.deferred = []
        self.deferred.append(build)

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


class Ended:
    """A `QuickSpan` at its end, waiting in the processor's queue (`context`: what the processor checks) until
    the exporter's thread makes it a `ReadableSpan`."""

    __slots__ = ("name", "context", "parent", "kind", "attrs", "deferred", "events", "status", "start", "end")

    def __init__(self, span: QuickSpan, end: int) -> None:
        self.name, self.context, self.parent, self.kind = span.name, span.context, span.parent, span.kind
        self.attrs, self.deferred, self.events, self.status = span.attrs, span.deferred, span.events, span.status
        self.start, self.end = span.start, end
