"""Local one-document publish time in the incremental layout (issue 28 local rows; issue 25's upload path).

    nice -n 10 .venv/bin/python -m benchmarks.scale.local_publish --sizes 10000,100000

A corpus of N one-chunk synthetic documents (`_corpus`, hash vectors: the encoder is not what is
measured) plus one Markdown note is indexed once; then, alternately, the note is edited and given alone (the
path of `ragsieve index <file>` and of the documents API: the other documents are kept), or the whole corpus
file is given again with one document edited (then loading and hashing its N documents is part of the time).
Each change is timed end to end through `IndexBuilder.build` (layout, shared-store transaction, the delta
segment, nearest-neighbour update, manifest, fsync, switch), then the open of the new generation by a reader. The bytes
and store rows written by each publish come from the manifest (`io`). Timings are samples on a shared machine; each run
records the load average when it ended. The document's own embedding by the default encoder (MiniLM, `onnx-int8` when
ONNX Runtime is installed) is timed apart (`own_embedding`): the issue's target is "<= 2 s plus the document's own
embedding". Above `sparse.APPROXIMATE_ABOVE` rows the first build's nearest-neighbour pass is the IVF search
(`ragsieve.tools.index.sparse.ann`), whose centroids and cells the index keeps: a one-document change then searches only
the cells it probes (`ragsieve.tools.index.sparse.cells`); below it a change is exact against all rows. An index reused with
`--keep` that was written before the fingerprint could be updated in place, or before the IVF cells were kept, gets
one untimed migration publish first (`migration_publish_s`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_io import RESULTS, commit


class HashEmbedder:
    """Unit vectors from sha256 of the text (no model): for building big synthetic indexes."""

    name, dimension, encoder = "synthetic-hash-384", 384, "torch"

    def embed(self, texts, progress=False):
        out = (
            np.asarray([np.frombuffer(hashlib.sha256(t.encode()).digest() * 12, dtype=np.uint8) for t in texts], dtype=np.float32)
            - 127.5
        )
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _corpus(path: Path, n: int, edited: int | None = None) -> None:
    rng = np.random.default_rng(n)
    vocab = [f"w{i}" for i in range(20000)]
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            words = " ".join(vocab[w] for w in rng.zipf(1.3, 30) % len(vocab))
            if i == edited:
                words += " edited"
            fh.write(json.dumps({"_id": f"d{i}", "title": "", "text": words}) + "\n")


def one_size(n: int, work: Path, changes: int, keep: bool = False, whole_corpus_max: int | None = None) -> dict:
    from ragsieve.tools.index.building.builder import IndexBuilder
    from ragsieve.tools.index.local.index import HybridIndex

    folder = work / f"local-{n}"
    corpus = folder / "corpus" / "corpus.jsonl"
    note = folder / "notes" / "note.md"
    from ragsieve.tools.index.sparse.subset import APPROXIMATE_ABOVE

    row: dict = {
        "chunks": n + 1,
        "runs": [],
        "first_build_nearest_neighbours": "ivf" if n + 1 > APPROXIMATE_ABOVE else "exact",
        "change_nearest_neighbours": "ivf: the probed cells kept with the index"
        if n + 1 > APPROXIMATE_ABOVE
        else "exact against all rows",
    }
    if not (folder / "index" / "CURRENT").is_file() or not keep:  # --keep reuses an index built before
        shutil.rmtree(folder, ignore_errors=True)
        corpus.parent.mkdir(parents=True)
        _corpus(corpus, n)
        note.parent.mkdir()
        note.write_text("# Note\n\nThe release marker is m0.\n", encoding="utf-8")
        t0 = time.perf_counter()
        IndexBuilder(folder / "index", embedder=HashEmbedder(), progress=False).build([corpus, note])
        row["initial_build_s"] = round(time.perf_counter() - t0, 1)
    else:
        row["reused_index"] = True
        live = folder / "index" / (folder / "index" / "CURRENT").read_text().strip() / "manifest.json"
        manifest = json.loads(live.read_text())
        base = live.parent / "segments" / manifest.get("segments", ["-"])[0]
        no_cells = n + 1 > APPROXIMATE_ABOVE and not (base / "centroids.npy").is_file()
        if "corpus_fingerprint_kind" not in manifest or no_cells:  # written by an older build: migrate once
            note.write_text("# Note\n\nThe release marker is migrated.\n", encoding="utf-8")
            t0 = time.perf_counter()
            IndexBuilder(folder / "index", embedder=HashEmbedder(), progress=False).build([note])
            row["migration_publish_s"] = round(time.perf_counter() - t0, 1)
    whole = whole_corpus_max is None or n <= whole_corpus_max
    if not whole:
        row["whole_corpus_runs"] = f"skipped above {whole_corpus_max} chunks (--whole-corpus-max): they time loading N documents"
    for k in range(2 * changes):
        if k % 2 == 1 and not whole:
            continue
        # even k: one file given (`ragsieve index notes/note.md`, the documents API): the others are kept;
        # odd k: the whole corpus file given again with one document edited (its N documents loaded and hashed)
        one_file = k % 2 == 0
        if one_file:
            # unique per run: a note equal to the indexed one (a reused index) would publish nothing
            note.write_text(f"# Note\n\nThe release marker is m{k + 1}-{time.time_ns()}.\n", encoding="utf-8")
        else:
            _corpus(corpus, n, edited=n // 2 if k % 4 == 1 else None)
        t0 = time.perf_counter()
        report = IndexBuilder(folder / "index", embedder=HashEmbedder(), progress=False).build([note] if one_file else [corpus])
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with HybridIndex.open(folder / "index", embedder=HashEmbedder()) as index:
            index.bm25.search("edited w1", 3)
        open_s = time.perf_counter() - t0
        manifest = json.loads((folder / "index" / report.generation / "manifest.json").read_text())
        row["runs"].append(
            {
                "given": "one file" if one_file else "whole corpus",
                "publish_s": round(build_s, 3),
                "open_and_first_search_s": round(open_s, 3),
                "docs_updated": report.docs_updated,
                "chunks_embedded": report.chunks_embedded,
                **manifest["io"],
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    for given in ("one file", "whole corpus"):
        times = sorted(r["publish_s"] for r in row["runs"] if r["given"] == given)
        if times:
            row[f"publish_s_median_{given.replace(' ', '_')}"] = times[len(times) // 2]
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return row


def own_embedding(text: str, samples: int = 3) -> dict:
    """Seconds the default encoder takes to embed the edited note (warm: the model loaded first)."""
    try:
        from ragsieve.tools.index.embedders.device import default_encoder
        from ragsieve.tools.index.embedders.local_embedder import Embedder
        from ragsieve.tools.index.embedders.model_names import DEFAULT_MODEL

        encoder = default_encoder()
        t0 = time.perf_counter()
        embedder = Embedder(DEFAULT_MODEL, encoder=encoder)
        embedder.embed(["warm-up"])
        load_s = time.perf_counter() - t0
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            embedder.embed([text])
            times.append(round(time.perf_counter() - t0, 4))
        return {"model": DEFAULT_MODEL, "encoder": encoder, "load_s": round(load_s, 2), "embed_s": times}
    except Exception as exc:  # the model package is missing: reported, not guessed
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--changes", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-local-publish")
    ap.add_argument("--keep", action="store_true", help="keep the indexes in --work and reuse them next time")
    ap.add_argument("--whole-corpus-max", type=int, default=None, help="above this many chunks, time only the one-file changes")
    ap.add_argument("--out", type=Path, default=RESULTS / "scale-local-publish.json")
    ap.add_argument(
        "--append", action="store_true", help="keep the sizes of --out not run now (each size records its own command and commit)"
    )
    ap.add_argument("--no-embedding", action="store_true", help="do not time the default encoder")
    args = ap.parse_args(argv)
    command, head = "python -m " + " ".join(["benchmarks.scale.local_publish", *(argv or sys.argv[1:])]), commit()
    out = {"command": command, "commit": head, "load_average_at_start": list(os.getloadavg()), "sizes": []}
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.append and args.out.is_file():
        before = json.loads(args.out.read_text(encoding="utf-8"))
        out = before | {"sizes": [s for s in before.get("sizes", []) if s["chunks"] - 1 not in sizes]}
        out["command"] = f"{before.get('command')}; then {command}"
    if not args.no_embedding:
        out["own_embedding"] = own_embedding("# Note\n\nThe release marker is m1.\n")
    for n in sizes:
        out["sizes"].append(
            one_size(n, args.work, args.changes, args.keep, args.whole_corpus_max)
            | {"command": command, "commit": head, "load_average_at_start": list(os.getloadavg())}
        )
        out["sizes"].sort(key=lambda s: s["chunks"])
        print(json.dumps(out["sizes"][-1]), flush=True)
        out["load_average_at_end"] = list(os.getloadavg())
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
