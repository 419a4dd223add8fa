"""What a `ragsieve index` build prints as it goes (embedding and crawl progress), and the crawl's pace."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ragsieve.cli.common import for_terminal


def parse_rate(text: str | None) -> float | None:
    """`2/s`, `30/m` or `2` -> requests per second; None (not given) -> the crawler's default."""
    from ragsieve.agent.errors import UsageError

    if text is None:
        return None
    value, _, unit = text.strip().partition("/")
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"invalid --rate {text!r}: use e.g. 2/s or 30/m") from None
    per = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}.get(unit.strip())
    if per is None or number <= 0:
        raise UsageError(f"invalid --rate {text!r}: use e.g. 2/s or 30/m")
    return number / per


def crawl_progress(every_s: float = 5.0) -> Callable[[int, int, str], None]:
    """A crawl's progress on stderr: a bar (pages, rate) on a terminal, else a line every `every_s` seconds."""
    import time

    last = [0.0]
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(desc="crawling", unit="page")

    def report(done: int, known: int, url: str) -> None:
        if bar is not None:
            bar.total = known  # the frontier grows as pages are read
            bar.update(done - bar.n)
            if done >= known:
                bar.close()
            return
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            print(for_terminal(f"crawl: {done} pages done, {known - done} queued; {url}"), file=sys.stderr)

    return report


def log_progress(every_s: float = 10.0) -> Callable[[str, int, int], None]:
    """Progress for logs and CI (no terminal): a line every `every_s` seconds with rate and ETA."""
    import time

    state: dict[str, Any] = {"start": None, "last": 0.0, "printed": None}

    def report(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if state["start"] is None:
            state["start"] = state["last"] = now
            return  # the first call starts the clock: nothing is measured yet
        if (done < total and now - state["last"] < every_s) or state["printed"] == (stage, done, total):
            return
        state["last"], state["printed"] = now, (stage, done, total)
        rate = done / max(now - state["start"], 1e-9)
        eta = f"{(total - done) / rate:.0f}s" if rate > 0 else "unknown"
        print(f"{stage}: {done}/{total} chunks, {rate:.1f}/s, ETA {eta}", file=sys.stderr, flush=True)

    return report
