"""The feedback store keeps what the question log keeps private: created 0600, and the questions, answers,
history and comments redacted before they are written (e-mail, phone, keys), through the chat page's HTTP."""

from __future__ import annotations

import stat

import httpx

from tests.support.service_fakes import served, sse_events

EMAIL, KEY, PHONE = "bob.smith@example.com", "sk-live-abcdef0123456789XYZ", "+44 20 7946 0958"


def test_feedback_sqlite_is_private_and_redacted(examples_index, tmp_path):
    data = tmp_path / "data"
    question = f"I am {EMAIL} and my key {KEY} leaked: how do I rotate an API key?"
    with served({"demo": examples_index}, data_dir=str(data)) as svc:
        with httpx.stream("POST", svc.base_url + "/ui/api/ask", json={"question": question}, timeout=60) as r:
            done = [d for e, d in sse_events(r) if e == "done"][0]
        follow = {
            "question": f"and if {EMAIL} loses it?",
            "history": [{"role": "user", "content": question}, {"role": "assistant", "content": "Rotate it."}],
        }
        with httpx.stream("POST", svc.base_url + "/ui/api/ask", json=follow, timeout=60) as r:
            assert [e for e, _ in sse_events(r)][-1] == "done"
        rated = httpx.post(
            svc.base_url + "/ui/api/feedback",
            timeout=30,
            json={"answer_id": done["answer_id"], "rating": "down", "comment": f"call me on {PHONE}"},
        )
        assert rated.status_code == 200, rated.text
    db = data / "feedback.sqlite3"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    raw = b"".join(p.read_bytes() for p in data.glob("feedback.sqlite3*"))
    for secret in (EMAIL, KEY, PHONE, "7946"):
        assert secret.encode() not in raw, secret
    assert b"[email]" in raw and b"rotate an API key" in raw
