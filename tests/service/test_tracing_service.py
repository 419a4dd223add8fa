"""Tracing through the real service and CLI over OTLP/HTTP, into an in-process receiver on 127.0.0.1 (decoded
with opentelemetry-proto): a caller's `traceparent` continued into one trace with every step, model call and
retrieved document; a collector that is down, slow or refusing costing one warning line, never the answer; a
malformed endpoint a one-line error at start."""

from __future__ import annotations

import logging
import threading
import time

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the [otel] extra is not installed")
pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto is not installed")

from ragsieve.testing import FakeChat  # noqa: E402
from ragsieve.tools import tracing  # noqa: E402
from tests.core.test_full_plan import QUESTION, calibrated_index, check_trace, fake_model  # noqa: E402,F401  (fixture)
from tests.core.test_tracing import OTEL_VARS  # noqa: E402
from tests.support.otlp_receiver import Receiver  # noqa: E402
from tests.support.service_fakes import served  # noqa: E402

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture(autouse=True)
def clean_tracing(monkeypatch):
    for name in OTEL_VARS:
        monkeypatch.delenv(name, raising=False)
    tracing.reset()
    yield
    tracing.reset()


def test_full_plan_question_through_the_service_is_one_trace_under_the_callers_span(
    calibrated_index,  # noqa: F811
    monkeypatch,
):
    import httpx

    with Receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        with served({"docs": calibrated_index}, FakeChat(default=fake_model)) as svc:
            reply = httpx.post(
                f"{svc.base_url}/v1/ask",
                json={"question": QUESTION, "plan": "full"},
                headers={"traceparent": TRACEPARENT},
                timeout=120,
            )
            metrics = httpx.get(f"{svc.base_url}/metrics", timeout=30).text
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert reply.headers["x-trace-id"] == CALLER_TRACE == body["trace_id"]
        assert reply.headers["traceresponse"].startswith(f"00-{CALLER_TRACE}-") and reply.headers["traceresponse"].endswith("-01")
        steps = [e["step"] for e in body["trace"]]
        spans = receiver.wait_for(
            lambda got: (
                sum(s.name.startswith("ragsieve.step.") for s in got) >= len(steps) and any(s.name == "POST /v1/ask" for s in got)
            )
        )
    mine = [s for s in spans if s.trace_id == CALLER_TRACE]
    request = next(s for s in mine if s.name == "POST /v1/ask")
    assert request.parent_id == CALLER_SPAN and request.kind == 2  # SERVER, the caller's span its parent
    assert request.attributes["http.response.status_code"] == 200 and request.attributes["http.route"] == "/v1/ask"
    question = next(s for s in mine if s.name == "ragsieve.question")
    assert question.parent_id == request.span_id
    step_spans = [s for s in mine if s.name.startswith("ragsieve.step.")]
    assert sorted(s.name.removeprefix("ragsieve.step.") for s in step_spans) == sorted(steps)
    assert {"judge", "conformal", "outliers", "segments", "answer", "validate"} <= set(steps)
    assert all(s.parent_id == question.span_id for s in step_spans)
    # a step's attributes are built in the exporter's thread (`Span.later`): each span still says its step's outcome
    assert sorted((s.name.removeprefix("ragsieve.step."), s.attributes["ragsieve.step.outcome"]) for s in step_spans) == sorted(
        (e["step"], e["outcome"]) for e in body["trace"]
    )
    llm = [s for s in mine if s.attributes.get("openinference.span.kind") == "LLM"]
    assert len(llm) == body["usage"]["calls"] + body["usage"]["cached_calls"]
    assert sum(s.attributes["llm.token_count.prompt"] for s in llm) == body["usage"]["prompt_tokens"] > 0
    assert sum(s.attributes["llm.token_count.completion"] for s in llm) == body["usage"]["completion_tokens"] > 0
    retrieved = {
        v
        for s in mine
        if s.attributes.get("openinference.span.kind") == "RETRIEVER"
        for k, v in s.attributes.items()
        if k.endswith(".document.id")
    }
    assert set(body["context"]) & retrieved
    assert 'ragsieve_step_seconds_count{plan="full",step="conformal"} 1.0' in metrics


def test_mcp_call_over_the_service_is_traced(examples_index, monkeypatch):
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    with Receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        with served({"docs": examples_index}, FakeChat(default="Rotate it [1].")) as svc:

            async def call():
                async with streamablehttp_client(f"{svc.base_url}/mcp/") as (read, write, _):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        return await session.call_tool("ask", {"question": "How do I rotate the API key?"})

            result = anyio.run(call)
        assert not result.isError
        spans = receiver.wait_for(lambda got: any(s.name == "ragsieve.question" for s in got))
    question = next(s for s in spans if s.name == "ragsieve.question")
    parents = {s.span_id: s for s in spans}
    assert parents[question.parent_id].name.startswith("POST /mcp")


def _answers(index, receiver_mode, monkeypatch, **options):
    """The answer with tracing off, then three with a collector in `receiver_mode` (each question's spans tried
    by the exporter's own thread before the next question: an export each), and the threads exports ran on."""
    from ragsieve.agent.config import TracingConfig
    from ragsieve.agent.orchestrator import Orchestrator

    with Orchestrator.open(index, chat=FakeChat(default="Rotate it [1].")) as orch:
        plain = orch.ask("How do I rotate the API key?", plan="fast")
    with Receiver(mode=receiver_mode, stall_s=options.pop("stall_s", 0.0)) as receiver:
        endpoint = receiver.endpoint + "/v1/traces"
        if receiver_mode == "down":
            receiver.stop()  # nothing listens on the port any more: connections are refused
        tracing.configure(TracingConfig(endpoint=endpoint, **options))
        exporter = tracing.spans._tracer.exporter
        threads, inner = [], exporter.inner.export
        monkeypatch.setattr(exporter.inner, "export", lambda spans: threads.append(threading.get_ident()) or inner(spans))
        traced = []
        with Orchestrator.open(index, chat=FakeChat(default="Rotate it [1].")) as orch:
            for _ in range(3):
                tried = len(threads)
                traced.append(orch.ask("How do I rotate the API key?", plan="fast"))
                ends = time.monotonic() + 20  # a bounded wait for the background export (no flush: it would export here)
                while len(threads) == tried and time.monotonic() < ends:
                    time.sleep(0.02)
    return plain, traced, threads


@pytest.mark.parametrize(
    "mode, options",
    [
        ("down", {"export_timeout_s": 1.0, "batch_delay_s": 0.05}),
        ("refuse", {"export_timeout_s": 1.0, "batch_delay_s": 0.05}),
        ("stall", {"export_timeout_s": 0.3, "batch_delay_s": 0.05, "max_queue": 16, "batch_size": 4, "stall_s": 2.0}),
    ],
)
def test_a_collector_that_is_away_costs_one_warning_never_the_answer(examples_index, monkeypatch, caplog, mode, options):
    caplog.set_level(logging.INFO)
    plain, traced, threads = _answers(examples_index, mode, monkeypatch, **options)
    assert threads and threading.get_ident() not in threads  # sent from the exporter's thread, never the answer's
    for answer in traced:  # the same answer, steps and citations as untraced
        assert answer.answer == plain.answer and [e.step for e in answer.trace] == [e.step for e in plain.trace]
        assert [c.chunk_id for c in answer.citations] == [c.chunk_id for c in plain.citations]
        assert answer.trace_id is not None
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].name == "ragsieve.tools.tracing.otel" and "said once" in warnings[0].getMessage()
    exporter = tracing.spans._tracer.exporter
    assert exporter.failures >= 2 and exporter.dropped >= 2  # failed again and again, said once


def test_a_collector_back_again_is_one_info_line(examples_index, caplog):
    """Refusing, then taking spans: one warning, one info line that it takes spans again, and the spans after."""
    from ragsieve.agent.config import TracingConfig

    caplog.set_level(logging.INFO, logger="ragsieve.tools.tracing.otel")
    with Receiver(mode="refuse") as receiver:
        tracing.configure(TracingConfig(endpoint=receiver.endpoint + "/v1/traces", export_timeout_s=0.5, batch_delay_s=0.05))
        for n in range(2):
            with tracing.span(f"away{n}"):
                pass
            tracing.flush(10.0)
        receiver.mode = "ok"
        with tracing.span("back"):
            pass
        spans = receiver.wait_for(lambda got: any(s.name == "back" for s in got))
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "ragsieve.tools.tracing.otel"]
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO], lines
    assert "takes spans again (2 spans were dropped)" in lines[1][1]
    assert [s.name for s in spans] == ["back"]


def test_queue_is_bounded(examples_index):
    """More spans than the queue holds while the exporter is stuck: the surplus is dropped, not kept."""
    from ragsieve.agent.config import TracingConfig

    with Receiver(mode="stall", stall_s=3.0) as receiver:
        tracing.configure(
            TracingConfig(
                endpoint=receiver.endpoint + "/v1/traces", max_queue=16, batch_size=16, batch_delay_s=0.05, export_timeout_s=0.5
            )
        )
        for n in range(200):
            with tracing.span(f"s{n}"):
                pass
        processor = tracing.spans._tracer.own._active_span_processor._span_processors[0]
        queue = processor._batch_processor._queue
        assert queue.maxlen == 16 and len(queue) <= 16


def test_malformed_endpoint_is_a_one_line_error_at_start(examples_index, monkeypatch, capsys):
    from ragsieve.cli.main import main

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")
    code = main(["ask", "How do I rotate the API key?", "--index", str(examples_index), "--base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "OTEL_EXPORTER_OTLP_ENDPOINT='localhost:4318'" in err


def test_cli_ask_is_one_trace_with_retries_counted(examples_index, tmp_path, monkeypatch, capsys):
    from ragsieve.cli.main import main
    from tests.support.stub_openai import StubOpenAI, StubReply, error_body, ok

    config = tmp_path / "ragsieve.toml"
    config.write_text("[llm]\nmax_attempts = 3\nmax_retry_s = 10.0\n")
    replies = [StubReply(500, error_body("boom", type_="server_error")), ok("Fine [1].")]
    with Receiver() as receiver, StubOpenAI(replies) as stub:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        assert (
            main(["ask", "rate limits", "--index", str(examples_index), "--config", str(config), "--base-url", stub.base_url])
            == 0
        )
        spans = receiver.wait_for(lambda got: any(s.name == "ragsieve.question" for s in got))
    assert capsys.readouterr().out.startswith("Fine [1].")
    question = next(s for s in spans if s.name == "ragsieve.question")
    assert question.parent_id == ""  # the root: the CLI question is its own trace
    mine = [s for s in spans if s.trace_id == question.trace_id]
    assert any(s.name == "ragsieve.step.answer" for s in mine)
    llm = [s for s in mine if s.attributes.get("openinference.span.kind") == "LLM"]
    assert len(llm) == 1 and llm[0].attributes["llm.token_count.prompt"] > 0
    assert llm[0].attributes["ragsieve.llm.retries"] == 1 and "ragsieve.llm.retry" in llm[0].events
    assert llm[0].attributes["gen_ai.request.model"] == "stub-model"


def test_a_question_the_sampler_drops_sends_nothing_and_keeps_its_trace_id(examples_index, monkeypatch):
    """The operator's lever (`OTEL_TRACES_SAMPLER`): a dropped trace sends no span and opens no child, and the
    answer still names its trace id (to join the caller's logs), its `traceresponse` flagged not sampled."""
    import httpx

    from ragsieve.agent.config import TracingConfig

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    with Receiver() as receiver:
        tracing.configure(TracingConfig(endpoint=receiver.endpoint + "/v1/traces"))
        with served({"docs": examples_index}, FakeChat(default="Rotate it [1].")) as svc:
            reply = httpx.post(f"{svc.base_url}/v1/ask", json={"question": "How do I rotate the API key?"}, timeout=120)
        with tracing.span("ragsieve.question") as root:
            assert not root.recording and tracing.span("ragsieve.step.answer") is tracing.NULL
        tracing.flush(10.0)
        assert receiver.requests == 0 and receiver.spans == []
    assert reply.status_code == 200 and reply.json()["answer"] == "Rotate it [1]."
    trace_id = reply.json()["trace_id"]
    assert len(trace_id) == 32 and reply.headers["x-trace-id"] == trace_id
    assert reply.headers["traceresponse"].startswith(f"00-{trace_id}-") and reply.headers["traceresponse"].endswith("-00")


def test_our_provider_keeps_a_retrievals_documents_with_their_text():
    """50 documents' ids, scores and texts (150 attributes) after the retrieval's settings: none dropped (the
    SDK's default limit of 128 would drop the settings first)."""
    from ragsieve.agent.config import TracingConfig

    documents = {f"retrieval.documents.{n}.document.{f}": f"{f}{n}" for n in range(50) for f in ("id", "score", "content")}
    with Receiver() as receiver:
        tracing.configure(TracingConfig(endpoint=receiver.endpoint + "/v1/traces"))
        with tracing.span("ragsieve.retrieve", tracing.Kind.RETRIEVER, {"ragsieve.retrieval.k": 50}) as span:
            span.update(documents)
        spans = receiver.wait_for(lambda got: bool(got))
    attributes = spans[0].attributes
    assert attributes["ragsieve.retrieval.k"] == 50 and documents.items() <= attributes.items()
