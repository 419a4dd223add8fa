"""`ragsieve index`: index files, folders and BEIR corpora."""

from __future__ import annotations

import argparse
import sys

from ragsieve.agent.errors import UsageError
from ragsieve.cli.common import add_common, add_device_option, for_terminal, load_config, range_checked
from ragsieve.cli.embedders import ray_stage, remote_embedder
from ragsieve.cli.progress import crawl_progress, log_progress, parse_rate
from ragsieve.tools.access.principals import AccessDefault
from ragsieve.tools.index.building.windows import LongCode
from ragsieve.tools.modes import Backend, BM25Engine, Encoder, FaissKind, choices


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("index", help="index files, folders and BEIR corpus.jsonl[.gz]")
    p.add_argument("paths", nargs="+", help="files, folders, or website URLs (a start page or a sitemap.xml)")
    add_common(p)
    p.add_argument("--chunk-tokens", type=int, help="chunk size in tokens (default from config: 200)")
    p.add_argument(
        "--embedding-model",
        "--embed-model",
        dest="embedding_model",
        help="the embedding model: a sentence-transformers name or folder, or the model's name at "
        "--embed-base-url (default from config: the packaged MiniLM)",
    )
    p.add_argument(
        "--embed-base-url",
        metavar="URL",
        help="embed with any OpenAI-compatible /v1/embeddings endpoint (key from env RAGSIEVE_EMBED_API_KEY)",
    )
    p.add_argument("--embed-dimensions", type=int, metavar="N", help="endpoint: ask for N dimensions (models that take it)")
    p.add_argument("--embed-batch-size", type=int, metavar="N", help="inputs per embedding request or batch")
    p.add_argument("--faiss", choices=choices(FaissKind), help="FAISS index kind")
    p.add_argument("--bm25", choices=choices(BM25Engine), help="BM25 engine")
    p.add_argument("--rebuild", action="store_true", help="rebuild from scratch (e.g. to change the embedding model)")
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="index only files matching this gitignore-style glob (repeat); overrides default excludes",
    )
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip files/folders matching (repeat)")
    p.add_argument(
        "--no-default-excludes",
        action="store_true",
        help="also index build output, minified/generated files, lock files and vendored folders",
    )
    p.add_argument(
        "--sync",
        action="store_true",
        help="make the index exactly these paths: documents indexed before from other paths are removed",
    )
    p.add_argument(
        "--base-url", metavar="URL", help="a saved website: cite pages as URL + their path below the folder given (+ #anchor)"
    )
    p.add_argument("--max-pages", type=int, default=200, help="website: pages to crawl at most (default 200)")
    p.add_argument("--same-domain", action="store_true", help="website: crawl the whole host, not only the start URL's folder")
    p.add_argument(
        "--rate",
        default=None,
        help="website: requests per second at most, e.g. 2/s or 30/m (default: 2/s, unpaced on a "
        "loopback site; robots.txt Crawl-delay always applies)",
    )
    p.add_argument("--no-syntax", action="store_true", help="cut code by lines instead of its syntax tree (cAST)")
    p.add_argument(
        "--long-code",
        choices=choices(LongCode),
        default=None,
        help="code chunks longer than the encoder's window: the mean of their windows' vectors (windows, "
        "new indexes) or the window the encoder reads first (head); default: as the index recorded",
    )
    p.add_argument(
        "--encoder",
        choices=choices(Encoder),
        help="how chunks are embedded (default: the encoder the index was built with, else torch-fp16 on "
        "a GPU, onnx-int8 on the CPU: the same model, int8 weights on ONNX Runtime, with the fast extra; "
        "torch without it)",
    )
    add_device_option(p)
    p.add_argument(
        "--embed-concurrency",
        type=int,
        metavar="N",
        help="embeddings endpoint: requests in flight at once (default from config: 1)",
    )
    p.add_argument(
        "--backend",
        choices=choices(Backend),
        help="serve the index from this engine (default from config: local); milvus also publishes",
    )
    p.add_argument(
        "--uri",
        help="milvus: a milvus-lite file, http://host:19530 or a Zilliz URI "
        "(default <index>/milvus.db; token from env RAGSIEVE_MILVUS_TOKEN)",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="embed on a Ray cluster (extra `ray`): auto (default) starts a local instance, else an "
        "address such as ray://head:10001 (docs/scaling.md)",
    )
    p.add_argument(
        "--ray-actors",
        type=int,
        default=None,
        metavar="N",
        help="Ray: encoder actors (default: one per GPU share, else one per CPU the tokenizers leave)",
    )
    p.add_argument(
        "--ray-batch-size",
        type=int,
        default=None,
        metavar="N",
        help="Ray: texts per actor call (default 64 on CPUs, 512 on GPUs)",
    )
    p.add_argument(
        "--ray-gpus-per-actor",
        type=float,
        default=None,
        metavar="F",
        help="Ray: GPUs each encoder actor reserves and encodes on (fractions share one: 0.5; "
        "default 1 when the cluster has GPUs, else 0)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--lock-wait",
        type=float,
        metavar="SECONDS",
        help="wait this long for another build of the same index (0: fail at once; default from config)",
    )
    p.add_argument(
        "--access-rules",
        metavar="FILE",
        help="who may read which document: gitignore-style globs and URL prefixes -> principals "
        "(docs/access.md); recorded beside the chunks, re-applied without re-embedding",
    )
    p.add_argument(
        "--access-default",
        choices=choices(AccessDefault),
        help="what documents no rule, front matter or attribute labels are (default: public, or as recorded)",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.ingest.selection import Selection

    config = load_config(args)
    ic = range_checked(
        config.index,
        chunk_tokens=args.chunk_tokens,
        lock_wait_s=args.lock_wait,
        embed_base_url=args.embed_base_url,
        embed_dimensions=args.embed_dimensions,
        embed_batch_size=args.embed_batch_size,
        device=args.device,
        embed_concurrency=args.embed_concurrency,
    )
    if (args.backend or ic.backend) == "milvus":  # a missing milvus extra is said before the build
        from ragsieve.tools.extras import Extra, require

        require(Extra.MILVUS, "pymilvus", "the milvus backend")
    remote = remote_embedder(ic, args)
    if remote is not None and args.device is not None:
        raise UsageError(
            "--device applies to a local embedding model; an embeddings endpoint runs where its server "
            "does (--embed-concurrency keeps it busy)"
        )
    if remote is None and ic.device == "auto":  # said at the start, not only in the last line
        from ragsieve.tools.index.embedders.device import resolve_device

        print(f"device auto: embedding on {resolve_device(ic.device)}", flush=True)  # stdout, as the summaries
    builder = IndexBuilder(
        args.index,
        lock_wait_s=ic.lock_wait_s,
        chunk_tokens=ic.chunk_tokens,
        embedding_model=args.embedding_model or ic.embedding_model,
        encoder=args.encoder or ic.encoder,
        embedder=remote,
        faiss_index=args.faiss or ic.faiss_index,
        bm25_engine=args.bm25 or ic.bm25_engine,
        batch_size=ic.embed_batch_size,
        sparse_percentile=ic.sparse_percentile,
        progress=False if args.no_progress else (True if sys.stderr.isatty() else log_progress()),
        syntax_chunks=not args.no_syntax,
        long_code=args.long_code,
        ray=ray_stage(args, ic.device),
        device=ic.device,
    )
    selection = Selection(include=args.include, exclude=args.exclude, default_excludes=not args.no_default_excludes)
    repos = [
        p
        for p in args.paths
        if p.startswith(("git@", "ssh://", "git://"))
        or (p.startswith(("http://", "https://")) and p.rstrip("/").endswith(".git"))
    ]
    if repos:
        raise UsageError(
            f"{repos[0]} is a git repository: clone it yourself (git clone {repos[0]}) and index the "
            "local folder; ragsieve never fetches repositories"
        )
    if args.base_url and not args.base_url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url must start with http:// or https://, got {args.base_url!r}")
    crawl = {"max_pages": args.max_pages, "same_domain": args.same_domain, "rate": parse_rate(args.rate)}
    if any(p.startswith(("http://", "https://")) for p in args.paths):
        crawl["progress"] = crawl_progress()
    from ragsieve.cli.access import access_summary, apply_rules

    apply_rules(args.index, args.access_rules, args.access_default)  # labels first: no chunk served unlabelled
    report = builder.build(
        args.paths, rebuild=args.rebuild, sync=args.sync, selection=selection, base_url=args.base_url, crawl=crawl
    )
    for crawled in getattr(builder, "crawl_reports", []):
        print(for_terminal(crawled.summary()))
    backend = args.backend or ic.backend
    if backend == "milvus":
        import os

        from ragsieve.tools.index.milvus.publish import publish

        pointer = publish(
            args.index,
            uri=args.uri or ic.uri,
            token=os.environ.get("RAGSIEVE_MILVUS_TOKEN"),
            index_type=ic.milvus_index,
            rebuild=args.rebuild,
            lock_wait_s=ic.lock_wait_s,
        )
        last = pointer["last_publish"]
        print(
            for_terminal(
                f"published {pointer['rows']} chunks of {pointer['generation']} to Milvus "
                f"{pointer['uri']} as {pointer['collection']} ({last['mode']}: {last['rows_written']} "
                f"rows written, {last['rows_retired']} retired)"
            )
        )
    if any(not p.startswith(("http://", "https://")) for p in args.paths):  # files were read (a crawl speaks of pages)
        print(for_terminal(report.load_summary))
    for path, reason in report.problems:
        print(for_terminal(f"  skipped {path}: {reason}"))
    excluded = report.excluded
    if excluded:
        shown = "; ".join(f"{n} {why}" for why, n in excluded.items())
        print(for_terminal(f"  excluded: {shown}"))
    print(report.summary())
    print(for_terminal(access_summary(args.index)))
    return 0
