"""When tracing is on and where spans go: the `[tracing]` config section and the standard OTel variables.

Resolution (`resolve`), each input applied or refused, never ignored:
- `[tracing] enabled = false`, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: off.
- `[tracing] endpoint` (the OTLP/HTTP traces URL), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the same), else
  `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL: `/v1/traces` is appended, as the OTel specification says).
- `enabled = true` without any endpoint: the OTLP default, `http://localhost:4318/v1/traces`.
- `enabled` unset (the default): on exactly when an endpoint is named.
- `OTEL_EXPORTER_OTLP_PROTOCOL` / `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` other than `http/protobuf`, or
  `OTEL_TRACES_EXPORTER` other than `otlp`/`none`, are refused: the `[otel]` extra exports OTLP over HTTP only.
- An endpoint that is not an http(s) URL with a host and a valid port is refused in one line at start.
Headers (`OTEL_EXPORTER_OTLP_HEADERS`, e.g. Langfuse's `Authorization`), timeouts and certificates are read by
the OTLP exporter itself, as every OTel SDK does. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Protocol
from urllib.parse import urlsplit

from ragsieve.tools.errors import UsageError

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
TRACES_PATH = "/v1/traces"
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOL_VARS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class TracingSection(Protocol):
    """What `resolve` reads: the `[tracing]` section (`ragsieve.agent.config.TracingConfig`, whose fields and
    defaults are `Defaults`'s; tests/core/test_tracing.py holds the two equal) or `Defaults` itself."""

    enabled: bool | None
    endpoint: str | None
    service_name: str | None
    capture_content: bool
    content_chars: int
    max_queue: int
    batch_size: int
    batch_delay_s: float
    export_timeout_s: float


@dataclass
class Defaults:
    """The `[tracing]` defaults, for callers without a config (the environment alone decides)."""

    enabled: bool | None = None  # None: on when an endpoint is named; false: off even then
    endpoint: str | None = None  # the OTLP/HTTP traces URL, e.g. http://127.0.0.1:6006/v1/traces
    service_name: str | None = None  # None: OTEL_SERVICE_NAME, else "ragsieve"
    capture_content: bool = False  # prompts, replies, questions and document text in spans, redacted
    content_chars: int = 4000  # each captured text is cut to this
    max_queue: int = 2048  # spans waiting for export; beyond, dropped
    batch_size: int = 512
    batch_delay_s: float = 1.0  # how long a span may wait for its batch
    export_timeout_s: float = 5.0  # one export, retries included


@dataclass(frozen=True)
class Resolved:
    """Tracing as it will run: `endpoint` where our own exporter sends (the application's provider, when it
    has one, decides for itself), `source` what turned it on (for the start-up line)."""

    endpoint: str
    source: str
    service_name: str
    capture_content: bool
    content_chars: int
    max_queue: int
    batch_size: int
    batch_delay_s: float
    export_timeout_s: float


def _flag(environ: Mapping[str, str], name: str) -> bool | None:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return None
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"{name}={raw!r}: expected true or false")


def check_endpoint(url: str, name: str) -> str:
    """`url` if it is an http(s) URL with a host and a valid port, else the one-line UsageError."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise UsageError(f"{name}={url!r} is not a valid URL ({exc}): expected e.g. http://127.0.0.1:4318") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"{name}={url!r} is not an http(s) URL with a host: expected e.g. http://127.0.0.1:4318 "
            f"(the [otel] extra exports OTLP over HTTP)"
        )
    del port
    return url.strip()


def _endpoint(config: TracingSection, environ: Mapping[str, str]) -> tuple[str, str] | None:
    if config.endpoint:
        return check_endpoint(config.endpoint, "[tracing] endpoint"), "[tracing] endpoint"
    full = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if full:
        return check_endpoint(full, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if base:
        check_endpoint(base, "OTEL_EXPORTER_OTLP_ENDPOINT")
        return base.rstrip("/") + TRACES_PATH, "OTEL_EXPORTER_OTLP_ENDPOINT"
    return None


def resolve(config: TracingSection | None = None, environ: Mapping[str, str] | None = None) -> Resolved | None:
    """Tracing as `config` and the environment ask for it, or None when off; a bad value is a UsageError."""
    section: TracingSection = config if config is not None else Defaults()
    env = os.environ if environ is None else environ
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter not in ("", "otlp", "none"):
        raise UsageError(f"OTEL_TRACES_EXPORTER={exporter!r}: ragsieve exports spans with OTLP (otlp) or not at all (none)")
    for name in _PROTOCOL_VARS:
        protocol = env.get(name, "").strip().lower()
        if protocol and protocol != "http/protobuf":
            raise UsageError(
                f"{name}={protocol!r}: the [otel] extra exports OTLP over HTTP (http/protobuf); "
                f"point the endpoint at the collector's HTTP port (4318)"
            )
    disabled = _flag(env, "OTEL_SDK_DISABLED")
    found = _endpoint(section, env)  # checked even when off: a malformed endpoint is an error, not a silent off
    if section.enabled is False or disabled or exporter == "none":
        return None
    if found is None and not section.enabled:
        return None
    endpoint, source = found if found is not None else (DEFAULT_ENDPOINT, "[tracing] enabled")
    return Resolved(
        endpoint=endpoint,
        source=source,
        service_name=section.service_name or env.get("OTEL_SERVICE_NAME", "").strip() or "ragsieve",
        capture_content=section.capture_content,
        content_chars=section.content_chars,
        max_queue=section.max_queue,
        batch_size=min(section.batch_size, section.max_queue),
        batch_delay_s=section.batch_delay_s,
        export_timeout_s=section.export_timeout_s,
    )
