"""The spans ragsieve's code opens, and nothing else: a no-op object while tracing is off.

`span(name, kind, attributes)` is a context manager; while tracing is off it returns `NULL`, whose methods do
nothing, so the code that opens spans costs one global read and a call. On first use, if nobody called
`configure` (`ragsieve.tools.tracing.setup`), the environment decides once (`OTEL_EXPORTER_OTLP_ENDPOINT`);
with it unset OpenTelemetry is never imported. `traced(...)` wraps a function in a span whose attributes come
from its arguments and its result. Text (questions, prompts, replies, documents) goes in only through
`Span.text`, which drops it unless the operator turned `capture_content` on, and redacts it otherwise.
`Span.later(build)` sets the attributes `build()` returns when the span is exported: on ragsieve's own provider
in the exporter's thread (so the answer does not wait for them), elsewhere at once; `build` reads only what no
longer changes once the span has ended.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from enum import Enum
from typing import Any, Callable, Mapping, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Kind(str, Enum):
    """OpenInference span kinds (`openinference.span.kind`), which Phoenix and Langfuse render by."""

    CHAIN = "CHAIN"
    LLM = "LLM"
    RETRIEVER = "RETRIEVER"
    EMBEDDING = "EMBEDDING"


class Span(Protocol):
    recording: bool  # False: a no-op (tracing off, or a span the sampler dropped)
    captures: bool  # whether `text` keeps text: build none otherwise

    def __enter__(self) -> "Span": ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None: ...
    def set(self, key: str, value: Any) -> None: ...
    def update(self, attributes: Mapping[str, Any]) -> None: ...
    def later(self, build: Callable[[], Mapping[str, Any]]) -> None: ...
    def text(self, key: str, value: str | None) -> None: ...
    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None: ...
    def count(self, key: str, by: int = 1) -> None: ...
    def ids(self) -> tuple[str, str] | None: ...


class _NullSpan:
    """What `span` returns while tracing is off: every method does nothing."""

    __slots__ = ()
    recording = False
    captures = False

    def __enter__(self) -> "_NullSpan":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        return None

    def set(self, key: str, value: Any) -> None:
        pass

    def update(self, attributes: Mapping[str, Any]) -> None:
        pass

    def later(self, build: Callable[[], Mapping[str, Any]]) -> None:
        pass

    def text(self, key: str, value: str | None) -> None:
        pass

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        pass

    def count(self, key: str, by: int = 1) -> None:
        pass

    def ids(self) -> tuple[str, str] | None:
        return None


NULL = _NullSpan()


class Tracer(Protocol):
    """What `setup` installs (`ragsieve.tools.tracing.otel.OtelTracer`): spans, and the current trace id."""

    def open(self, name: str, kind: Kind, attributes: Mapping[str, Any] | None) -> Span: ...
    def open_request(self, name: str, headers: Mapping[str, str], attributes: Mapping[str, Any]) -> Span: ...
    def trace_id(self) -> str | None: ...
    def shutdown(self) -> None: ...


_UNSET: Any = object()
_tracer: Tracer | None = _UNSET  # _UNSET: not decided yet; None: off
current: ContextVar[Span | None] = ContextVar("ragsieve_span", default=None)  # the innermost open ragsieve span


_decider: Callable[[], object] | None = None  # `setup.configure`, registered by the package on import


def decide_with(configure: Callable[[], object]) -> None:
    """Called once by `ragsieve.tools.tracing` (this module never imports `setup`: no import cycle)."""
    global _decider
    _decider = configure


def _decide() -> Tracer | None:
    if _decider is None:
        install(None)
    else:
        _decider()  # from the environment only: off unless an OTLP endpoint variable is set
    return _tracer


def install(tracer: Tracer | None) -> None:
    """Called by `setup.configure` only."""
    global _tracer
    _tracer = tracer


def active() -> Tracer | None:
    """The tracer, deciding from the environment on first use; None while tracing is off."""
    tracer = _tracer
    return _decide() if tracer is _UNSET else tracer


def enabled() -> bool:
    return active() is not None


def span(name: str, kind: Kind = Kind.CHAIN, attributes: Mapping[str, Any] | None = None) -> Span:
    tracer = _tracer
    if tracer is None:
        return NULL
    if tracer is _UNSET:
        tracer = _decide()
        if tracer is None:
            return NULL
    return tracer.open(name, kind, attributes)


def request_span(name: str, headers: Mapping[str, str], attributes: Mapping[str, Any]) -> Span:
    """A service request's span, continuing the caller's W3C `traceparent` in `headers` (NULL while off)."""
    tracer = active()
    if tracer is None:
        return NULL
    return tracer.open_request(name, headers, attributes)


def event(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """An event on the innermost open ragsieve span (nothing while tracing is off or outside any span)."""
    if _tracer is not None:
        open_span = current.get()
        if open_span is not None:
            open_span.event(name, attributes)


def count(key: str, by: int = 1) -> None:
    """Add `by` to the integer attribute `key` of the innermost open ragsieve span."""
    if _tracer is not None:
        open_span = current.get()
        if open_span is not None:
            open_span.count(key, by)


def trace_id() -> str | None:
    """The current trace's id (32 hex digits), or None while tracing is off or outside a trace."""
    tracer = _tracer
    return None if tracer is None or tracer is _UNSET else tracer.trace_id()


def traced(
    name: str | Callable[..., str],
    kind: Kind = Kind.CHAIN,
    before: Callable[..., Mapping[str, Any]] | None = None,
    after: Callable[..., None] | None = None,
) -> Callable[[F], F]:
    """`fn` run inside a span: `name` (or `name(*args, **kwargs)`), attributes `before(*args, **kwargs)`,
    then `after(span, result, *args, **kwargs)` while the span is still open. Off: `fn` itself, at once."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            if _tracer is None or (_tracer is _UNSET and _decide() is None):
                return fn(*args, **kwargs)
            title = name(*args, **kwargs) if callable(name) else name
            with span(title, kind, before(*args, **kwargs) if before is not None else None) as opened:
                result = fn(*args, **kwargs)
                if after is not None and opened.recording:
                    after(opened, result, *args, **kwargs)
                return result

        return inner  # type: ignore[return-value]

    return wrap
