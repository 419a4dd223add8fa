"""Streamed answers carry the same `[n]` numbers as the final answer.

`answer_from_context` renumbers the model's passage markers in order of first
use (`[3] ... [1]` becomes `[1] ... [2]`), drops out-of-range ones, and merges
passages with the same citation label into one number (`citation_merge`). A
streamed answer must show the same numbers as the final one, so tokens pass
through `CitationStream`, which applies both rules as text arrives, holding
back only a possibly unfinished marker (`[`, `[1`, `[12`). A marker repeating
the one just sent (`[1][1]` after a merge) is dropped, as the final answer drops it.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

_MARKER = re.compile(r"\[(\d{1,3})\]")
_PARTIAL = re.compile(r"\[\d{0,3}$")
_AFTER_MARKER = re.compile(r"\]\s+$")  # whitespace after a marker waits: a repeat may follow


class CitationStream:
    def __init__(self, n_passages: int, emit: Callable[[str], None], labels: Sequence[str] | None = None):
        if labels is not None and len(labels) != n_passages:
            raise ValueError(f"{len(labels)} labels for {n_passages} passages")
        self.n_passages = n_passages
        self.emit = emit
        self.labels = list(labels) if labels is not None else [str(i) for i in range(1, n_passages + 1)]
        self.numbers: dict[str, int] = {}  # citation label -> number shown
        self._last = ""  # the marker that ends the text sent so far (whitespace aside), if any
        self._held = ""
        self._started = False  # leading whitespace is dropped (the final answer is stripped)

    def feed(self, token: str) -> None:
        text = self._held + token
        partial = _PARTIAL.search(text)
        cut = partial.start() if partial else len(text)
        spaced = _AFTER_MARKER.search(text, 0, cut)
        if spaced:
            cut = spaced.start() + 1
        self._held = text[cut:]
        self._send(text[:cut])

    def close(self) -> None:
        held, self._held = self._held, ""
        self._send(held)

    def _send(self, text: str) -> None:
        out, at = [], 0
        for match in _MARKER.finditer(text):
            before = text[at:match.start()]
            out.append(before)
            at = match.end()
            if before.strip():
                self._last = ""
            marker = self._renumber(match)
            if marker and marker == self._last:  # `[1] [1]`: the repeat goes, as in the final answer
                out.pop()  # with the whitespace before it
                continue
            out.append(marker)
            self._last = marker or self._last
        if text[at:].strip():
            self._last = ""
        text = "".join(out) + text[at:]
        if not self._started:
            text = text.lstrip()
            self._started = bool(text)
        if text:
            self.emit(text)

    def _renumber(self, match: re.Match) -> str:
        number = int(match.group(1))
        if not 1 <= number <= self.n_passages:
            return ""
        label = self.labels[number - 1]
        if label not in self.numbers:
            self.numbers[label] = len(self.numbers) + 1
        return f"[{self.numbers[label]}]"
