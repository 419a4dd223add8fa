"""Who sees what, through `ragsieve serve`'s HTTP answer surfaces: the needle (group:finance only) reaches the finance
user, cited, and nothing of it reaches another user: not the answer, citations, trace, streamed chunks or the
vector-store search. Identity from keys, Open WebUI's forwarded headers, verified user tokens and the keys file.
MCP, the chat page's source view, the widget and the documents API: test_access_service_pages.py."""

from __future__ import annotations

import json

import httpx
import pytest

from ragsieve.service.auth.identity import (
    IdentityRefused,
    KeyIdentity,
    proxy_principals,
)
from ragsieve.service.auth.keys import KeyRing
from ragsieve.testing import FakeChat
from tests.core.test_full_plan import fake_model
from tests.support.access_corpus import NEEDLE_TEXT, QUESTION, leaks, make_jwks, token
from tests.support.access_service_setup import ADMIN, BOB, FIN, NEEDLE, PLAIN, PROXY, everything_received, needle_index, ring
from tests.support.service_fakes import served

pytestmark = pytest.mark.filterwarnings("ignore:Use `streamable_http_client`:DeprecationWarning")


@pytest.fixture(scope="module")
def needle(tmp_path_factory, embedder):
    return needle_index(tmp_path_factory, embedder)


def test_the_needle_reaches_finance_and_nobody_else_on_every_http_surface(needle, tmp_path):
    index, _, jwks = needle
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(jwks), data_dir=str(tmp_path / "data")) as svc:
        text, got = everything_received(svc, FIN)
        assert NEEDLE in {c["source"] for c in got["ask"]["citations"]}
        assert NEEDLE_TEXT[:40] in text and got["store_search"]["data"][0]["filename"] == "corpus/finance/needle-budget.md"
        for key, headers in (
            (BOB, None),
            (PROXY, {"X-OpenWebUI-User-Email": "eve@example.com", "X-OpenWebUI-User-Role": "user"}),
        ):
            text, got = everything_received(svc, key, headers)
            assert leaks(text) == [], (key, leaks(text))
            assert got["ask"]["citations"] and NEEDLE not in {c["source"] for c in got["ask"]["citations"]}
            assert len(got["store_search"]["data"]) == 3  # the three handbook pages: no sign of the other two
        # Open WebUI forwarding a finance user through the trusted proxy with an asserting key
        text, got = everything_received(
            svc, PROXY, {"X-Forwarded-User": "fin@example.com", "X-Forwarded-Groups": "finance, staff"}
        )
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
        claimed = httpx.post(
            svc.base_url + "/v1/ask",
            json={**ask, "where": {"readers": ["group:finance"]}},
            headers={"Authorization": f"Bearer {BOB}"},
            timeout=120,
        )
        assert claimed.status_code == 200 and leaks(claimed.text) == []  # a body cannot widen the caller's access
        good = token(key, user="fin@example.com", groups=["finance"])
        as_token = post({"Authorization": f"Bearer {good}"})
        assert as_token.status_code == 200 and NEEDLE in {c["source"] for c in as_token.json()["citations"]}
        staff = token(key, user="bob@example.com", groups=["staff"])
        r = post({"Authorization": f"Bearer {PLAIN}", "X-Ragsieve-User-Token": staff})
        assert r.status_code == 200 and leaks(r.text) == []
        for bad in (
            token(key, user="fin@example.com", groups=["finance"], exp_in_s=-120),
            token(other, user="fin@example.com", groups=["finance"]),
            token(key, user="fin@example.com", groups=["finance"], audience="someone-else"),
        ):
            r = post({"Authorization": f"Bearer {bad}"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "identity_refused", r.text
            assert "\n" not in r.json()["error"]["message"]
            r = post({"Authorization": f"Bearer {PLAIN}", "X-Ragsieve-User-Token": bad})
            assert r.status_code == 401


def test_open_webui_headers_map_to_principals():
    # the four headers Open WebUI sets with ENABLE_FORWARD_USER_INFO_HEADERS (backend/open_webui/routers/openai.py)
    headers = {
        "x-openwebui-user-name": "Ada L",
        "x-openwebui-user-id": "8f1c-22",
        "x-openwebui-user-email": "Ada@Example.com",
        "x-openwebui-user-role": "admin",
    }
    assert proxy_principals(headers) == ("group:openwebui-admin", "user:8f1c-22", "user:ada@example.com")
    assert proxy_principals({"x-forwarded-user": "bob", "x-forwarded-groups": "a, b"}) == ("group:a", "group:b", "user:bob")
    assert proxy_principals({}) is None


def test_open_webui_groups_forwarded_by_its_connection_header():
    # Open WebUI 0.12.4 fills a connection's custom header "{{USER_GROUPS}}" with the user's group names joined
    # by "," (backend/open_webui/utils/headers.py, parse_custom_headers), "" for a user in no group
    sent = {
        "x-openwebui-user-email": "fin@example.com",
        "x-openwebui-user-id": "u-1",
        "x-openwebui-user-role": "user",
        "x-forwarded-groups": "finance,Ops",
    }
    assert proxy_principals(sent) == ("group:finance", "group:openwebui-user", "group:ops", "user:fin@example.com", "user:u-1")
    assert proxy_principals({**sent, "x-forwarded-groups": ""}) == ("group:openwebui-user", "user:fin@example.com", "user:u-1")
    # a group name with spaces is named with dashes (a rules file separates its entries by spaces)
    assert "group:finance-team" in proxy_principals({**sent, "x-forwarded-groups": "Finance Team"})
    with pytest.raises(IdentityRefused) as refused:  # a group name that is no principal: refused, not dropped
        proxy_principals({**sent, "x-forwarded-groups": "Finance<Team>"})
    assert refused.value.status == 403 and "Finance<Team>" in str(refused.value)


def test_the_keys_file_of_the_access_page_loads_and_bad_entries_are_refused(needle, tmp_path):
    import shutil

    from ragsieve.agent.errors import UsageError

    shutil.copy(needle[2], tmp_path / "jwks.json")
    page = (__import__("pathlib").Path(__file__).resolve().parents[2] / "docs" / "access.md").read_text()
    block = page.split("# Who sees what", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "keys.toml"
    path.write_text(block.replace('indexes = ["idx"]', 'indexes = ["needle"]'))
    keys = KeyRing.load(str(path), environ={})
    assert keys.identity_of("sk-finance-app") == KeyIdentity(("group:finance",))
    assert keys.identity_of("sk-openwebui") == KeyIdentity((), assert_identity=True)
    assert keys.identity_of("sk-admin-0001") is None and keys.scope("sk-openwebui") == {"needle"}
    assert keys.identity.trusted("10.0.0.5") and not keys.identity.trusted("10.0.0.6")
    assert keys.identity.jwt is not None and keys.identity.jwt.jwks == str(tmp_path / "jwks.json")
    for bad in (
        '[keys."sk-x-000001"]\nindexes = ["a"]\nprincipals = ["boss"]\n',
        '[keys."sk-x-000001"]\nindexes = ["a"]\nassert_identity = "yes"\n',
        '[keys]\n"sk-x-000001" = ["a"]\n[identity]\ntrusted_proxies = ["not-an-ip"]\n',
        '[keys]\n"sk-x-000001" = ["a"]\n[identity.jwt]\nissuer = "i"\naudience = "a"\njwks = "http://x/j"\n',
        '[keys]\n"sk-x-000001" = ["a"]\n[identity.jwt]\nissuer = "i"\njwks = "jwks.json"\n',
    ):
        path.write_text(bad)
        with pytest.raises(UsageError, match="keys file"):
            KeyRing.load(str(path), environ={})


def test_a_forged_x_forwarded_for_does_not_make_a_local_client_the_trusted_proxy(needle, tmp_path):
    """uvicorn's proxy headers would trust 127.0.0.1's X-Forwarded-For: the check rests on the socket peer."""
    index, _, jwks = needle
    forged = {"X-Forwarded-User": "cfo@example.com", "X-Forwarded-Groups": "finance"}
    with served({"needle": index}, FakeChat(default=fake_model), keys=ring(jwks, proxies=("127.0.0.2/32",))) as svc:
        ask = {"question": QUESTION, "index": "needle"}
        for spoof in (
            {},
            {"X-Forwarded-For": "127.0.0.2"},
            {"X-Forwarded-For": "10.1.1.1, 127.0.0.2"},
            {"Forwarded": "for=127.0.0.2"},
        ):
            r = httpx.post(
                svc.base_url + "/v1/ask", json=ask, timeout=120, headers={"Authorization": f"Bearer {PROXY}", **forged, **spoof}
            )
            assert r.status_code == 403 and "trusted proxy" in r.json()["error"]["message"], (spoof, r.text)
            assert leaks(r.text) == []
