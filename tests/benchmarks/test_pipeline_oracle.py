"""The scripted oracle judge of benchmarks/pipeline/main.py (`data.readers.OracleChat`) calls a chunk relevant iff one
of its documents is gold, the benchmark's own definition, also when two documents carry the same text (HotpotQA's
"Tara Strong" hp693 and "Tara Strong filmography" hp699: one paragraph, two titles). The judge is driven through
the pipeline's real judge prompt and the calibration measurement (`judging.measure.measure_judge`)."""

from __future__ import annotations

from benchmarks.pipeline.data.readers import OracleChat  # noqa: E402
from benchmarks.pipeline.oracle_texts import ChunkTexts  # noqa: E402
from ragsieve.agent.config import Config  # noqa: E402
from ragsieve.agent.judging.measure import llm_judge, measure_judge  # noqa: E402
from ragsieve.agent.llm.client import LLM  # noqa: E402
from ragsieve.agent.llm.templates import PromptRenderer  # noqa: E402
from ragsieve.tools.types import Chunk, Hit  # noqa: E402

SHARED = (
    "Tara Strong (born Tara Lyn Charendoff; February 12, 1973) is a Canadian-American actress who has done "
    "voice work for numerous animations and video games. Many of her major voice roles include animated series "
    'such as "Rugrats", "Teen Titans" and the spin-off series "Teen Titans Go!".'
) * 3
OTHER = "Teen Titans Go! is an American animated television series based on the DC Comics superhero team. " * 4
DISTRACTOR = SHARED[:250] + " A different ending: this paragraph is about another actress entirely." * 2
DOCS = [("hp693", SHARED), ("hp699", SHARED), ("hp695", OTHER), ("hp900", DISTRACTOR)]


def _hits() -> list[Hit]:
    return [
        Hit(chunk=Chunk(doc_id=d, chunk_index=0, text=t, source=f"{d}.txt"), row=i, score=1.0 - i / 10, rank=i + 1)
        for i, (d, t) in enumerate(DOCS)
    ]


def test_chunk_texts_name_every_document_of_a_shared_text_and_match_cut_texts_in_full():
    chunks = ChunkTexts((t, d) for d, t in DOCS)
    assert chunks.docs(SHARED) == {"hp693", "hp699"}
    assert chunks.docs(SHARED[:1200]) == {"hp693", "hp699"}  # the judge's cut (loop.judge_chunk_chars)
    assert chunks.docs(DISTRACTOR[:300]) == {"hp900"}  # same first 250 characters, another text
    assert chunks.docs(SHARED[:220]) == {"hp693", "hp699", "hp900"}  # a cut shorter than where they part
    short = ChunkTexts([("Paris.", "a"), ("Paris. And more.", "b")])
    assert short.docs("Paris.") == {"a"}  # a whole short chunk is not the start of a longer one
    assert short.docs("Paris. And") == {"b"} and chunks.docs("") == set()
    assert chunks.text_of("hp695") == OTHER and chunks.text_of("nope") is None


def _measure(gold: str) -> tuple[float | None, float | None]:
    chat = OracleChat(ChunkTexts((t, d) for d, t in DOCS), 0.0)
    judge = llm_judge(LLM(chat), PromptRenderer(), Config().loop)
    hits = _hits()
    positive = next(h.chunk_id for h in hits if h.chunk.doc_id == gold)

    def items():
        chat.q = {"id": "cal-q", "gold": [gold], "answers": []}
        yield "Which Tara Strong role is based on the Teen Titans?", {positive}, hits

    measured = measure_judge(items(), judge, model="oracle", pool=20, top_k=5)
    return measured.judge_recall, measured.false_positive_rate


def test_the_oracle_calls_the_gold_paragraph_relevant_when_another_document_carries_its_text():
    """hp693 is gold and hp699 has the same text, listed after it (a text -> document dict kept hp699 and the
    oracle called the gold paragraph irrelevant: 58 of 59 on HotpotQA fold 1). The shared text is relevant to
    either gold; the third document and the distractor with the same first 250 characters are not."""
    assert _measure("hp693") == (1.0, 0.3333)  # the twin hp699 is the one "false positive": same text as the gold
    assert _measure("hp699") == (1.0, 0.3333)
    assert _measure("hp695") == (1.0, 0.0)
    assert _measure("hp900") == (1.0, 0.0)


def test_the_oracle_reader_cites_the_source_that_holds_the_answer():
    chat = OracleChat(ChunkTexts([("about Lyon", "d0"), ("Paris is the capital", "d1")]), 0.0)
    chat.q = {"id": "q", "answers": ["Paris"], "gold": ["d1"]}
    passages = [
        {"number": 1, "source": "a", "title": "", "text": "about Lyon"},
        {"number": 2, "source": "b", "title": "", "text": "Paris is the capital"},
    ]
    prompt = PromptRenderer().render("answer", question="What is the capital?", passages=passages, abstain="NO")
    assert chat.complete([{"role": "user", "content": prompt}]).text == "Paris [2]."  # not [1], the first source
    prompt = PromptRenderer().render("answer", question="What is the capital?", passages=passages[:1], abstain="NO")
    assert "[" not in chat.complete([{"role": "user", "content": prompt}]).text  # no answer in its sources: abstains
