"""The scripted oracle (and the gullible reader): judge, reader and validator that know the gold."""

from __future__ import annotations

import json
import random
import re

from benchmarks.pipeline.oracle_texts import ChunkTexts

ABSTAIN = "The context does not contain the answer."


class OracleChat:
    """A scripted model that knows the gold: judge, reader and validator (each judge verdict
    flipped with probability `flip`, seeded per question and chunk).

    Judge: a chunk is relevant iff its document is gold (documents that carry the same text are all its
    documents: `oracle_texts.ChunkTexts`). Reader: it answers with the gold
    answer when some passage in its prompt contains it (for SciFact, when a gold abstract is
    in the prompt: "supported"), else abstains - so EM/F1 measure whether the context holds
    the answer, not a model's reading. Validator: resolved iff the reader's condition holds.
    Prompts are parsed only for the judge's one-line JSON mapping of indexes to texts.
    """

    accepts_deadline = False

    def __init__(self, chunks: ChunkTexts, flip: float):
        self.chunks, self.flip = chunks, flip
        self.q: dict = {}

    @property
    def model_name(self) -> str:
        return f"oracle-flip{int(self.flip * 100)}" if self.flip else "oracle"

    def _supported(self, prompt: str) -> str | None:
        low = prompt.lower()
        for answer in self.q.get("answers") or []:
            if answer and answer.lower() in low:
                return answer
        if not self.q.get("answers"):
            for doc in self.q.get("gold") or []:
                if (self.chunks.text_of(doc) or "\0")[:120].lower() in low:
                    return "The claim is supported"
        return None

    def complete(self, messages, *, json_schema=None, schema_name="reply", max_tokens=None, temperature=None):
        from ragsieve.agent.llm.chat import ChatReply

        prompt = "\n".join(m.get("content", "") for m in messages)
        keys = list(((json_schema or {}).get("properties") or {}).keys())
        if keys and "resolved" in keys:
            text = json.dumps({"resolved": self._supported(prompt) is not None, "reason": "oracle"})
        elif keys:
            mapping = _mapping_line(prompt, keys)
            verdicts = {}
            for key in keys:
                body = mapping.get(key, "")
                truth = bool(self.chunks.docs(body) & set(self.q.get("gold") or []))
                draw = random.Random(f"{self.q.get('id')}|{body[:200]}").random()
                verdicts[key] = (not truth) if draw < self.flip else truth
            text = json.dumps(verdicts)
        else:
            found = self._supported(prompt.split("Question:")[0])
            text = f"{found} [{self._cited(prompt)}]." if found else ABSTAIN
        return ChatReply(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()))

    def _cited(self, prompt: str) -> int:
        """The number of the first source of the answer prompt (`prompts/answer.j2`) that holds what the reader
        answers from, as a capable model cites it (until this change every answer cited [1], so a validator reading
        the cited passages found the gold only when it came first)."""
        for number, text in SOURCE.findall(prompt):
            if self._supported(text) is not None:
                return int(number)
        return 1


# one source of the answer prompt: its number and its text (up to the fence's END line)
SOURCE = re.compile(r"^\S+ SOURCE \[(\d+)\] from [^\n]*\n(.*?)^\S+ END$", re.MULTILINE | re.DOTALL)


def _mapping_line(prompt: str, keys: list[str]) -> dict[str, str]:
    for line in prompt.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and set(keys) <= set(obj):
                return {k: str(v) for k, v in obj.items()}
    return {}


class GullibleChat(OracleChat):
    """The oracle's judge with a reader that can be fooled (issue 46): it answers with the gold answer when
    its prompt holds one, else with a *plausible* (wrong) answer of an unanswerable SQuAD 2.0 question
    (`plausible_answers`) when its prompt holds one, and abstains only when neither is there. So a plan that
    stuffs its context with near-miss text answers more unanswerable questions, and abstention measures what
    the plan put in the context, not the reader's construction. The validator is the same reader (resolved
    iff it would answer): a model fooled by the text it read is fooled when it checks its answer. Its model name is
    the judge's (`oracle`, `oracle-flipN`): the judge, and so its measured reliability, is the oracle's."""

    def _supported(self, prompt: str) -> str | None:
        found = super()._supported(prompt)
        if found is not None:
            return found
        low = prompt.lower()
        for answer in self.q.get("plausible") or []:
            if answer and answer.lower() in low:
                return answer
        return None
