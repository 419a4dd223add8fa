"""Which pipeline results ran an earlier `full` plan than the one the current code runs.

A result file records the commit it ran at. `PLAN_SINCE` is the last commit that changed what the plans
compute (001925b: under `auto` the relevant set stands alone only when the judge's recall, bounded below,
reaches 1 - alpha; before it 1f12636, the merge of issue 46's two halves: every rule keeps the conformal set, GMM never removes its
members, RSE keeps the fast context the conformal step joined (b9f2bfd); a judge that passes its checks and
finds nothing relevant is trusted and the answer abstains on calibrated terms, the fallback adds only chunks a
trusted judge accepts (6274b07); both follow 504130f, the default encoder embedding each text alike whatever its
batch, so earlier indexes and figures are stale too);
a `pipeline-*.json` whose commit git knows and that does not contain `PLAN_SINCE` measured a plan that no
longer exists, so the report does not show its figures as current. Whoever changes what a plan computes
moves `PLAN_SINCE` to that commit in the same change's follow-up, and the pipeline results are re-run.

`JUDGE_SINCE` is a later change that alters only runs whose judge was measured at calibration
(`--judge-questions` above 0, the default 60): under `auto` a judge measured to accept decoys is barred and
decides nothing (`agent/judging/reliability.judge_barred`). A run that measured no judge (the embedded model's
rows, `--judge-questions 0`) computes what it did before that change, so only `PLAN_SINCE` judges it.

A commit git does not know (a result from another clone, a test's fixture) is not judged here: the file
is shown with its commit, as before.
"""
from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLAN_SINCE = "3887a6f"
JUDGE_SINCE = "e3ea4b3"  # judges barred on their measured decoy rate (reliability.judge_barred), rows saying so
PREDATES = "predates the current `full` plan"


@lru_cache(maxsize=256)
def predates_plan(commit: str | None, since: str = PLAN_SINCE, repo: Path = REPO) -> bool:
    """True when git knows `commit` (a "+dirty" suffix is ignored) and `since` is not among its ancestors."""
    if not commit:
        return False
    sha = commit.split("+", 1)[0]

    def git(*args: str) -> int:
        try:
            return subprocess.run(["git", *args], cwd=repo, capture_output=True, timeout=10).returncode
        except (OSError, subprocess.TimeoutExpired):
            return -1

    if git("cat-file", "-e", f"{sha}^{{commit}}") != 0 or git("cat-file", "-e", f"{since}^{{commit}}") != 0:
        return False
    return git("merge-base", "--is-ancestor", since, sha) == 1


def measures_judge(command: str) -> bool:
    """Whether a `benchmarks/pipeline.py` command measured its judge at calibration (`--judge-questions`,
    default 60); a command that is not recorded counts as one that did."""
    words = command.replace("=", " ").split()
    for flag, value in zip(words, words[1:]):
        if flag == "--judge-questions":
            try:
                return int(value) > 0
            except ValueError:
                return True
    return True


def since_for(data: dict) -> str:
    """The plan change a result must contain to be current: `JUDGE_SINCE` when its judge was measured."""
    return JUDGE_SINCE if measures_judge(str(data.get("command") or "")) else PLAN_SINCE


def result_predates(data: dict) -> bool:
    """True when the pipeline result `data` ran a plan that no longer exists (`since_for`)."""
    return predates_plan(str(data.get("commit") or ""), since_for(data))


def predating(files) -> list[tuple[Path, str]]:
    """(path, note) of each loaded file (`report.load`'s triples) that ran an earlier plan."""
    return [(p, e) for p, d, e in files if d is None and e.startswith(PREDATES)]


def predating_note(commit: str, since: str = PLAN_SINCE) -> str:
    """The load error a predating pipeline result is reported with."""
    return f"{PREDATES} (ran at {commit[:7]}, before {since}); re-run it to show its figures"
