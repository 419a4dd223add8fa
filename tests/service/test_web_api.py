"""The assistant's API without a browser: widget keys (file, origin, rate, scope), the page's origin check,
feedback (store, refusal, export read by `ragsieve eval`), signed source links, the source view of pages."""

from __future__ import annotations

import json

import httpx
import pytest

from ragsieve.agent.core.state import Citation
from ragsieve.agent.errors import EndpointError, UsageError
from ragsieve.cli.main import main
from ragsieve.eval.data import load_dataset
from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.auth.widget_keys import RateLimit, WidgetKey, WidgetKeys
from ragsieve.service.feedback.store import FeedbackStore
from ragsieve.service.web import source_view
from ragsieve.service.web.links import citation_href, load_secret, signed_part, verify
from ragsieve.testing import FakeChat
from ragsieve.tools.types import Chunk
from tests.support.service_fakes import ANSWER
from tests.support.service_fakes import sse_events as sse

QUESTION = "How do I rotate the API key of a Lumen workspace?"
KEY = "pk-site-widget-1"
SITE = "https://docs.example.com"


def test_widget_keys_file_is_checked_and_sits_beside_api_keys(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text(
        f'[widget_keys."{KEY}"]\nindexes = ["demo"]\norigins = ["HTTPS://Docs.Example.com:443/"]\nrequests_per_minute = 5\n'
    )
    keys = WidgetKeys.load(str(path))
    assert keys.find(KEY).origins == {SITE} and keys.find(KEY).requests_per_minute == 5
    assert keys.find("pk-site-widget-2") is None and not KeyRing.load(str(path), environ={}).enabled
    keys.check_names({"demo"})
    with pytest.raises(UsageError, match="unknown index"):
        keys.check_names({"docs"})
    for bad, message in (
        ('indexes = ["*"]\norigins = ["https://a.b"]', "never global"),
        ('indexes = ["demo"]\norigins = ["https://a.b/path"]', "not an origin"),
        ('indexes = ["demo"]\norigins = ["*"]', "not an origin"),
        ('indexes = ["demo"]\norigins = ["https://a.b"]\nrequests_per_minute = 0', "1 to 100000"),
        ('indexes = ["demo"]\norigins = ["https://a.b"]\nwrite = true', "unknown setting"),
    ):
        path.write_text(f'[widget_keys."{KEY}"]\n{bad}\n')
        with pytest.raises(UsageError, match=message):
            WidgetKeys.load(str(path))


def test_rate_limit_is_a_token_bucket():
    limit = RateLimit(2)
    assert limit.take(now=100.0) == 0 and limit.take(now=100.0) == 0
    assert limit.take(now=100.0) == pytest.approx(30.0)  # one token comes back every 30 s
    assert limit.take(now=130.0) == 0


def test_one_visitor_cannot_spend_the_whole_key():
    key = WidgetKey(KEY, frozenset({"demo"}), frozenset({SITE}), 3, visitor_requests_per_minute=2)
    assert key.take("10.0.0.1", now=0.0) == 0 and key.take("10.0.0.1", now=0.0) == 0
    assert key.take("10.0.0.1", now=0.0) == pytest.approx(30.0)  # this visitor waits
    assert key.take("10.0.0.2", now=0.0) == 0  # another one still gets the key's last call
    assert key.take("10.0.0.3", now=0.0) == pytest.approx(20.0)  # then the key's own bucket is empty


def test_widget_key_origin_rate_scope_and_no_v1_access(examples_index, second_index, tmp_path):
    keys = WidgetKeys([WidgetKey(KEY, frozenset({"demo"}), frozenset({SITE}), 5, visitor_requests_per_minute=5)])
    ring = KeyRing({"sk-admin-key-1": {"*"}})
    chat = FakeChat(default=ANSWER)
    from ragsieve.agent.llm.client import LLM
    from ragsieve.service.app import create_app
    from ragsieve.service.indexes.registry import IndexRegistry
    from ragsieve.service.server import ServiceThread
    from ragsieve.service.settings import ServiceSettings

    registry = IndexRegistry({"demo": examples_index, "notes": second_index}, __import__("ragsieve").Config(), llm=LLM(chat))
    settings = ServiceSettings(port=0, data_dir=str(tmp_path / "data"))
    app = create_app(registry, settings, ring, preload_model=False, widget_keys=keys)
    try:
        with ServiceThread(app, settings, lifetime_s=120) as svc:
            url = svc.base_url
            widget = {"Authorization": f"Bearer {KEY}", "Origin": SITE}
            config = httpx.get(url + "/ui/api/config", headers=widget)
            assert config.status_code == 200 and [i["name"] for i in config.json()["indexes"]] == ["demo"]
            assert config.headers["access-control-allow-origin"] == SITE
            assert httpx.get(url + "/v1/models", headers=widget).status_code == 401  # never an API key
            assert httpx.post(url + "/v1/ask", json={"question": QUESTION}, headers=widget).status_code == 401
            r = httpx.post(url + "/ui/api/ask", json={"question": QUESTION, "index": "notes"}, headers=widget)
            assert r.status_code == 404
            r = httpx.post(url + "/ui/api/ask", json={"question": QUESTION, "plan": "full"}, headers=widget)
            assert r.status_code == 404 and "index default only" in r.json()["error"]["message"]
            with httpx.stream("POST", url + "/ui/api/ask", json={"question": QUESTION}, headers=widget) as resp:
                events = sse(resp)
            done = events[-1][1]
            assert events[-1][0] == "done" and done["index"] == "demo" and done["answer_id"]
            assert all(c["href"].startswith("/ui/source?") for c in done["citations"])
            chat.push(EndpointError("endpoint down", base_url="http://x"))
            with httpx.stream("POST", url + "/ui/api/ask", json={"question": QUESTION}, headers=widget) as resp:
                failed = sse(resp)
            assert failed[-1][0] == "error" and failed[-1][1]["status"] == 502  # shown in the answer card
            limited = httpx.get(url + "/ui/api/config", headers=widget)
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
            assert limited.headers["access-control-allow-origin"] == SITE  # the widget can read why
            # the page: the API key rules, same origin only
            admin = {"Authorization": "Bearer sk-admin-key-1"}
            assert httpx.get(url + "/ui/api/config").status_code == 401
            assert httpx.get(url + "/ui/api/config", headers=admin).json()["indexes"][1]["name"] == "notes"
            foreign = httpx.get(url + "/ui/api/config", headers={**admin, "Origin": "https://evil.example"})
            assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "origin_not_allowed"
            assert httpx.get(url + "/ui/api/config", headers={**admin, "Origin": url}).status_code == 200
            # feedback: only on an answer the caller could see, with a valid rating
            fb = {"answer_id": done["answer_id"], "rating": "up", "comment": "ok"}
            assert httpx.post(url + "/ui/api/feedback", json=fb, headers=admin).status_code == 200
            bad = httpx.post(url + "/ui/api/feedback", json={**fb, "answer_id": "0" * 32}, headers=admin)
            assert bad.status_code == 404
            assert httpx.post(url + "/ui/api/feedback", json={**fb, "rating": "meh"}, headers=admin).status_code == 400
            page = httpx.get(url + "/")
            assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
            script = httpx.get(url + "/widget.js").text
            assert "DOMPurify" in script and "attachShadow" in script
            assert "MarkedJS" in httpx.get(url + "/ui/licenses").text
    finally:
        registry.close()
    rated = FeedbackStore.in_folder(tmp_path / "data").rated()
    assert [(r["rating"], r["comment"], r["via"]) for r in rated] == [(1, "ok", "widget:pk-site-")]


def test_signed_links_and_the_source_view_of_pages(tmp_path):
    secret = load_secret(tmp_path)
    assert load_secret(tmp_path) == secret and (tmp_path / "ui-secret").stat().st_mode & 0o777 == 0o600
    pdf = Citation(number=1, chunk_id="manual.pdf#3", source="manual.pdf", symbol="pp. 2-3")
    href, kind = citation_href(secret, "docs", pdf)
    assert kind == "page" and href.endswith("#page-2") and "chunk=manual.pdf%233" in href
    token = href.split("t=")[1].split("#")[0].split("&")[0]
    signed = signed_part("manual.pdf#3", None, int(href.split("e=")[1].split("&")[0]))  # the link's expiry too
    assert verify(secret, "docs", signed, token) and not verify(secret, "other", signed, token)
    assert not verify(secret, "docs", "manual.pdf#3", token)
    web = Citation(number=2, chunk_id="u#0", source="https://docs.example.com/a#old", symbol="#setup")
    assert citation_href(secret, "docs", web) == ("https://docs.example.com/a#setup", "web")
    script = Citation(number=3, chunk_id="x#0", source="javascript:alert(1)", line_start=4, line_end=6)
    assert citation_href(secret, "docs", script)[0].startswith("/ui/source?")  # never a javascript: link
    chunks = [
        Chunk(
            doc_id="manual.pdf",
            chunk_index=i,
            text=f"text {i} <script>x()</script>",
            source="manual.pdf",
            title="Manual",
            symbol=s,
        )
        for i, s in enumerate(["p. 1", "p. 2", "pp. 2-3", "p. 3"])
    ]
    html = source_view.render("docs", chunks, 2)
    assert html.count('<h2 id="page-') == 3 and 'id="page-2"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'class="chunk hl" id=cited>text 2' in html


def test_feedback_export_is_a_dataset_ragsieve_eval_reads(examples_index, tmp_path, capsys):
    store = FeedbackStore.in_folder(tmp_path / "data")
    cite = {"number": 1, "chunk_id": "examples/docs/api-keys.md#0", "label": "examples/docs/api-keys.md:1-9"}
    good = store.record_answer(
        index="demo",
        plan="fast",
        asked="and then?",
        question=QUESTION,
        answer="Rotate it [1].",
        citations=[cite],
        trace=[{"step": "retrieve"}],
        history=[],
        via="page",
    )
    wrong = store.record_answer(
        index="demo",
        plan="fast",
        asked="q2",
        question="What is a webhook?",
        answer="No.",
        citations=[cite],
        trace=[],
        history=[],
        via="page",
    )
    store.record_answer(
        index="demo", plan="fast", asked="q3", question="unrated", answer="x", citations=[], trace=[], history=[], via="page"
    )
    store.rate(good, 1, "good")
    store.rate(wrong, -1, "wrong document")
    out = tmp_path / "dataset"
    code = main(
        ["feedback", "export", "--data-dir", str(tmp_path / "data"), "--index", f"demo={examples_index}", "--out", str(out)]
    )
    assert code == 0 and "1 approved questions over 1 documents" in capsys.readouterr().err
    ds = load_dataset(out)
    assert [(q.text, q.qrels, q.answers) for q in ds.questions] == [
        (QUESTION, {"examples/docs/api-keys.md": 1}, ["Rotate it [1]."])
    ]
    kept = [json.loads(line) for line in (out / "feedback.jsonl").read_text().splitlines()]
    assert [(k["rating"], k["comment"]) for k in kept] == [(1, "good"), (-1, "wrong document")]
    code = main(
        ["eval", str(out), "--index", str(examples_index), "--retrieval-only", "--out", str(tmp_path / "ev"), "--no-progress"]
    )
    assert code == 0 and json.loads((tmp_path / "ev" / "results.json").read_text())["dataset"]["evaluated"] == 1
    empty = tmp_path / "empty"
    FeedbackStore.in_folder(empty)
    assert (
        main(
            ["feedback", "export", "--data-dir", str(empty), "--index", f"demo={examples_index}", "--out", str(tmp_path / "none")]
        )
        == 2
    )
    assert "no rated answer" in capsys.readouterr().err
