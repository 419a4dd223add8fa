"""Long code chunks embedded whole: the mean of their windows' vectors, each window under the chunk's header.

A sentence encoder reads a fixed window (all-MiniLM-L6-v2: 256 wordpieces, special tokens included) and
drops the rest, so the vector of a longer chunk says nothing about its tail. About a fifth of the code
chunks of CPython's standard library are longer than that window. Here a chunk longer than the window is
cut into consecutive windows of the chunk's own text, each preceded by the chunk's header (its path and
symbol label, `report.indexed_text`), so every window is read as a part of that definition; the
chunk's vector is the L2-normalised mean of its windows' vectors (mean pooling over passages, as the
encoder itself mean-pools over tokens; MaxP/FirstP/SumP of Dai & Callan, "Deeper Text Understanding for
IR with Contextual Neural Language Modeling", SIGIR 2019, are the alternatives: one vector per chunk
keeps the index's one-row-per-chunk shape). A chunk that fits the window gets exactly the vector it had.

Recorded in the manifest (`settings.chunking.long_code`): `windows` for new indexes, `head` (the
encoder's truncation) for indexes built before; measured in `benchmarks/sources.py` (docs/sources.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragsieve.tools.errors import UsageError

if TYPE_CHECKING:
    from ragsieve.tools.types import Chunk

Tokenizer = Any  # a Hugging Face (fast) tokenizer, read untyped


class LongCode(str, Enum):
    HEAD = "head"  # the encoder truncates: the vector of the first window only (indexes built before)
    WINDOWS = "windows"  # the mean of the windows' vectors, each window under the chunk's header

    @classmethod
    def parse(cls, value: "str | LongCode") -> "LongCode":
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"invalid long_code {value!r}: choose one of {', '.join(m.value for m in cls)}") from None


def tokenizer_of(embedder: object) -> tuple[Tokenizer, int] | None:
    """(tokenizer, window in wordpieces without the two special tokens) of a local sentence-transformers
    embedder; None for a provider whose tokenizer is not known here (an endpoint)."""
    model = getattr(embedder, "_model", None)
    tokenizer = getattr(model, "tokenizer", None)
    limit = getattr(model, "max_seq_length", None)
    if tokenizer is None or not limit:
        return None
    return tokenizer, int(limit) - 2


def window_texts(tokenizer: Tokenizer, text: str, header: int, window: int) -> list[str]:
    """The texts to embed for `text`, whose first `header` characters are its header: `[text]` when it
    fits `window` wordpieces; else consecutive slices of the body (by the tokenizer's offsets, nothing
    dropped or repeated), each prefixed by the header, each within the window."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)[
        "offset_mapping"
    ]  # longer than the model's limit on purpose: no warning
    if len(offsets) <= window:
        return [text]
    head = text[:header].rstrip("\n")
    body = [o for o in offsets if o[0] >= header]
    room = window - (len(tokenizer(head, add_special_tokens=False, verbose=False)["input_ids"]) + 1 if head else 0)
    if room < window // 4 or not body:  # a header filling most of the window: plain slices of the whole text
        head, body, room = "", offsets, window
    out = []
    for s in range(0, len(body), room):
        part = body[s : s + room]
        piece = text[part[0][0] : part[-1][1]]
        out.append(f"{head}\n{piece}" if head else piece)
    return out


def embed_windowed(
    embed: Callable[[list[str]], npt.ArrayLike], tokenizer: Tokenizer, window: int, texts: list[str], headers: list[int | None]
) -> np.ndarray:
    """Vectors of `texts` by `embed` (rows L2-normalised): a text with a header length (not None) longer
    than the window gets the normalised mean of its windows' vectors; the others are embedded as they are.
    All windows go to `embed` in one call (its batching applies)."""
    pieces: list[str] = []
    owner: list[int] = []
    for i, (text, header) in enumerate(zip(texts, headers)):
        parts = [text] if header is None else window_texts(tokenizer, text, header, window)
        pieces.extend(parts)
        owner.extend([i] * len(parts))
    vectors = np.asarray(embed(pieces), dtype=np.float32)
    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
    np.add.at(out, np.asarray(owner), vectors)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def code_headers(chunks: Sequence[Chunk], texts: list[str]) -> list[int | None]:
    """For each chunk and the text it is indexed as: the length of the header before a code chunk's own
    text (0 when indexed bare), None for a chunk of any other kind (embedded as it is)."""
    return [len(t) - len(c.text) if c.kind == "code" and t.endswith(c.text) else None for c, t in zip(chunks, texts)]


def windowed_rows(embedder: object, chunks: Sequence[Chunk], texts: list[str]) -> list[int]:
    """Positions of the code chunks (indexed as `texts`) that `embedder` would read as more than one window;
    [] for an embedder whose window is not known here."""
    tok = tokenizer_of(embedder)
    if tok is None:
        return []
    return [
        i
        for i, (t, h) in enumerate(zip(texts, code_headers(chunks, texts)))
        if h is not None and len(window_texts(tok[0], t, h, tok[1])) > 1
    ]
