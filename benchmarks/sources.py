"""Code and website sources on real material nobody here wrote -> benchmarks/results/sources.json.

    nice -n 10 .venv/bin/python benchmarks/sources.py [--modules N] [--max-queries N] [--web-extra-pages N]

Code: CPython standard-library modules of this interpreter, indexed with their
docstrings replaced by `pass` (so a query's words are not in the corpus). The
queries are the first sentence of each public function's or method's
docstring; the gold is that function's line span in the stripped file. A hit
counts when a retrieved chunk of the gold file overlaps the gold span.
Recall@1/5/10 and MRR@10 over the same hybrid retriever (BM25 + MiniLM,
weighted fusion) for line chunking, syntax chunking (cAST) without symbol
headers and syntax chunking with them; plus the share of gold functions that
cover more than one chunk.

Website: Debian's python3.11-doc HTML served by `python -m http.server` on
127.0.0.1 and crawled through a sitemap of the gold pages (+ linked pages up
to --web-extra-pages): pages/s of the crawl, chunks per page, the share of
boilerplate lines removed (lines of the whole page text that are not in the
page's `div.body`, the Sphinx main block) and the share of `div.body` lines
kept, and page-level retrieval (Recall@1/5/10, MRR@10) on 35 questions
written for this benchmark, each with its gold page. No LLM is used.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import re
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
STDLIB = Path(os.path.dirname(os.__file__))
PYDOC = Path("/usr/share/doc/python3.11/html")
MODULES = ["http/client.py", "calendar.py", "logging/__init__.py", "pathlib.py", "mailbox.py", "ftplib.py",
           "imaplib.py", "threading.py", "smtplib.py", "ipaddress.py", "statistics.py", "shlex.py",
           "email/utils.py", "poplib.py"]  # 14 modules rich in documented public functions
QUESTIONS = [  # (question, gold page under library/)
    ("How do I serialize a Python object to a JSON formatted string?", "json"),
    ("How can I read rows of a comma-separated values file as dictionaries?", "csv"),
    ("How do I split a string using shell-like syntax that respects quotes?", "shlex"),
    ("How can I wrap a long paragraph of text to a given width?", "textwrap"),
    ("How do I get the n smallest elements from a list with a heap?", "heapq"),
    ("How do I insert into a sorted list while keeping it sorted?", "bisect"),
    ("How do I find all path names matching a pattern like *.txt?", "glob"),
    ("How do I test whether a filename matches a Unix shell-style wildcard?", "fnmatch"),
    ("How do I create a temporary directory that is removed automatically?", "tempfile"),
    ("How do I copy an entire directory tree recursively?", "shutil"),
    ("How do I generate a cryptographically secure random token for a password reset URL?", "secrets"),
    ("How do I compute the SHA-256 digest of some bytes?", "hashlib"),
    ("How do I verify a message authentication code with a shared key?", "hmac"),
    ("How do I encode binary data to base64 text?", "base64"),
    ("How do I generate a random universally unique identifier?", "uuid"),
    ("How do I extract all members of a zip archive?", "zipfile"),
    ("How do I compress a file with gzip?", "gzip"),
    ("How do I compute the median and standard deviation of a list of numbers?", "statistics"),
    ("How do I shuffle a list or pick a random sample from it?", "random"),
    ("How do I compute the greatest common divisor or the square root of an integer?", "math"),
    ("How do I represent exact rational numbers like one third?", "fractions"),
    ("How do I define a set of symbolic named constants with unique values?", "enum"),
    ("How do I generate __init__ and __repr__ automatically for a class with fields?", "dataclasses"),
    ("How do I cache the results of an expensive function call?", "functools"),
    ("How do I iterate over all permutations or the cartesian product of iterables?", "itertools"),
    ("What function corresponds to the + operator for use with map or reduce?", "operator"),
    ("How do I join path components and read a file with object-oriented paths?", "pathlib"),
    ("How do I print a text calendar for a month?", "calendar"),
    ("How do I substitute $-placeholders in a template string?", "string"),
    ("How do I compute the differences between two sequences of lines as a unified diff?", "difflib"),
    ("How do I pretty-print a nested data structure?", "pprint"),
    ("How do I make a deep copy of a compound object?", "copy"),
    ("How do I write a context manager with a generator and a decorator?", "contextlib"),
    ("How do I define an abstract base class with abstract methods?", "abc"),
    ("How do I register a function to run when the interpreter exits?", "atexit"),
    ("How do I measure the execution time of small code snippets?", "timeit"),
    ("How do I split a URL into scheme, netloc, path and query components?", "urllib.parse"),
    ("How do I run a thread-safe FIFO queue between producer and consumer threads?", "queue"),
]


# -- code ----------------------------------------------------------------------------------------
def strip_docstrings(source: str) -> str:
    """The module with every docstring statement replaced by `pass` on its first line (lines removed)."""
    tree = ast.parse(source)
    lines = source.split("\n")
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                spans.append((first.lineno, first.end_lineno, first.col_offset))
    for start, end, col in sorted(spans, reverse=True):
        lines[start - 1:end] = [" " * col + "pass"]
    return "\n".join(lines)


def first_sentence(doc: str) -> str:
    text = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return (m.group(1) if m else text).strip()


def code_queries(modules: list[str]) -> tuple[list[dict], dict[str, str]]:
    """Queries with gold (file, start, end) in the stripped files, and the stripped file texts."""
    queries, texts = [], {}
    for rel in modules:
        source = (STDLIB / rel).read_text(encoding="utf-8")
        stripped = strip_docstrings(source)
        texts[rel] = stripped
        original = {}
        for node, qual in _functions(ast.parse(source)):
            doc = ast.get_docstring(node)
            if doc and not node.name.startswith("_"):
                original[qual] = first_sentence(doc)
        for node, qual in _functions(ast.parse(stripped)):
            sentence = original.get(qual)
            if sentence and len(sentence.split()) >= 4:
                queries.append({"query": sentence, "file": rel, "start": node.lineno, "end": node.end_lineno,
                                "symbol": qual})
    return queries, texts


def _functions(tree, prefix=""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node, prefix + node.name
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")


def rank_metrics(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {f"recall@{k}": round(sum(1 for r in ranks if r is not None and r <= k) / n, 4) for k in (1, 5, 10)} | \
        {"mrr@10": round(sum(1.0 / r for r in ranks if r is not None and r <= 10) / n, 4), "n": n}


def code_benchmark(args, embedder) -> dict:
    from ragsieve.tools.index.builder import IndexBuilder
    from ragsieve.tools.index.hybrid import HybridIndex
    from ragsieve.tools.index.retriever import HybridRetriever

    modules = MODULES[:args.modules]
    queries, texts = code_queries(modules)
    queries = queries[:args.max_queries]
    work = Path(tempfile.mkdtemp(prefix="ragsieve-sources-"))
    corpus = work / "stdlib"
    for rel, text in texts.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text, encoding="utf-8")
    out = {"modules": modules, "queries": len(queries), "variants": {}}
    for name, options in (("lines", {"code_chunking": "lines"}),
                          ("syntax_no_headers", {"code_chunking": "syntax", "symbol_headers": False}),
                          ("syntax_headers", {"code_chunking": "syntax", "symbol_headers": True})):
        t0 = time.perf_counter()
        report = IndexBuilder(work / f"index-{name}", embedder=embedder, progress=False, **options).build([corpus])
        build_s = time.perf_counter() - t0
        with HybridIndex.open(work / f"index-{name}", embedder=embedder) as index:
            chunks = [index.store.get(r) for r in range(len(index))]
            by_file: dict[str, list] = {}
            for c in chunks:
                by_file.setdefault(c.doc_id.split("/", 1)[1], []).append(c)
            split = sum(1 for q in queries if sum(1 for c in by_file[q["file"]]
                                                  if c.line_start <= q["end"] and c.line_end >= q["start"]) > 1)
            retriever = HybridRetriever(index, fusion="weighted")
            ranks = []
            for q in queries:
                hits = retriever.run(q["query"], top_k=10)
                ranks.append(next((h.rank for h in hits if h.chunk.doc_id.split("/", 1)[1] == q["file"]
                                   and h.chunk.line_start <= q["end"] and h.chunk.line_end >= q["start"]), None))
        out["variants"][name] = rank_metrics(ranks) | {
            "chunks": report.chunks_total, "gold_split_share": round(split / len(queries), 4),
            "build_s": round(build_s, 1)}
        print(name, out["variants"][name], flush=True)
    return out


# -- website -------------------------------------------------------------------------------------
class _BodyText(HTMLParser):
    """Text lines of the whole page and of its `div.body` (the Sphinx main block)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.body_depth, self.all, self.body, self.skip = 0, None, [], [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        if tag in ("br", "img", "meta", "link", "hr", "input"):
            return
        self.depth += 1
        if self.body_depth is None and tag == "div" and "body" in (dict(attrs).get("class") or "").split():
            self.body_depth = self.depth

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skip = max(0, self.skip - 1)
        if tag in ("br", "img", "meta", "link", "hr", "input"):
            return
        if self.body_depth is not None and self.depth == self.body_depth:
            self.body_depth = -1
        self.depth -= 1

    def handle_data(self, data):
        if self.skip:
            return
        for line in data.split("\n"):
            key = norm(line)
            if len(key) >= 3:
                self.all.append(key)
                if self.body_depth is not None and self.body_depth > 0:
                    self.body.append(key)


def norm(line: str) -> str:
    return " ".join(re.sub(r"[`*#\u00b6]", "", line).split()).casefold()


def boilerplate_shares(html: str, extracted: str) -> tuple[int, int, int, int]:
    """(boilerplate lines, of which removed, main lines, of which kept), by normalised line text."""
    parser = _BodyText()
    parser.feed(html)
    body = set(parser.body)
    boiler = {line for line in parser.all if line not in body}
    text = norm(extracted.replace("\n", " "))
    removed = sum(1 for line in boiler if line not in text)
    kept = sum(1 for line in body if line in text)
    return len(boiler), removed, len(body), kept


def web_benchmark(args, embedder) -> dict:
    from site_server import serve_folder
    from ragsieve.tools.index.builder import IndexBuilder
    from ragsieve.tools.index.hybrid import HybridIndex
    from ragsieve.tools.index.retriever import HybridRetriever
    from ragsieve.tools.ingest.crawl import Crawler
    from ragsieve.tools.ingest.web import page_document

    work = Path(tempfile.mkdtemp(prefix="ragsieve-web-"))
    (work / "html").symlink_to(PYDOC)
    gold = sorted({g for _, g in QUESTIONS})
    urls = "".join(f"<url><loc>/html/library/{g}.html</loc></url>" for g in gold)
    (work / "sitemap.xml").write_text(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>')
    with serve_folder(work, max_seconds=1800) as base:
        crawler = Crawler(base + "sitemap.xml", max_pages=len(gold) + args.web_extra_pages, rate=args.rate)
        result = crawler.run()
    pages = result.pages
    docs = [d for d in (page_document(p) for p in pages) if d is not None]
    boiler = [boilerplate_shares(p.html, d.text) for p, d in zip(pages, docs)]
    t0 = time.perf_counter()
    report = IndexBuilder(work / "index", embedder=embedder, progress=False).build([], documents=docs)
    build_s = time.perf_counter() - t0
    ranks, anchored = [], 0
    with HybridIndex.open(work / "index", embedder=embedder) as index:
        retriever = HybridRetriever(index, fusion="weighted")
        for question, page in QUESTIONS:
            hits = retriever.run(question, top_k=50)
            pages_ranked = list(dict.fromkeys(h.chunk.doc_id for h in hits))
            target = f"{base}html/library/{page}.html"
            ranks.append(pages_ranked.index(target) + 1 if target in pages_ranked else None)
        chunks = [index.store.get(r) for r in range(len(index))]
        anchored = sum(1 for c in chunks if "#" in c.source)
    return {
        "pages": len(pages), "crawl": {"requests": result.requests, "seconds": round(result.seconds, 2),
                                       "pages_per_s": round(len(pages) / result.seconds, 2), "rate_limit": args.rate,
                                       "skipped": len(result.skipped)},
        "chunks": report.chunks_total, "chunks_per_page": round(report.chunks_total / max(1, len(docs)), 2),
        "chunks_citing_an_anchor": round(anchored / max(1, report.chunks_total), 4),
        "boilerplate_lines": sum(b[0] for b in boiler),
        "boilerplate_removed_share": round(sum(b[1] for b in boiler) / max(1, sum(b[0] for b in boiler)), 4),
        "main_lines": sum(b[2] for b in boiler),
        "main_kept_share": round(sum(b[3] for b in boiler) / max(1, sum(b[2] for b in boiler)), 4),
        "index_build_s": round(build_s, 1),
        "retrieval_pages": rank_metrics(ranks),
        "questions_missed@10": [q for (q, _), r in zip(QUESTIONS, ranks) if r is None or r > 10],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", type=int, default=len(MODULES))
    ap.add_argument("--max-queries", type=int, default=400)
    ap.add_argument("--web-extra-pages", type=int, default=20)
    ap.add_argument("--rate", type=float, default=50.0, help="crawl requests/s (our own loopback server)")
    ap.add_argument("--skip-web", action="store_true")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sources.json")
    args = ap.parse_args(argv)
    from ragsieve.tools.index.dense import Embedder

    embedder = Embedder()
    started = time.time()
    out = {"command": " ".join([sys.executable, *sys.argv]), "load_average": os.getloadavg(),
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
           "embedding_model": embedder.name, "retriever": "hybrid weighted (BM25 + dense), 200-token chunks"}
    out["code"] = code_benchmark(args, embedder)
    if not args.skip_web and PYDOC.is_dir():
        out["website"] = web_benchmark(args, embedder)
    elif not args.skip_web:
        out["website"] = "not run: Debian python3.11-doc is not installed (apt-get install python3.11-doc)"
    out["elapsed_s"] = round(time.time() - started, 1)
    out["load_average_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2), encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k in ("code", "website")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
