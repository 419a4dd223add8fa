"""Telling a context-window refusal from other rejected requests, across OpenAI-compatible servers.

The context budget is counted with `count_tokens` (words and punctuation), an estimate: the model's own
tokenizer counts more on some text (on SciFact a context of dozens of abstracts, well inside the budget,
became an answer request over the embedded 16,384-token window). Servers refuse such a request with HTTP 400
and say so in words:

- llama.cpp: "request (17582 tokens) exceeds the available context size (16384 tokens)";
- OpenAI, vLLM: "This model's maximum context length is 8192 tokens. However, your messages resulted in
  9000 tokens" / "... you requested 9000 tokens", or the error code `context_length_exceeded`;
- others: a message naming the context length or window.

`context_overflow` returns the `ContextOverflow` to raise (with the counts when the message gives them) or None.
"""

from __future__ import annotations

import re

from ragsieve.agent.errors import ContextOverflow

_LLAMA = re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)", re.I)
_OPENAI = re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", re.I | re.S)
_GENERIC = re.compile(r"context_length_exceeded|context (?:length|window|size)|too many tokens|prompt is too long", re.I)


def context_overflow(status: int | None, text: str, message: str) -> ContextOverflow | None:
    """The overflow error for a refused request (`status`, the server's error `text`), None for other faults;
    `message` is the error's text for the user."""
    if status not in (400, 413, None):
        return None
    if m := _LLAMA.search(text):
        return ContextOverflow(message, requested=int(m.group(1)), available=int(m.group(2)))
    if m := _OPENAI.search(text):
        return ContextOverflow(message, requested=int(m.group(2)), available=int(m.group(1)))
    if _GENERIC.search(text):
        return ContextOverflow(message)
    return None
