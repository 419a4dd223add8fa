"""`POST /v1/indexes/{name}/crawl` + `GET /v1/jobs/{id}`: a site on loopback crawled into a served index."""

from __future__ import annotations

import functools
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import httpx

from ragsieve.service.auth.keys import KeyRing
from tests.support.service_fakes import served

PAGES = {
    "index.html": "<html><head><title>Site</title></head><body><main><h1>Welcome</h1><p>Start here and read "
    "<a href='ferries.html'>the ferry timetable</a>.</p></main></body></html>",
    "ferries.html": "<html><head><title>Ferries</title></head><body><main><h1 id='times'>Ferry times</h1><p>The "
    "ferry to Skellig leaves at 07:45 from pier nine, every day except Sunday.</p></main></body></html>",
}


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_pages(tmp_path) -> ThreadingHTTPServer:
    """PAGES as a static site on loopback (the caller shuts it down)."""
    site = tmp_path / "site"
    site.mkdir()
    for name, html in PAGES.items():
        (site / name).write_text(html, encoding="utf-8")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd


def test_crawl_job_into_a_served_index(examples_index, tmp_path):
    httpd = serve_pages(tmp_path)
    start = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    keys = KeyRing({"sk-editor-0001": {"lumen:write"}, "sk-viewer-0001": {"lumen"}})
    # the crawl writes into a copy: the session's shared index stays as it was
    import shutil

    index = tmp_path / "lumen"
    shutil.copytree(examples_index, index)
    try:
        with served({"lumen": index}, keys=keys, data_dir=str(tmp_path / "data")) as svc:
            body = {"url": start, "max_pages": 5, "rate": 20}
            denied = httpx.post(
                f"{svc.base_url}/v1/indexes/lumen/crawl", json=body, headers={"Authorization": "Bearer sk-viewer-0001"}
            )
            assert denied.status_code == 403 and denied.json()["error"]["code"] == "read_only_key"
            auth = {"Authorization": "Bearer sk-editor-0001"}
            job = httpx.post(f"{svc.base_url}/v1/indexes/lumen/crawl", json=body, headers=auth)
            assert job.status_code == 202, job.text
            job_id = job.json()["id"]
            ends = time.monotonic() + 120
            while True:
                state = httpx.get(f"{svc.base_url}/v1/jobs/{job_id}", headers=auth).json()
                if state["status"] in ("completed", "failed") or time.monotonic() > ends:
                    break
                time.sleep(0.2)
            assert state["status"] == "completed", state
            assert state["result"]["docs_added"] == 2 and state["progress"]["pages_done"] >= 2
            hidden = httpx.get(f"{svc.base_url}/v1/jobs/{job_id}", headers={"Authorization": "Bearer wrong-key-1"})
            assert hidden.status_code == 401
            ends = time.monotonic() + 10
            while time.monotonic() < ends:
                hits = svc.registry.orchestrators["lumen"].retrieve("ferry to Skellig pier nine", top_k=3)
                if hits and hits[0].chunk.source.endswith("ferries.html"):
                    break
                time.sleep(0.2)
            assert hits[0].chunk.source.endswith("ferries.html")
    finally:
        httpd.shutdown()
