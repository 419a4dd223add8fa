"""The eval command an insights export prints runs against the served index: it names the index's folder and
the LLM, and `ragsieve eval` refuses (one line) to measure an export against an index that does not exist
instead of building one from the export's few documents; it says when it will answer with the embedded model."""

from __future__ import annotations

import shlex
from pathlib import Path

import httpx

from ragsieve.testing import FakeChat
from tests.support.insights_fakes import BILLING, START, FakeClock, insights_service


def _parsed(command: str):
    from ragsieve.cli.main import build_parser

    words = shlex.split(command)
    assert words[:2] == ["ragsieve", "eval"], command
    return build_parser().parse_args(words[1:])


def test_the_printed_eval_command_measures_the_served_index(examples_index, tmp_path, capsys):
    from ragsieve.cli.main import main
    from ragsieve.eval.evaluate import Evaluation

    data = tmp_path / "data"
    with insights_service({"lumen": examples_index}, data, FakeClock(START)) as svc:
        for question in BILLING[:3]:
            assert (
                httpx.post(f"{svc.base_url}/v1/ask", json={"question": question, "index": "lumen"}, timeout=60).status_code == 200
            )
        svc.registry.insights.log.flush()
        report = httpx.get(f"{svc.base_url}/insights/api/report", params={"index": "lumen"}, timeout=60).json()
        group = report["groups"][0]
        exported = httpx.post(
            f"{svc.base_url}/insights/api/export-eval",
            timeout=60,
            json={"index": "lumen", "group": group["id"], "label": group["label"]},
        ).json()
    args = _parsed(exported["command"])
    assert Path(args.index) == examples_index.resolve() and args.dataset == exported["folder"]
    assert args.local_model or args.base_url  # the LLM is named, not left to a silent default
    # the CLI's export prints the same kind of command
    assert (
        main(
            [
                "insights",
                "--index",
                f"lumen={examples_index}",
                "--data-dir",
                str(data),
                "--since",
                "60d",
                "--export-eval",
                "g1",
                "--out",
                str(tmp_path / "cli-eval"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().err.rsplit("run: ", 1)[1].strip()
    assert Path(_parsed(printed).index) == examples_index.resolve()
    # run as printed (the LLM replaced by a scripted one): the served index is measured, none is built
    run = Evaluation(
        args.dataset,
        args.index,
        plans=["fast"],
        out=tmp_path / "eval",
        progress=False,
        cache=False,
        chat=FakeChat(default="The context does not contain the answer."),
        build_missing=False,
    )
    results = run.run()
    assert run.index_report is None and results["plans"]["fast"]["questions"] == 3
    # a name instead of a folder: one clear line, nothing built
    missing = tmp_path / "lumen"
    assert main(["eval", exported["folder"], "--index", str(missing), "--out", str(tmp_path / "eval2")]) == 2
    err = capsys.readouterr().err
    refused = [line for line in err.splitlines() if line.startswith("ragsieve: error:")]
    assert len(refused) == 1 and "no index at" in refused[0] and "--index" in refused[0], err
    assert not missing.exists()
    assert "answering with the embedded model" in err.split("ragsieve: error:")[0]  # said before anything starts
