"""Tracing: the settings (each applied or refused), spans from the same events as the answer's trace, content
only when turned on and redacted, the caller's access never widened, and nothing imported while off.
The OTLP/HTTP path and the service: tests/service/test_tracing_service.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ragsieve.agent.config import Config, TracingConfig
from ragsieve.testing import FakeChat
from ragsieve.tools import tracing
from ragsieve.tools.errors import MissingExtraError, UsageError
from ragsieve.tools.tracing import Defaults, resolve
from tests.core.test_full_plan import QUESTION, calibrated_index, check_trace, fake_model  # noqa: F401  (fixture)

OTEL_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
)


@pytest.fixture(autouse=True)
def clean_tracing(monkeypatch):
    for name in OTEL_VARS:
        monkeypatch.delenv(name, raising=False)
    tracing.reset()
    yield
    tracing.reset()


@pytest.fixture
def memory():
    """An application's own tracer provider (in memory), handed to ragsieve."""
    pytest.importorskip("opentelemetry.sdk", reason="the [otel] extra is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


# -- settings: applied or refused -----------------------------------------------------------------
def test_off_without_an_endpoint_and_on_with_one():
    assert resolve(TracingConfig(), {}) is None
    on = resolve(TracingConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"})
    assert on.endpoint == "http://127.0.0.1:4318/v1/traces" and on.source == "OTEL_EXPORTER_OTLP_ENDPOINT"
    full = resolve(
        TracingConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:2/custom"}
    )
    assert full.endpoint == "http://b:2/custom"  # the signal's own variable wins, used as it is
    assert (
        resolve(TracingConfig(endpoint="http://c:3/v1/traces"), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"}).endpoint
        == "http://c:3/v1/traces"
    )
    assert resolve(TracingConfig(enabled=True), {}).endpoint == "http://localhost:4318/v1/traces"
    assert (
        resolve(TracingConfig(), {"OTEL_SERVICE_NAME": "docs-bot", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"}).service_name
        == "docs-bot"
    )


def test_turned_off_by_config_or_the_standard_variables():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert resolve(TracingConfig(enabled=False), env) is None
    assert resolve(TracingConfig(), env | {"OTEL_SDK_DISABLED": "true"}) is None
    assert resolve(TracingConfig(), env | {"OTEL_TRACES_EXPORTER": "none"}) is None


@pytest.mark.parametrize(
    "env, words",
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, "not an http(s) URL"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:99999"}, "not a valid URL"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "grpc://x:4317"}, "not an http(s) URL"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http/protobuf"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "otlp"),
        ({"OTEL_SDK_DISABLED": "maybe"}, "true or false"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line(env, words):
    with pytest.raises(UsageError) as caught:
        resolve(TracingConfig(), env)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_malformed_endpoint_is_refused_even_when_tracing_is_turned_off():
    with pytest.raises(UsageError):
        resolve(TracingConfig(enabled=False, endpoint="ftp://x"), {})


def test_config_section_refuses_unknown_keys_and_content_without_redaction():
    with pytest.raises(ValueError):
        Config.model_validate({"tracing": {"endpoint": "http://a:1", "sample": 0.5}})
    with pytest.raises(UsageError, match="redaction"):
        tracing.configure(TracingConfig(enabled=True, capture_content=True))


def test_missing_extra_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)  # as if opentelemetry-sdk were not installed
    with pytest.raises(MissingExtraError) as caught:
        tracing.configure(TracingConfig(endpoint="http://127.0.0.1:4318/v1/traces"))
    assert "pip install 'ragsieve[otel]'" in str(caught.value) and "\n" not in str(caught.value)


def test_the_otel_module_imports_without_opentelemetry():
    """Its OpenTelemetry imports wait for a tracer, so the core wheel's walk imports it; asking for tracing there
    is the one-line error."""
    script = """
import sys
sys.modules["opentelemetry"] = None  # as if no OpenTelemetry package were installed
import ragsieve.tools.tracing.otel
from ragsieve.agent.config import TracingConfig
from ragsieve.tools import tracing
from ragsieve.tools.errors import MissingExtraError
try:
    tracing.configure(TracingConfig(enabled=True))
except MissingExtraError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("pip install 'ragsieve[otel]'") and len(out.stdout.strip().splitlines()) == 1


# -- off: nothing imported, nothing changed ------------------------------------------------------
def test_unset_variable_imports_no_opentelemetry_and_changes_nothing(examples_index):
    script = f"""
import json, sys
from ragsieve.agent.orchestrator import Orchestrator
from ragsieve.testing import FakeChat
with Orchestrator.open({str(examples_index)!r}, chat=FakeChat(default="Rotate it [1].")) as orch:
    answer = orch.ask("How do I rotate the API key?", plan="fast")
print(json.dumps({{"otel": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
                  "keys": sorted(answer.public()), "answer": answer.answer}}))
"""
    env = {k: v for k, v in os.environ.items() if k not in OTEL_VARS}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["otel"] == [] and "trace_id" not in found["keys"] and found["answer"] == "Rotate it [1]."


# -- spans from the answer's own events -------------------------------------------------------------
def _by_name(spans, prefix):
    return [s for s in spans if s.name.startswith(prefix)]


def test_full_plan_spans_follow_the_answer_trace(calibrated_index, memory):  # noqa: F811
    from opentelemetry import trace

    from ragsieve.agent.orchestrator import Orchestrator

    provider, exporter = memory
    assert tracing.configure(TracingConfig(enabled=True), tracer_provider=provider)
    with Orchestrator.open(calibrated_index, Config(), chat=FakeChat(default=fake_model)) as orch:
        answer = orch.ask(QUESTION, plan="full")
    check_trace(answer)
    spans = exporter.get_finished_spans()
    question = _by_name(spans, "ragsieve.question")
    assert len(question) == 1 and question[0].parent is None
    trace_id = question[0].context.trace_id
    assert all(s.context.trace_id == trace_id for s in spans)  # one trace, the judge's threads included
    assert answer.trace_id == format(trace_id, "032x") and answer.public()["trace_id"] == answer.trace_id
    steps = _by_name(spans, "ragsieve.step.")
    assert [s.name.removeprefix("ragsieve.step.") for s in sorted(steps, key=lambda s: s.start_time)] == [
        e.step for e in answer.trace
    ]
    for span, event in zip(sorted(steps, key=lambda s: s.start_time), answer.trace):
        assert span.attributes["openinference.span.kind"] == "CHAIN"
        assert span.attributes["ragsieve.step.outcome"] == event.outcome
        assert span.attributes["ragsieve.step.llm.calls"] == event.usage.calls
        assert span.parent.span_id == question[0].context.span_id
    llm = _by_name(spans, "chat fake")
    assert len(llm) == answer.usage.calls + answer.usage.cached_calls
    step_ids = {s.context.span_id for s in steps}
    assert all(s.parent.span_id in step_ids for s in llm)  # each call under the step that made it
    assert sum(s.attributes["llm.token_count.prompt"] for s in llm) == answer.usage.prompt_tokens
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in llm) == answer.usage.completion_tokens
    assert all(s.attributes["openinference.span.kind"] == "LLM" and s.attributes["gen_ai.request.model"] == "fake" for s in llm)
    retrievals = _by_name(spans, "ragsieve.retrieve")
    assert retrievals and all(s.attributes["openinference.span.kind"] == "RETRIEVER" for s in retrievals)
    first = answer.first_stage
    docs = retrievals[0].attributes
    assert docs["retrieval.documents.0.document.id"] in first and "retrieval.documents.0.document.score" in docs
    assert _by_name(spans, "ragsieve.embed") and question[0].attributes["llm.token_count.total"] > 0
    # off by default: no text of any kind in any span
    texts = [k for s in spans for k in s.attributes if k.endswith((".content", "input.value", "output.value"))]
    assert texts == [] and not any("ragsieve.step.summary" in s.attributes for s in spans)
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # no global provider installed


def test_content_when_turned_on_is_redacted(examples_index, memory):
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.insights.redact import redact

    provider, exporter = memory
    tracing.configure(TracingConfig(enabled=True, capture_content=True), redact=redact, tracer_provider=provider)
    question = "How do I rotate the API key? Mail me at jane.doe@example.com"
    with Orchestrator.open(examples_index, chat=FakeChat(default="Rotate it [1].")) as orch:
        orch.ask(question, plan="fast")
    spans = exporter.get_finished_spans()
    root = _by_name(spans, "ragsieve.question")[0]
    assert root.attributes["input.value"] == "How do I rotate the API key? Mail me at [email]"
    assert root.attributes["output.value"] == "Rotate it [1]."
    llm = _by_name(spans, "chat ")[0]
    assert "[email]" in llm.attributes["llm.input_messages.0.message.content"]
    dump = json.dumps([dict(s.attributes) for s in spans])
    assert "jane.doe@example.com" not in dump
    assert any(k.endswith(".document.content") for s in spans for k in s.attributes)


def test_principals_never_widen_what_a_span_holds(tmp_path, embedder, memory):
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.insights.redact import redact
    from ragsieve.tools.index.search.where import Where
    from tests.support.access_corpus import QUESTION as NEEDLE_QUESTION
    from tests.support.access_corpus import build_needle_index, leaks

    provider, exporter = memory
    tracing.configure(TracingConfig(enabled=True, capture_content=True), redact=redact, tracer_provider=provider)
    folder = build_needle_index(tmp_path, embedder)
    exporter.clear()
    dumps = {}
    with Orchestrator.open(folder, chat=FakeChat(default="I cannot say.")) as orch:
        for who in ("group:staff", "group:finance"):
            orch.ask(NEEDLE_QUESTION, plan="fast", where=Where(readers=(who,)))
            dumps[who] = json.dumps([dict(s.attributes) for s in exporter.get_finished_spans()])
            exporter.clear()
    assert leaks(dumps["group:staff"]) == []  # the needle's text, path and title: in no span of this caller
    assert leaks(dumps["group:finance"])  # the same spans do hold it for a reader (the check can fail)


def test_build_phases_and_embedding_batches(tmp_path, embedder, memory):
    from ragsieve.tools.index.building.builder import IndexBuilder

    provider, exporter = memory
    tracing.configure(TracingConfig(enabled=True), tracer_provider=provider)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nThe garden rota changes every Monday.\n")
    IndexBuilder(tmp_path / "index", embedder=embedder, progress=False).build([str(docs)])
    spans = {s.name: s for s in exporter.get_finished_spans()}
    build = spans["ragsieve.build"]
    assert build.parent is None and build.attributes["ragsieve.build.chunks_embedded"] >= 1
    for phase in ("load", "write", "embed", "publish"):
        assert spans[f"ragsieve.build.{phase}"].context.trace_id == build.context.trace_id
    embed = spans["ragsieve.embed"]
    assert embed.attributes["openinference.span.kind"] == "EMBEDDING" and embed.attributes["ragsieve.embedding.texts"] >= 1


def test_config_section_and_tools_defaults_agree():
    """`[tracing]` (agent.config, the foundation) and the defaults tools/ uses without a config are one set."""
    from dataclasses import asdict

    assert TracingConfig().model_dump() == asdict(Defaults())


def test_a_front_end_keeps_the_applications_tracing_unless_its_config_says_otherwise(memory):
    from ragsieve.service.middleware.tracing import start

    provider, _ = memory
    tracing.configure(TracingConfig(enabled=True), tracer_provider=provider)
    assert start(Config()) is True and tracing.enabled()  # an app built with a config that sets no [tracing]
    assert start(Config.model_validate({"tracing": {"enabled": False}})) is False and not tracing.enabled()


def test_the_first_span_decides_from_the_environment_and_a_front_end_still_applies_its_own(monkeypatch):
    from ragsieve.service.middleware.tracing import start

    with tracing.span("before any configure"):
        pass
    assert not tracing.enabled() and not tracing.configured()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")
    with pytest.raises(UsageError):  # the front end's start re-reads the environment: refused, not kept off
        start(Config())
