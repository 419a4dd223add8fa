"""Helpers for the insights tests: a scripted month of traffic over the examples index (fake clock, fake LLM)."""

from __future__ import annotations

import contextlib
import itertools
import re
import time
from pathlib import Path

from ragsieve import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.service.app import create_app
from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.common.insights_hook import open_insights
from ragsieve.service.indexes.registry import IndexRegistry
from ragsieve.service.server import ServiceThread
from ragsieve.service.settings import ServiceSettings
from ragsieve.testing import FakeChat

DAY = 86400.0
START = float(int(time.time() - 31 * DAY))  # the scripted month ends a day ago (the CLI reads with the real clock)
ABSTAIN = "The context does not contain the answer."
MISSING = ("refund", "invoice", "billing", "credit card", "vat", "receipt", "iphone", "android", "mobile app")
BILLING = [
    "How do I get a refund for my subscription?",
    "Where can I download my invoices?",
    "Can I pay by credit card instead of invoice?",
    "How do I change my billing address on invoices?",
    "Why was my credit card charged twice this month?",
    "Can I get a VAT receipt for my payment?",
]
MOBILE = ["Is there a Lumen app for iPhone?", "Does Lumen have an Android mobile app?"]
ANSWERED = [
    "How do I rotate an API key?",
    "How long does Lumen retry a failed webhook delivery?",
    "What is the rate limit per workspace?",
    "How do I install the Lumen CLI?",
    "How do I configure the default workspace?",
]


def scripted(messages) -> str:
    """Abstains when the question is about something the examples corpus lacks, else answers citing [1]."""
    prompt = messages[-1]["content"]
    question = prompt.rsplit("Question:", 1)[-1].split("\n", 1)[0].lower()
    if any(word in question for word in MISSING) or "<" in question:
        return ABSTAIN
    return "It is described in the documentation [1]."


class FakeClock:
    def __init__(self, start: float):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@contextlib.contextmanager
def insights_service(
    indexes: dict[str, Path],
    data_dir: Path,
    clock,
    *,
    config: Config | None = None,
    keys: KeyRing | None = None,
    lifetime_s: float = 300.0,
    widget_keys=None,
    reply=scripted,
):
    config = config or Config.model_validate({"insights": {"enabled": True}})
    registry = IndexRegistry(indexes, config, llm=LLM(FakeChat(default=reply)))
    try:
        registry.insights = open_insights(registry, str(data_dir), clock=clock)
        settings = ServiceSettings(port=0, data_dir=str(data_dir))
        app = create_app(registry, settings, keys, preload_model=False, widget_keys=widget_keys)
        with ServiceThread(app, settings, lifetime_s=lifetime_s) as svc:
            svc.registry = registry
            yield svc
    finally:
        registry.close()


def month_of_questions() -> list[tuple[int, str]]:
    """(day, question) over 30 days: 24 billing, 6 mobile and 30 answerable questions, deterministic."""
    billing = itertools.cycle(BILLING)
    mobile = itertools.cycle(MOBILE)
    answered = itertools.cycle(ANSWERED)
    out = []
    for day in range(30):
        out.append((day, next(answered)))
        if day % 5 != 4:
            out.append((day, next(billing)))
        if day % 5 == 0:
            out.append((day, next(mobile)))
    return out


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))
