"""`ragsieve serve --workers 2 --data-dir D`: whichever worker process a request reaches, it sees the same
vector stores, file and batch status and job progress (`<data-dir>/jobs.sqlite`, records under a lock)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import openai

from tests.service.test_crawl_job import serve_pages
from tests.service.test_documents_api import MD, PY
from tests.service.test_documents_batches import BROKEN_PDF
from tests.support.serve_process import serve_process
from tests.support.stub_openai import StubOpenAI, ok

WORKER = "x-ragsieve-worker"


def _until(check, timeout_s: float, what: str):
    ends = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < ends, f"timed out: {what}"
        time.sleep(0.1)


def test_two_workers_answer_alike_for_jobs_batches_and_stores(examples_index, tmp_path):
    httpd = serve_pages(tmp_path)
    fresh = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=60)  # a new connection each time
    try:
        with StubOpenAI([ok("unused")] * 4) as upstream:
            env = {**os.environ, "OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "up"}
            args = ("--workers", "2", "--data-dir", str(tmp_path / "data"))
            with serve_process(examples_index, *args, env=env, stderr=subprocess.DEVNULL) as (
                proc,
                base,
            ):  # its workers: one group
                client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, http_client=fresh)
                store = client.vector_stores.create(name="shared")
                batch = client.vector_stores.file_batches.upload_and_poll(  # uploads and polls spread over both workers
                    store.id,
                    files=[("deploy-notes.md", MD.encode()), ("widgets.py", PY.encode()), ("broken.pdf", BROKEN_PDF)],
                    poll_interval_ms=100,
                )
                assert batch.status == "completed"
                assert (batch.file_counts.completed, batch.file_counts.failed) == (2, 1)

                answered: dict[str, set] = {}

                def both_answer(path: str, check) -> bool:  # every answer right; done once two workers gave one
                    r = fresh.get(base + path)
                    assert r.status_code == 200, r.text
                    if not check(r.json()):
                        return False
                    answered.setdefault(path, set()).add(r.headers[WORKER])
                    return len(answered[path]) >= 2

                batch_path = f"/v1/vector_stores/{store.id}/file_batches/{batch.id}"
                _until(
                    lambda: both_answer(
                        batch_path,
                        lambda b: (
                            b["status"] == "completed"
                            and b["file_counts"] == {"in_progress": 0, "completed": 2, "failed": 1, "cancelled": 0, "total": 3}
                        ),
                    ),
                    60,
                    "both workers report the batch",
                )

                def six_from_the_new_store():
                    hits = [
                        r
                        for r in (
                            fresh.post(
                                base + f"/v1/vector_stores/{store.id}/search", json={"query": "zorblax gateway port"}
                            ).json()["data"]
                            for _ in range(6)
                        )
                        if r and r[0]["filename"] == "deploy-notes.md"
                    ]
                    return hits if len(hits) == 6 else None  # six fresh connections, every one from the new store

                assert len(_until(six_from_the_new_store, 30, "every worker serves the new store")) == 6

                job = fresh.post(
                    base + f"/v1/indexes/{store.id}/crawl",
                    json={"url": f"http://127.0.0.1:{httpd.server_address[1]}/index.html", "rate": 20, "max_pages": 5},
                )
                assert job.status_code == 202, job.text
                job_path = f"/v1/jobs/{job.json()['id']}"
                _until(
                    lambda: both_answer(job_path, lambda j: j["status"] == "completed"),
                    120,
                    "both workers report the crawl job completed",
                )
                assert fresh.get(base + job_path).json()["result"]["docs_added"] == 2

                notes = next(
                    f
                    for f in client.vector_stores.files.list(store.id)
                    if f.status == "completed" and client.files.retrieve(f.id).filename == "deploy-notes.md"
                )
                client.vector_stores.files.delete(notes.id, vector_store_id=store.id)

                def gone_everywhere():
                    results = [
                        fresh.post(
                            base + f"/v1/vector_stores/{store.id}/search", json={"query": "zorblax gateway port 7412"}
                        ).json()["data"]
                        for _ in range(6)
                    ]
                    return all(all(h["filename"] != "deploy-notes.md" for h in r) for r in results)

                _until(gone_everywhere, 30, "the deleted file leaves every worker's answers")
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    finally:
        fresh.close()
        httpd.shutdown()
