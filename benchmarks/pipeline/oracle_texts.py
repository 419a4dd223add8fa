"""Which documents a chunk text shown to a scripted judge belongs to (`data.OracleChat`).

A judge prompt shows each chunk's text cut to `loop.judge_chunk_chars`; the scripted oracle calls it relevant when
one of its documents is gold, the benchmark's definition of gold (document ids). Two documents can carry the same
text: HotpotQA's "Tara Strong" (hp693, gold for question 5ae5aba0554299546bf82f17) and "Tara Strong filmography"
(hp699) have one identical 638-character paragraph. A judge that reads text cannot tell such chunks apart, so a
shown text names every document with a chunk that starts with it, and the oracle calls it relevant when any of
them is gold. (A dict from a 200-character prefix to one document kept the last one, hp699, so the oracle called
the gold paragraph irrelevant, in the calibration measurement and in the evaluated run; issue 46.)
"""

from __future__ import annotations

from typing import Iterable

PREFIX = 200  # shown texts are looked up by their first PREFIX characters, then matched in full


class ChunkTexts:
    """Chunk texts and their documents: `docs(shown)` for a judge's shown text, `text_of(doc)` for a reader."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        """`pairs`: (chunk text, document id) in index row order."""
        self._by_prefix: dict[str, list[tuple[str, str]]] = {}
        self._exact: dict[str, set[str]] = {}
        self._last_text: dict[str, str] = {}
        for text, doc in pairs:
            self._by_prefix.setdefault(text[:PREFIX], []).append((text, doc))
            self._exact.setdefault(text, set()).add(doc)
            self._last_text[doc] = text

    def docs(self, shown: str) -> set[str]:
        """Documents with a chunk whose text is `shown`, else whose text starts with it (the judge shows a chunk's
        text cut to `loop.judge_chunk_chars`): a whole short chunk is not taken for the start of a longer one."""
        if not shown:
            return set()
        if shown in self._exact:
            return set(self._exact[shown])
        if len(shown) >= PREFIX:
            candidates: Iterable[tuple[str, str]] = self._by_prefix.get(shown[:PREFIX], [])
        else:  # a short chunk, or a cut shorter than PREFIX: any bucket may hold it
            candidates = (pair for bucket in self._by_prefix.values() for pair in bucket)
        return {doc for text, doc in candidates if text.startswith(shown)}

    def text_of(self, doc: str) -> str | None:
        """The text of the document's last chunk in row order (the reader's test that a gold abstract is shown)."""
        return self._last_text.get(doc)

    def __len__(self) -> int:
        return sum(len(b) for b in self._by_prefix.values())
