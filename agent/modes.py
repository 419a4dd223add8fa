"""Mode Enums of the agent's settings (`ragsieve.agent.config`), in the foundation with the tools' own
(`ragsieve.tools.modes`): the config validates them without importing the pipeline that applies them."""
from __future__ import annotations

from enum import Enum


class ContextRule(str, Enum):
    """How judged and statistical evidence make the context (`loop.combine`, applied by
    `ragsieve.agent.judging.combine`). `auto` (default): `relevant` or `union`, decided from the
    judge's measured recall (`ragsieve.agent.judging.reliability`). `relevant`: the trusted relevant
    set alone (a capable judge decides). `union`: the trusted relevant set plus the conformal set. `anchored`: the first
    release's fixed-size rule (`final_k` chunks, first-stage head anchored)."""

    AUTO = "auto"

    RELEVANT = "relevant"
    UNION = "union"
    ANCHORED = "anchored"
