"""Rewrite the figures in docs/*.md between `<!-- fig:NAME ARGS -->` and `<!-- /fig -->` from
benchmarks/results/*.json (`docs_markers`; figure functions in `docs_figures_quality`, `docs_figures_plan`,
`docs_figures_scaling`, `docs_figures_milvus` and `docs_figures_sources`), or check them:

    .venv/bin/python benchmarks/docs_figures.py           # rewrite every docs page that has markers
    .venv/bin/python benchmarks/docs_figures.py --check   # exit 1 when a page's figures are not current

`benchmarks/report.py` runs the rewrite too; `tests/test_docs_figures.py` runs the check. A figure whose file
is missing, unreadable or a pipeline result of an earlier `full` plan says so ("re-run it") instead of a number.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docs_figures_milvus  # noqa: E402,F401  (registers its figures)
import docs_figures_plan  # noqa: E402,F401  (registers its figures)
import docs_figures_quality  # noqa: E402,F401  (registers its figures)
import docs_figures_scaling  # noqa: E402,F401  (registers its figures)
import docs_figures_sources  # noqa: E402,F401  (registers its figures)
from docs_markers import OPEN, Results, fill  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def pages(docs: Path) -> list[Path]:
    """The docs pages that hold figure markers."""
    return [p for p in sorted(docs.glob("*.md")) if OPEN in p.read_text(encoding="utf-8")]


def current(page: Path, results: Path | Results) -> tuple[str, str]:
    """(the page's text, the text it should have)."""
    text = page.read_text(encoding="utf-8")
    return text, fill(text, results if isinstance(results, Results) else Results(results))


def rewrite(docs: Path, results: Path, check: bool = False) -> list[Path]:
    """The pages whose figures are not current; rewritten unless `check`. A ValueError for a bad marker."""
    stale = []
    shared = Results(results)
    for page in pages(docs):
        text, wanted = current(page, shared)
        if text != wanted:
            stale.append(page)
            if not check:
                page.write_text(wanted, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--docs", type=Path, default=REPO / "docs")
    ap.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when a page's figures are stale")
    args = ap.parse_args(argv)
    try:
        stale = rewrite(args.docs, args.results, check=args.check)
    except (OSError, ValueError) as exc:
        print(f"docs_figures: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for page in stale:
            print(f"{page} figures are stale: run `python benchmarks/docs_figures.py`", file=sys.stderr)
        return 1 if stale else 0
    print("\n".join(f"wrote {page}" for page in stale) or "docs figures are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
