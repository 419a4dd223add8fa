"""The browser code `ragsieve serve` sends: vendored DOMPurify and marked plus our scripts, one file each.

`/ui/assistant.js` (the chat page) and `/widget.js` (the embeddable widget)
are concatenations made once per process, no build step: each vendored UMD
file runs in its own function scope with a local `module`, so the bundle adds
no global to a host page (the widget sits on foreign sites).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

STATIC = resources.files("ragsieve.service.web") / "static"
VENDOR = (("DOMPurify", "purify.min.js"), ("markedLib", "marked.umd.js"))
FILES = {
    "chat.html": "text/html; charset=utf-8",
    "chat.css": "text/css; charset=utf-8",
    "conversation.css": "text/css; charset=utf-8",
    "source.css": "text/css; charset=utf-8",
    "insights.css": "text/css; charset=utf-8",
}


def read(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


@lru_cache(maxsize=4)
def bundle(main: str) -> str:
    parts = [
        "/*! ragsieve assistant. Bundles DOMPurify (Apache-2.0 or MPL-2.0, (c) Cure53) and marked (MIT, (c) "
        "MarkedJS, Christopher Jeffrey); licences at /ui/licenses */",
        "(function () {",
    ]
    for name, file in VENDOR:
        parts.append(
            f"var {name} = (function () {{ var module = {{ exports: {{}} }}; var exports = module.exports;\n"
            f"{read('vendor/' + file)}\n;return module.exports; }}).call({{}});"
        )
    parts.append(f"var CHAT_CSS = {json.dumps(read('conversation.css'))};")  # the widget's shadow root needs it
    parts += [read("core.js"), read("trace.js"), read(main), "})();"]
    return "\n".join(parts)


@lru_cache(maxsize=1)
def licenses() -> str:
    return "\n\n".join(
        f"==== {name} ====\n\n{read('vendor/' + name)}"
        for name in ("README.md", "LICENSE-dompurify.txt", "LICENSE-dompurify-MPL.txt", "LICENSE-marked.txt")
    )
