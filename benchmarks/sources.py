"""Sources benchmark -> benchmarks/results/sources.json: code search on CPython's standard library and a
website crawl of the Python documentation (Debian's python3.11-doc), on real data nobody here wrote.

    nice -n 5 .venv/bin/python benchmarks/sources.py [--modules ...] [--pages 120]

Code: for >= 10 stdlib modules, every public function or method with a docstring gives one query (the
docstring's first sentence) whose gold is that function; the modules are indexed *with docstrings blanked*
(line numbers kept), so the query text is not in the corpus. A hit is correct when it is a chunk of the gold
file overlapping the function's lines. Recall@1/5/10 and MRR for line chunking, syntax chunking (cAST) without
and with symbol headers (same embedding model, same hybrid retrieval), and the share of gold functions split
over several chunks.
Website: the docs are served on 127.0.0.1 (http.server) and crawled from a sitemap of the gold pages plus
other library pages; reported: pages/s, chunks per page, the share of boilerplate lines removed and of main
text kept (against the page's div.body), and retrieval (Recall@1/5/10, MRR by page) on 30 written questions.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_io  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
STDLIB = Path(sysconfig.get_paths()["stdlib"])
MODULES = ["json/__init__.py", "json/decoder.py", "json/encoder.py", "http/client.py", "http/cookiejar.py",
           "urllib/parse.py", "urllib/request.py", "argparse.py", "shutil.py", "pathlib.py", "textwrap.py",
           "csv.py", "tarfile.py", "zipfile.py", "email/message.py", "logging/__init__.py", "configparser.py",
           "difflib.py", "ftplib.py", "calendar.py"]
DOCS = Path("/usr/share/doc/python3.11/html")
QUESTIONS = [  # (question, gold page below the docs root)
    ("How do I turn a JSON string into a Python dict?", "library/json.html"),
    ("How can I read rows from a CSV file?", "library/csv.html"),
    ("How do I copy a whole directory tree?", "library/shutil.html"),
    ("How do I join path components in an object oriented way?", "library/pathlib.html"),
    ("How do I wrap a long paragraph of text to a fixed width?", "library/textwrap.html"),
    ("How do I extract all members of a tar archive?", "library/tarfile.html"),
    ("How do I read a member of a ZIP archive without extracting it?", "library/zipfile.html"),
    ("How do I define command line options and parse sys.argv?", "library/argparse.html"),
    ("How do I configure a rotating log file handler?", "library/logging.handlers.html"),
    ("How do I read an INI configuration file?", "library/configparser.html"),
    ("How do I compute the differences between two lists of lines?", "library/difflib.html"),
    ("How do I print a calendar for a month?", "library/calendar.html"),
    ("How do I split a URL into scheme, host and path?", "library/urllib.parse.html"),
    ("How do I send an HTTP request with the low level client?", "library/http.client.html"),
    ("How do I store cookies between HTTP requests?", "library/http.cookiejar.html"),
    ("How do I run an external command and capture its output?", "library/subprocess.html"),
    ("How do I generate cryptographically secure random tokens?", "library/secrets.html"),
    ("How do I compute a SHA-256 hash of some bytes?", "library/hashlib.html"),
    ("How do I measure execution time of small code snippets?", "library/timeit.html"),
    ("How do I create a temporary directory that is removed automatically?", "library/tempfile.html"),
    ("How do I count hashable items in an iterable?", "library/collections.html"),
    ("How do I cache the results of a function call?", "library/functools.html"),
    ("How do I iterate over all combinations of a list?", "library/itertools.html"),
    ("How do I match a regular expression at the start of a string?", "library/re.html"),
    ("How do I get the current date and time in UTC?", "library/datetime.html"),
    ("How do I serialize Python objects to bytes with pickle?", "library/pickle.html"),
    ("How do I run coroutines concurrently with asyncio?", "library/asyncio-task.html"),
    ("How do I create a thread pool to run functions in parallel?", "library/concurrent.futures.html"),
    ("How do I read environment variables?", "library/os.html"),
    ("How do I define an enumeration with named constants?", "library/enum.html"),
    ("How do I declare a class that stores data fields with generated __init__?", "library/dataclasses.html"),
    ("How do I write unit tests with assertions in classes?", "library/unittest.html"),
]


def first_sentence(doc: str) -> str:
    text = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return (m.group(1) if m else text)[:300]


def strip_docstrings(source: str) -> tuple[str, list[dict]]:
    """(source with every docstring's lines blanked, the public functions with a docstring)."""
    tree = ast.parse(source)
    lines = source.split("\n")
    functions = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                doc = body[0].value.value
                start, end = body[0].lineno, body[0].end_lineno
                indent = re.match(r"\s*", lines[start - 1]).group(0)
                for i in range(start - 1, end):
                    lines[i] = ""
                lines[start - 1] = indent + "pass" if len(body) == 1 else ""
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                    q = first_sentence(doc)
                    if len(q.split()) >= 4:
                        functions.append({"name": node.name, "start": node.lineno, "end": node.end_lineno,
                                          "query": q})
    return "\n".join(lines), functions


def code_corpus(work: Path, modules: list[str]) -> list[dict]:
    gold = []
    for rel in modules:
        src = STDLIB / rel
        text, functions = strip_docstrings(src.read_text(encoding="utf-8"))
        out = work / "stdlib" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        gold += [dict(f, file=f"stdlib/{rel}") for f in functions]
    return gold


def score(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {"n": n, **{f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 5, 10)},
            "mrr": sum(1 / r for r in ranks if r is not None) / n}


def code_benchmark(work: Path, modules: list[str], embedder) -> dict:
    from ragsieve import Config
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.tools.index.builder import IndexBuilder
    from ragsieve.tools.index.hybrid import HybridIndex

    gold = code_corpus(work, modules)
    out = {"modules": modules, "queries": len(gold), "configs": {}}
    for name, syntax, headers in (("lines", False, False), ("syntax", True, False), ("syntax+headers", True, True)):
        idx = work / f"idx-{name}"
        started = time.perf_counter()
        IndexBuilder(idx, embedder=embedder, progress=False, syntax_chunks=syntax,
                     symbol_headers=headers).build([work / "stdlib"])
        build_s = time.perf_counter() - started
        with HybridIndex.open(idx) as index:
            chunks = index.store.get_many(range(len(index)))
        spans: dict[str, list] = {}
        for c in chunks:
            spans.setdefault(c.doc_id, []).append(c)
        split = sum(1 for g in gold if sum(1 for c in spans.get(g["file"], [])
                                           if c.line_start <= g["end"] and c.line_end >= g["start"]) > 1)
        ranks = []
        with Orchestrator.open(idx, Config()) as orch:
            for g in gold:
                hits = orch.retrieve(g["query"], top_k=10)
                rank = next((i for i, h in enumerate(hits, start=1) if h.chunk.doc_id == g["file"]
                             and h.chunk.line_start <= g["end"] and h.chunk.line_end >= g["start"]), None)
                ranks.append(rank)
        out["configs"][name] = {**score(ranks), "chunks": len(chunks), "gold_split_share": split / len(gold),
                                "build_s": round(build_s, 1)}
        print(f"  code {name}: {json.dumps(out['configs'][name])}", flush=True)
    return out


@contextlib.contextmanager
def served(root: Path):
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(re.search(r"port (\d+)", proc.stdout.readline()).group(1))
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def boilerplate(html: str, extracted: str) -> tuple[int, int, int, int]:
    """(boilerplate lines, of them removed, main-text lines, of them kept); main text = div.body's text."""
    import lxml.html

    from ragsieve.tools.ingest.html_text import html_to_text

    def lines(text):
        return {" ".join(ln.split()) for ln in text.split("\n") if len(ln.split()) >= 3}

    root = lxml.html.fromstring(html)
    body = root.xpath("//div[contains(concat(' ', @class, ' '), ' body ')]")
    if not body:
        return 0, 0, 0, 0
    main = lines(html_to_text(lxml.html.tostring(body[0], encoding="unicode"))[1])
    everything = lines(html_to_text(html)[1])
    ours = " ".join(extracted.replace("`", "").replace("*", "").replace("\\", "").split())
    plate = everything - main
    removed = sum(1 for ln in plate if ln not in ours)
    kept = sum(1 for ln in main if ln.replace("`", "") in ours)
    return len(plate), removed, len(main), kept


def web_benchmark(work: Path, pages: int, embedder) -> dict:
    from ragsieve import Config
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.tools.index.builder import IndexBuilder
    from ragsieve.tools.index.hybrid import HybridIndex
    from ragsieve.tools.ingest.web_text import extract_page

    site = work / "site"
    site.mkdir()
    (site / "html").symlink_to(DOCS)
    library = sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "library").glob("*.html"))
    wanted = [g for _, g in QUESTIONS] + [p for p in library if p not in {g for _, g in QUESTIONS}]
    wanted = list(dict.fromkeys(wanted))[:max(pages, len(QUESTIONS))]
    with served(site) as origin:
        (site / "sitemap.xml").write_text('<?xml version="1.0"?><urlset>' + "".join(
            f"<url><loc>{origin}/html/{p}</loc></url>" for p in wanted) + "</urlset>", encoding="utf-8")
        builder = IndexBuilder(work / "idx-web", embedder=embedder, progress=False)
        started = time.perf_counter()
        crawler = builder._crawler(f"{origin}/sitemap.xml", {"max_pages": len(wanted), "rate": 100.0})
        crawl = crawler.run()
        crawl_s = time.perf_counter() - started
        stats = [0, 0, 0, 0]
        for page in crawl.pages:
            got = extract_page(page.html)
            for i, v in enumerate(boilerplate(page.html, got.text)):
                stats[i] += v
        report = builder.build([f"{origin}/sitemap.xml"], crawl={"max_pages": len(wanted), "rate": 100.0})
        with HybridIndex.open(work / "idx-web") as index:
            n_chunks = len(index)
            anchored = sum(1 for c in index.store.get_many(range(n_chunks)) if c.symbol.startswith("#"))
        ranks = []
        with Orchestrator.open(work / "idx-web", Config()) as orch:
            for question, gold in QUESTIONS:
                hits, seen = orch.retrieve(question, top_k=30), []
                for h in hits:
                    page = h.chunk.source.split("/html/", 1)[-1]
                    if page not in seen:
                        seen.append(page)
                ranks.append(seen.index(gold) + 1 if gold in seen[:10] else None)
    return {"pages_requested": len(wanted), "pages_crawled": len(crawl.pages), "crawl_s": round(crawl_s, 2),
            "pages_per_s": round(len(crawl.pages) / crawl_s, 2), "skipped": len(crawl.skipped),
            "chunks": n_chunks, "chunks_per_page": round(n_chunks / max(1, len(crawl.pages)), 2),
            "chunks_with_anchor_share": round(anchored / max(1, n_chunks), 3),
            "boilerplate_lines": stats[0], "boilerplate_removed_share": round(stats[1] / max(1, stats[0]), 3),
            "main_lines": stats[2], "main_kept_share": round(stats[3] / max(1, stats[2]), 3),
            "index_build": report.summary(), "retrieval_by_page": score(ranks), "questions": len(QUESTIONS)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--pages", type=int, default=120)
    ap.add_argument("--parts", default="code,web", help="code, web or both; a part run alone is merged into an "
                                                         "existing --out file (its own command recorded)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sources.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragsieve.tools.index.dense import Embedder

    parts = set(args.parts.split(","))
    embedder = Embedder("sentence-transformers/all-MiniLM-L6-v2")
    result = {}
    if parts != {"code", "web"} and args.out.is_file():
        result = json.loads(args.out.read_text(encoding="utf-8"))
    run = {**bench_io.header(), "stdlib": str(STDLIB)}
    work = Path(tempfile.mkdtemp(prefix="ragsieve-sources-"))
    try:
        if "code" in parts:
            result["code"] = {**code_benchmark(work, args.modules.split(","), embedder), "run": run}
        if "web" in parts:
            if not DOCS.is_dir():
                result["web"] = {"skipped": f"{DOCS} not found (apt-get install python3.11-doc)", "run": run}
            else:
                result["web"] = {**web_benchmark(work, args.pages, embedder), "run": run}
                print(f"  web: {json.dumps(result['web'])}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.update(run)
    return bench_io.write(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
