"""Reader leases: a builder's clean-up leaves a generation a reader holds; the last reader's sweep removes it."""

from __future__ import annotations

import subprocess
import sys

from ragsieve.tools.index.local.generations import new_generation, sweep, switch_current
from ragsieve.tools.index.local.readers import ReaderLease, in_use

HOLD = (
    "import sys, time; from ragsieve.tools.index.local.readers import ReaderLease; ReaderLease(sys.argv[1]); "
    "print('held', flush=True); sys.stdin.read()"
)


def test_a_held_generation_survives_switches_until_released(tmp_path):
    first = new_generation(tmp_path)
    switch_current(tmp_path, first)
    lease = ReaderLease(first)
    assert lease.held and in_use(first)
    second = new_generation(tmp_path)
    switch_current(tmp_path, second, keep=first)
    third = new_generation(tmp_path)
    switch_current(tmp_path, third, keep=second)  # would delete `first` were it not held
    assert first.is_dir() and second.is_dir()
    lease.release()
    assert not in_use(first)
    assert sweep(tmp_path, {third.name, second.name}) == [first.name] and not first.exists()


def test_a_lease_of_another_process_is_seen_and_dies_with_it(tmp_path):
    gen = new_generation(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(gen)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert in_use(gen)
        assert sweep(tmp_path, set()) == [] and gen.is_dir()
    finally:
        proc.kill()
        proc.wait(30)
    assert not in_use(gen)
    assert sweep(tmp_path, set()) == [gen.name]
