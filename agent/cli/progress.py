"""Progress for long CLI work: a bar with rate and ETA in a terminal, a line every N seconds in a log or CI."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable


def eta_line(stage: str, done: int, total: int, elapsed: float) -> str:
    """`embedding 1200/31487 (3.8%) 17.1/s, ETA 29m30s` (rate and ETA once something is done)."""
    share = f" ({100.0 * done / total:.1f}%)" if total else ""
    line = f"{stage} {done}/{total}{share}"
    if done > 0 and elapsed > 0:
        rate = done / elapsed
        left = (total - done) / rate if rate > 0 else 0.0
        minutes, seconds = divmod(int(left), 60)
        line += f" {rate:.1f}/s, ETA {minutes}m{seconds:02d}s"
    return line


class LineProgress:
    """A callback (stage, done, total) printing one line per stage every `every_s` seconds, and at the end."""

    def __init__(self, every_s: float = 10.0, stream=None, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self.stream, self.clock = every_s, stream or sys.stderr, clock
        self._start: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._done: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        start = self._start.setdefault(stage, now)
        if done < 0:
            if stage in self._last:
                print(eta_line(stage, self._done.get(stage, total), total, now - start) + " done",
                      file=self.stream, flush=True)
            return
        self._done[stage] = done
        if now - self._last.get(stage, start - self.every_s) >= self.every_s:
            self._last[stage] = now
            print(eta_line(stage, done, total, now - start), file=self.stream, flush=True)


def make_progress(mode: str | bool):
    """'bar' (tqdm; the builder's own), 'lines' (LineProgress) or False (silent)."""
    if mode == "lines":
        return LineProgress()
    return mode == "bar"
