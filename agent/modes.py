"""Mode Enums of the agent's settings (`ragsieve.agent.config`), in the foundation with the tools' own
(`ragsieve.tools.modes`): the config validates them without importing the pipeline that applies them."""

from __future__ import annotations

from enum import Enum


class ContextRule(str, Enum):
    """How judged and statistical evidence make the context (`loop.combine`, applied by
    `ragsieve.agent.judging.combine`). `auto` (default): `relevant` or `union`, decided from the
    judge's measured recall (`ragsieve.agent.judging.reliability`). `relevant`: the trusted relevant
    set in place of the fast context, the conformal set kept (a capable judge decides what lies beyond the
    conformal set, never what is in it, so coverage 1 - alpha holds whatever its recall). `union`: the trusted
    relevant set plus the conformal set (and, under `auto`, the fast context when it is measured stronger than
    the coverage). `anchored`: the first release's fixed-size rule (`final_k` chunks, first-stage head anchored)."""

    AUTO = "auto"

    RELEVANT = "relevant"
    UNION = "union"
    ANCHORED = "anchored"
