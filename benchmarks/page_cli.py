"""The command line the generated-page writers share (`readme_figures.py`, `access_doc.py`): rewrite one page's
generated block from benchmarks/results/, or with `--check` exit 1 when it is stale (2 on an unreadable input)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def page_main(argv: list[str] | None, *, name: str, flag: str, page: Path, description: str,
              current: Callable[[Path, Path], tuple[str, str]], errors: tuple[type[BaseException], ...] = (OSError, ValueError)
              ) -> int:
    """`current(page, results)` gives (the page's text, the text it should have)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument(flag, dest="page", type=Path, default=page)
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when the block is stale")
    args = ap.parse_args(argv)
    try:
        text, wanted = current(args.page, args.results)
    except errors as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if text != wanted:
            print(f"{args.page} figures are stale: run `python benchmarks/{name}.py`", file=sys.stderr)
            return 1
        return 0
    print(f"wrote {args.page}" if rewrite_page(args.page, text, wanted) else f"{args.page} is current")
    return 0


def rewrite_page(page: Path, text: str, wanted: str) -> bool:
    """Write `wanted` to `page` when it differs from the page's `text`; True when it wrote."""
    if text == wanted:
        return False
    page.write_text(wanted, encoding="utf-8")
    return True
