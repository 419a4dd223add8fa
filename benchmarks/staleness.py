"""Whether a result is current: none of the files it measures changed since the commit it ran at.

What a result measures is its header's `measures` (`bench_io.header`), else its family's paths (`MEASURES`, for
files written before headers had it); `Git.changed` lists the measured files changed since a commit, leaving out
renames, Python files whose syntax tree is unchanged (a `ruff format` pass) and benchmark files whose change only
moves imports and paths. Staleness comes from the code, never from a hand-set commit. Retired results (`RETIRED`) keep their file and command.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
from functools import lru_cache
from pathlib import Path

from benchmarks.bench_io import REPO

PRODUCT = ["agent/", "tools/", "prompts/", "ragsieve/", "pyproject.toml"]

# What a result measures when its header does not say (files written before `measures`): (file patterns, "|"
# between them; family; paths), first match wins. A folder ends in "/"; the defaults of the code measured live in those folders
# (agent/config/, tools/index/...), so a changed default makes the result stale.
MEASURES: list[tuple[str, str, list[str]]] = [
    ("retrieval_*.json", "retrieval", ["benchmarks/retrieval/", "tools/", "agent/config/"]),
    ("eval_*_retrieval.json", "retrieval", ["ragsieve/eval/", "tools/", "agent/config/"]),
    ("cli-search.json", "retrieval", ["benchmarks/retrieval/", "ragsieve/cli/", "tools/", "agent/config/"]),
    ("pipeline-*.json|agentic*.json|judges-*.json", "pipeline", ["benchmarks/pipeline/", "agent/", "tools/", "prompts/"]),
    ("service*.json", "service", ["benchmarks/service/", "ragsieve/service/", "agent/", "tools/"]),
    ("tracing-*.json", "service", ["benchmarks/service/", "tools/tracing/", "agent/", "ragsieve/service/"]),
    ("sources*.json", "sources", ["benchmarks/sources/", "tools/ingest/", "tools/index/", "agent/"]),
    ("indexing-*.json", "gpu", ["benchmarks/gpu/", "ragsieve/cli/", "tools/index/", "tools/ingest/"]),
    ("scale*.json", "scale", ["benchmarks/scale/", "tools/index/", "tools/ingest/"]),
    ("install-size.json", "install", ["benchmarks/install/", "pyproject.toml"]),
    ("*", "other", ["benchmarks/", *PRODUCT]),
]
# Results whose benchmark left the tree, by family (one-off studies whose question is answered): their files stay,
# with the command and commit that made them (`git checkout <commit>` to re-run); the report calls them retired.
RETIRED: dict[str, str] = {
    "retrieval": "bm25-identifiers.json|retrieval_providers.json|retrieval_query_encoder.json",
    "pipeline": "combine-replay.json|fallback.json|reliability.json|filters-*.json|gmm_questions.json|rse-long*.json"
    "|followups*.json|agentic*.json",
    "service": "service_live.json|frontends_*.json",
    "sources": "sources-answers.json",
    "scale": "scale.json|scale_cpu_ray.json|scale_publish_milvus.json|sparse-ann.json",
    "access": "access*.json",
    "insights": "insights.json",
}
# A change to a benchmark file that only touches these lines (imports, paths from the module's own location, a
# path naming a benchmark module) does not change what it measures: the package moves of issue 59 leave results current.
MECHANICAL = re.compile(r"^\s*(from |import |sys\.path\.|$)|benchmarks[./]|Path\(__file__\)")


def _matches(name: str, patterns: str) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns.split("|"))


def retired(name: str) -> str | None:
    """The family of a retired result, None for a live one."""
    return next((fam for fam, patterns in RETIRED.items() if _matches(name, patterns)), None)


def family(name: str) -> tuple[str, list[str]]:
    fam, paths = next((fam, paths) for patterns, fam, paths in MEASURES if _matches(name, patterns))
    return retired(name) or fam, paths


class Git:
    """What changed in the repository's committed code since a commit (HEAD is the code the report judges)."""

    def __init__(self, repo: Path = REPO) -> None:
        self.repo = repo
        self._blobs: subprocess.Popen[bytes] | None = None  # one `git cat-file --batch` for every blob read

    def close(self) -> None:
        if self._blobs is not None:
            self._blobs.communicate()
            self._blobs = None

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=self.repo, capture_output=True, text=True, timeout=120)

    @lru_cache(maxsize=512)  # noqa: B019 (one Git per report run)
    def _entries(self, sha: str) -> tuple[tuple[str, ...], ...] | None:
        """(status, old blob, new blob, path[, new path]) of every file that differs between `sha` and HEAD; None:
        git knows no `sha`."""
        if not re.fullmatch(r"[0-9a-f]{7,40}", sha) or self._git("cat-file", "-e", f"{sha}^{{commit}}").returncode:
            return None
        out = self._git("diff", "-M", "--raw", "--no-abbrev", sha, "HEAD").stdout
        rows = (line.split("\t") for line in out.splitlines() if line.startswith(":"))
        return tuple((meta.split()[4], meta.split()[2], meta.split()[3], *paths) for meta, *paths in rows)

    @lru_cache(maxsize=8192)  # noqa: B019
    def _tree(self, blob: str) -> str | None:
        """The syntax tree of a Python blob (`ast.dump`), None when it does not parse."""
        if self._blobs is None:
            self._blobs = subprocess.Popen(
                ["git", "cat-file", "--batch"], cwd=self.repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        assert self._blobs.stdin and self._blobs.stdout
        self._blobs.stdin.write(blob.encode() + b"\n")
        self._blobs.stdin.flush()
        size = int(self._blobs.stdout.readline().split()[2])
        text = self._blobs.stdout.read(size + 1)[:size].decode("utf-8", "replace")
        try:
            return ast.dump(ast.parse(text))
        except SyntaxError:
            return None

    @lru_cache(maxsize=4096)  # noqa: B019
    def _mechanical(self, sha: str, paths: tuple[str, ...]) -> bool:
        """True when the benchmark file's change since `sha` only touches `MECHANICAL` lines."""
        diff = self._git("diff", "-M", "--unified=0", sha, "HEAD", "--", *paths).stdout
        return not any(
            line[:1] in "+-" and not line.startswith(("+++ ", "--- ")) and not MECHANICAL.search(line[1:])
            for line in diff.splitlines()
        )

    def changed(self, commit: str, measures: list[str]) -> list[str] | None:
        """The measured files changed since `commit` ("+dirty" ignored), renames and reformatting without edits
        excepted; None when git does not know the commit."""
        sha = commit.split("+", 1)[0]
        entries = self._entries(sha)
        if entries is None:
            return None
        hits = []
        for status, old, new, *paths in entries:
            if status == "R100" or not any(_under(p, m) for p in paths for m in measures):
                continue
            if paths[-1].startswith("benchmarks/") and (
                paths[-1].endswith("/__init__.py") and status == "A" or status[0] in "MR" and self._mechanical(sha, tuple(paths))
            ):
                continue  # a package marker, or imports and paths only
            if status[0] in "MR" and paths[-1].endswith(".py") and self._tree(old) == self._tree(new) is not None:
                continue  # reformatted only (`ruff format`): the same syntax tree
            hits.append(paths[-1])
        return hits


def _under(path: str, measured: str) -> bool:
    return path == measured.rstrip("/") or (measured.endswith("/") and path.startswith(measured))
