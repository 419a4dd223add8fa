"""Chat front ends' background requests (title, tags, follow-ups, search queries, autocomplete, emoji).

Open WebUI and LibreChat send these to the chat's own model as ordinary chat
completions. Running the retrieval pipeline for them wastes the LLM slots the
user's question needs and returns an answer with sources where the front end
expects a title or a JSON object. They are recognised by the prompt templates
the front ends ship (read from their source: Open WebUI `config.py`
`DEFAULT_*_GENERATION_PROMPT_TEMPLATE`, LibreChat's title prompts) and answered
here, without retrieval and without an LLM call, in the shape each template
asks for. A front end whose templates were customised is still recognised
when its prompt keeps the JSON key the front end parses (`"title"`, `"tags"`,
`"follow_ups"`, `"queries"`); for anything else the passthrough model id
(`PASSTHROUGH_MODEL`) sends a "task model" straight to the LLM.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from enum import Enum

from ragsieve.agent.answer.conversation import message_text

PASSTHROUGH_MODEL = "ragsieve-passthrough"  # never an index name: served indexes may not take it


class Task(str, Enum):
    TITLE = "title"
    TAGS = "tags"
    FOLLOW_UPS = "follow_ups"
    QUERIES = "queries"
    AUTOCOMPLETE = "autocomplete"
    EMOJI = "emoji"
    IMAGE_PROMPT = "image_prompt"
    TOOL_SELECTION = "tool_selection"


@dataclass
class TaskRequest:
    task: Task
    client: str  # "open-webui" | "librechat"
    prompt: str  # the task prompt (the last user message)
    as_json: bool  # the template asks for a JSON object


# (task, client, markers that must all appear, case-insensitive). Open WebUI's templates all begin
# "### Task:" and quote the chat inside <chat_history>; each names the JSON key its parser reads.
_PATTERNS: list[tuple[Task, str, tuple[str, ...]]] = [
    (Task.TITLE, "open-webui", ("### task:", "title", "<chat_history>")),
    (Task.TAGS, "open-webui", ("### task:", "tags", "<chat_history>")),
    (Task.FOLLOW_UPS, "open-webui", ("### task:", "follow_ups", "<chat_history>")),
    (Task.FOLLOW_UPS, "open-webui", ("### task:", "follow-up", "<chat_history>")),
    (Task.QUERIES, "open-webui", ("### task:", "queries", "<chat_history>")),
    (Task.AUTOCOMPLETE, "open-webui", ("### task:", "autocompletion", "<text>")),
    (Task.EMOJI, "open-webui", ("facial expression", "emoji")),
    (Task.TOOL_SELECTION, "open-webui", ("available tools:", "tool_calls")),
    (Task.IMAGE_PROMPT, "open-webui", ("### task:", "image generation", "<chat_history>")),
    (Task.TITLE, "librechat", ("5-word-or-less title for the conversation",)),
    (Task.TITLE, "librechat", ("analyze this conversation and provide", "concise title in the detected language")),
    (Task.TITLE, "librechat", ("concise title (max 40 characters) for a conversation that starts with",)),
]
# Open WebUI's templates name several keys in their guidelines; the first key named in the output
# section decides between them (a title template never names "follow_ups", a tags one names "tags").
_ORDER = (
    Task.TOOL_SELECTION,
    Task.AUTOCOMPLETE,
    Task.FOLLOW_UPS,
    Task.QUERIES,
    Task.TAGS,
    Task.IMAGE_PROMPT,
    Task.TITLE,
    Task.EMOJI,
)
_KEY = {
    Task.TITLE: '"title"',
    Task.TAGS: '"tags"',
    Task.FOLLOW_UPS: '"follow_ups"',
    Task.QUERIES: '"queries"',
    Task.AUTOCOMPLETE: '"text"',
    Task.IMAGE_PROMPT: '"prompt"',
}


def detect(messages: list[dict]) -> TaskRequest | None:
    """The background task `messages` carry, or None for a user's question. The task prompt is the last
    user message (Open WebUI's tool selection puts it in the system message)."""
    if not messages or not isinstance(messages[-1], dict) or messages[-1].get("role") != "user":
        return None
    try:
        prompt = message_text(messages[-1].get("content"), "messages[-1]")
        if isinstance(messages[0], dict) and messages[0].get("role") == "system" and len(messages) == 2:
            system = message_text(messages[0].get("content"), "messages[0]")
            if "available tools:" in system.lower():
                prompt = system + "\n" + prompt
    except Exception:  # content the chat route refuses with a clear message: not a task
        return None
    low = prompt.lower()
    found = [(task, client) for task, client, marks in _PATTERNS if all(m in low for m in marks)]
    if not found:
        return None
    found.sort(key=lambda tc: _ORDER.index(tc[0]))
    if len(found) > 1 and found[0][1] == "open-webui":  # several keys named: the one the output asks for
        keyed = [tc for tc in found if _KEY.get(tc[0], "\0") in low]
        found = keyed or found
    task, client = found[0]
    as_json = client == "open-webui" and ("json" in low and task is not Task.EMOJI)
    return TaskRequest(task=task, client=client, prompt=prompt, as_json=as_json)


# --------------------------------------------------------------------- replies
_STOP = set(
    """a an the of to in on for and or but with without by from at as is are was were be been being do does did
how what which who whom whose when where why can could should would will shall may might must i me my we our you your
it its this that these those there here about into over under than then so if not no yes please tell explain show
give list describe between any some all each every more most much many other such only also just get got have has
had make makes made let lets using use used via vs versus able need needs want wants like""".split()
)
_WORDS = re.compile(r"[^\W_][\w'.-]*", re.UNICODE)
_ROLE_LINE = re.compile(r"^\s*(user|assistant|ai|human)\s*:\s?", re.IGNORECASE)


def user_turns(prompt: str) -> list[str]:
    """The user's turns quoted in a task prompt (`USER: ...` / `User: ...` lines, as both front ends write)."""
    body = prompt
    m = re.search(r"<chat_history>(.*?)</chat_history>", prompt, re.S | re.I)
    if m:
        body = m.group(1)
    turns, current = [], None
    for line in body.splitlines():
        role = _ROLE_LINE.match(line)
        if role:
            if current is not None:
                turns.append(current)
            current = [role.group(1).lower(), line[role.end() :]]
        elif current is not None:
            current[1] += "\n" + line
    if current is not None:
        turns.append(current)
    texts = [t.strip() for r, t in turns if r in ("user", "human") and t.strip()]
    if not texts:
        m = re.search(r"<text>(.*?)</text>", prompt, re.S | re.I)
        if m and m.group(1).strip():
            texts = [m.group(1).strip()]
    return texts


def keywords(text: str, n: int) -> list[str]:
    """Up to `n` content words of `text`, most frequent first (ties: first seen), original spelling."""
    words = [w.strip(".'-") for w in _WORDS.findall(text)]
    words = [w for w in words if len(w) > 2 and w.lower() not in _STOP]
    counts = Counter(w.lower() for w in words)
    first: dict[str, tuple[int, str]] = {}
    for i, w in enumerate(words):
        first.setdefault(w.lower(), (i, w))
    ranked = sorted(counts, key=lambda k: (-counts[k], first[k][0]))
    return [first[k][1] for k in ranked[:n]]


def title_for(question: str) -> str:
    """A short title: the question's first five content words, in their order."""
    words = [w.strip(".'-") for w in _WORDS.findall(question)]
    kept = [w for w in words if len(w) > 1 and w.lower() not in _STOP][:5]
    if not kept:
        kept = words[:5] or ["New", "chat"]
    return " ".join(w[:1].upper() + w[1:] for w in kept)[:80]


def reply_text(req: TaskRequest, history_question: str | None = None) -> str:
    """The reply content the front end expects for `req` (JSON text where its template asks for JSON)."""
    turns = user_turns(req.prompt)
    first = turns[0] if turns else (history_question or "")
    last = turns[-1] if turns else (history_question or "")
    if req.task is Task.TITLE:
        title = title_for(first)
        return json.dumps({"title": title}, ensure_ascii=False) if req.as_json else title
    if req.task is Task.TAGS:
        tags = [w[:1].upper() + w[1:] for w in keywords(" ".join(turns), 3)] or ["General"]
        return json.dumps({"tags": tags}, ensure_ascii=False)
    if req.task is Task.FOLLOW_UPS:  # no suggestions rather than invented ones: the front end shows none
        return json.dumps({"follow_ups": []})
    if req.task is Task.QUERIES:  # the user's own words are the search query (a follow-up: with the one before)
        queries = [last] if last else []
        if len(turns) > 1:
            queries.append(f"{turns[-2]} {last}")
        return json.dumps({"queries": queries}, ensure_ascii=False)
    if req.task is Task.AUTOCOMPLETE:  # no completion offered
        return json.dumps({"text": ""})
    if req.task is Task.TOOL_SELECTION:  # ragsieve calls no tools
        return json.dumps({"tool_calls": []})
    if req.task is Task.IMAGE_PROMPT:
        return json.dumps({"prompt": last}, ensure_ascii=False)
    return "\U0001f4ac"  # emoji: a speech balloon
