"""Embedding progress for a build: a tqdm bar, a caller's callback, or nothing."""

from __future__ import annotations

from typing import Callable, Union

from tqdm import tqdm

# True: a tqdm bar; a callable: (stage, done, total); False: nothing
Progress = Union[bool, Callable[[str, int, int], object]]


def progress_reporter(progress: Progress, total: int) -> Callable[[int | None], None]:
    """`progress=True`: a tqdm bar; a callable gets ("embedding", done, total); else nothing.
    The reporter takes the chunks done so far, and None when the work is over."""
    if callable(progress):

        def call(done: int | None) -> None:
            progress("embedding", total if done is None else done, total)

        return call
    if progress and total:
        bar = tqdm(total=total, desc="embedding", unit="chunk")
        last = [0]

        def tick(done: int | None) -> None:
            if done is None:
                bar.close()
                return
            bar.update(done - last[0])
            last[0] = done

        return tick
    return lambda done: None


def stream_reporter(progress: Progress) -> Callable[[int | None, int | None], None]:
    """Progress of embedding while chunking goes on: (chunks embedded, chunks seen so far); (None, None) ends it.
    A callable gets ("embedding", done, seen); `progress=True` a tqdm bar whose total grows."""
    if callable(progress):

        def call(done: int | None, seen: int | None) -> None:
            if done is not None and seen is not None:  # (None, None) ends it
                progress("embedding", done, seen)

        return call
    if progress:
        bar = tqdm(total=0, desc="embedding", unit="chunk")

        def tick(done: int | None, seen: int | None) -> None:
            if done is None:
                bar.close()
                return
            bar.total = seen
            bar.update(done - bar.n)

        return tick
    return lambda done, seen: None
