"""How a judge round decided (`ragsieve.agent.judging.rounds`), recorded in the run state and its trace."""

from __future__ import annotations

from ragsieve.tools.modes import TextMode


class JudgeMode(TextMode):
    """How a judge round decided: `judge` (its verdicts are trusted), `score` (uninformative: retrieval
    scores decide), `failed` (every batch failed), `skipped` (not judged: budget or distrust)."""

    JUDGE = "judge"
    SCORE = "score"
    FAILED = "failed"
    SKIPPED = "skipped"
