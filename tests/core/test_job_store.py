"""`<data-dir>/jobs.sqlite`: job state any process reads, jobs of dead processes, one claimant per key."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from ragsieve.service.documents.job_store import JobStore


def _job(job_id: str, status: str) -> dict:
    return {
        "id": job_id,
        "object": "job",
        "kind": "crawl",
        "index": "docs",
        "status": status,
        "error": None,
        "progress": {"pages_done": 3},
        "params": {"url": "http://127.0.0.1/"},
    }


def _in_another_process(folder, body: str, *, wait: bool = True):
    code = textwrap.dedent(f"""
        import sys, time
        from ragsieve.service.documents.job_store import JobStore
        store = JobStore({str(folder)!r})
    """) + textwrap.dedent(body)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    if wait:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        return out
    return proc


def test_state_written_by_one_process_is_read_by_another(tmp_path):
    store = JobStore(tmp_path)
    store.put(_job("job_a", "completed"))
    out = _in_another_process(
        tmp_path,
        """
        job = store.get("job_a")
        print(job["status"], job["progress"]["pages_done"])
        store.put({**job, "id": "job_b", "status": "running"})
    """,
    )
    assert out.split() == ["completed", "3"]
    orphan = store.get("job_b")  # running in a process that has exited
    assert orphan["status"] == "failed" and "stopped before it finished" in orphan["error"]
    store.put(_job("job_c", "running"))
    assert store.get("job_c")["status"] == "running"  # this process is alive
    assert store.get("job_nope") is None


def test_a_claim_held_by_a_live_process_is_refused_then_freed_by_its_exit(tmp_path):
    store = JobStore(tmp_path)
    holder = _in_another_process(
        tmp_path,
        """
        print(store.claim("vs_1/file-1/1.0"), flush=True)
        sys.stdin.readline()
    """,
        wait=False,
    )
    try:
        assert holder.stdout.readline().strip() == "True"
        assert not store.claim("vs_1/file-1/1.0")  # the other worker ingests it
        assert store.claim("vs_1/file-2/1.0")
    finally:
        holder.communicate("\n", timeout=60)
    assert store.claim("vs_1/file-1/1.0")  # its process is gone: the work is ours now
    store.release("vs_1/file-1/1.0")
    out = _in_another_process(tmp_path, 'print(store.claim("vs_1/file-1/1.0"), store.claim("vs_1/file-2/1.0"))')
    assert out.split() == ["True", "False"]  # released, and still held by this (live) process


def test_only_the_newest_finished_jobs_are_kept(tmp_path):
    store = JobStore(tmp_path)
    for i in range(12):
        store.put(_job(f"job_{i:02d}", "completed"))
    store.put(_job("job_live", "running"))
    store.prune(keep=5)
    assert store.get("job_00") is None and store.get("job_11") is not None
    assert store.get("job_live")["status"] == "running"
