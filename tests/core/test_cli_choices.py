"""The command line's choices are the Enums' values: one list of each, the one the code parses."""

from __future__ import annotations

import argparse

import pytest

from ragsieve.cli.main import build_parser
from ragsieve.tools.filters.conformal import ScoreKind
from ragsieve.tools.index.building.windows import LongCode
from ragsieve.tools.index.embedders.local_embedder import Embedder
from ragsieve.tools.modes import Backend, Encoder


def _choices(command: str, option: str) -> list[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if option in a.option_strings)
    return list(action.choices or [])


@pytest.mark.parametrize(
    ("command", "option", "expected"),
    [
        ("index", "--encoder", [e.value for e in Encoder]),
        ("index", "--long-code", [m.value for m in LongCode]),
        ("index", "--backend", [b.value for b in Backend]),
        ("calibrate", "--score", ["auto", *(k.value for k in ScoreKind)]),
    ],
)
def test_choices_are_the_enum_values(command, option, expected):
    assert _choices(command, option) == expected


def test_the_encoder_enum_is_the_embedders_list():
    """`Encoder` names exactly the encoders the embedder accepts, in its order."""
    assert [e.value for e in Encoder] == list(Embedder.ENCODERS)
    assert set(_choices("index", "--encoder")) == {"torch", "torch-fp16", "onnx", "onnx-int8"}


def test_an_encoder_outside_the_enum_is_refused(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["index", "docs", "--encoder", "tensorrt"])
    assert "invalid choice: 'tensorrt'" in capsys.readouterr().err
