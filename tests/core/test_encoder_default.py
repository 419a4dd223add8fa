"""The fast encoder by default (issue 28): a new index gets `onnx-int8` (within 0.005 nDCG@10 of torch), an existing index
keeps the encoder its manifest records, and an explicit choice wins."""

from __future__ import annotations

from pathlib import Path

from ragsieve.tools.index.building.builder import IndexBuilder
from ragsieve.tools.index.building.encoder_choice import recorded_encoder
from ragsieve.tools.index.embedders.device import default_encoder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"


def test_a_new_index_gets_onnx_and_an_existing_one_keeps_its_encoder(tmp_path, embedder):
    assert default_encoder() == "onnx-int8"  # onnx and onnxruntime are dependencies
    assert IndexBuilder(tmp_path / "new", progress=False).encoder == "onnx-int8"
    old = tmp_path / "old"
    IndexBuilder(old, embedder=embedder, progress=False).build([EXAMPLES])  # the torch embedder
    assert recorded_encoder(old) == "torch"
    assert IndexBuilder(old, progress=False).encoder == "torch"  # not silently switched
    assert IndexBuilder(old, progress=False, encoder="onnx").encoder == "onnx"  # unless asked
    assert recorded_encoder(tmp_path / "missing") is None
