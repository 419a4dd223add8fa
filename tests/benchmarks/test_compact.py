"""benchmarks/compact.py: per-question JSON lines become .jsonl.gz with the same rows; a bad file is named and
kept; a second run changes nothing; screenshots get a palette only when it is smaller."""

from __future__ import annotations

import json

from benchmarks import compact
from benchmarks.bench_io import read_rows


def test_rows_are_compressed_once_without_loss_and_a_bad_file_is_kept(tmp_path, capsys):
    rows = [{"qid": str(i), "gold_recall": i / 10, "text": "a passage " * 20} for i in range(50)]
    (tmp_path / "run.questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "bad.questions.jsonl").write_text('{"qid": 1}\n{not json\n', encoding="utf-8")
    (tmp_path / "run.json").write_text('{"command": "c"}', encoding="utf-8")
    assert compact.main(["--results", str(tmp_path)]) == 1  # one file skipped
    err = capsys.readouterr().err
    assert "skipped bad.questions.jsonl" in err
    assert not (tmp_path / "run.questions.jsonl").exists()
    assert read_rows(tmp_path / "run.questions.jsonl.gz") == rows
    assert (tmp_path / "bad.questions.jsonl").exists() and (tmp_path / "run.json").read_text() == '{"command": "c"}'
    (tmp_path / "bad.questions.jsonl").unlink()
    packed = (tmp_path / "run.questions.jsonl.gz").read_bytes()
    assert compact.main(["--results", str(tmp_path)]) == 0
    assert (tmp_path / "run.questions.jsonl.gz").read_bytes() == packed  # nothing left to do


def test_a_screenshot_gets_a_palette_only_when_smaller(tmp_path):
    import random

    from PIL import Image

    rng = random.Random(0)  # noisy pixels: three bytes each in RGB, one in a palette copy
    image = Image.new("RGB", (200, 120))
    image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(200 * 120)])
    image.save(tmp_path / "shot.png")
    before = (tmp_path / "shot.png").stat().st_size
    assert compact.main(["--results", str(tmp_path), "--dry-run"]) == 0
    assert (tmp_path / "shot.png").stat().st_size == before
    assert compact.main(["--results", str(tmp_path)]) == 0
    with Image.open(tmp_path / "shot.png") as done:
        assert done.mode == "P" and done.size == (200, 120)
    assert (tmp_path / "shot.png").stat().st_size < before
    assert compact.compact_png(tmp_path / "shot.png", dry_run=False) == 0  # already a palette: left alone


def test_plain_rows_beside_packed_ones_are_skipped_never_written_over(tmp_path, capsys):
    from benchmarks.bench_io import write_rows

    write_rows([{"qid": "old"}], tmp_path / "run.questions.jsonl")
    (tmp_path / "run.questions.jsonl").write_text('{"qid": "new"}\n', encoding="utf-8")
    assert compact.main(["--results", str(tmp_path)]) == 1
    assert "run.questions.jsonl.gz exists too" in capsys.readouterr().err
    assert read_rows(tmp_path / "run.questions.jsonl.gz") == [{"qid": "old"}]
    assert (tmp_path / "run.questions.jsonl").exists()


def test_inline_rows_of_a_summary_move_beside_it_once(tmp_path):
    rows = [{"qid": str(i), "plan": "fast", "answer": "text " * 30} for i in range(40)]
    summary = {"command": "c", "sets": {"squad2": {"summary": {"n": 40}, "rows": rows}, "x": {"rows": [{"n": 1}]}}}
    (tmp_path / "run.json").write_text(json.dumps(summary), encoding="utf-8")
    assert compact.main(["--results", str(tmp_path), "--dry-run"]) == 0
    assert json.loads((tmp_path / "run.json").read_text()) == summary
    assert compact.main(["--results", str(tmp_path)]) == 0
    kept = json.loads((tmp_path / "run.json").read_text())
    assert kept["sets"]["squad2"] == {"summary": {"n": 40}, "rows_file": "run.questions.jsonl.gz", "rows_n": 40}
    assert kept["sets"]["x"] == {"rows": [{"n": 1}]}  # rows without a qid are a summary's own rows: left in place
    assert read_rows(tmp_path / "run.questions.jsonl.gz") == [{"set": "squad2", **r} for r in rows]
    before = (tmp_path / "run.json").read_bytes()
    assert compact.main(["--results", str(tmp_path)]) == 0
    assert (tmp_path / "run.json").read_bytes() == before
