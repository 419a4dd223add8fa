"""Live indexes: a running server follows new generations (its own uploads, `ragsieve index` in another process)
with no failed request, questions in flight finish on their generation, old generations go when unread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai

from ragsieve.testing import FakeChat
from ragsieve.tools.index.building.builder import IndexBuilder
from tests.support.service_fakes import served

ROOT = Path(__file__).resolve().parents[2]


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "gateway.md").write_text("# Gateway\n\nThe gateway listens on port 7412.\n", encoding="utf-8")
    (docs / "billing.md").write_text("# Billing\n\nInvoices are sent on the first day of the month.\n", encoding="utf-8")
    return docs


def _ask(base: str, question: str, index: str = "live") -> dict:
    r = httpx.post(base + "/v1/ask", json={"question": question, "index": index}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _gens(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.name.startswith("gen-")}


def test_question_in_flight_keeps_its_generation(tmp_path, embedder):
    docs, index = _docs(tmp_path), tmp_path / "index"
    builder = IndexBuilder(index, embedder=embedder, progress=False)
    builder.build([docs])
    release = threading.Event()

    def reply(messages):
        if "SLOW" in str(messages):
            release.wait(60)
        return "An answer [1]."

    with served({"live": index}, FakeChat(default=reply)) as svc:
        live = svc.registry.orchestrators["live"]
        first_gen = live.generation
        slow: dict = {}
        asking = threading.Thread(target=lambda: slow.update(_ask(svc.base_url, "SLOW: where is the quokka manual?")))
        asking.start()
        time.sleep(1.0)  # the slow question has retrieved from the first generation and waits in the model
        (docs / "quokka.md").write_text("# Quokka manual\n\nThe quokka manual lives in room 12.\n", encoding="utf-8")
        builder.build([docs])  # two publishes while it runs: the builder alone would delete the first one
        (docs / "quokka.md").write_text("# Quokka manual\n\nThe quokka manual lives in room 14.\n", encoding="utf-8")
        builder.build([docs])
        ends = time.monotonic() + 10
        while live.generation == first_gen and time.monotonic() < ends:
            time.sleep(0.1)
        assert live.generation != first_gen, "the server did not switch within 10 s"
        fresh = _ask(svc.base_url, "where is the quokka manual?")
        assert any(c.startswith("docs/quokka.md") for c in fresh["context"])
        assert first_gen in _gens(index), "a generation a question still reads was deleted"
        release.set()
        asking.join(60)
        assert slow and not any("quokka" in c for c in slow["context"])  # answered wholly from its generation
        ends = time.monotonic() + 10
        while first_gen in _gens(index) and time.monotonic() < ends:
            time.sleep(0.1)
        assert first_gen not in _gens(index), "the old generation outlived its last reader"


CLI_LOOP = """
import sys
from pathlib import Path
from ragsieve.cli.main import main
docs, index = Path(sys.argv[1]), sys.argv[2]
for i in range(20):
    (docs / f"cli-{i % 3}.md").write_text(f"# Revision {i}\\n\\nThe marker of revision {i} is clirev{i}.\\n")
    code = main(["index", str(docs), "--index", index, "--no-progress", "--lock-wait", "120"])
    if code != 0:
        sys.exit(code)
"""


def test_twenty_cli_publishes_and_twenty_uploads_under_load(tmp_path, embedder):
    docs, index = _docs(tmp_path), tmp_path / "index"
    IndexBuilder(index, embedder=embedder, progress=False).build([docs])
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    with served(
        {"live": index}, FakeChat(default="An answer [1]."), data_dir=str(tmp_path / "data"), max_concurrent=4, queue_limit=64
    ) as svc:
        client = openai.OpenAI(base_url=svc.base_url + "/v1", api_key="none", max_retries=0)
        store = client.vector_stores.create(name="uploads")
        failures: list[str] = []
        answered = [0]
        stop = threading.Event()

        def questions():
            while not stop.is_set():
                try:
                    _ask(svc.base_url, "which port does the gateway listen on?")
                    client.vector_stores.search(store.id, query="upload marker")
                    answered[0] += 1
                    stop.wait(0.25)  # a steady trickle, not a CPU hog on a 2-core machine
                except Exception as exc:  # counted: the test asserts there are none
                    failures.append(f"{type(exc).__name__}: {exc}")

        askers = [threading.Thread(target=questions) for _ in range(2)]
        for t in askers:
            t.start()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        cli = subprocess.Popen(
            [sys.executable, "-c", CLI_LOOP, str(docs), str(index)], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True
        )
        try:
            for i in range(20):
                path = uploads / f"upload-{i}.md"
                path.write_text(f"# Upload {i}\n\nThe upload marker of file {i} is upmark{i}.\n", encoding="utf-8")
                with open(path, "rb") as fh:
                    done = client.vector_stores.files.upload_and_poll(
                        vector_store_id=store.id, file=fh, poll_interval_ms=100, max_wait_seconds=120
                    )
                assert done.status == "completed", done.last_error
            _, err = cli.communicate(timeout=240)
            assert cli.returncode == 0, err[-2000:]
        finally:
            if cli.poll() is None:
                cli.kill()
            stop.set()
            for t in askers:
                t.join(60)
        assert not failures, failures[:3]
        assert answered[0] >= 5
        ends = time.monotonic() + 10
        while time.monotonic() < ends:  # within seconds of the last publish, new questions see it
            if any(c.startswith("docs/cli-1.md") for c in _ask(svc.base_url, "clirev19")["context"][:3]):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the last CLI publish was not served within 10 s")
        found = client.vector_stores.search(store.id, query="upmark19", max_num_results=1).data
        assert found[0].filename == "upload-19.md"
        assert client.vector_stores.retrieve(store.id).file_counts.completed == 20
        assert len(_gens(index)) <= 3  # unread generations were deleted
