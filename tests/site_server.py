"""`python -m http.server` over a folder on 127.0.0.1, for crawler tests: bounded in time, stops by itself."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def serve_folder(folder: Path, max_seconds: float = 300.0):
    """Yield the base URL (`http://127.0.0.1:PORT/`) of a real http.server over `folder`."""
    proc = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                             "--directory", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    killer = threading.Timer(max_seconds, proc.kill)  # never outlives a hung test
    killer.start()
    try:
        line = proc.stdout.readline()
        port = re.search(r"port (\d+)", line)
        if port is None:
            raise RuntimeError(f"http.server did not start: {line!r}")
        yield f"http://127.0.0.1:{port.group(1)}/"
    finally:
        killer.cancel()
        proc.kill()
        proc.wait(timeout=10)
