"""Helpers for the chat page and widget tests (a helper module, not a test file): a small corpus with a code
file, a hostile document and a crawled web page; a static loopback site; the served app; the browser."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shutil
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ragsieve import Config
from ragsieve.agent.llm.client import LLM
from ragsieve.service.app import create_app
from ragsieve.service.indexes.registry import IndexRegistry
from ragsieve.service.server import ServiceThread
from ragsieve.service.settings import ServiceSettings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_MISSING = (
    "no chromium at /usr/bin/chromium: `sudo apt-get install chromium`, or `make test` as root "
    "(it installs it unless RAGSIEVE_INSTALL_CHROMIUM=0)"
)
PLAYWRIGHT_MISSING = "no playwright: pip install -e '.[browser-test]' (make test installs it)"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = '<img src=x onerror="window.__pwned=1">'
REWRITTEN = "How long does the old Lumen API key stay valid after it is rotated?"

GUIDE = """<!doctype html><html><head><title>Lumen web guide</title></head><body>
<nav><a href="other.html">Other</a></nav>
<main><h1>Lumen web guide</h1>
<h2 id="rotating-keys">Rotating keys from the dashboard</h2>
<p>Open Settings, then API keys, and press Rotate. The dashboard shows the new key once; copy it before closing
the dialog. Rotation from the dashboard and from the command line behave the same way.</p>
</main></body></html>"""


def write_corpus(folder: Path) -> Path:
    docs = folder / "docs"
    docs.mkdir(parents=True)
    (docs / "keys.md").write_text(
        "# API keys\n\nEvery Lumen workspace has API keys.\n\n## Rotating a key\n\n"
        "Run `lumen keys rotate` to rotate the workspace API key.\n"
        "The old key stays valid for 24 hours after rotation, then it is revoked.\n",
        encoding="utf-8",
    )
    (docs / "hostile.md").write_text(
        f"# Hostile page\n\nThis page carries an image tag: {HOSTILE} inside its text.\n"
        "It also says [click me](javascript:window.__pwned=2) to test links.\n",
        encoding="utf-8",
    )
    (docs / "client.py").write_text(
        '"""The Lumen client."""\n\n\nclass Client:\n    def rotate_key(self, workspace):\n'
        '        """Rotate the API key of a workspace."""\n'
        '        return self.post(f"/workspaces/{workspace}/keys/rotate")\n',
        encoding="utf-8",
    )
    billing = " ".join(f"Invoices for the billing period number {i} are issued on the first working day." for i in range(30))
    hooks = " ".join(f"Webhook endpoint {i} receives events signed with the workspace secret." for i in range(12))
    write_pdf(
        docs / "handbook.pdf",
        [
            billing,
            hooks + " Webhook retries: a failed delivery is retried five times with exponential backoff, then dropped. " + hooks,
        ],
    )
    return docs


def scripted_reply(messages) -> str:
    """The fake model: a rewrite for a follow-up, else an answer citing the passages by their sources."""
    prompt = messages[-1]["content"]
    if "stand-alone question for a search engine" in prompt:
        return REWRITTEN
    if "mapping an index to the chunk's text" in prompt:  # the judge: every chunk shown is relevant
        body = prompt.split("mapping an index to the chunk's text:\n", 1)[1].split("\n", 1)[0]
        return json.dumps({k: True for k in json.loads(body)})
    if "Draft answer:" in prompt:  # validation
        return json.dumps({"resolved": True, "reason": "the sources answer it (scripted)"})
    numbers = {}
    for n, source, text in re.findall(r'SOURCE \[(\d+)\] from "([^"]+)"[^\n]*\n(.*?)\n\S+ END', prompt, re.S):
        numbers.setdefault(Path(source).name if not source.startswith("http") else "web", n)
        if "retried five times" in text:
            numbers["retries"] = n
    question = prompt.rsplit("Question:", 1)[-1]
    if "webhook" in question.lower():
        return f"A failed delivery is retried five times with exponential backoff [{numbers.get('retries', 1)}]."
    if "hostile" in question.lower():
        return (
            f"The page shows {HOSTILE} and a [click me](javascript:window.__pwned=2) link "
            f"[{numbers.get('hostile.md', 1)}]. See also [the site](https://evil.example/steal)."
        )
    if "old" in question.lower():
        return f"The old key stays valid for **24 hours** after rotation [{numbers.get('keys.md', 1)}]."
    return (
        f"Run `lumen keys rotate` [{numbers.get('keys.md', 1)}]. The dashboard can rotate it too "
        f"[{numbers.get('web', 1)}], and the client has `rotate_key` [{numbers.get('client.py', 1)}]."
    )


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        return


@contextlib.contextmanager
def static_site(root: Path, lifetime_s: float = 300.0):
    """`root` served on 127.0.0.1 (a free port) for at most `lifetime_s`; yields the port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    stopper = threading.Timer(lifetime_s, httpd.shutdown)
    stopper.daemon = True
    stopper.start()
    try:
        yield httpd.server_address[1]
    finally:
        stopper.cancel()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@contextlib.contextmanager
def served_ui(
    indexes,
    chat,
    data_dir: Path,
    *,
    widget_keys=None,
    config: Config | None = None,
    lifetime_s: float = 300.0,
    llm=None,
    keys=None,
):
    registry = IndexRegistry(indexes, config or Config(), llm=llm or LLM(chat))
    settings = ServiceSettings(port=0, data_dir=str(data_dir))
    app = create_app(registry, settings, keys, preload_model=False, widget_keys=widget_keys)
    try:
        with ServiceThread(app, settings, lifetime_s=lifetime_s) as svc:
            yield svc
    finally:
        registry.close()


@contextlib.contextmanager
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, timeout=60_000)
        try:
            yield b
        finally:
            b.close()


def screenshots_dir(name: str) -> Path:
    """Screenshots are test artefacts under the temp folder, never in the repository."""
    folder = Path(tempfile.gettempdir()) / "ragsieve-ui-screenshots" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def write_pdf(path: Path, pages: list[str]) -> None:
    """A minimal text PDF (one Helvetica text block per page), written by hand: no PDF library writes text."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in pages:
        lines = [text[i : i + 90] for i in range(0, len(text), 90)]
        body = (
            "BT /F1 10 Tf 40 800 Td 12 TL "
            + " ".join("(" + ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") '" for ln in lines)
            + " ET"
        )
        objects.append(f"<< /Length {len(body)} >>\nstream\n{body}\nendstream")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents {len(objects)} 0 R "
            f"/Resources << /Font << /F1 3 0 R >> >> >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out, offsets = b"%PDF-1.4\n", []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{obj}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(out)
