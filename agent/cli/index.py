"""`ragsieve index`: index files, folders, BEIR corpora and websites (a start URL or a sitemap)."""
from __future__ import annotations

import argparse
import sys

from ragsieve.agent.cli.common import add_common, for_terminal, load_config, range_checked


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("index", help="index files, folders, BEIR corpus.jsonl[.gz] or a website URL")
    p.add_argument("paths", nargs="+", help="files, folders, or an http(s) start page / sitemap.xml")
    add_common(p)
    p.add_argument("--chunk-tokens", type=int, help="chunk size in tokens (default from config: 200)")
    p.add_argument("--embedding-model", help="sentence-transformers model name or path")
    p.add_argument("--faiss", choices=["flat", "hnsw"], help="FAISS index kind")
    p.add_argument("--bm25", choices=["bm25s", "rank_bm25"], help="BM25 engine")
    p.add_argument("--code-chunking", choices=["syntax", "lines"],
                   help="cut source code on syntax (tree-sitter, default) or on lines")
    p.add_argument("--no-symbol-headers", action="store_true",
                   help="do not title code chunks with their enclosing symbols")
    p.add_argument("--include", action="append", metavar="GLOB",
                   help="index only files matching this glob (relative to each folder; repeatable)")
    p.add_argument("--exclude", action="append", metavar="GLOB", help="skip files or folders matching this glob")
    p.add_argument("--no-default-excludes", action="store_true",
                   help="also index build output, minified, vendored, generated and lock files")
    p.add_argument("--base-url", metavar="URL",
                   help="local HTML folder: cite pages as URL + path + #anchor (a saved copy of a site)")
    p.add_argument("--max-pages", type=int, default=200, help="website: fetch at most this many pages (default 200)")
    p.add_argument("--same-domain", action="store_true",
                   help="website: follow links anywhere on the start page's host (default: below its folder)")
    p.add_argument("--rate", default="2/s", metavar="N/s",
                   help="website: at most N requests per second (default 2/s; robots.txt Crawl-delay may slow it)")
    p.add_argument("--sync", action="store_true",
                   help="also remove indexed documents under these paths that no longer exist")
    p.add_argument("--rebuild", action="store_true", help="rebuild from scratch (e.g. to change the embedding model)")
    p.add_argument("--no-progress", action="store_true", help="no progress output")
    p.add_argument("--lock-wait", type=float, metavar="SECONDS",
                   help="wait this long for another build of the same index (0: fail at once; default from config)")
    p.set_defaults(func=run)
    return p


def make_builder(args: argparse.Namespace, config, progress: bool):
    from ragsieve.tools.index.builder import IndexBuilder
    from ragsieve.agent.cli.progress import make_progress
    from ragsieve.tools.ingest.path_filter import PathFilter

    ic = range_checked(config.index, chunk_tokens=getattr(args, "chunk_tokens", None),
                       lock_wait_s=getattr(args, "lock_wait", None),
                       code_chunking=getattr(args, "code_chunking", None))
    path_filter = PathFilter(include=ic.include + (getattr(args, "include", None) or []),
                             exclude=ic.exclude + (getattr(args, "exclude", None) or []),
                             use_defaults=ic.default_excludes and not getattr(args, "no_default_excludes", False))
    return IndexBuilder(
        args.index,
        lock_wait_s=ic.lock_wait_s,
        chunk_tokens=ic.chunk_tokens,
        embedding_model=getattr(args, "embedding_model", None) or ic.embedding_model,
        faiss_index=getattr(args, "faiss", None) or ic.faiss_index,
        bm25_engine=getattr(args, "bm25", None) or ic.bm25_engine,
        batch_size=ic.embed_batch_size,
        sparse_percentile=ic.sparse_percentile,
        code_chunking=ic.code_chunking,
        symbol_headers=ic.symbol_headers and not getattr(args, "no_symbol_headers", False),
        path_filter=path_filter,
        progress=make_progress(progress),
        base_url=getattr(args, "base_url", None),
    )


def print_report(report) -> None:
    print(for_terminal(report.load_summary))
    for path, reason in report.problems:
        print(for_terminal(f"  skipped {path}: {reason}"))
    print(report.summary())


def parse_rate(text: str) -> float:
    """'2/s', '2' or '0.5/s' -> requests per second."""
    from ragsieve.agent.errors import UsageError

    value = str(text).strip().lower().removesuffix("/s")
    try:
        rate = float(value)
    except ValueError:
        rate = 0.0
    if not rate > 0:
        raise UsageError(f"invalid --rate {text!r}: give requests per second such as 2/s or 0.5/s")
    return rate


def run(args: argparse.Namespace) -> int:
    from ragsieve.agent.cli.progress import make_progress
    from ragsieve.agent.errors import UsageError
    from ragsieve.tools.ingest.urls import is_url

    config = load_config(args)
    progress = False if args.no_progress else ("bar" if sys.stderr.isatty() else "lines")
    builder = make_builder(args, config, progress)
    repos = [p for p in args.paths if p.endswith(".git") or p.startswith(("git@", "ssh://"))]
    if repos:
        raise UsageError(f"{repos[0]} looks like a git repository: clone it first (git clone {repos[0]}) and index "
                         "the local folder; ragsieve reads no remote repositories")
    urls = [p for p in args.paths if is_url(p)]
    files = [p for p in args.paths if not is_url(p)]
    if urls and (args.sync or args.rebuild or args.base_url):
        raise UsageError("--sync, --rebuild and --base-url apply to files and folders; a re-crawl already removes "
                         "pages that disappeared")
    if files:
        print_report(builder.build(files, rebuild=args.rebuild, sync=args.sync))
    for url in urls:
        from ragsieve.tools.ingest.web import crawl_and_index

        callback = make_progress(progress)
        result, report = crawl_and_index(builder, url, max_pages=args.max_pages, same_domain=args.same_domain,
                                         rate=parse_rate(args.rate),
                                         progress=callback if callable(callback) else None)
        print(for_terminal(result.summary()))
        for skipped, reason in result.skipped[:20]:
            print(for_terminal(f"  skipped {skipped}: {reason}"))
        if len(result.skipped) > 20:
            print(f"  ... and {len(result.skipped) - 20} more skipped")
        print(report.summary() if report is not None else "index unchanged")
    return 0
