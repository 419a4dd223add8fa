"""Keep benchmarks/results light; safe to re-run (a compacted folder is left as it is):

    python -m benchmarks.compact [--results benchmarks/results] [--dry-run]

- per-question detail written as plain JSON lines (`NAME.jsonl`) becomes `NAME.jsonl.gz` (`bench_io.write_rows`,
  the same rows, bytes fixed by the rows alone); the plain file is removed; when `NAME.jsonl.gz` already exists
  the plain file is skipped and named, never written over it;
- per-question rows a summary holds inline (`sets.<name>.rows`, every row with a `qid`) move to
  `NAME.questions.jsonl.gz` (each row gains `set`); the summary keeps `rows_file` and `rows_n` in their place;
- screenshots (`*.png`) are stored with a 256-colour palette when that is smaller (a browser screenshot of a page
  keeps what it shows: text, citation chips, colours).
Everything else in a summary JSON is left as it is: the report reads it, and its command reproduces the detail.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

from benchmarks.bench_io import RESULTS, read_rows, write_rows


def tracked_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def compact_rows(path: Path, dry_run: bool) -> tuple[Path, int]:
    """`path` (.jsonl) written as .jsonl.gz; (the new path, bytes saved)."""
    before = path.stat().st_size
    packed = path.with_name(path.name + ".gz")
    if packed.exists():  # e.g. a `--merge` run that did not read the packed rows: joining them is the benchmark's job
        raise ValueError(f"{packed.name} exists too; merge or remove one (nothing was overwritten)")
    if dry_run:
        return path.with_name(path.name + ".gz"), 0
    rows = read_rows(path)
    out = write_rows(rows, path)
    if read_rows(out) != rows:  # never lose detail: keep the plain file when the copy differs
        raise ValueError(f"{out}: the compressed rows differ from {path}")
    path.unlink()
    return out, before - out.stat().st_size


def split_rows(path: Path, dry_run: bool) -> int:
    """The inline per-question rows of summary `path` moved to NAME.questions.jsonl.gz; how many rows moved."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sets = data.get("sets") if isinstance(data, dict) else None
    moved = {
        name: block["rows"]
        for name, block in (sets.items() if isinstance(sets, dict) else [])
        if isinstance(block, dict)
        and isinstance(block.get("rows"), list)
        and block["rows"]
        and all(isinstance(r, dict) and "qid" in r for r in block["rows"])
    }
    if not moved:
        return 0
    out = path.with_name(path.name.removesuffix(".json") + ".questions.jsonl.gz")
    if out.exists():
        raise ValueError(f"{out.name} exists too; merge or remove one (nothing was overwritten)")
    rows = [{"set": name, **row} for name, block in moved.items() for row in block]
    if dry_run:
        return len(rows)
    if read_rows(write_rows(rows, out)) != rows:
        raise ValueError(f"{out}: the compressed rows differ from {path.name}'s")
    for name, block in moved.items():
        del sets[name]["rows"]
        sets[name].update(rows_file=out.name, rows_n=len(block))
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return len(rows)


def compact_png(path: Path, dry_run: bool) -> int:
    """Bytes saved by a palette copy of the screenshot (0 when it is not smaller, or Pillow is missing)."""
    try:
        from PIL import Image
    except ImportError:
        return 0
    with Image.open(path) as image:
        if image.mode == "P":
            return 0
        buffer = io.BytesIO()
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(buffer, "PNG", optimize=True)
    saved = path.stat().st_size - buffer.tell()
    if saved > 0 and not dry_run:
        path.write_bytes(buffer.getvalue())
    return max(saved, 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    args = ap.parse_args(argv)
    before, failed = tracked_bytes(args.results), 0
    for path in sorted(args.results.glob("*.jsonl")):
        try:
            out, saved = compact_rows(path, args.dry_run)
        except (OSError, ValueError) as exc:  # a bad file is named and skipped; the others go on
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{path.name} -> {out.name} ({saved:,} bytes saved)")
    for path in sorted(args.results.glob("*.json")):
        try:
            moved = split_rows(path, args.dry_run)
        except (OSError, ValueError) as exc:
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        if moved:
            print(f"{path.name}: {moved} inline rows -> {path.name.removesuffix('.json')}.questions.jsonl.gz")
    for path in sorted(args.results.glob("*.png")):
        try:
            saved = compact_png(path, args.dry_run)
        except OSError as exc:
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        if saved:
            print(f"{path.name}: palette ({saved:,} bytes saved)")
    print(
        f"{args.results}: {before:,} -> {tracked_bytes(args.results):,} bytes" + (f"; {failed} file(s) skipped" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
