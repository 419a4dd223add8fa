"""Helpers for the grounding and citation tests (a helper module, not a test file): a crawled page whose
`#lru` section is long enough for several chunks (one anchor, one citation label), and scripted models that
cite two of those chunks, or nothing."""

from __future__ import annotations

import re
from pathlib import Path

LRU = " ".join(
    f"The lru cache decorator keeps up to maxsize results of calls, detail number {i}, "
    f"and evicts the least recently used entry when it is full."
    for i in range(40)
)
PAGE = f"""<!doctype html><html><head><title>functools</title></head><body><main>
<h1 id="functools">functools: higher-order functions</h1>
<p>The functools module is for higher-order functions that act on or return other functions.</p>
<h2 id="lru">lru_cache(maxsize=128)</h2>
<p>{LRU}</p>
<h2 id="partial">partial(func, *args)</h2>
<p>Return a new partial object which when called behaves like func called with the positional arguments.</p>
</main></body></html>"""
QUESTION = "What does the lru cache decorator evict when it is full?"
UNCITED = "Python drops whichever item came first, like any FIFO queue would."  # shares no word with a passage


def write_site(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "functools.html").write_text(PAGE, encoding="utf-8")
    return root


def build_site_index(folder: Path, port: int, embedder) -> Path:
    from ragsieve.tools.index.building.builder import IndexBuilder

    IndexBuilder(folder, embedder=embedder, progress=False).build([f"http://127.0.0.1:{port}/functools.html"])
    return folder


def lru_numbers(prompt: str) -> list[str]:
    """The passage numbers of the `#lru` section's chunks in an answer prompt, in prompt order."""
    found = re.findall(r'SOURCE \[(\d+)\] from "([^"]+)"[^\n]*\n(.*?)\n\S+ END', prompt, re.S)
    return [n for n, _source, text in found if "least recently used" in text]


def citing_twice(messages) -> str:
    """The answer cites two chunks of the `#lru` section (they merge into one citation), apart and adjacent."""
    prompt = messages[-1]["content"]
    if "Draft answer:" in prompt:
        return '{"resolved": true, "reason": "scripted"}'
    lru = lru_numbers(prompt)
    a, b = (lru + lru)[:2]
    return (
        f"The decorator keeps up to maxsize results [{b}] and evicts the least recently used entry when it is full [{a}][{b}].  "
    )


def every_chunk_config():
    """`retrieval.sections = false`: the ranking keeps every chunk of the `#lru` section, so two of them reach
    the context and the answer's citations merge (by default one chunk per section is ranked)."""
    from ragsieve.agent.config import Config

    config = Config()
    config.retrieval = config.retrieval.model_copy(update={"sections": False})
    return config
