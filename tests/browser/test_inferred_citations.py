"""When the model cites nothing and ragsieve infers the citations, every surface says who made them (issue 55,
item 4): the native JSON (`origin: "inferred"`, `grounded` false), the OpenAI reply Open WebUI shows (a
"Sources (not cited by the model)" list, no inline `[1]` the model did not write; real `openai` client), and the
chat page and widget (a muted "(suggested source)" with a tooltip; Debian's chromium driven by Playwright)."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from ragsieve.testing import FakeChat
from tests.support.service_fakes import served
from tests.support.web_fixtures import CHROMIUM, CHROMIUM_MISSING, PLAYWRIGHT_MISSING
from tests.support.widget_site import TIMEOUT_MS, WIDGET_ROOT, settled, widget_site

# shares most of its words with the rotation passage of examples/docs/api-keys.md, and cites nothing
UNMARKED = (
    "The old secret is not revoked at once: it enters a 24-hour grace period during which both the old "
    "and the new secret are accepted."
)
CITED = "The old secret stays valid for a 24-hour grace period [1]."
QUESTION = "How long does the old secret stay valid after rotation?"
KEY = "pk-inferred-browser-1"


def scripted(messages) -> str:
    return CITED if "please" in messages[-1]["content"] else UNMARKED


def test_native_json_and_the_openai_reply_say_who_cited(examples_index):
    with served({"demo": examples_index}, FakeChat(default=scripted)) as svc:
        body = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION}, timeout=60).json()
        assert body["grounding"] == "inferred" and body["grounded"] is False and body["citations_inferred"] is True
        inferred = [c for c in body["citations"] if c["cited"]]
        assert inferred and {c["origin"] for c in inferred} == {"inferred"}
        assert "api-keys.md" in inferred[0]["label"]
        assert body["answer"] == UNMARKED  # the model's words, with no marker it did not write
        cited = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION + " please"}, timeout=60).json()
        assert cited["grounding"] == "cited" and cited["grounded"] is True
        assert [c["origin"] for c in cited["citations"] if c["cited"]] == ["model"]

        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="unused", max_retries=0)
        for stream in (False, True):
            if stream:
                parts = client.chat.completions.create(
                    model="demo", stream=True, messages=[{"role": "user", "content": QUESTION}]
                )
                content = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
                annotations = []
            else:
                reply = client.chat.completions.create(model="demo", messages=[{"role": "user", "content": QUESTION}])
                content = reply.choices[0].message.content
                annotations = reply.choices[0].message.annotations or []
                ext = reply.model_extra["ragsieve"]
                assert ext["grounding"] == "inferred" and ext["grounded"] is False
                assert {c["origin"] for c in ext["citations"] if c["cited"]} == {"inferred"}
            text, _, sources = content.partition("**Sources (not cited by the model)**")
            assert sources, content  # the list says the model did not cite these
            assert "[1]" not in text and text.strip() == UNMARKED  # no inline marker presented as the model's
            assert "[1] " in sources and "api-keys.md" in sources and "suggested by ragsieve" in sources
            assert annotations == []  # no url_citation claims a citation the model did not make


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=CHROMIUM_MISSING)
def test_page_and_widget_show_inferred_citations_as_suggested(examples_index, tmp_path):
    pytest.importorskip("playwright", reason=PLAYWRIGHT_MISSING)
    with widget_site(examples_index, tmp_path, FakeChat(default=scripted), KEY) as site:
        page = site.chat(QUESTION)
        answer = page.locator("article.rs-answer").first
        answer.locator(".rs-sources li").first.wait_for(timeout=TIMEOUT_MS)
        settled(page)
        check_suggested(answer)
        site.chat(QUESTION + " please", page)  # a citation the model made: no such marker
        cited = page.locator("article.rs-answer").first
        cited.locator(".rs-sources li").first.wait_for(timeout=TIMEOUT_MS)
        settled(page)
        assert cited.locator(".rs-inferred").count() == 0 and cited.locator(".rs-md a.rs-cite").count() == 1
        host = site.widget("host.html", QUESTION, ' data-strict="false"')
        widget = host.locator("article.rs-answer").first
        widget.locator(".rs-sources li").first.wait_for(timeout=TIMEOUT_MS)
        settled(host, WIDGET_ROOT)
        check_suggested(widget)


def check_suggested(answer) -> None:
    """The inferred source is listed as suggested (muted, with a tooltip) and the text has no citation link."""
    suggested = answer.locator(".rs-sources li.rs-inferred")
    assert suggested.count() >= 1
    assert "api-keys.md" in suggested.first.inner_text() and "(suggested source)" in suggested.first.inner_text()
    note = suggested.first.locator(".rs-source-note")
    assert "Not cited by the model" in (note.get_attribute("title") or "")
    color = suggested.first.locator(".rs-source").evaluate("e => getComputedStyle(e).fontStyle")
    assert color == "italic"  # shown differently from a citation the model made
    assert answer.locator(".rs-md a.rs-cite").count() == 0  # no [1] in the text made to look like the model's
    assert "suggested by ragsieve" in answer.locator(".rs-inferred-note").inner_text()
