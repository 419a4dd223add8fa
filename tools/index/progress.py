"""Embedding progress for a build: a tqdm bar, a caller's callback, or nothing."""
from __future__ import annotations

from typing import Callable


def progress_reporter(progress, total: int) -> Callable[[int | None], None]:
    """`progress=True`: a tqdm bar; a callable gets ("embedding", done, total); else nothing.
    The reporter takes the chunks done so far, and None when the work is over."""
    if callable(progress):
        def call(done):
            progress("embedding", total if done is None else done, total)
        return call
    if progress and total:
        from tqdm import tqdm

        bar = tqdm(total=total, desc="embedding", unit="chunk")
        last = [0]

        def tick(done):
            if done is None:
                bar.close()
                return
            bar.update(done - last[0])
            last[0] = done
        return tick
    return lambda done: None
