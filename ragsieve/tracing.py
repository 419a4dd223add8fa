"""Tracing started by the front ends (CLI commands, `ragsieve serve`, `ragsieve mcp`) from the config's
`[tracing]` section and the OTel environment, with the question log's redaction for captured text
(`ragsieve.insights.redact`). The spans themselves: `ragsieve.tools.tracing`; docs/tracing.md."""
from __future__ import annotations

from typing import Any


def start(config: Any) -> bool:
    """Apply `config.tracing` (a `Config`, or None for the environment alone); True when tracing is on.
    A bad setting or a missing `[otel]` extra is the one-line error of `ragsieve.tools.tracing.configure`."""
    from ragsieve.tools.tracing import TracingConfig, configure

    section = getattr(config, "tracing", None) or TracingConfig()
    if not section.capture_content:
        return configure(section)
    from ragsieve.insights.redact import redact

    return configure(section, redact=redact)
