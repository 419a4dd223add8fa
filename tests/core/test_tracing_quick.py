"""Tracing on ragsieve's own provider: a sampled span is recorded plainly (`QuickSpan`) and becomes the SDK's
`ReadableSpan` in the exporter's thread. It must be the span the SDK would have made: the same trace, parent,
kind, times inside its parent's, attributes (`later`'s too), events and error status; a root or a caller's
child is sampled exactly as the SDK's tracer samples it; the OTel context inside it names it (so other
instrumentation nests under it); a sampled-out trace builds none; a stuck exporter's full queue drops spans
quietly (one warning at most, from ragsieve)."""

from __future__ import annotations

import logging

import pytest

from ragsieve.agent.config import TracingConfig
from ragsieve.tools import tracing

pytest.importorskip("opentelemetry.sdk", reason="the [otel] extra is not installed")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from ragsieve.tools.tracing.otel import LiveSpan, QuickSpan  # noqa: E402

ENDPOINT = "http://127.0.0.1:9/v1/traces"  # never reached: the exporter's inner part is replaced in memory


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"):
        monkeypatch.delenv(name, raising=False)
    tracing.reset()
    yield
    tracing.reset()


def own_tracer(**options):
    """ragsieve's own provider, its batching exporter sending into memory."""
    tracing.configure(TracingConfig(endpoint=ENDPOINT, batch_delay_s=0.05, **options))
    tracer = tracing.spans._tracer
    assert tracer.own is not None and tracer.quick
    memory = InMemorySpanExporter()
    tracer.exporter.inner = memory
    return tracer, memory


def question(seen: dict) -> None:
    """A root, a child with a grandchild that fails, counts, events and an attribute set later."""
    with tracing.request_span("POST /v1/ask", {}, {"http.request.method": "POST"}) as root:
        seen["root"] = root
        with tracing.span("step", tracing.Kind.CHAIN, {"ragsieve.step": "judge", "skip": None}) as step:
            seen["step"] = step
            seen["otel_current"] = trace.get_current_span().get_span_context()
            seen["trace_id"] = tracing.trace_id()
            step.update({"ragsieve.ids": ("a", "b"), "ragsieve.scores": [1, 0.5], "ragsieve.kind": tracing.Kind.LLM})
            tracing.count("ragsieve.retries")
            tracing.count("ragsieve.retries", 2)
            tracing.event("ragsieve.note", {"n": 1})
            with pytest.raises(ValueError):
                with tracing.span("chat fake", tracing.Kind.LLM, {"llm.model_name": "fake"}):
                    raise ValueError("bad reply")
        step.set("after", 1)  # closed: ignored by the exported span, as the SDK ignores it


def exported(tracer, memory) -> dict:
    seen: dict = {}
    question(seen)
    assert tracing.flush(10.0)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert sorted(spans) == ["POST /v1/ask", "chat fake", "step"]
    return {"seen": seen, "spans": spans}


def test_a_child_is_recorded_plainly_and_exported_as_the_sdk_span_it_stands_for():
    tracer, memory = own_tracer()
    out = exported(tracer, memory)
    seen, spans = out["seen"], out["spans"]
    root, step, chat = spans["POST /v1/ask"], spans["step"], spans["chat fake"]
    assert isinstance(seen["root"], QuickSpan) and isinstance(seen["step"], QuickSpan)
    assert root.kind == trace.SpanKind.SERVER and root.parent is None
    # one trace, the parents as opened, the OTel context naming the open child
    assert {s.context.trace_id for s in spans.values()} == {root.context.trace_id}
    assert step.parent.span_id == root.context.span_id and chat.parent.span_id == step.context.span_id
    assert seen["otel_current"].span_id == step.context.span_id
    assert seen["trace_id"] == format(root.context.trace_id, "032x") == seen["step"].ids()[0]
    assert seen["step"].ids()[1] == format(step.context.span_id, "016x")
    assert step.context.trace_flags == root.context.trace_flags and step.context.trace_flags.sampled
    # times: each inside its parent's
    assert root.start_time <= step.start_time <= chat.start_time <= chat.end_time <= step.end_time <= root.end_time
    # attributes cleaned once, as the SDK holds them; counts and events kept; the late set left out
    assert dict(step.attributes) == {
        "openinference.span.kind": "CHAIN",
        "ragsieve.step": "judge",
        "ragsieve.ids": ("a", "b"),
        "ragsieve.scores": (1.0, 0.5),
        "ragsieve.kind": "LLM",
        "ragsieve.retries": 3,
    }
    assert [(e.name, dict(e.attributes)) for e in step.events] == [("ragsieve.note", {"n": 1})]
    assert step.kind == trace.SpanKind.INTERNAL and step.resource is root.resource
    assert step.instrumentation_scope.name == "ragsieve"
    # the failing grandchild: error status and the exception event, as record_exception writes it
    assert chat.status.status_code == trace.StatusCode.ERROR and "ValueError: bad reply" in chat.status.description
    (error,) = chat.events
    assert error.name == "exception" and error.attributes["exception.type"] == "ValueError"
    assert error.attributes["exception.message"] == "bad reply" and "Traceback" in error.attributes["exception.stacktrace"]


def test_quick_and_sdk_children_export_the_same_spans():
    """The same code with every span through the SDK's tracer (`quick` off) exports the same names, parents,
    kinds, attributes, events and statuses."""

    def shape(out) -> dict:
        spans = out["spans"]
        names = {s.context.span_id: s.name for s in spans.values()}
        return {
            s.name: (
                names.get(s.parent.span_id) if s.parent is not None else None,
                s.kind,
                dict(s.attributes),
                [(e.name, sorted(e.attributes)) for e in s.events],
                s.status.status_code,
            )
            for s in spans.values()
        }

    tracer, memory = own_tracer()
    quick = shape(exported(tracer, memory))
    tracer.quick = False
    memory.clear()
    sdk = exported(tracer, memory)
    assert not isinstance(sdk["seen"]["step"], QuickSpan)
    assert shape(sdk) == quick


def test_the_providers_attribute_limits_hold(monkeypatch):
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "3")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "4")
    tracer, memory = own_tracer()
    with tracing.span("root"):
        with tracing.span("child", tracing.Kind.CHAIN, {"a": "long text", "b": 1, "c": 2, "d": 3}):
            pass
    assert tracing.flush(10.0)
    child = {s.name: s for s in memory.get_finished_spans()}["child"]
    assert dict(child.attributes) == {"b": 1, "c": 2, "d": 3}  # as the SDK: the earliest set dropped first
    with tracing.span("root"):
        with tracing.span("child2", tracing.Kind.CHAIN, {"a": "long text"}):
            pass
    assert tracing.flush(10.0)
    child2 = {s.name: s for s in memory.get_finished_spans()}["child2"]
    assert child2.attributes["a"] == "long"


def test_a_sampled_out_trace_builds_no_child(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    tracer, memory = own_tracer()
    with tracing.span("root") as root:
        with tracing.span("child") as child:
            assert tracing.trace_id() is not None  # the trace id still joins the caller's logs
    assert not root.recording and child is tracing.NULL
    assert tracing.flush(10.0)
    assert memory.get_finished_spans() == ()


def test_a_caller_s_remote_parent_is_joined_by_the_request_span_and_its_children():
    tracer, memory = own_tracer()
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracing.request_span("GET /x", {"traceparent": caller}, {}) as request:
        with tracing.span("child") as child:
            pass
    assert isinstance(request, QuickSpan) and isinstance(child, QuickSpan)
    assert tracing.flush(10.0)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert format(spans["GET /x"].parent.span_id, "016x") == "b7ad6b7169203331" and spans["GET /x"].parent.is_remote
    assert format(spans["child"].context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert spans["child"].parent.span_id == spans["GET /x"].context.span_id


def test_a_full_queue_drops_quick_spans_with_one_warning_at_most(caplog):
    """An exporter that never returns in time: quick spans beyond the queue are dropped where they end, the
    SDK's per-span lines folded away, at most ragsieve's one warning."""
    import threading

    release = threading.Event()

    class Stuck(InMemorySpanExporter):
        def export(self, spans):
            release.wait(5.0)
            return super().export(spans)

    tracing.configure(TracingConfig(endpoint=ENDPOINT, max_queue=16, batch_size=16, batch_delay_s=0.01))
    tracer = tracing.spans._tracer
    stuck = Stuck()
    tracer.exporter.inner = stuck
    caplog.set_level(logging.INFO)
    try:
        with tracing.span("root"):
            for n in range(200):
                with tracing.span(f"child{n}") as child:
                    assert isinstance(child, QuickSpan)
        queue = tracer.processor._batch_processor._queue
        assert queue.maxlen == 16 and len(queue) <= 16
    finally:
        release.set()
    assert tracing.flush(10.0)
    assert len(stuck.get_finished_spans()) < 201  # the surplus was dropped, not kept
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) <= 1 and all(r.name.startswith("ragsieve") for r in lines)


@pytest.mark.parametrize("sampler", ["traceidratio", "parentbased_traceidratio"])
def test_a_root_is_sampled_as_the_sdk_s_tracer_samples_it(monkeypatch, sampler):
    """Callers' traceparents (sampled and not, alternately) through the sampler at a ratio of one half (which
    decides by the trace id, or follows the caller's flag): the request spans ragsieve records itself are
    sampled (exported, flagged) exactly where the SDK's own spans are, their children following."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
    callers = [f"{n:02x}" * 16 for n in range(1, 250, 7)]  # trace ids spread across the ratio's bound

    def run(quick: bool) -> tuple[list, set]:
        tracer, memory = own_tracer()
        tracer.quick = quick
        flags = []
        for n, trace_id in enumerate(callers):
            caller = f"00-{trace_id}-b7ad6b7169203331-0{n % 2}"
            with tracing.request_span("GET /x", {"traceparent": caller}, {}) as request:
                with tracing.span("child") as child:
                    pass
            assert isinstance(request, QuickSpan if quick and request.recording else LiveSpan)
            assert child.recording == request.recording  # a dropped request's child is not even opened
            flags.append((request.ids(), request.recording))
        assert tracing.flush(10.0)
        exported = {(format(s.context.trace_id, "032x"), s.name) for s in memory.get_finished_spans()}
        tracing.reset()
        return flags, exported

    quick_flags, quick_spans = run(True)
    sdk_flags, sdk_spans = run(False)
    assert [(ids[0], on) for ids, on in quick_flags] == [(ids[0], on) for ids, on in sdk_flags]
    assert quick_spans == sdk_spans
    sampled = {trace_id for (trace_id, _), on in quick_flags if on}
    assert 0 < len(sampled) < len(callers)  # the ratio kept some and dropped some
    assert quick_spans == {(t, name) for t in sampled for name in ("GET /x", "child")}


def test_later_attributes_and_the_span_are_built_in_the_exporter_s_thread():
    """`later`'s builder and the `ReadableSpan` run in the exporter's thread, not in the answering one; the
    exported span holds the builder's attributes as if set at once, after the others."""
    import threading
    import time

    tracer, memory = own_tracer()
    threads: dict[str, int] = {}
    make = tracer._readable

    def readable(**kwargs):
        threads["readable"] = threading.get_ident()
        return make(**kwargs)

    def build() -> dict:
        threads["build"] = threading.get_ident()
        return {"ragsieve.late": ("x", "y"), "ragsieve.kept": None}

    tracer._readable = readable
    with tracing.span("root"):
        with tracing.span("child", tracing.Kind.RETRIEVER, {"a": 1}) as child:
            child.later(build)
            child.set("b", 2)
        assert threads == {}  # nothing built while answering
    for _ in range(1000):  # the exporter's thread sends within its batch delay (50 ms); `flush` would send here
        if len(memory.get_finished_spans()) == 2:
            break
        time.sleep(0.01)
    assert set(threads) == {"build", "readable"} and threading.get_ident() not in threads.values()
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert list(spans["child"].attributes.items()) == [
        ("openinference.span.kind", "RETRIEVER"),
        ("a", 1),
        ("b", 2),
        ("ragsieve.late", ("x", "y")),
    ]


def test_a_failing_later_builder_costs_its_attributes_not_the_span_or_the_batch():
    tracer, memory = own_tracer()

    def broken() -> dict:
        raise KeyError("gone")

    with tracing.span("root"):
        with tracing.span("child", tracing.Kind.CHAIN, {"a": 1}) as child:
            child.later(broken)
            child.later(lambda: {"c": 3})
    assert tracing.flush(10.0)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert sorted(spans) == ["child", "root"] and dict(spans["child"].attributes) == {
        "openinference.span.kind": "CHAIN",
        "a": 1,
        "c": 3,
    }
    assert tracer.exporter.failures == 0


def test_later_on_an_sdk_span_is_set_at_once():
    tracer, memory = own_tracer()
    tracer.quick = False
    with tracing.span("root") as root:
        assert isinstance(root, LiveSpan)
        root.later(lambda: {"a": 1})
        assert dict(root.span.attributes)["a"] == 1


def test_a_span_opened_inside_another_instrumentation_s_span_is_its_child():
    """Inside a QuickSpan, a span of the application's own instrumentation becomes current; a ragsieve span
    opened within it is its child (not the QuickSpan's), and the one after it the QuickSpan's again."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    tracer, memory = own_tracer()
    theirs = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    with tracing.span("root"):
        with tracing.span("outer") as outer:
            with provider.get_tracer("app").start_as_current_span("foreign") as foreign:
                with tracing.span("inner") as inner:
                    assert isinstance(inner, QuickSpan)
            with tracing.span("after"):
                pass
    provider.shutdown()
    assert tracing.flush(10.0)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert spans["inner"].parent.span_id == foreign.get_span_context().span_id != outer.context.span_id
    assert spans["inner"].context.trace_id == spans["outer"].context.trace_id
    assert spans["after"].parent.span_id == outer.context.span_id
