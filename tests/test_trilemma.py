"""The trilemma table, reproduced on the packaged spec.

One `shift check --bound small --engine explorer` run (module fixture, 2 minutes) backs the
table: the verdicts of the trilemma in docs/design.md, each violation with a counterexample
whose last state shows the violation itself and which replays through `shift replay` to the
same violation, the JUnit report and the exit status. TLC's own verdicts are checked on a
sample (`--engine all`: NoFailover whole, with its Liveness violation, and NaiveReplay's
safety violations), not on every cell: all seven designs under TLC take 13 minutes of CI,
and tests/model/test_conformance.py already shows TLC and the explorer build the same graph
for every design at this bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

DESIGNS = ["Shift", "ShiftPrefix", "ShiftCounted", "NaiveReplay", "NoFailover",
           "ReceiverQuery", "Staging", "NcclResiliency"]


def run_check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shift", "check", *args],
        cwd=cwd, capture_output=True, text=True, timeout=2400,
    )


# One worker builds the module's fixture once (pytest-xdist, --dist loadgroup).
pytestmark = pytest.mark.xdist_group("trilemma-small")


def checked(work: Path, *args: str) -> dict[str, Any]:
    proc = run_check("--bound", "small", *args, "--json", "out.json",
                     "--junit", "junit.xml", "--out", "cex", cwd=work)
    assert (work / "out.json").exists(), summary(proc)
    results = json.loads((work / "out.json").read_text())["results"]
    cells = {(r["design"], r["property"]): r for r in results}
    return {"proc": proc, "cells": cells, "work": work}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return checked(tmp_path_factory.mktemp("check"), "--engine", "explorer")


# TLC beside the explorer: one design whole, and the safety violations of another (its
# Liveness alone is two minutes of TLC).
TLC_SAMPLE = {
    "NoFailover": [],
    "NaiveReplay": ["ExactlyOnceExecution", "NotificationIntegrity", "AtomicSafety"],
}


@pytest.fixture(scope="module")
def tlc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runs = [checked(tmp_path_factory.mktemp(design), "--engine", "all", "--design", design,
                    *[a for p in props for a in ("--property", p)])
            for design, props in TLC_SAMPLE.items()]
    return {"procs": [r["proc"] for r in runs],
            "cells": {k: dict(v, work=r["work"]) for r in runs for k, v in r["cells"].items()}}


def cell(small: dict[str, Any], design: str, prop: str) -> dict[str, Any]:
    return small["cells"][(design, prop)]


def last_state(small: dict[str, Any], design: str, prop: str) -> dict[str, Any]:
    path = Path(cell(small, design, prop)["counterexample"])
    if not path.is_absolute():
        path = small["work"] / path
    trace = json.loads(path.read_text())
    return trace["states"][-1]


def summary(proc: subprocess.CompletedProcess[str]) -> str:
    """The table, its error lines and the last progress lines: what explains a failure."""
    out = proc.stdout
    table = out[out.find("Trilemma table"):] if "Trilemma table" in out else out[-4000:]
    return table + "\n" + "\n".join(proc.stderr.splitlines()[-30:])


def test_every_verdict_matches_its_declaration(small: dict[str, Any]) -> None:
    assert small["proc"].returncode == 0, summary(small["proc"])
    assert {d for d, _ in small["cells"]} == set(DESIGNS)
    for r in small["cells"].values():
        assert r["verdict"] == r["expected"], r


def test_tlc_and_the_explorer_agree_on_the_sample(tlc: dict[str, Any]) -> None:
    # merge() turns a disagreement into an `error` cell naming both answers.
    for proc in tlc["procs"]:
        assert proc.returncode == 0, summary(proc)
        assert "engines disagree" not in proc.stdout, summary(proc)
    assert {r["engine"] for r in tlc["cells"].values()} == {"tlc+explorer"}
    assert {d for d, _ in tlc["cells"]} == set(TLC_SAMPLE)
    for r in tlc["cells"].values():
        assert r["verdict"] == r["expected"], r


def replay(trace: Path, design: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shift", "replay", str(trace),
                           "--design", design], capture_output=True, text=True, timeout=300)


def violated_cells(small: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(k for k, r in small["cells"].items() if r["verdict"] == "violated")


def test_explorer_counterexamples_replay_to_the_same_violation(small: dict[str, Any]) -> None:
    cells = violated_cells(small)
    assert len(cells) >= 15
    for design, prop in cells:
        trace = small["work"] / "cex" / f"{design}-{prop}.trace.jsonl"
        proc = replay(trace, design)
        assert proc.returncode == 0, proc.stderr
        verdict = proc.stdout.strip().splitlines()[-1]
        assert verdict.startswith("violates: ") and prop in verdict, (design, prop, verdict)


def test_tlc_counterexamples_replay_through_the_model(tlc: dict[str, Any]) -> None:
    """TLC's ITF traces are state traces: replay checks every state against the model's."""
    violated = sorted(k for k, r in tlc["cells"].items() if r["verdict"] == "violated")
    assert len(violated) == 4
    for design, prop in violated:
        r = tlc["cells"][(design, prop)]
        path = Path(r["counterexample"])
        assert "explorer" not in path.name, path
        proc = replay(path if path.is_absolute() else r["work"] / path, design)
        assert proc.returncode == 0, proc.stderr
        assert prop in proc.stdout.strip().splitlines()[-1], (design, prop, proc.stdout)


def test_the_table_is_printed(small: dict[str, Any]) -> None:
    out = small["proc"].stdout
    for design in DESIGNS:
        assert design in out
    assert "violated (expected)" in out and "holds" in out


@pytest.mark.parametrize(
    ("design", "prop", "verdict"),
    [
        ("Shift", "ExactlyOnceExecution", "violated"),
        ("Shift", "NotificationIntegrity", "holds"),
        ("Shift", "DataAtNotification", "violated"),
        ("Shift", "AtomicSafety", "holds"),
        ("Shift", "Liveness", "holds"),
        ("ShiftPrefix", "ExactlyOnceExecution", "violated"),
        ("ShiftPrefix", "DataAtNotification", "holds"),
        ("ShiftPrefix", "Liveness", "holds"),
        ("ShiftCounted", "NotificationIntegrity", "holds"),
        ("ShiftCounted", "DataAtNotification", "holds"),
        ("ShiftCounted", "Liveness", "holds"),
        ("NaiveReplay", "NotificationIntegrity", "violated"),
        ("NaiveReplay", "AtomicSafety", "violated"),
        ("NoFailover", "Liveness", "violated"),
        ("NoFailover", "ExactlyOnceExecution", "holds"),
        ("ReceiverQuery", "ExactlyOnceExecution", "holds"),
        ("ReceiverQuery", "Opacity", "violated"),
        ("Staging", "ExactlyOnceExecution", "holds"),
        ("Staging", "ZeroCopy", "violated"),
        ("NcclResiliency", "NotificationIntegrity", "violated"),
    ],
)
def test_trilemma_cell(small: dict[str, Any], design: str, prop: str, verdict: str) -> None:
    r = cell(small, design, prop)
    assert r["verdict"] == verdict, r
    assert (r["counterexample"] is not None) == (verdict == "violated")
    assert r["states"] > 0


def execs(state: dict[str, Any]) -> list[int]:
    """The per-WR execution counts of A's WRs in an ITF state (per host, a TLA+ sequence:
    a JSON array)."""
    return [v if isinstance(v, int) else int(v["#bigint"]) for v in state["execs"]["A"]]


def test_shift_executes_a_write_twice(small: dict[str, Any]) -> None:
    state = last_state(small, "Shift", "ExactlyOnceExecution")
    program = state["program"]["A"]
    twice = [i for i, n in enumerate(execs(state)) if n > 1]
    assert twice and all(program[i]["op"] == "WRITE" for i in twice)


def test_naive_replay_slides_the_receive_queue(small: dict[str, Any]) -> None:
    state = last_state(small, "NaiveReplay", "NotificationIntegrity")
    taken = [e for e in state["rcvSeen"]["B"] if e["status"] == "SUCCESS"]
    wrs = [e["wr"] for e in taken]
    assert len(wrs) != len(set(wrs)), "a notification is seen twice"
    assert taken[-1]["recv"] != 1, "the duplicate consumed a later receive WR"


def test_no_failover_surfaces_the_error(small: dict[str, Any]) -> None:
    state = last_state(small, "NoFailover", "Liveness")
    statuses = ({e["status"] for e in state["sndSeen"]["A"]}
                | {e["status"] for e in state["rcvSeen"]["B"]})
    assert statuses - {"SUCCESS"}, "the application saw an error completion"


def test_junit_has_a_case_per_cell_and_no_failure(small: dict[str, Any]) -> None:
    root = ET.parse(small["work"] / "junit.xml").getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"{d} [small]" for d in DESIGNS]
    cases = root.findall("testsuite/testcase")
    assert len(cases) == len(small["cells"])
    assert not root.findall(".//failure") and not root.findall(".//error")


def test_merge_reports_engines_that_explore_different_graphs() -> None:
    """The same verdict from graphs of different sizes is a disagreement too: a change of
    the model (or of the spec) that moves no verdict still moves the state count."""
    from shift.tlc.check import CellVerdict
    from shift.tlc.explorer import merge

    def cell(prop: str, verdict: str, states: int) -> CellVerdict:
        return CellVerdict("Shift", prop, verdict, "holds", states, 1.0)

    tlc = [cell("Opacity", "holds", 28_300), cell("Liveness", "holds", 28_300),
           cell("AtomicSafety", "holds", 34_114), cell("ZeroCopy", "violated", 900),
           cell("DataAtNotification", "holds", 34_114)]
    explorer = [cell("Opacity", "holds", 34_114), cell("Liveness", "holds", 34_114),
                cell("AtomicSafety", "holds", 34_114), cell("ZeroCopy", "violated", 34_114),
                cell("DataAtNotification", "violated", 34_114)]
    out = {v.property: v for v in merge(tlc, explorer)}
    assert out["Opacity"].verdict == "error"
    assert "28,300" in out["Opacity"].message and "34,114" in out["Opacity"].message
    assert out["DataAtNotification"].verdict == "error"
    assert "TLC says holds, the explorer says violated" in out["DataAtNotification"].message
    # a temporal property is checked apart, and a violation stops TLC early: no comparison
    assert [out[p].verdict for p in ("Liveness", "AtomicSafety", "ZeroCopy")] == [
        "holds", "holds", "violated"]


# TLC at bound apperr (workloads 11-13: a bad lkey or rkey behind a WR in flight), on a
# sample as well: Shift's AppErrorContained (docs/findings.md, F6a and F6b closed), and
# NoFailover whole, whose Liveness plain RC breaks (it tells the peer nothing).
APPERR_SAMPLE = {"Shift": ["AppErrorContained"], "NoFailover": []}


@pytest.mark.xdist_group("trilemma-apperr")
@pytest.mark.parametrize("design", APPERR_SAMPLE)
def test_tlc_verdicts_with_application_errors(design: str, tmp_path: Path) -> None:
    props = [a for p in APPERR_SAMPLE[design] for a in ("--property", p)]
    proc = run_check("--bound", "apperr", "--engine", "all", "--design", design, *props,
                     "--json", "out.json", "--out", "cex", cwd=tmp_path)
    assert proc.returncode == 0, summary(proc)
    results = json.loads((tmp_path / "out.json").read_text())["results"]
    cells = {r["property"]: r for r in results}
    assert {r["engine"] for r in results} == {"tlc+explorer"}
    assert all(r["verdict"] == r["expected"] for r in results), results
    assert cells["AppErrorContained"]["verdict"] == "holds"
    if design == "NoFailover":
        assert cells["Liveness"]["verdict"] == "violated"
