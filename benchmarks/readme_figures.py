"""Rewrite README.md's headline figures table from benchmarks/results/*.json (`report_figures`), or check it:

    .venv/bin/python benchmarks/readme_figures.py           # rewrite the block between the figures markers
    .venv/bin/python benchmarks/readme_figures.py --check   # exit 1 when README.md's block is not current

`benchmarks/report.py` puts the same table at the top of REPORT.md; `tests/test_readme_figures.py` runs the check.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from page_cli import page_main  # noqa: E402
from report_figures import readme_block, replace_block  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def current(readme: Path, results: Path) -> tuple[str, str]:
    """(README's text, the text it should have)."""
    text = readme.read_text(encoding="utf-8")
    return text, replace_block(text, readme_block(results))


def main(argv: list[str] | None = None) -> int:
    return page_main(argv, name="readme_figures", flag="--readme", page=REPO / "README.md",
                     description=(__doc__ or "").splitlines()[0], current=current)


if __name__ == "__main__":
    sys.exit(main())
