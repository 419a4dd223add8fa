"""The answer's text is made once, as it streams: what a client is sent is what the answer is.

`answer_from_context` feeds the model's reply through `CitationStream`, streamed
or not, and the answer text is the stream's output, so the streamed and the
non-streamed answers are the same bytes. The stream renumbers passage markers
in order of first use (`[3] ... [1]` becomes `[1] ... [2]`), drops out-of-range
ones, merges passages with the same citation label into one number (two chunks
under one `#anchor` are one source) and drops a marker repeating the one just
sent (`[1][1]` after a merge). It holds back only what can still change:
- a possibly unfinished marker (`[`, `[1`, `[12`) and whitespace after a marker (a repeat may follow);
- trailing whitespace (the answer is stripped);
- a reply that may still be the abstention sentence (the answer step replaces that with the closest passages);
- with `hold_uncited`, everything until the first valid marker (a strict answer that cites nothing is
  replaced by the abstention, so none of it is sent).
What was held at the end is not sent: the answer step sends the final text's unsent tail (`released`).
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

_MARKER = re.compile(r"\[(\d{1,3})\]")
_PARTIAL = re.compile(r"\[\d{0,3}$")
_AFTER_MARKER = re.compile(r"\]\s+$")  # whitespace after a marker waits: a repeat may follow
_ABSTAIN_FORMS = tuple(
    f"{lead}context does not contain {art} answer." for lead in ("the ", "") for art in ("the", "an", "this", "that")
)


def may_be_abstention(text: str) -> bool:
    """`text` is, or may still become, the whole abstention sentence (`answering.is_abstention`)."""
    core = " ".join(text.split()).lower()
    return bool(core) and any(form.startswith(core) or core == form[:-1] for form in _ABSTAIN_FORMS)


class CitationStream:
    def __init__(
        self,
        n_passages: int,
        emit: Callable[[str], None] | None,
        labels: Sequence[str] | None = None,
        *,
        hold_uncited: bool = False,
    ) -> None:
        if labels is not None and len(labels) != n_passages:
            raise ValueError(f"{len(labels)} labels for {n_passages} passages")
        self.n_passages = n_passages
        self.emit = emit
        self.hold_uncited = hold_uncited
        self.labels = list(labels) if labels is not None else [str(i) for i in range(1, n_passages + 1)]
        self.numbers: dict[str, int] = {}  # citation label -> number shown
        self.cited: list[int] = []  # passage numbers cited, in order of first use
        self.released = ""  # the text handed to `emit`
        self._pending = ""  # processed text not yet released
        self._last = ""  # the marker that ends the text sent so far (whitespace aside), if any
        self._held = ""  # raw text that may be an unfinished marker
        self._closed = False

    @property
    def text(self) -> str:
        """The answer so far (all of it once closed): released text and what is still held."""
        return self.released + (self._pending.rstrip() if self._closed else self._pending)

    def feed(self, token: str) -> None:
        if self._closed:
            raise ValueError("the citation stream is closed")
        text = self._held + token
        partial = _PARTIAL.search(text)
        cut = partial.start() if partial else len(text)
        spaced = _AFTER_MARKER.search(text, 0, cut)
        if spaced:
            cut = spaced.start() + 1
        self._held = text[cut:]
        self._pending += self._process(text[:cut])
        self._release(final=False)

    def close(self) -> None:
        """The reply is complete: the rest is sent unless it is still held (an abstention, or uncited under
        `hold_uncited`); `text` is then the whole answer."""
        if self._closed:
            return
        held, self._held = self._held, ""
        self._pending += self._process(held)
        self._pending = self._pending.rstrip()
        self._closed = True
        self._release(final=True)

    def _release(self, *, final: bool) -> None:
        whole = self.released + self._pending
        if not whole.strip():
            self._pending = "" if not self.released else self._pending
            return
        if may_be_abstention(whole) or (self.hold_uncited and not self.cited):
            return
        out = self._pending if final else self._pending.rstrip()
        if not self.released:
            out = out.lstrip()
        self._pending = self._pending[len(self._pending.rstrip()) :] if not final else ""
        if out:
            self.released += out
            if self.emit is not None:
                self.emit(out)

    def _process(self, text: str) -> str:
        out, at = [], 0
        for match in _MARKER.finditer(text):
            before = text[at : match.start()]
            out.append(before)
            at = match.end()
            if before.strip():
                self._last = ""
            marker = self._renumber(match)
            if marker and marker == self._last:  # `[1] [1]`: the repeat goes
                out.pop()  # with the whitespace before it
                continue
            out.append(marker)
            self._last = marker or self._last
        if text[at:].strip():
            self._last = ""
        return "".join(out) + text[at:]

    def _renumber(self, match: re.Match) -> str:
        number = int(match.group(1))
        if not 1 <= number <= self.n_passages:
            return ""
        if number not in self.cited:
            self.cited.append(number)
        label = self.labels[number - 1]
        if label not in self.numbers:
            self.numbers[label] = len(self.numbers) + 1
        return f"[{self.numbers[label]}]"
