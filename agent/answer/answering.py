"""Answering from a context: number the passages, ask, parse the `[n]` citations."""

from __future__ import annotations

import re
from typing import Any, Callable

from ragsieve.agent.answer.citation_stream import CitationStream
from ragsieve.agent.answer.stitching import whole_definitions
from ragsieve.agent.core.state import Citation
from ragsieve.agent.errors import ContextOverflow
from ragsieve.tools.filters.ordering import order_for_context
from ragsieve.tools.ingest.chunking import count_tokens
from ragsieve.tools.types import Chunk, Hit

ABSTAIN = "The context does not contain the answer."
NO_EVIDENCE = "No passage in the index passed the relevance evidence for this question, so there is no answer to give."
PASSAGES_INTRO = (
    "The model did not answer, but the calibrated evidence says the question is answerable from "
    "the index; these are the most relevant passages found (quoted, not a generated answer):"
)
CLOSEST_INTRO = "Closest passages found (not an answer to the question):"
_ABSTAIN_RE = re.compile(r"(the )?context does not contain (the|an|this|that) answer\.?", re.IGNORECASE)
MIXED_MIN_WORDS = 3

_CITE = re.compile(r"\[(\d{1,3})\]")
CUT_NOTE = "[The answer was cut short: it reached the max_tokens limit.]"
HISTORY_TURNS = 6  # the most recent turns of a conversation the answer call sees
HISTORY_TURN_CHARS = 1500
_WORD = re.compile(r"\w{3,}")
INFER_MIN_OVERLAP = 0.5
INFER_MAX = 3


def is_abstention(text: str) -> bool:
    """The whole reply is the abstention sentence (case, final period and spacing aside)."""
    return bool(_ABSTAIN_RE.fullmatch(" ".join(text.split()).strip()))


def answers_and_abstains(text: str) -> bool:
    """A deterministic check: the reply holds the abstention sentence AND at least
    MIXED_MIN_WORDS other words (an answer that also says the context lacks the answer)."""
    if not _ABSTAIN_RE.search(text) or is_abstention(text):
        return False
    rest = _ABSTAIN_RE.sub(" ", _CITE.sub(" ", text))
    return len(_WORD.findall(rest)) >= MIXED_MIN_WORDS


def abstention_answer(
    hits_best_first: list[Hit], n: int = 3, chars: int = 300, head: str = ABSTAIN
) -> tuple[str, list[Citation]]:
    """An abstention that still shows the `n` closest passages, marked as not an answer: the
    abstention sentence first (so every reader counts it as an abstention), then the list. The listed
    passages are sources the answer does not cite (`cited` False): no surface shows them as citations."""
    if n <= 0 or not hits_best_first:
        return head, []
    listed, citations = passages_answer(hits_best_first, n, chars, intro=CLOSEST_INTRO)
    return f"{head}\n\n{listed}", [c.model_copy(update={"cited": False, "origin": "retrieved"}) for c in citations]


def passages_answer(
    hits_best_first: list[Hit], n: int = 3, chars: int = 300, intro: str = PASSAGES_INTRO
) -> tuple[str, list[Citation]]:
    """A search-page answer: the `n` most relevant passages, each cited, with a snippet; one paragraph each
    (a blank line between), so markdown renderers (the chat page, the widget, Open WebUI) show separate items."""
    lines, citations = [intro], []
    for number, hit in enumerate(hits_best_first[:n], start=1):
        chunk = hit.chunk
        snippet = " ".join(chunk.text.split())
        snippet = snippet if len(snippet) <= chars else snippet[:chars].rsplit(" ", 1)[0] + " ..."
        lines.append(f"[{number}] {snippet}")
        citations.append(citation_of(number, chunk))
    return "\n\n".join(lines), citations


def citation_of(number: int, chunk: Chunk) -> Citation:
    """Citation `number` of a chunk (its label is `Citation.label()`)."""
    return Citation(
        number=number,
        chunk_id=chunk.chunk_id,
        source=chunk.source,
        title=chunk.title,
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        symbol=chunk.symbol,
        heading=section_heading(chunk),
    )


_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
_TOKEN = re.compile(r"[a-z0-9]+")


def section_heading(chunk: Chunk) -> str:
    """The heading of a web section's chunk, for labels that show "§ Rotating keys from the dashboard" rather
    than the anchor id "§ rotating-keys": of the chunk's heading lines, the one sharing most words with the
    anchor (first on a tie); "" when none shares any (the anchor id is shown) and for chunks without an anchor."""
    anchor = str(chunk.symbol or "")
    if not anchor.startswith("#"):
        return ""
    wanted = set(_TOKEN.findall(anchor.lower()))
    best, score = "", 0
    for found in _HEADING.finditer(chunk.text):
        heading = found.group(1).replace("`", "").strip()
        shared = len(wanted & set(_TOKEN.findall(heading.lower())))
        if shared > score:
            best, score = heading[:200], shared
    return best


def number_passages(hits_best_first: list[Hit], order: str = "edges") -> list[Hit]:
    """The context in prompt order (lost-in-the-middle reordering by default)."""
    return order_for_context(hits_best_first, order)


_REFUSAL = re.compile(
    r"\b(?:(?:does|do|did) ?n[o']t (?:contain|mention|say|include|provide|specify|state|cover|"
    r"describe|explain|answer)|(?:cannot|can't|can ?not|unable to) (?:answer|find|determine|tell)|"
    r"no (?:information|mention|details?|data) (?:about|on|regarding|in)|"
    r"not (?:mentioned|provided|stated|specified|included|covered|described)|not enough information|"
    r"insufficient information|i (?:do not|don't) know|no answer (?:is|can be) (?:given|found))\b",
    re.I,
)


def is_refusal(text: str) -> bool:
    """The abstention sentence in any wording: such a reply never gets inferred citations."""
    core = text.strip().rstrip(".").lower()
    return core == ABSTAIN.rstrip(".").lower() or bool(_REFUSAL.search(text))


def cited_numbers(text: str, n_passages: int) -> list[int]:
    """Distinct passage numbers cited as `[n]`, in order of first use; out-of-range ones dropped."""
    seen: list[int] = []
    for match in _CITE.finditer(text):
        number = int(match.group(1))
        if 1 <= number <= n_passages and number not in seen:
            seen.append(number)
    return seen


def infer_citations(text: str, passages: list[str]) -> list[int]:
    """Passage numbers (1-based) to cite when the model cited none: those holding at
    least INFER_MIN_OVERLAP of the answer's distinct words (3+ letters), best first.

    Small local models often answer correctly without `[n]` markers; the answer
    still needs its sources. Callers record that the citations were inferred.
    """
    words = {w.lower() for w in _WORD.findall(text)}
    if not words:
        return []
    scored = []
    for number, passage in enumerate(passages, start=1):
        overlap = len(words & {w.lower() for w in _WORD.findall(passage)}) / len(words)
        if overlap >= INFER_MIN_OVERLAP:
            scored.append((-overlap, number))
    return [number for _, number in sorted(scored)[:INFER_MAX]]


WINDOW_RETRIES = 2  # answer calls re-sent with fewer passages after the endpoint refused the window
WINDOW_MARGIN = 0.9  # kept: this share of the passages' tokens scaled by the refusal's available / requested
WINDOW_KEEP_UNKNOWN = 0.7  # kept when the refusal gives no token counts


def fit_window(hits: list[Hit], exc: ContextOverflow) -> list[Hit]:
    """The best-first `hits` cut to what the window holds: their estimated tokens scaled by the endpoint's
    available / requested counts (x WINDOW_MARGIN; WINDOW_KEEP_UNKNOWN when it gave none), at least one
    passage dropped."""
    sizes = [count_tokens(h.chunk.text) for h in hits]
    keep = exc.available / exc.requested * WINDOW_MARGIN if exc.requested and exc.available else WINDOW_KEEP_UNKNOWN
    room, kept, used = sum(sizes) * keep, [], 0
    for hit, size in zip(hits[:-1], sizes):
        if used + size > room:
            break
        kept.append(hit)
        used += size
    return kept


def answer_from_context(
    question: str,
    hits: list[Hit],
    deps: Any,
    *,
    order: str = "edges",
    max_tokens: int | None = None,
    report: dict | None = None,
    instructions: str | None = None,
    on_token: Callable[[str], None] | None = None,
    temperature: float | None = None,
    asked: str | None = None,
    history: list | None = None,
    hold_uncited: bool = False,
) -> tuple[str, list[Citation]]:
    """Render `answer.j2` over `hits` (best first), ask the LLM, return text and citations.

    Citations list the passages the answer cites, renumbered 1..n in citation
    order and rewritten in the text, so `[1]` in the answer is citation 1. When
    the model cited nothing, citations are inferred by word overlap and
    `report["citations_inferred"]` says so. The text is made by `CitationStream`, streamed or not (so both
    are the same bytes); `report["streamed"]` is the part sent to `on_token` (an abstention, or with
    `hold_uncited` an answer that cites nothing, is held back for the answer step to decide).
    """
    hits = whole_definitions(hits, deps.index, deps.config)
    shown = question if not asked or asked.strip() == question.strip() else f"{asked.strip()}\n(In context: {question})"
    for attempt in range(WINDOW_RETRIES + 1):
        ordered = number_passages(hits, order)
        passages = [
            {"number": i, "source": h.chunk.source, "title": h.chunk.title, "text": h.chunk.text}
            for i, h in enumerate(ordered, start=1)
        ]
        prompt = deps.prompts.render("answer", question=shown, passages=passages, abstain=ABSTAIN)
        messages = conversation_messages(history) + [{"role": "user", "content": prompt}]
        if instructions:  # the client application's system messages (style, language): the answer call only
            messages.insert(0, {"role": "system", "content": instructions})
        labels = [citation_of(i, h.chunk).label() for i, h in enumerate(ordered, start=1)]
        stream = CitationStream(len(ordered), on_token, labels, hold_uncited=hold_uncited)
        try:
            reply = deps.need_llm().reply(
                messages, max_tokens=max_tokens, temperature=temperature, on_token=stream.feed if on_token is not None else None
            )
            break
        except ContextOverflow as exc:  # refused before any token: retried with the best passages that fit
            fewer = fit_window(hits, exc)
            if attempt == WINDOW_RETRIES or not fewer or len(fewer) == len(hits):
                raise
            if report is not None:
                window = report.setdefault("window_cut", {"passages": len(hits), "window_tokens": exc.available})
                window.update({"sent": len(fewer), "requested_tokens": exc.requested})
            hits = fewer
    if on_token is None:  # not streamed: the same stream makes the same text
        stream.feed(reply.text)
    inferred: list[int] = []
    if not stream.cited and not is_refusal(stream.text):
        # the model cited nothing: the passages sharing most of its words are listed as citations marked
        # `origin: inferred`, and no marker is written into the model's text (who made a citation stays visible)
        inferred = infer_citations(stream.text, [h.chunk.text for h in ordered])
    if reply.finish_reason == "length":
        stream.feed("\n\n" + CUT_NOTE)
    stream.close()
    if report is not None:
        report["citations_inferred"] = bool(inferred)
        report["finish_reason"] = reply.finish_reason
        report["streamed"] = stream.released
    if inferred:
        return stream.text, inferred_citations(inferred, ordered, labels)
    first: dict[int, Citation] = {}  # citation number -> citation
    for old in stream.cited:
        chunk = ordered[old - 1].chunk
        number = stream.numbers[labels[old - 1]]
        if number not in first:
            first[number] = citation_of(number, chunk)
        elif chunk.chunk_id != first[number].chunk_id and chunk.chunk_id not in first[number].merged:
            first[number].merged.append(chunk.chunk_id)
    return stream.text, [first[n] for n in sorted(first)]


def inferred_citations(inferred: list[int], ordered: list[Hit], labels: list[str]) -> list[Citation]:
    """The passages `inferred` (prompt numbers, best first) as citations 1..n, `origin` "inferred"; passages with
    one label are one citation (as for the model's own markers)."""
    by_label: dict[str, Citation] = {}
    for old in inferred:
        chunk = ordered[old - 1].chunk
        got = by_label.get(labels[old - 1])
        if got is None:
            by_label[labels[old - 1]] = citation_of(len(by_label) + 1, chunk).model_copy(update={"origin": "inferred"})
        elif chunk.chunk_id != got.chunk_id and chunk.chunk_id not in got.merged:
            got.merged.append(chunk.chunk_id)
    return list(by_label.values())


def conversation_messages(history: list | None) -> list[dict[str, str]]:
    """The latest turns of a conversation as chat messages (user/assistant), each cut to HISTORY_TURN_CHARS."""
    out = []
    for turn in (history or [])[-HISTORY_TURNS:]:
        role, text = (turn.role, turn.text) if hasattr(turn, "role") else (turn.get("role"), turn.get("text"))
        if role in ("user", "assistant") and text and text.strip():
            out.append({"role": role, "content": text[:HISTORY_TURN_CHARS]})
    while out and out[0]["role"] != "user":  # a chat starts with the user
        out.pop(0)
    return out
