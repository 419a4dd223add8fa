"""First-run rough edges (issue 55, item 10): onnxruntime's pre-processing hint on the first int8 export, the
short-key error naming the key, `--device auto` saying what it chose at the start."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest


def _tiny_model(path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 64)).astype("float32"), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_the_int8_export_drops_only_the_preprocessing_hint(tmp_path, caplog):
    pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ragsieve.tools.index.embedders.onnx_encoder import PREPROCESSING_HINT, _without_preprocessing_hint

    _tiny_model(tmp_path / "m.onnx")
    with caplog.at_level(logging.WARNING):
        quantize_dynamic(str(tmp_path / "m.onnx"), str(tmp_path / "plain.onnx"), weight_type=QuantType.QInt8)
    assert PREPROCESSING_HINT in caplog.text  # what the first build printed before
    caplog.clear()
    with caplog.at_level(logging.WARNING), _without_preprocessing_hint():
        quantize_dynamic(str(tmp_path / "m.onnx"), str(tmp_path / "int8.onnx"), weight_type=QuantType.QInt8)
        logging.warning("another warning still shows")
    assert PREPROCESSING_HINT not in caplog.text and "another warning still shows" in caplog.text
    assert (tmp_path / "int8.onnx").is_file()
    assert not logging.getLogger().filters  # the filter is gone afterwards


def test_a_short_api_key_is_named_without_printing_it(tmp_path):
    env = {**os.environ, "RAGSIEVE_API_KEYS": "goodkey-12345678,xyzzy"}
    out = subprocess.run(
        [sys.executable, "-m", "ragsieve", "serve", "--index", f"docs={tmp_path}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "starting 'xy'" in out.stderr and "(5 characters)" in out.stderr  # which key, by its start
    assert "xyzzy" not in out.stderr and "goodkey" not in out.stderr  # never the secret itself


def test_device_auto_says_what_it_chose_first(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nThe zorblax gateway listens on port 7412.\n", encoding="utf-8")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragsieve",
            "index",
            str(docs),
            "--index",
            str(tmp_path / "idx"),
            "--device",
            "auto",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    first = out.stdout.splitlines()[0]
    assert first.startswith("device auto: embedding on ") and first.split()[-1] in ("cpu", "mps", "cuda:0"), first


def test_the_first_onnx_export_is_a_progress_line_without_verbose(tmp_path):
    """The ~10 s one-time export (and its int8 step) is said on stderr as it starts, not only with -v."""
    pytest.importorskip("onnxruntime")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nThe zorblax gateway listens on port 7412.\n", encoding="utf-8")
    env = {**os.environ, "RAGSIEVE_CACHE": str(tmp_path / "cache")}  # no export there yet
    args = [sys.executable, "-m", "ragsieve", "index", str(docs), "--index", str(tmp_path / "idx")]
    out = subprocess.run(
        [*args, "--encoder", "onnx-int8", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stderr.splitlines()
    assert any(ln.startswith("ragsieve: exporting ") and "ONNX once" in ln for ln in lines), out.stderr[-2000:]
    assert "ragsieve: quantizing the ONNX export to int8 once" in lines, out.stderr[-2000:]
    assert "pre-processing" not in out.stderr  # onnxruntime's hint stays dropped
    again = subprocess.run(
        [*args[:-1], str(tmp_path / "idx2"), "--encoder", "onnx-int8", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert again.returncode == 0 and "exporting" not in again.stderr, again.stderr[-2000:]  # once: cached
