"""The insights read as the key's principals: an admin-scoped key with principals gets, in every insights
surface (report, CSV and JSON exports, the eval-set export), nothing of a document those principals may not
read; the operator's admin key (no principals) still sees every document."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from ragsieve.service.auth.identity import KeyIdentity
from ragsieve.service.auth.keys import KeyRing
from tests.support.access_corpus import NEEDLE_TEXT, QUESTION, leaks
from tests.support.access_service_setup import NEEDLE, needle_index
from tests.support.insights_fakes import START, FakeClock, insights_service

OPERATOR, BOB_ADMIN, FIN = "sk-owner-00001", "sk-bob-admin-01", "sk-fin-reader-1"
UNANSWERED = "Is there a refund if the Heron acquisition price is paid in parts?"  # the scripted model abstains


@pytest.fixture(scope="module")
def needle(tmp_path_factory, embedder):
    return needle_index(tmp_path_factory, embedder)


def insights_keys() -> KeyRing:
    return KeyRing(
        {OPERATOR: {"needle:admin"}, BOB_ADMIN: {"needle:admin"}, FIN: {"needle"}},
        {BOB_ADMIN: KeyIdentity(("user:bob@example.com",)), FIN: KeyIdentity(("group:finance",))},
    )


def everything(svc, key: str, tmp: Path) -> str:
    """Every insights surface read with `key`: the report, both exports and the exported eval set's files."""
    auth = {"Authorization": f"Bearer {key}"}
    params = {"index": "needle", "since": "30d"}
    parts = []
    report = httpx.get(svc.base_url + "/insights/api/report", params=params, headers=auth, timeout=120)
    assert report.status_code == 200, report.text
    parts.append(report.text)
    for ext in ("csv", "json"):
        r = httpx.get(f"{svc.base_url}/insights/api/export.{ext}", params=params, headers=auth, timeout=120)
        assert r.status_code == 200, r.text
        parts.append(r.text)
    for group in report.json()["groups"]:
        r = httpx.post(
            svc.base_url + "/insights/api/export-eval",
            headers=auth,
            timeout=120,
            json={"index": "needle", "since": "30d", "group": group["id"], "label": group["label"]},
        )
        assert r.status_code == 200, r.text
        parts.append(r.text)
        parts += [f.read_text(encoding="utf-8") for f in Path(r.json()["folder"]).rglob("*") if f.is_file()]
    return "\n".join(parts)


def test_an_admin_key_with_principals_reads_the_insights_as_them(needle, tmp_path):
    index, _, _ = needle
    with insights_service({"needle": index}, tmp_path, FakeClock(START), keys=insights_keys()) as svc:
        fin = {"Authorization": f"Bearer {FIN}"}
        for question in (QUESTION, UNANSWERED):
            r = httpx.post(svc.base_url + "/v1/ask", json={"question": question, "index": "needle"}, headers=fin, timeout=120)
            assert r.status_code == 200, r.text
        asked = r.json()
        answered = httpx.post(
            svc.base_url + "/ui/api/ask", json={"question": QUESTION, "index": "needle"}, headers=fin, timeout=120
        )
        answer_id = [
            json.loads(line[6:]) for line in answered.text.splitlines() if line.startswith("data: ") and '"answer_id"' in line
        ][-1]["answer_id"]
        rated = httpx.post(
            svc.base_url + "/ui/api/feedback", json={"answer_id": answer_id, "rating": "down"}, headers=fin, timeout=30
        )
        assert rated.status_code == 200, rated.text
        assert asked["abstention"] is not None  # the unanswered question makes a topic group
        svc.registry.insights.log.flush()

        operator = everything(svc, OPERATOR, tmp_path)
        assert NEEDLE in operator and NEEDLE_TEXT[:30] in operator  # the operator view: every document
        bob = everything(svc, BOB_ADMIN, tmp_path)
        assert leaks(bob) == [], leaks(bob)
        report = httpx.get(
            svc.base_url + "/insights/api/report",
            params={"index": "needle"},
            headers={"Authorization": f"Bearer {BOB_ADMIN}"},
            timeout=60,
        ).json()
        assert report["totals"]["questions"] == 3  # the questions and counts are the index's, not the documents'
        assert any(g["closest"] for g in report["groups"])  # bob's readable passages are still shown
        assert "corpus/handbook/holidays.md" in report["unreached"] + [d for d, _ in report["most_cited"]] + [
            p["source"] for g in report["groups"] for p in g["closest"]
        ]
