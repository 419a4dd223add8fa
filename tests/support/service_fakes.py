"""Helpers for the service tests (a helper module, not a test file): served apps over scripted models."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

from ragsieve import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.service.app import create_app
from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.indexes.registry import IndexRegistry
from ragsieve.service.server import ServiceThread
from ragsieve.service.settings import ServiceSettings
from ragsieve.testing import FakeChat

ANSWER = "Rotate it with `lumen keys rotate` [2]; the old key stays valid for 24 hours [1]."


def sse_events(response) -> list[tuple[str, dict]]:
    """A server-sent-event stream as (event name, JSON data) pairs, in order."""
    events, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
    return events


class CountingChat(FakeChat):
    """A FakeChat whose streams count the tokens that reached the caller (a cancelled stream stops early)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.delivered = 0
        self.lock = threading.Lock()

    def stream(self, messages, *, on_token, max_tokens=None, temperature=None):
        def counted(token):
            on_token(token)
            with self.lock:
                self.delivered += 1

        return super().stream(messages, on_token=counted, max_tokens=max_tokens, temperature=temperature)


@contextlib.contextmanager
def served(
    indexes: dict[str, Path],
    chat=None,
    *,
    config: Config | None = None,
    keys: KeyRing | None = None,
    lifetime_s: float = 300.0,
    **settings,
):
    if settings.get("host", "127.0.0.1") != "127.0.0.1":  # a server started by a test listens on loopback only
        raise ValueError(f"tests serve on 127.0.0.1 only, not {settings['host']!r}")
    chat = chat if chat is not None else FakeChat(default=ANSWER)
    registry = IndexRegistry(indexes, config or Config(), llm=LLM(chat), llm_parallel=settings.pop("llm_parallel", 4))
    app = create_app(registry, ServiceSettings(port=0, **settings), keys, preload_model=False)
    try:
        with ServiceThread(app, ServiceSettings(port=0, **settings), lifetime_s=lifetime_s) as svc:
            svc.chat, svc.registry, svc.app = chat, registry, app
            yield svc
    finally:
        registry.close()
