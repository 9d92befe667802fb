"""The layer over libibverbs (issue 18, items 3 and 6): the C core's endpoints with the
libibverbs backend (verbs/backend/ibv.c) on the simulated provider in lock-step, driven
by the same events as the model and as the direct core.

- the differential campaign's third side: model traces of every design at several bounds
  through the layer over libibverbs, observations equal after every step;
- a failover and fail-back scenario: the same events on the direct core and over
  libibverbs give the same observations, the control messages crossing as UD datagrams;
- seeded bugs of the layer killed through libibverbs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from shift.verbs import devices
from shift.verbs.rdma_core import Build
from verbs_helpers import run_as

pytestmark = pytest.mark.xdist_group("verbs")

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def fuzz(bound: str, examples: int, out: Path) -> subprocess.CompletedProcess[str]:
    """`shift fuzz --side verbs` (it enters the lock-step environment itself)."""
    return subprocess.run([sys.executable, "-m", "shift", "fuzz", "--side", "verbs",
                           "--bound", bound, "--examples", str(examples), "--out", str(out)],
                          capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL, cwd=ROOT)


@pytest.mark.parametrize("bound", ["default", "large", "faithful", "twoway", "apperr"])
def test_model_traces_through_the_layer_over_libibverbs(rdma: Build, bound: str,
                                                       tmp_path: Path) -> None:
    """Every design, model traces at the bound: no divergence on the libibverbs side."""
    proc = fuzz(bound, 60, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"bound {bound}, seed 0, side verbs" in proc.stdout
    rows = re.findall(r"^  (\w+) +(\d+) traces +(\d+) steps +(\d+) divergent", proc.stdout,
                      flags=re.M)
    assert {r[0] for r in rows} == {"Shift", "NaiveReplay", "NoFailover", "ShiftPrefix",
                                    "ShiftCounted"}
    assert all(int(r[1]) == 60 and int(r[2]) > 60 and r[3] == "0" for r in rows), rows
    assert proc.stdout.rstrip().endswith("no divergence")


def test_a_failover_over_libibverbs_is_the_direct_cores(rdma: Build) -> None:
    """A WRITE and a SEND, A's default NIC dead under a WRITE in flight, then back: over
    libibverbs the layer fails over, replays and starts its fail-back exactly as over
    the simulator's backend, its control messages UD datagrams on the backup path."""
    proc = devices.run(rdma, devices.LOCKSTEP, [sys.executable, str(HERE / "layer_scenario.py")],
                       capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    direct, verbs = seen["direct"], seen["verbs"]
    assert verbs["phases"] == direct["phases"]
    assert verbs["memory_B"] == direct["memory_B"] == [8, 0, 0, 0]  # WR 3, replayed
    assert verbs["stats_A"] == direct["stats_A"]
    assert verbs["stats_A"]["failovers"] == 1 and verbs["stats_A"]["replayed"] == 1
    assert verbs["states"] == direct["states"]
    sent = [c["wr"] for c in verbs["phases"][-1]["sndSeen"]["A"]]
    assert sent == [1, 2, 3, 4]  # every WR completed once, in order
    assert (direct["ctl_on_wire"], verbs["ctl_on_wire"]) == ("ctl", "ud")


@pytest.mark.parametrize("mutant", ["reconnect-never-resent", "no-counter-filter",
                                    "fatal-event-ignored", "ibv-psn-epoch-kept",
                                    "ibv-doorbell-at-once"])
def test_a_seeded_bug_of_the_layer_is_killed_through_libibverbs(rdma: Build,
                                                                 mutant: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "differential" /
                                               "seeded_bugs.py"), "--side", "verbs",
                           "--only", mutant], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"^{mutant} +killed ", proc.stdout, flags=re.M), proc.stdout


def test_the_backend_refuses_what_it_cannot_open(rdma: Build) -> None:
    """A device that is not listed, control memory too small: an errno, no crash."""
    script = (
        "import errno\n"
        "from shift.verbs.layer import backend\n"
        "b = backend()\n"
        "out = b.ffi.new('void **')\n"
        "print(b.lib.shift_ibv_open(b'sim9', b'sim1', 1, b.ffi.NULL, 0, out),"
        " b.lib.shift_ibv_open(b'sim0', b'sim1', 1, b.ffi.new('char[]', 16), 16, out),"
        " b.lib.shift_ibv_open(b'sim0', b'sim1', 0, b.ffi.NULL, 0, out),"
        " b.lib.shift_ibv_close(b.ffi.NULL))\n")
    proc = run_as(rdma, "A", sys.executable, "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert [int(x) for x in proc.stdout.split()] == [19, 22, 22, 22]  # ENODEV, EINVAL x3
