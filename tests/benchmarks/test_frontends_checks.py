"""The checks `benchmarks/service/frontends.py` makes on what Open WebUI stored and showed fail on the defects they
are for: an answer streamed twice, sources grouped by page or without anchors, an uncited answer that does
not say so. (The benchmark runs them on a real Open WebUI; Open WebUI is too large for the test suite.)"""

from __future__ import annotations

from benchmarks.service.frontends_checks import Reply, answer_once, grounding_shown, one_source_per_cited_anchor  # noqa: E402

ANSWER = "Rotate it with the rotate endpoint [1]; the old secret stays valid for 24 hours [2]."
SOURCES_LIST = (
    "\n\n**Sources**\n[1] docs/api-keys.md:18-28 (API keys)  \n"
    "[2] https://docs.example.com/keys.html#grace  \n"
    "[3] docs/quickstart.md:1-9 *(retrieved, not cited by the answer)*  "
)
CONTENT = ANSWER + SOURCES_LIST
SOURCES = [
    {"name": "[1] docs/api-keys.md:18-28 (API keys)", "url": "docs/api-keys.md#L18-L28"},
    {"name": "[2] https://docs.example.com/keys.html#grace", "url": "https://docs.example.com/keys.html#grace"},
]
SHOWN = "Rotate it with the rotate endpoint ... 2 Sources"


def test_a_reply_as_ragsieve_sends_it_passes_every_check():
    reply = Reply(CONTENT, SOURCES, SHOWN)
    assert reply.cited == [1, 2]
    assert answer_once(reply)[0] and one_source_per_cited_anchor(reply)[0] and grounding_shown(reply)[0]


def test_an_answer_sent_again_after_its_stream_fails_answer_once():
    renumbered = ANSWER.replace("[2]", "[1]")
    assert not answer_once(Reply(ANSWER + "\n\n" + renumbered + SOURCES_LIST, SOURCES))[0]
    assert not answer_once(Reply(CONTENT + CONTENT, SOURCES))[0]  # the whole reply twice: two Sources lists


def test_sources_grouped_by_page_or_without_anchor_fail():
    page_tops = [dict(s, url=s["url"].split("#")[0]) for s in SOURCES]
    ok, why = one_source_per_cited_anchor(Reply(CONTENT, page_tops, SHOWN))
    assert not ok and "without an anchor" in why
    one_page = [SOURCES[0], dict(SOURCES[1], url=SOURCES[0]["url"])]
    assert not one_source_per_cited_anchor(Reply(CONTENT, one_page, SHOWN))[0]
    assert not one_source_per_cited_anchor(Reply(CONTENT, SOURCES[:1], SHOWN))[0]  # a cited passage lost
    uncited_listed = SOURCES + [{"name": "[3] docs/quickstart.md:1-9", "url": "docs/quickstart.md#L1-L9"}]
    assert not one_source_per_cited_anchor(Reply(CONTENT, uncited_listed, SHOWN))[0]
    assert not one_source_per_cited_anchor(Reply(CONTENT, SOURCES, "... 5 Sources"))[0]  # the page shows others


def test_an_uncited_answer_must_say_so_and_an_abstention_need_not():
    uncited = "Herman Melville wrote it."
    assert not grounding_shown(Reply(uncited, [], uncited))[0]
    note = "\n\n*Not grounded in the documents: the answer cites none of the passages.*"
    assert grounding_shown(Reply(uncited + note, [], uncited + " Not grounded in the documents: ..."))[0]
    assert not grounding_shown(Reply(uncited + note, [], uncited))[0]  # stored, but not shown on the page
    abstention = Reply("The context does not contain the answer.\n\nClosest passages found:\n\n[1] docs/a.md", [])
    assert abstention.cited == [] and grounding_shown(abstention)[0] and one_source_per_cited_anchor(abstention)[0]
