"""Streamed answers carry the same `[n]` numbers as the final answer.

`answer_from_context` renumbers the model's passage markers in order of first
use (`[3] ... [1]` becomes `[1] ... [2]`) and drops out-of-range ones. A
streamed answer must show the same numbers as the final one, so tokens pass
through `CitationStream`, which applies that rule as text arrives, holding
back only a possibly unfinished marker (`[`, `[1`, `[12`).
"""
from __future__ import annotations

import re
from typing import Callable

_MARKER = re.compile(r"\[(\d{1,3})\]")
_PARTIAL = re.compile(r"\[\d{0,3}$")


class CitationStream:
    def __init__(self, n_passages: int, emit: Callable[[str], None]):
        self.n_passages = n_passages
        self.emit = emit
        self.numbers: dict[int, int] = {}  # passage number -> number shown
        self._held = ""
        self._started = False  # leading whitespace is dropped (the final answer is stripped)

    def feed(self, token: str) -> None:
        text = self._held + token
        partial = _PARTIAL.search(text)
        cut = partial.start() if partial else len(text)
        self._held = text[cut:]
        self._send(text[:cut])

    def close(self) -> None:
        held, self._held = self._held, ""
        self._send(held)

    def _send(self, text: str) -> None:
        text = _MARKER.sub(self._renumber, text)
        if not self._started:
            text = text.lstrip()
            self._started = bool(text)
        if text:
            self.emit(text)

    def _renumber(self, match: re.Match) -> str:
        number = int(match.group(1))
        if not 1 <= number <= self.n_passages:
            return ""
        if number not in self.numbers:
            self.numbers[number] = len(self.numbers) + 1
        return f"[{self.numbers[number]}]"
