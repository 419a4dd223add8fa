"""The release test's fresh venv outside the repository (`Fresh`: pip, package list, the import walk) and
`ragsieve serve` run from it as a child process (`Server`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

TORCH = "torch==2.13.0"  # the CPU wheel (the pip constraints of this machine cap torch at a CPU build)
EXTRAS = "server,mcp"  # what the last stage installs
# the surfaces' and heavy parts' packages: never a requirement of the core install (they are extras)
SURFACE_PACKAGES = frozenset(
    {"fastapi", "uvicorn", "starlette", "mcp", "trafilatura", "matplotlib", "onnx", "onnxruntime", "python-multipart"}
    | {"prometheus-client", "pypdf", "python-docx", "tree-sitter-language-pack", "xllamacpp", "pymilvus"}
    | {"milvus-lite", "ray", "lxml", "lxml-html-clean"}
)
WALK = """
import importlib, importlib.util, json, pkgutil, ragsieve
imported, failed = [], {}
def onerror(name):
    failed.setdefault(name, "walk_packages could not import the package")
for info in pkgutil.walk_packages(ragsieve.__path__, "ragsieve.", onerror=onerror):
    if info.name.endswith(".__main__"):  # a script (importing it runs the CLI): found here, run by `python -m`
        if importlib.util.find_spec(info.name) is None:
            failed[info.name] = "not found"
        else:
            imported.append(info.name)
        continue
    try:
        importlib.import_module(info.name)
        imported.append(info.name)
    except Exception as exc:
        failed[info.name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"file": ragsieve.__file__, "imported": imported, "failed": failed}))
"""


@dataclass
class Fresh:
    root: Path
    bin: Path
    env: dict[str, str]
    wheel: Path
    timings: dict[str, float] = field(default_factory=dict)
    core_packages: set[str] = field(default_factory=set)
    core_runs: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)
    core_walk: dict = field(default_factory=dict)

    def run(self, *args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(args), capture_output=True, text=True, cwd=cwd or self.root / "work", env=self.env, timeout=timeout
        )

    def pip(self, *args: str, step: str) -> None:
        started = time.monotonic()
        done = self.run(str(self.bin / "python"), "-m", "pip", "install", "--quiet", *args, timeout=900)
        self.timings[step] = round(time.monotonic() - started, 1)
        assert done.returncode == 0, done.stderr[-3000:]

    def packages(self) -> set[str]:
        listed = self.run(str(self.bin / "python"), "-m", "pip", "list", "--format", "json", timeout=120)
        assert listed.returncode == 0, listed.stderr
        return {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}

    def walk(self) -> dict:
        done = self.run(str(self.bin / "python"), "-c", WALK, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])


def clean_env(venv_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "VIRTUAL_ENV",
            "PYTHONPATH",
            "PYTHONHOME",
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "OPENAI_MODEL",
            "RAGSIEVE_BASE_URL",
            "RAGSIEVE_MODEL",
        )
    }
    env.update(
        {
            "PATH": f"{venv_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    return env


class Server:
    """`ragsieve serve` as a child process; its stderr is read by a thread, its address from the start line."""

    def __init__(self, fresh: Fresh, *args: str):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [str(fresh.bin / "ragsieve"), "serve", *args, "--port", "0"],
            cwd=fresh.root / "work",
            env=fresh.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def address(self, timeout_s: float = 300) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                match = re.search(r"serving .* at (http://127\.0\.0\.1:\d+)/v1", line)
                if match:
                    return match.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError("ragsieve serve did not start:\n" + "\n".join(self.lines[-40:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.reader.join(timeout=10)
