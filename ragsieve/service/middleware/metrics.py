"""Prometheus metrics of one app (its own registry: two apps in one process never share counters)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
STEP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("ragsieve_requests", "HTTP requests by route and status", ["route", "status"], registry=r)
        self.latency = Histogram(
            "ragsieve_question_seconds",
            "Question latency by plan (queueing included)",
            ["plan"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "ragsieve_time_to_first_token_seconds",
            "Streamed answers: time to first token",
            ["plan"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.llm_calls = Counter("ragsieve_llm_calls", "LLM calls made for questions", ["plan"], registry=r)
        self.llm_tokens = Counter("ragsieve_llm_tokens", "LLM tokens for questions", ["plan", "kind"], registry=r)
        self.queue_depth = Gauge("ragsieve_queue_depth", "Questions admitted and waiting for a thread", registry=r)
        self.in_flight = Gauge("ragsieve_questions_in_flight", "Questions running", registry=r)
        self.rejected = Counter("ragsieve_rejected", "Questions refused with 429 (queue full)", registry=r)
        self.requests_by_task = Counter(
            "ragsieve_frontend_tasks", "Front ends' background requests answered without retrieval, by task", ["task"], registry=r
        )
        self.steps = Histogram(
            "ragsieve_step_seconds",
            "Plan step durations by plan and step (the answer's trace events, as the spans)",
            ["plan", "step"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.errors = Counter("ragsieve_errors", "Questions that ended in an error, by kind", ["kind"], registry=r)

    def observe_answer(self, plan: str, seconds: float, usage, steps=()) -> None:
        """A question's latency and usage; `steps`, its trace events, each step's duration."""
        self.latency.labels(plan).observe(seconds)
        for event in steps:
            if event.outcome != "stopped":  # a budget stop is an event, not a step run
                self.steps.labels(plan, event.step).observe(event.duration_s)
        self.llm_calls.labels(plan).inc(usage.calls)
        self.llm_tokens.labels(plan, "prompt").inc(usage.prompt_tokens)
        self.llm_tokens.labels(plan, "completion").inc(usage.completion_tokens)

    def render(self) -> bytes:
        return generate_latest(self.registry)
