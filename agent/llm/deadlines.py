"""Time limits that follow progress: an inactivity watchdog for streams, and call timeouts from measured rates.

A fixed per-call timeout kills a call that is working, only slowly: on a
machine whose cores are shared, the embedded model's prompt processing can
take minutes for a long judge prompt. Two rules replace it:

- a streamed call is cut only when nothing arrives for `inactivity_s` (an SSE
  comment such as `: ping` is not progress: the watchdog sees only events),
  when the question's deadline passes, or when the question is cancelled;
  until its first content token it may stay silent for `first_event_s` (the
  prompt is processed first: the window is scaled by the prompt's length and
  the measured prompt rate), and every event resets that window, so a server
  that reports its prompt processing (llama.cpp's `return_progress` events)
  is never cut while it reports;
- a call whose server sends nothing until it is done (a plain completion from
  the embedded llama.cpp server) waits `expected_s * margin`, the time its
  measured prompt-processing and generation rates predict for this prompt and
  reply size (never less than the configured floor); the question's deadline
  bounds both.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

EWMA_ALPHA = 0.3  # weight of the newest measurement in the rate averages
MARGIN = 3.0  # a call may take this many times the predicted time before it is cut
# Before any measurement: rates of the 0.5B model on 2 busy cores (pessimistic, so the first call is not cut).
PRIOR_PROMPT_TPS = 40.0
PRIOR_GEN_TPS = 4.0


class RateMeter:
    """Exponentially weighted prompt-processing and generation rates (tokens/s) of one endpoint.

    Fed with llama.cpp's `timings` (prompt_n, prompt_ms, predicted_n, predicted_ms) when the server
    sends them, otherwise with usage counts over the call's latency (a lower bound on both rates)."""

    def __init__(self, prompt_tps: float = PRIOR_PROMPT_TPS, gen_tps: float = PRIOR_GEN_TPS, *, margin: float = MARGIN) -> None:
        self.prompt_tps, self.gen_tps, self.margin = float(prompt_tps), float(gen_tps), float(margin)
        self.samples = 0
        self._lock = threading.Lock()

    def observe(self, *, prompt_n: int, prompt_s: float, gen_n: int, gen_s: float) -> None:
        with self._lock:
            if prompt_n > 0 and prompt_s > 0:
                self.prompt_tps = _ewma(self.prompt_tps, prompt_n / prompt_s, self.samples)
            if gen_n > 0 and gen_s > 0:
                self.gen_tps = _ewma(self.gen_tps, gen_n / gen_s, self.samples)
            self.samples += 1

    def observe_reply(self, body: dict, latency_s: float) -> None:
        """Learn from a chat completion body: its `timings` when present, else its usage and latency."""
        timings = body.get("timings") if isinstance(body.get("timings"), dict) else None
        if timings:
            try:
                self.observe(
                    prompt_n=int(timings.get("prompt_n") or 0),
                    prompt_s=float(timings.get("prompt_ms") or 0) / 1000.0,
                    gen_n=int(timings.get("predicted_n") or 0),
                    gen_s=float(timings.get("predicted_ms") or 0) / 1000.0,
                )
                return
            except (TypeError, ValueError):
                pass
        raw = body.get("usage")
        usage = raw if isinstance(raw, dict) else {}
        try:
            prompt_n, gen_n = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        except (TypeError, ValueError):
            return
        if latency_s > 0 and prompt_n + gen_n > 0:  # split the latency by the current rates' prediction
            p, g = prompt_n / self.prompt_tps, gen_n / self.gen_tps
            share = p / (p + g) if p + g > 0 else 0.5
            self.observe(prompt_n=prompt_n, prompt_s=latency_s * share, gen_n=gen_n, gen_s=latency_s * (1 - share))

    def expected_s(self, prompt_tokens: int, max_tokens: int) -> float:
        """The predicted time of a call: its prompt at the prompt rate plus `max_tokens` at the generation rate."""
        with self._lock:
            return prompt_tokens / self.prompt_tps + max_tokens / self.gen_tps

    def call_timeout(self, prompt_tokens: int, max_tokens: int, floor_s: float) -> float:
        """How long a silent call may take: `margin` times the prediction, at least `floor_s`."""
        return max(floor_s, self.margin * self.expected_s(prompt_tokens, max_tokens))


def _ewma(old: float, new: float, samples: int) -> float:
    return new if samples == 0 else (1 - EWMA_ALPHA) * old + EWMA_ALPHA * new


class Watchdog:
    """Closes a stream (`close()`) when it makes no progress for `inactivity_s` (before its first content
    token, `first_event_s`), when `deadline` (monotonic) passes, or when `should_stop()` turns true.

    The stream's reader calls `progress()` on every event and `token()` on every content delta; after the
    stream ends, `reason` says why the watchdog closed it (None when it did not) and `kind` what kind of
    reason it was ("first_token" when no content token came). Checks run every `tick_s` in a daemon thread."""

    def __init__(
        self,
        close: Callable[[], None],
        *,
        inactivity_s: float,
        first_event_s: float | None = None,
        deadline: float | None = None,
        should_stop: Callable[[], bool] | None = None,
        tick_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._close, self._clock = close, clock
        self.inactivity_s = float(inactivity_s)
        self.first_event_s = float(first_event_s if first_event_s is not None else inactivity_s)
        self.deadline, self.should_stop, self.tick_s = deadline, should_stop, tick_s
        self.reason: str | None = None
        self.kind: str | None = None  # "first_token" | "inactivity" | "deadline" | "cancelled"
        self._last = clock()
        self._events = 0
        self._tokens = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ragsieve-stream-watchdog", daemon=True)

    def __enter__(self) -> "Watchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()

    def progress(self) -> None:
        self._last = self._clock()
        self._events += 1

    def token(self) -> None:
        self.progress()
        self._tokens += 1

    def _verdict(self) -> tuple[str, str] | None:
        now = self._clock()
        if self.deadline is not None and now >= self.deadline:
            return "deadline", "deadline per question reached while streaming"
        if self.should_stop is not None and self.should_stop():
            return "cancelled", "the question was stopped (cancelled or out of budget)"
        first = self._tokens == 0
        allowed = self.first_event_s if first else self.inactivity_s
        if now - self._last >= allowed:
            what = "no first token" if first else "no new token"
            return (
                "first_token" if first else "inactivity",
                f"{what} for {allowed:g}s (inactivity timeout); the endpoint stalled",
            )
        return None

    def _run(self) -> None:
        while not self._done.wait(self.tick_s):
            verdict = self._verdict()
            if verdict is not None:
                self.kind, self.reason = verdict
                try:
                    self._close()
                except Exception:  # closing a broken stream may raise; it is closed either way
                    pass
                return


_SLOW_WORDS = ("timeout", "timed out", "inactivity", "not complete after", "deadline", "SlowReply")


def is_slow_call(exc: BaseException) -> bool:
    """A call that failed because it took too long (a slow machine), not because the endpoint refused or is
    down: `calibrate` and `eval` retry such a question once, then skip it with a count."""
    from ragsieve.agent.errors import BudgetExceeded, EndpointError

    if isinstance(exc, BudgetExceeded):
        return "deadline" in str(exc).lower()
    return isinstance(exc, EndpointError) and any(w.lower() in str(exc).lower() for w in _SLOW_WORDS)
