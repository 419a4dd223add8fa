"""A scripted model for the `full` plan end to end (tests and the tracing benchmark): it reads each prompt as a
model would and answers the judge (every chunk relevant), validation (resolved), calibration's question writing
and answer check, and else an answer citing passage [1]."""

from __future__ import annotations

import json
import re

_FENCE_LINE = re.compile(r"^(@@[0-9a-f]{16})$", re.M)  # the bare fence lines around quoted text


def fenced_text(prompt: str) -> str:
    """The quoted document text of a prompt: between its two bare fence lines."""
    first = _FENCE_LINE.search(prompt)
    if first is None:
        raise ValueError("the prompt quotes no fenced text")
    end = prompt.index("\n" + first.group(1), first.end())
    return prompt[first.end() : end].strip("\n")


def full_plan_reply(messages: list[dict[str, str]]) -> str:
    """The reply to `messages` (a `FakeChat` default)."""
    prompt = messages[0]["content"]
    if "mapping an index to the chunk's text" in prompt:
        body = prompt.split("mapping an index to the chunk's text:\n", 1)[1].split("\n", 1)[0]
        return json.dumps({k: True for k in json.loads(body)})
    if "Draft answer:" in prompt:
        return json.dumps({"resolved": True, "reason": "scripted"})
    if "write ONE question" in prompt:
        words = re.findall(r"[A-Za-z]{3,}", fenced_text(prompt))
        return json.dumps({"question": " ".join(words[:10]), "answer": " ".join(words[:3])})
    expected = re.search(r"Expected answer: (.*)", prompt)
    if expected is not None:
        return json.dumps({"contains": expected.group(1).lower() in fenced_text(prompt).lower()})
    return "Rotate the key in the workspace settings [1]."
