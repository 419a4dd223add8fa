"""The `[tracing]` section: OpenTelemetry spans exported over OTLP/HTTP (docs/tracing.md). Its fields and
defaults are those of `ragsieve.tools.tracing.settings.Defaults` (tests/core/test_tracing.py holds them equal);
resolution against the OTel environment variables: `ragsieve.tools.tracing.settings.resolve`."""

from __future__ import annotations

from pydantic import Field

from ragsieve.agent.config.base import _Section


class TracingConfig(_Section):
    """Off unless an endpoint is named here or in `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`."""

    enabled: bool | None = None  # None: on when an endpoint is named; false: off even then
    endpoint: str | None = None  # the OTLP/HTTP traces URL, e.g. http://127.0.0.1:6006/v1/traces
    service_name: str | None = None  # None: OTEL_SERVICE_NAME, else "ragsieve"
    # prompts, replies, questions and document text in spans (redacted like the question log); off: ids,
    # scores, counts, tokens and timings only
    capture_content: bool = False
    content_chars: int = Field(default=4000, ge=100, le=100_000)  # each captured text is cut to this
    max_queue: int = Field(default=2048, ge=16, le=1_000_000)  # spans waiting for export; beyond, dropped
    batch_size: int = Field(default=512, ge=1, le=100_000)
    batch_delay_s: float = Field(default=1.0, gt=0, le=60)  # how long a span may wait for its batch
    export_timeout_s: float = Field(default=5.0, gt=0, le=120)  # one export, retries included
