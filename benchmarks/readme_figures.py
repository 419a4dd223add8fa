"""Rewrite README.md's headline figures table from benchmarks/results/*.json (`report_figures`), or check it:

    .venv/bin/python benchmarks/readme_figures.py           # rewrite the block between the figures markers
    .venv/bin/python benchmarks/readme_figures.py --check   # exit 1 when README.md's block is not current

`benchmarks/report.py` puts the same table at the top of REPORT.md; `tests/test_readme_figures.py` runs the check.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_figures import readme_block, replace_block  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def current(readme: Path, results: Path) -> tuple[str, str]:
    """(README's text, the text it should have)."""
    text = readme.read_text(encoding="utf-8")
    return text, replace_block(text, readme_block(results))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when the block is stale")
    args = ap.parse_args(argv)
    try:
        text, wanted = current(args.readme, args.results)
    except (OSError, ValueError) as exc:
        print(f"readme_figures: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if text != wanted:
            print(f"{args.readme} figures are stale: run `python benchmarks/readme_figures.py`", file=sys.stderr)
            return 1
        return 0
    if text != wanted:
        args.readme.write_text(wanted, encoding="utf-8")
        print(f"wrote {args.readme}")
    else:
        print(f"{args.readme} is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
