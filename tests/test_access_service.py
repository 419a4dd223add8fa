"""Who sees what, through every surface of `ragsieve serve`: the needle (group:finance only) reaches the finance
user, cited, and nothing of it reaches another user: not the answer, citations, trace, streamed chunks, MCP
results or the documents API. Identity from keys, Open WebUI's forwarded headers and verified user tokens."""
from __future__ import annotations

import json

import anyio
import httpx
import openai
import pytest
from access_corpus import NEEDLE_TEXT, QUESTION, build_needle_index, leaks, make_jwks, token
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from service_fakes import served
from test_full_plan import fake_model

from ragsieve.agent.llm.fake import FakeChat
from ragsieve.service.auth.identity import (
    IdentityRefused,
    IdentitySettings,
    JwtSettings,
    KeyIdentity,
    proxy_principals,
)
from ragsieve.service.auth.keys import KeyRing

NEEDLE = "corpus/finance/needle-budget.md"
ADMIN, FIN, BOB, PROXY, PLAIN = "sk-admin-0001", "sk-finance-01", "sk-bob-000001", "sk-proxy-0001", "sk-plain-0001"
pytestmark = pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")


@pytest.fixture(scope="module")
def needle(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("needle-svc")
    index = build_needle_index(root, embedder)
    key, jwks = make_jwks(root)
    return index, key, jwks


def ring(jwks, proxies=("127.0.0.1/32",)) -> KeyRing:
    import ipaddress

    identity = IdentitySettings(tuple(ipaddress.ip_network(p) for p in proxies),
                                JwtSettings(issuer="https://idp.test", audience="ragsieve", jwks=str(jwks),
                                            indexes=("needle",)))
    return KeyRing({ADMIN: {"*"}, FIN: {"needle"}, BOB: {"needle"}, PROXY: {"needle"}, PLAIN: {"needle"}},
                   {FIN: KeyIdentity(("group:finance",)), BOB: KeyIdentity(("user:bob@example.com",)),
                    PROXY: KeyIdentity((), assert_identity=True)}, identity)


def client(svc, key: str, headers: dict | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=svc.base_url + "/v1", api_key=key, max_retries=0, timeout=120,
                         default_headers=headers or {})


def everything_received(svc, key: str, headers: dict | None = None) -> tuple[str, dict]:
    """Ask the needle's question on every HTTP surface as one caller: all the text received, and the answers."""
    auth = {"Authorization": f"Bearer {key}", **(headers or {})}
    got, parts = {}, []
    ask = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION, "index": "needle"}, headers=auth,
                     timeout=120)
    assert ask.status_code == 200, ask.text
    got["ask"] = ask.json()
    parts.append(ask.text)
    chat = client(svc, key, headers).chat.completions.create(
        model="needle", messages=[{"role": "user", "content": QUESTION}])
    got["chat"] = chat.model_dump()
    parts.append(chat.model_dump_json())
    stream = client(svc, key, headers).chat.completions.create(
        model="needle", messages=[{"role": "user", "content": QUESTION}], stream=True)
    parts.extend(c.model_dump_json() for c in stream)
    page = httpx.post(svc.base_url + "/ui/api/ask", json={"question": QUESTION, "index": "needle"}, headers=auth,
                      timeout=120)
    assert page.status_code == 200, page.text
    parts.append(page.text)
    found = httpx.post(svc.base_url + "/v1/vector_stores/needle/search", json={"query": QUESTION}, headers=auth,
                       timeout=120)
    assert found.status_code == 200, found.text
    got["store_search"] = found.json()
    parts.append(found.text)
    return "\n".join(parts), got


def test_the_needle_reaches_finance_and_nobody_else_on_every_http_surface(needle, tmp_path):
    index, _, jwks = needle
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(jwks),
                data_dir=str(tmp_path / "data")) as svc:
        text, got = everything_received(svc, FIN)
        assert NEEDLE in {c["source"] for c in got["ask"]["citations"]}
        assert NEEDLE_TEXT[:40] in text and got["store_search"]["data"][0]["filename"] == "corpus/finance/needle-budget.md"
        for key, headers in ((BOB, None), (PROXY, {"X-OpenWebUI-User-Email": "eve@example.com",
                                                   "X-OpenWebUI-User-Role": "user"})):
            text, got = everything_received(svc, key, headers)
            assert leaks(text) == [], (key, leaks(text))
            assert got["ask"]["citations"] and NEEDLE not in {c["source"] for c in got["ask"]["citations"]}
            assert len(got["store_search"]["data"]) == 3  # the three handbook pages: no sign of the other two
        # Open WebUI forwarding a finance user through the trusted proxy with an asserting key
        text, got = everything_received(svc, PROXY, {"X-Forwarded-User": "fin@example.com",
                                                    "X-Forwarded-Groups": "finance, staff"})
        assert NEEDLE in {c["source"] for c in got["ask"]["citations"]}
        sent = json.dumps([h["messages"] for h in svc.chat.history[-3:]])
        assert NEEDLE_TEXT[:40] in sent


def test_identity_claims_are_refused_unless_trusted_and_signed(needle, tmp_path):
    index, key, jwks = needle
    other, _ = make_jwks(tmp_path)
    forged = {"X-OpenWebUI-User-Email": "cfo@example.com", "X-Forwarded-Groups": "finance"}
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(jwks, proxies=("10.9.9.9/32",))) as svc:
        ask = {"question": QUESTION, "index": "needle"}

        def post(headers):
            return httpx.post(svc.base_url + "/v1/ask", json=ask, headers=headers, timeout=120)

        for k in (PROXY, PLAIN, ADMIN):  # the client is not the trusted proxy: forged headers are refused
            r = post({"Authorization": f"Bearer {k}", **forged})
            assert r.status_code == 403 and "trusted proxy" in r.json()["error"]["message"], r.text
        claimed = httpx.post(svc.base_url + "/v1/ask", json={**ask, "where": {"readers": ["group:finance"]}},
                             headers={"Authorization": f"Bearer {BOB}"}, timeout=120)
        assert claimed.status_code == 200 and leaks(claimed.text) == []  # a body cannot widen the caller's access
        good = token(key, user="fin@example.com", groups=["finance"])
        as_token = post({"Authorization": f"Bearer {good}"})
        assert as_token.status_code == 200 and NEEDLE in {c["source"] for c in as_token.json()["citations"]}
        staff = token(key, user="bob@example.com", groups=["staff"])
        r = post({"Authorization": f"Bearer {PLAIN}", "X-Ragsieve-User-Token": staff})
        assert r.status_code == 200 and leaks(r.text) == []
        for bad in (token(key, user="fin@example.com", groups=["finance"], exp_in_s=-120),
                    token(other, user="fin@example.com", groups=["finance"]),
                    token(key, user="fin@example.com", groups=["finance"], audience="someone-else")):
            r = post({"Authorization": f"Bearer {bad}"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "identity_refused", r.text
            assert "\n" not in r.json()["error"]["message"]
            r = post({"Authorization": f"Bearer {PLAIN}", "X-Ragsieve-User-Token": bad})
            assert r.status_code == 401


def test_open_webui_headers_map_to_principals():
    # the four headers Open WebUI sets with ENABLE_FORWARD_USER_INFO_HEADERS (backend/open_webui/routers/openai.py)
    headers = {"x-openwebui-user-name": "Ada L", "x-openwebui-user-id": "8f1c-22", "x-openwebui-user-email":
               "Ada@Example.com", "x-openwebui-user-role": "admin"}
    assert proxy_principals(headers) == ("group:openwebui-admin", "user:8f1c-22", "user:ada@example.com")
    assert proxy_principals({"x-forwarded-user": "bob", "x-forwarded-groups": "a, b"}) == (
        "group:a", "group:b", "user:bob")
    assert proxy_principals({}) is None


def test_open_webui_groups_forwarded_by_its_connection_header():
    # Open WebUI 0.12.4 fills a connection's custom header "{{USER_GROUPS}}" with the user's group names joined
    # by "," (backend/open_webui/utils/headers.py, parse_custom_headers), "" for a user in no group
    sent = {"x-openwebui-user-email": "fin@example.com", "x-openwebui-user-id": "u-1",
            "x-openwebui-user-role": "user", "x-forwarded-groups": "finance,Ops"}
    assert proxy_principals(sent) == ("group:finance", "group:openwebui-user", "group:ops", "user:fin@example.com",
                                      "user:u-1")
    assert proxy_principals({**sent, "x-forwarded-groups": ""}) == ("group:openwebui-user",
                                                                    "user:fin@example.com", "user:u-1")
    # a group name with spaces is named with dashes (a rules file separates its entries by spaces)
    assert "group:finance-team" in proxy_principals({**sent, "x-forwarded-groups": "Finance Team"})
    with pytest.raises(IdentityRefused) as refused:  # a group name that is no principal: refused, not dropped
        proxy_principals({**sent, "x-forwarded-groups": "Finance<Team>"})
    assert refused.value.status == 403 and "Finance<Team>" in str(refused.value)


def test_mcp_search_ask_read_as_the_caller(needle):
    index, _, jwks = needle
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(jwks)) as svc:
        url = f"{svc.base_url}/mcp"

        async def session_as(key: str) -> dict:
            out = {}
            async with streamablehttp_client(url, headers={"Authorization": f"Bearer {key}"}) as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    out["indexes"] = (await session.call_tool("indexes", {})).content[0].text
                    out["search"] = (await session.call_tool("search", {"query": QUESTION, "top_k": 5})).content[0].text
                    out["ask"] = (await session.call_tool("ask", {"question": QUESTION})).content[0].text
                    read = await session.call_tool("read", {"ref": NEEDLE + "#0", "neighbours": 2})
                    missing = await session.call_tool("read", {"ref": "corpus/finance/nothing.md#0"})
                    out["read"], out["read_error"] = read.content[0].text, read.isError
                    out["missing"] = missing.content[0].text
            return out

        fin = anyio.run(session_as, FIN)
        assert NEEDLE_TEXT[:40] in fin["read"] and not fin["read_error"] and NEEDLE in fin["search"]
        assert NEEDLE in fin["ask"]
        bob = anyio.run(session_as, BOB)
        assert bob["read_error"] and bob["read"].replace(NEEDLE, "X") == bob["missing"].replace(
            "corpus/finance/nothing.md", "X")  # a forbidden document reads exactly as a missing one
        assert leaks(bob["search"] + bob["ask"] + bob["indexes"]) == []
        assert json.loads(bob["indexes"])["indexes"][0]["documents"] == 3


def test_the_chat_page_source_view_reads_as_the_link_owner(needle, tmp_path):
    import shutil

    from service_fakes import sse_events

    from ragsieve.tools.access.labels import set_rules
    from ragsieve.tools.access.rules import AccessRules

    index = tmp_path / "index"
    shutil.copytree(needle[0], index)
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(needle[2])) as svc:
        page = httpx.post(svc.base_url + "/ui/api/ask", json={"question": QUESTION, "index": "needle"},
                          headers={"Authorization": f"Bearer {FIN}"}, timeout=120)
        done = [d for name, d in sse_events(page) if name == "done"][0]
        href = next(c["href"] for c in done["citations"] if c["source"] == NEEDLE)
        assert "as=group%3Afinance" in href
        opened = httpx.get(svc.base_url + href.split("#")[0])
        assert opened.status_code == 200 and "Heron acquisition" in opened.text
        widened = httpx.get(svc.base_url + href.split("#")[0].replace("as=group%3Afinance", "as=public"))
        assert widened.status_code == 404  # the principals are signed with the chunk
        set_rules(index, AccessRules.parse("finance/ group:board\n"))  # finance loses the document
        revoked = httpx.get(svc.base_url + href.split("#")[0])
        assert revoked.status_code == 404 and revoked.json()["error"]["message"] == widened.json()["error"]["message"]


def test_the_widget_reads_as_the_host_pages_signed_user(needle, tmp_path):
    from service_fakes import sse_events

    from ragsieve import Config
    from ragsieve.agent.llm.client import LLM
    from ragsieve.service.app import create_app
    from ragsieve.service.auth.widget_keys import WidgetKey, WidgetKeys
    from ragsieve.service.indexes.registry import IndexRegistry
    from ragsieve.service.server import ServiceThread
    from ragsieve.service.settings import ServiceSettings

    index, key, jwks = needle
    site, widget_key = "https://docs.example.com", "pk-needle-site-01"
    widgets = WidgetKeys([WidgetKey(widget_key, frozenset({"needle"}), frozenset({site}), 60,
                                    visitor_requests_per_minute=60)])
    registry = IndexRegistry({"needle": index}, Config(), llm=LLM(FakeChat(default=fake_model)))
    settings = ServiceSettings(port=0)
    app = create_app(registry, settings, ring(jwks), preload_model=False, widget_keys=widgets)
    try:
        with ServiceThread(app, settings, lifetime_s=120) as svc:
            def ask(extra: dict) -> httpx.Response:
                return httpx.post(svc.base_url + "/ui/api/ask", json={"question": QUESTION}, timeout=120,
                                  headers={"Authorization": f"Bearer {widget_key}", "Origin": site, **extra})

            fin = ask({"X-Ragsieve-User-Token": token(key, user="fin@example.com", groups=["finance"])})
            done = [d for name, d in sse_events(fin) if name == "done"][0]
            assert NEEDLE in {c["source"] for c in done["citations"]}
            anonymous = ask({})
            assert anonymous.status_code == 200 and leaks(anonymous.text) == []
            expired = ask({"X-Ragsieve-User-Token": token(key, user="fin@example.com", groups=["finance"],
                                                          exp_in_s=-120)})
            assert expired.status_code == 401 and leaks(expired.text) == []
    finally:
        registry.close()


def test_documents_api_access_attribute_hides_a_file_from_everyone_else(needle, tmp_path):
    writer, fin, bob = "sk-writer-0001", "sk-fin-all-001", "sk-bob-all-001"
    keys = KeyRing({writer: {"*:write"}, fin: {"*"}, bob: {"*"}},
                   {fin: KeyIdentity(("group:finance",)), bob: KeyIdentity(("user:bob@example.com",))})
    files = tmp_path / "upload"
    files.mkdir()
    (files / "plan.md").write_text(f"# Acquisition plan\n\n{NEEDLE_TEXT}\n")
    (files / "holidays.md").write_text("# Holidays\n\nStaff take 25 days of paid holiday a year.\n")
    with served({"needle": needle[0]}, FakeChat(default=fake_model), keys=keys, data_dir=str(tmp_path / "data"),
                request_timeout_s=120) as svc:
        w = openai.OpenAI(base_url=svc.base_url + "/v1", api_key=writer, max_retries=0)
        store = w.vector_stores.create(name="uploads")
        landed = {}
        for name, attributes in (("plan.md", {"access": "group:finance"}), ("holidays.md", {})):
            with open(files / name, "rb") as fh:
                landed[name] = w.vector_stores.files.upload_and_poll(
                    vector_store_id=store.id, file=fh, attributes=attributes, poll_interval_ms=100,
                    max_wait_seconds=120)
        assert {f.status for f in landed.values()} == {"completed"}
        secret = landed["plan.md"].id
        bad = httpx.post(f"{svc.base_url}/v1/vector_stores/{store.id}/files/{secret}",
                         json={"attributes": {"access": "group:"}}, headers={"Authorization": f"Bearer {writer}"})
        assert bad.status_code == 400 and "access" in bad.json()["error"]["message"]

        def seen_by(key: str) -> str:
            auth = {"Authorization": f"Bearer {key}"}
            base = f"{svc.base_url}/v1/vector_stores/{store.id}"
            parts = [httpx.post(base + "/search", json={"query": QUESTION}, headers=auth).text,
                     httpx.get(base + "/files", headers=auth).text, httpx.get(base, headers=auth).text]
            for url in (f"{base}/files/{secret}", f"{base}/files/{secret}/content"):
                r = httpx.get(url, headers=auth)
                parts.append(f"{r.status_code} {r.text}")
            return "\n".join(parts)

        assert NEEDLE_TEXT[:40] in seen_by(fin) and secret in seen_by(fin)
        other = seen_by(bob)
        assert leaks(other) == [] and secret not in other.replace(f"no file {secret!r}", "")
        missing = httpx.get(f"{svc.base_url}/v1/vector_stores/{store.id}/files/file-000000000000000000000000",
                            headers={"Authorization": f"Bearer {bob}"})
        forbidden = httpx.get(f"{svc.base_url}/v1/vector_stores/{store.id}/files/{secret}",
                              headers={"Authorization": f"Bearer {bob}"})
        assert forbidden.status_code == missing.status_code == 404
        assert forbidden.json()["error"]["message"].replace(secret, "X") == missing.json()["error"][
            "message"].replace("file-000000000000000000000000", "X")
        assert '"total":1' in httpx.get(f"{svc.base_url}/v1/vector_stores/{store.id}",
                                        headers={"Authorization": f"Bearer {bob}"}).text.replace(" ", "")


def test_the_keys_file_of_the_access_page_loads_and_bad_entries_are_refused(needle, tmp_path):
    import shutil

    from ragsieve.agent.errors import UsageError

    shutil.copy(needle[2], tmp_path / "jwks.json")
    page = (__import__("pathlib").Path(__file__).resolve().parent.parent / "docs" / "access.md").read_text()
    block = page.split("# Who sees what", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "keys.toml"
    path.write_text(block.replace('indexes = ["idx"]', 'indexes = ["needle"]'))
    keys = KeyRing.load(str(path), environ={})
    assert keys.identity_of("sk-finance-app") == KeyIdentity(("group:finance",))
    assert keys.identity_of("sk-openwebui") == KeyIdentity((), assert_identity=True)
    assert keys.identity_of("sk-admin-0001") is None and keys.scope("sk-openwebui") == {"needle"}
    assert keys.identity.trusted("10.0.0.5") and not keys.identity.trusted("10.0.0.6")
    assert keys.identity.jwt is not None and keys.identity.jwt.jwks == str(tmp_path / "jwks.json")
    for bad in ('[keys."sk-x-000001"]\nindexes = ["a"]\nprincipals = ["boss"]\n',
                '[keys."sk-x-000001"]\nindexes = ["a"]\nassert_identity = "yes"\n',
                '[keys]\n"sk-x-000001" = ["a"]\n[identity]\ntrusted_proxies = ["not-an-ip"]\n',
                '[keys]\n"sk-x-000001" = ["a"]\n[identity.jwt]\nissuer = "i"\naudience = "a"\njwks = "http://x/j"\n',
                '[keys]\n"sk-x-000001" = ["a"]\n[identity.jwt]\nissuer = "i"\njwks = "jwks.json"\n'):
        path.write_text(bad)
        with pytest.raises(UsageError, match="keys file"):
            KeyRing.load(str(path), environ={})
