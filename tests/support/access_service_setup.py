"""Shared by the test_access_service* files: the needle index (each test module's `needle` fixture builds it once), the service's keys
(a finance key, bob's, an asserting proxy key, a plain one, an admin), and every HTTP surface asked as one caller."""

from __future__ import annotations

import httpx
import openai

from ragsieve.service.auth.identity import (
    IdentitySettings,
    JwtSettings,
    KeyIdentity,
)
from ragsieve.service.auth.keys import KeyRing
from tests.support.access_corpus import QUESTION, build_needle_index, make_jwks

NEEDLE = "corpus/finance/needle-budget.md"
ADMIN, FIN, BOB, PROXY, PLAIN = "sk-admin-0001", "sk-finance-01", "sk-bob-000001", "sk-proxy-0001", "sk-plain-0001"


def needle_index(tmp_path_factory, embedder):
    """The needle index, its signing key and JWKS file (each test module's `needle` fixture)."""
    root = tmp_path_factory.mktemp("needle-svc")
    index = build_needle_index(root, embedder)
    key, jwks = make_jwks(root)
    return index, key, jwks


def ring(jwks, proxies=("127.0.0.1/32",)) -> KeyRing:
    import ipaddress

    identity = IdentitySettings(
        tuple(ipaddress.ip_network(p) for p in proxies),
        JwtSettings(issuer="https://idp.test", audience="ragsieve", jwks=str(jwks), indexes=("needle",)),
    )
    return KeyRing(
        {ADMIN: {"*"}, FIN: {"needle"}, BOB: {"needle"}, PROXY: {"needle"}, PLAIN: {"needle"}},
        {
            FIN: KeyIdentity(("group:finance",)),
            BOB: KeyIdentity(("user:bob@example.com",)),
            PROXY: KeyIdentity((), assert_identity=True),
        },
        identity,
    )


def client(svc, key: str, headers: dict | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=svc.base_url + "/v1", api_key=key, max_retries=0, timeout=120, default_headers=headers or {})


def everything_received(svc, key: str, headers: dict | None = None) -> tuple[str, dict]:
    """Ask the needle's question on every HTTP surface as one caller: all the text received, and the answers."""
    auth = {"Authorization": f"Bearer {key}", **(headers or {})}
    got, parts = {}, []
    ask = httpx.post(svc.base_url + "/v1/ask", json={"question": QUESTION, "index": "needle"}, headers=auth, timeout=120)
    assert ask.status_code == 200, ask.text
    got["ask"] = ask.json()
    parts.append(ask.text)
    chat = client(svc, key, headers).chat.completions.create(model="needle", messages=[{"role": "user", "content": QUESTION}])
    got["chat"] = chat.model_dump()
    parts.append(chat.model_dump_json())
    stream = client(svc, key, headers).chat.completions.create(
        model="needle", messages=[{"role": "user", "content": QUESTION}], stream=True
    )
    parts.extend(c.model_dump_json() for c in stream)
    page = httpx.post(svc.base_url + "/ui/api/ask", json={"question": QUESTION, "index": "needle"}, headers=auth, timeout=120)
    assert page.status_code == 200, page.text
    parts.append(page.text)
    found = httpx.post(svc.base_url + "/v1/vector_stores/needle/search", json={"query": QUESTION}, headers=auth, timeout=120)
    assert found.status_code == 200, found.text
    got["store_search"] = found.json()
    parts.append(found.text)
    return "\n".join(parts), got
