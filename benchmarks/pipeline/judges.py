"""A family of scripted judges that fail the way weak real models do (issue 56), beside `oracle` / `oracle-flipN`.

    nice -n 10 .venv/bin/python -m benchmarks.pipeline.judges_run --sets hotpotqa,squad2,scifact --baseline /tmp/trust-base

Each judge sees only the prompt a real model sees: the question and the `{index: text}` mapping of the rendered
judge prompt (`prompts/judge.j2`). None reads the gold, and none knows which chunks are decoys or that a batch is
an order check: whatever the loop's checks catch, they catch as they would catch a model.

- `eager`: relevant when the chunk shares any content word with the question (it rejects only text that shares
  nothing, so it passes the far-off decoys and accepts near-miss text);
- `strict`: relevant only with at least 3 shared content words (it misses answer chunks phrased differently);
- `primacy`: calls the first `PRIMACY_K` chunks of every batch relevant (position bias; Zheng et al. 2023);
- `lexicalNN`: relevant when the chunk holds at least NN % of the question's content words (30, 50, 70);
- `NAME-noiseNN`: any of them with NN % of its verdicts flipped, seeded by question and text.

The reader and validator (answers iff its context holds a gold answer, `--reader gullible`: or a plausible one)
are the oracle's (`data.readers.OracleChat` / `GullibleChat`): the family varies the judge only, so abstention
and recall measure what the judge put in the context. `judges_run.py` runs the family against the current code and
a baseline tree in one command and writes the paired promise tests into the result file.
"""

from __future__ import annotations

import json
import random
import re

from benchmarks.pipeline.data.readers import GullibleChat, OracleChat, _mapping_line
from benchmarks.pipeline.oracle_texts import ChunkTexts

PRIMACY_K = 2
STRICT_MIN = 3
WORD = re.compile(r"[a-z0-9]+")
# a small English stopword list: the words a lexical judge would not count as shared content
STOP = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he
her here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or
other our out over own same she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
yours one two three first second many much name named""".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased alphanumeric words of 3+ characters that are not stopwords."""
    return {w for w in WORD.findall(text.lower()) if len(w) >= 3 and w not in STOP}


def question_of(prompt: str) -> str:
    """The question line of the rendered judge prompt (`Question: ...`)."""
    for line in prompt.splitlines():
        if line.startswith("Question: "):
            return line[len("Question: ") :]
    return ""


def _shared(question: str, text: str) -> int:
    return len(content_words(question) & content_words(text))


def _share(question: str, text: str) -> float:
    words = content_words(question)
    return len(words & content_words(text)) / len(words) if words else 0.0


# name -> verdicts(question, [(key, text) in batch order]) -> {key: bool}
RULES = {
    "eager": lambda q, items: {k: _shared(q, t) >= 1 for k, t in items},
    "strict": lambda q, items: {k: _shared(q, t) >= STRICT_MIN for k, t in items},
    "primacy": lambda q, items: {k: i < PRIMACY_K for i, (k, _) in enumerate(items)},
    **{f"lexical{p}": (lambda q, items, p=p: {k: _share(q, t) >= p / 100 for k, t in items}) for p in (30, 50, 70)},
}
NOISE = 10  # the family's noisy variants flip this share (%) of verdicts
FAMILY = [*RULES, *(f"{name}-noise{NOISE}" for name in RULES)]


def parse(name: str) -> tuple[str, float]:
    """(rule, flip share) of a family judge name; ValueError for a name not in the family."""
    rule, _, noise = name.partition("-noise")
    if rule not in RULES or (noise and not noise.isdigit()):
        raise ValueError(f"unknown judge {name!r}: choose one of {', '.join(FAMILY)}")
    return rule, int(noise) / 100 if noise else 0.0


def judge_reply(name: str, prompt: str, keys: list[str]) -> dict[str, bool]:
    """The verdicts of family judge `name` on one rendered judge prompt, from the prompt's text alone."""
    rule, flip = parse(name)
    question = question_of(prompt)
    mapping = _mapping_line(prompt, keys)
    items = [(k, mapping.get(k, "")) for k in keys]
    verdicts = RULES[rule](question, items)
    if flip:
        for k, text in items:
            if random.Random(f"{name}|{question}|{text[:200]}").random() < flip:
                verdicts[k] = not verdicts[k]
    return verdicts


def family_chat(name: str, chunks: ChunkTexts, reader: str = "oracle"):
    """A scripted model: family judge `name`, the oracle's (or the gullible) reader and validator."""
    parse(name)
    base = GullibleChat if reader == "gullible" else OracleChat

    class FamilyChat(base):  # type: ignore[misc, valid-type]
        @property
        def model_name(self) -> str:
            return name

        def complete(self, messages, *, json_schema=None, schema_name="reply", max_tokens=None, temperature=None):
            from ragsieve.agent.llm.chat import ChatReply

            keys = list(((json_schema or {}).get("properties") or {}).keys())
            if not keys or "resolved" in keys:  # the reader and the validator are the oracle's
                return super().complete(
                    messages, json_schema=json_schema, schema_name=schema_name, max_tokens=max_tokens, temperature=temperature
                )
            prompt = "\n".join(m.get("content", "") for m in messages)
            text = json.dumps(judge_reply(name, prompt, keys))
            return ChatReply(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()))

    return FamilyChat(chunks, 0.0)
