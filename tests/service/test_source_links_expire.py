"""A source-view link made for an unrestricted caller is signed with its expiry: it opens (without a key)
until then, and not after; moving its expiry breaks the signature; a link signed without one never opens."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from ragsieve.service.web.links import LINK_TTL_S, sign, signed_part
from tests.support.service_fakes import served, sse_events


def test_source_links_expire(examples_index, tmp_path):
    with served({"demo": examples_index}, data_dir=str(tmp_path / "data")) as svc:
        with httpx.stream(
            "POST", svc.base_url + "/ui/api/ask", json={"question": "How do I rotate an API key?"}, timeout=60
        ) as r:
            done = [d for e, d in sse_events(r) if e == "done"][0]
        href = next(c["href"] for c in done["citations"] if c["href"].startswith("/ui/source?"))
        query = {k: v[0] for k, v in parse_qs(urlsplit(href).query).items()}
        assert abs(int(query["e"]) - (time.time() + LINK_TTL_S)) < 120
        assert httpx.get(svc.base_url + href.split("#")[0]).status_code == 200  # no key needed, before expiry

        def opened(**change) -> httpx.Response:
            return httpx.get(f"{svc.base_url}/ui/source?{urlencode({**query, **change})}")

        assert opened(e=str(int(query["e"]) + 10**6)).status_code == 404  # a later expiry is not signed
        secret, chunk = svc.app.state.web.secret, query["chunk"]
        past = int(time.time()) - 5
        expired = opened(e=str(past), t=sign(secret, "demo", signed_part(chunk, None, past)))
        assert expired.status_code == 404 and "expired" in expired.json()["error"]["message"]
        forever = {k: v for k, v in query.items() if k != "e"} | {"t": sign(secret, "demo", chunk)}
        assert httpx.get(f"{svc.base_url}/ui/source?{urlencode(forever)}").status_code == 404  # the old form
