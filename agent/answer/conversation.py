"""Conversations: a chat history in, one stand-alone question out (before retrieval).

A chat front end sends the whole message list every turn. The last user
message is the question; when earlier turns exist it is rewritten by the
`rewrite.j2` prompt into a question that stands alone ("and what about the
old key?" -> "What happens to the old API key when a Lumen workspace key is
rotated?"), as conversational query reformulation does (Yu et al. 2020,
"Few-Shot Generative Conversational Query Rewriting", SIGIR). The client's
system messages are kept apart as instructions for the answer step only.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from ragsieve.agent.errors import LLMError, UsageError

MAX_TURNS = 12  # the most recent turns the rewrite sees
MAX_TURN_CHARS = 2000  # each turn is cut to this in the rewrite prompt
MAX_REWRITE_CHARS = 1000  # a longer rewrite is not a question: the user's words are kept
KEEP_MIN = 0.5  # a rewrite must keep at least this share of the latest message's content words
_WORD = re.compile(r"[^\W_][\w'-]*")
_FILLER = set(
    """a an the of to in on for and or but with by from at as is are was were be been do does did how what which
who whom whose when where why can could should would will may might must i me my we our you your it its this that these
those they them their there here about into than then so if not no yes please tell explain show give one ones same
other another more also just again too what's it's that's""".split()
)


class Turn(BaseModel):
    role: str  # user | assistant
    text: str


class Conversation(BaseModel):
    question: str  # the last user message
    history: list[Turn] = Field(default_factory=list)  # earlier user/assistant turns, oldest first
    instructions: str | None = None  # the system (and developer) messages, joined


def message_text(content: object, where: str) -> str:
    """The text of an OpenAI message `content`: a string, or a list of `{"type": "text", "text": ...}` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise UsageError(f"{where}: only text content parts are supported (got {kind!r})")
            texts.append(part["text"])
        return "\n".join(texts)
    raise UsageError(f"{where}: content must be a string or a list of text parts")


def from_messages(messages: list[dict]) -> Conversation:
    """Split OpenAI chat `messages` into question, history and instructions; refuse what cannot be answered."""
    if not isinstance(messages, list) or not messages:
        raise UsageError("messages must be a non-empty list")
    system, turns = [], []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise UsageError(f"messages[{i}] must be an object with a 'role'")
        role = m["role"]
        text = message_text(m.get("content"), f"messages[{i}]")
        if role in ("system", "developer"):
            if text.strip():
                system.append(text.strip())
        elif role in ("user", "assistant"):
            turns.append(Turn(role=role, text=text))
        elif role in ("tool", "function"):
            raise UsageError(f"messages[{i}]: role {role!r} is not supported (ragsieve calls no tools)")
        else:
            raise UsageError(f"messages[{i}]: unknown role {role!r}")
    if not turns or turns[-1].role != "user":
        raise UsageError("the last message must be the user's question (role 'user')")
    question = turns[-1].text
    return Conversation(question=question, history=turns[:-1], instructions="\n\n".join(system) or None)


def rewrite_question(question: str, history: list[Turn], llm: Any, prompts: Any) -> tuple[str, str | None]:
    """(stand-alone question, why the user's words were kept or None). No history: the question as is.

    When the rewrite does not come back usable (failed, empty, too long, or it dropped the latest message's own
    words) the user's words are searched alone, unless they depend on the conversation (`depends_on_history`:
    a pronoun, a leading "and"/"what about", too few words of their own); only then the previous question is
    added beside them (`anchored`). A stand-alone follow-up stays stand-alone."""
    if not any(t.role == "user" for t in history):
        return question, None
    turns = [{"role": t.role, "text": t.text[:MAX_TURN_CHARS]} for t in history[-MAX_TURNS:]]
    prompt = prompts.render("rewrite", turns=turns, question=question)
    try:
        text = llm.text([{"role": "user", "content": prompt}], max_tokens=128, temperature=0.0)
    except LLMError as exc:
        if type(exc).__name__ == "BudgetExceeded":
            raise
        return unrewritten(question, history, f"rewrite failed ({type(exc).__name__})")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    rewritten = lines[0].strip().strip('"').strip() if lines else ""
    if not rewritten or len(rewritten) > MAX_REWRITE_CHARS:
        return unrewritten(question, history, "the rewrite was empty or too long")
    if kept_share(question, rewritten) < KEEP_MIN:
        return unrewritten(question, history, "the rewrite dropped the latest message's own words")
    return rewritten, None


def unrewritten(question: str, history: list[Turn], why: str) -> tuple[str, str]:
    """What is searched when the rewrite is unusable: the user's words, with the previous question beside them
    only when they depend on it."""
    if depends_on_history(question):
        return anchored(question, history), (
            f"{why}; the follow-up refers to the conversation: the user's words "
            "are searched with the previous question beside them"
        )
    return question, f"{why}; the follow-up stands alone: the user's words are the question"


# words that point back into the conversation ("does it", "those", "the same"), and openings that continue it
_REFERRING = frozenset(
    """it its itself they them their theirs this these those he she him her his one ones
same former latter above previous earlier""".split()
)
_CONTINUING = ("and ", "or ", "but ", "also ", "so ", "then ", "what about", "how about", "what if", "same ")
MIN_OWN_WORDS = 3  # fewer content words than this is an ellipsis ("and for Windows?", "why?")


def depends_on_history(question: str) -> bool:
    """Whether a follow-up needs the conversation to be understood: it refers back (a pronoun or demonstrative:
    "does it work on Windows?"), continues the last turn ("and ...", "what about ..."), or is an ellipsis with
    fewer than `MIN_OWN_WORDS` content words of its own. "How do I run coroutines concurrently with asyncio?"
    after a question about JSON does not."""
    words = [w.lower() for w in _WORD.findall(question)]
    lowered = " ".join(words) + " "
    return any(w in _REFERRING for w in words) or lowered.startswith(_CONTINUING) or len(content_words(question)) < MIN_OWN_WORDS


def content_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text) if len(w) > 2 and w.lower() not in _FILLER]


def kept_share(latest: str, rewrite: str) -> float:
    """The share of the latest message's content words the rewrite keeps (a 5-letter prefix counts:
    "deleting" keeps "delete"). 1.0 when the latest message has none (a bare "why?")."""
    words = set(content_words(latest))
    if not words:
        return 1.0
    have = {w[:5] for w in content_words(rewrite)}
    return sum(1 for w in words if w[:5] in have) / len(words)


def anchored(question: str, history: list[Turn]) -> str:
    """The user's words, then the previous user question as context: a search query that keeps the new
    intent and still carries what its references point to."""
    previous = next((t.text for t in reversed(history) if t.role == "user" and t.text.strip()), "")
    previous = " ".join(previous.split())[: MAX_TURN_CHARS // 4]
    return f"{question.strip()} (context: {previous})" if previous else question
