"""The workloads are written once, as `Program(k)` in spec/Workloads.tla: the model and the
proofs read them from there (`shift.spec.workloads`), so a workload added to a copy of the
spec (`--spec-dir`) is explored, replayed and fuzzed like the packaged ones, and one the
reader or the model cannot take is a one-line error naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shift.model.next import Model
from shift.proofs.programs import WORKLOADS
from shift.spec.catalog import packaged_spec_dir
from shift.spec.workloads import WR, Store, read_workloads
from test_declarations import spec_copy

from shift.cli import main
from shift.errors import SpecError

LAST = '      [] k = 8 -> << WR("WRITE", 1, 1, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>\n'
# A workload of one's own (9: 7 and 8 are the two-way ones): a bulk WRITE, then a SEND as
# the notification.
SEVENTH = '      [] k = 9 -> << WR("WRITE", 1, 1, FALSE, 0), WR("SEND", 0, 0, TRUE, 1) >>\n'
# Bound `seven`: default's faults, retries and recovery (as `shift fuzz` needs: the C core
# fails back whether or not the bound has Recover), workload 9 alone.
SEVEN = ('[bounds.seven]\nsummary = "as default, workload 9 only"\n'
        'constants = { Workloads = "{9}", MaxRetries = 1, MaxDrops = 1, MaxFaults = 1, '
        'FaultPaths = "{1}", Recover = "TRUE", CtlLoss = "TRUE", AckBeforeCqe = "FALSE", '
        'RnrNak = "FALSE", RnrRetry = 7, DeviceFatal = "FALSE", ImplicitNak = "FALSE" }\n\n')


def with_seventh(tmp_path: Path, arm: str = SEVENTH) -> Path:
    """A copy of the spec whose Program(k) has `arm` after its last workload (8), and bound
    `seven`."""
    spec = spec_copy(tmp_path)
    tla = spec / "Workloads.tla"
    assert LAST in tla.read_text()
    tla.write_text(tla.read_text().replace(LAST, LAST + arm))
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text().replace("[designs.Shift]\n", SEVEN + "[designs.Shift]\n"))
    return spec


def test_the_model_and_the_proofs_run_the_programs_of_workloads_tla() -> None:
    spec = read_workloads(packaged_spec_dir())
    assert list(spec.programs) == [1, 2, 3, 4, 5, 6, 11, 12, 13, 7, 8]
    assert spec.program(1) == (WR("WRITE", 1, 1, False, 0), WR("WRITE_IMM", 0, 0, True, 1))
    assert Model.load("Shift").bound.programs == tuple(spec.programs[k] for k in range(1, 9))
    # The proofs are one-way: they take the workloads where B posts no WR, except those
    # with an application error (a bad key: 11 and 12), which their relation lacks.
    # Each WR as (op, region, value, signaled, compare); the encoding has one region, the
    # one a program uses: workload 6's CAS on region 2 is its region 1.
    expected = {k: [(w.op, w.region, w.value, w.signaled, w.compare) for w in p]
                for k, p in spec.one_way().items() if all(w.key == "OK" for w in p)}
    assert expected[6] == [("CAS", 2, 1, True, 0), ("WRITE_IMM", 0, 0, True, 0)]
    expected[6] = [("CAS", 1, 1, True, 0), ("WRITE_IMM", 0, 0, True, 0)]
    assert expected == WORKLOADS
    assert {k for k, p in spec.one_way().items() if any(w.key != "OK" for w in p)} == {11, 12}
    assert spec.bprogram(13)[1].key == "LKEY"  # the application error on B (two-way)
    assert spec.program(11)[1].key == "LKEY" and spec.program(12)[1].key == "RKEY"
    assert list(WORKLOADS) == [1, 2, 3, 4, 5, 6]
    # B's program of the two-way workloads: ping-pong's reply waits for A's SEND.
    assert spec.bprogram(7) == (WR("SEND", 0, 2, True, 1, 0, 1),) and spec.bprogram(1) == ()
    assert Model.load("Shift", "twoway").bound.programs_of(7) == (spec.program(7),
                                                                  spec.bprogram(7))
    lines = (packaged_spec_dir() / "Workloads.tla").read_text().splitlines()
    assert 'WR("FADD", 1, 1, TRUE, 0)' in lines[spec.lines[3][0] - 1]


def test_a_seventh_workload_is_explored_and_its_counterexample_replayed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = with_seventh(tmp_path)
    monkeypatch.chdir(tmp_path)
    # Declared as at the packaged bounds; workload 7 has no stale-data shape (exit 1).
    assert main(["check", "--spec-dir", str(spec), "--bound", "seven", "--design", "Shift",
                 "--engine", "explorer", "--quiet"]) == 1
    out = capsys.readouterr().out
    # its state count (12,568 before the control plane was lossy, 18,564 before the
    # reconnect by message, issue 15)
    assert "HOLDS (expected violated)" in out and "45,680" in out
    trace = tmp_path / "shift-out" / "Shift-ExactlyOnceExecution.trace.jsonl"
    first = json.loads(trace.read_text().splitlines()[0])
    assert first == {"event": "Init", "workload": 9}
    for replayed in (trace, trace.with_name("Shift-ExactlyOnceExecution.explorer.itf.json")):
        assert main(["replay", str(replayed), "--design", "Shift", "--bound", "seven",
                     "--spec-dir", str(spec)]) == 0
        out = capsys.readouterr().out
        assert "1. Init(9)" in out and "A's WR 2: SEND (payload" in out
        assert "violates: ExactlyOnceExecution" in out


def test_a_seventh_workload_is_fuzzed_against_the_c_core(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = with_seventh(tmp_path)
    assert main(["fuzz", "--spec-dir", str(spec), "--bound", "seven", "--examples", "40",
                 "--design", "Shift", "--out", str(tmp_path / "corpus")]) == 0
    assert "no divergence" in capsys.readouterr().out


def test_tlc_and_the_explorer_agree_on_a_seventh_workload(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = with_seventh(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--spec-dir", str(spec), "--bound", "seven", "--design",
                 "NoFailover", "--engine", "all", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "engines disagree" not in out and "1,466" in out


MALFORMED = [
    # the arm, what the one-line error says
    pytest.param(SEVENTH.replace("FALSE, 0)", "FALSE)"), "Program(9), WR 1: WR takes 5 arguments",
                 id="arity"),
    pytest.param(SEVENTH.replace('"WRITE"', '"WIRTE"'),
                 "Program(9), WR 1: op 'WIRTE': the model knows", id="op"),
    pytest.param(SEVENTH.replace("TRUE, 1)", "TRUE, 2)"),
                 "Program(9), WR 2: note 2: a SEND here is note 1", id="note"),
    pytest.param(SEVENTH.replace("1, 1, FALSE", "1, 1 + 1, FALSE"),
                 "Program(9), WR 1: value: '1 + 1'", id="expression"),
    pytest.param(SEVENTH.replace("<< WR", "Program(1) \\o << WR"),
                 "Program(9): expected a tuple", id="not-a-tuple"),
    pytest.param(SEVENTH.replace("k = 9", "k = 10"), "no workload 9, which bound seven names",
                 id="missing"),
    pytest.param(SEVENTH.replace("TRUE, 1) >>", "TRUE, 1), >>"), "not well-formed TLA+",
                 id="syntax"),
]


@pytest.mark.parametrize("arm, says", MALFORMED)
@pytest.mark.parametrize("command", [
    ["check", "--engine", "explorer", "--design", "Shift"],
    ["replay", "trace.jsonl", "--design", "Shift"],
    ["fuzz", "--examples", "1"],
])
def test_a_workload_the_model_cannot_take_is_a_one_line_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        arm: str, says: str, command: list[str]) -> None:
    spec = with_seventh(tmp_path, arm)
    (tmp_path / "trace.jsonl").write_text('{"event": "Init", "workload": 9}\n')
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--bound", "seven", "--spec-dir", str(spec)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[check]")]
    assert len(err) == 1 and says in err[0], err
    # file and line: the added arm's, or that of `Program(k) ==` for a missing workload
    lines = (spec / "Workloads.tla").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if ln.startswith("Program(k) =="))
    arm_at = lines.index(arm.rstrip("\n")) + 1
    assert err[0].startswith(f"shift {command[0]}: {spec / 'Workloads.tla'}:"), err
    assert err[0].split(":")[2] in (str(at), str(arm_at)), err


def test_the_reader_names_the_line_of_a_malformed_arm(tmp_path: Path) -> None:
    spec = with_seventh(tmp_path, SEVENTH.replace("k = 9", "OTHER"))
    lines = (spec / "Workloads.tla").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if "OTHER ->" in ln)
    with pytest.raises(SpecError, match=rf"Workloads.tla:{at}: Program: only arms"):
        read_workloads(spec)


def test_tlc_does_not_start_on_a_workload_program_lacks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = with_seventh(tmp_path, SEVENTH.replace("k = 9", "k = 10"))
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--spec-dir", str(spec), "--bound", "seven", "--engine", "tlc"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[check]")]
    at = read_workloads(spec).line
    assert err == [f"shift check: {spec / 'Workloads.tla'}:{at}: no workload 9, which bound seven "
                   "names in its Workloads: Program(k) has an arm for k = 1, 2, 3, 4, 5, 6, "
                   "11, 12, 13, 7, 8, 10 only"]


STORES_6 = "    CASE k = 6 -> << Store(2, 0, 1) >>\n"


def with_stores(tmp_path: Path, arm: str) -> Path:
    """A copy of the spec whose StoresOf(k) has `arm` in place of workload 6's."""
    spec = spec_copy(tmp_path)
    tla = spec / "Workloads.tla"
    assert STORES_6 in tla.read_text()
    tla.write_text(tla.read_text().replace(STORES_6, arm))
    return spec


def test_b_stores_are_read_from_stores_of() -> None:
    spec = read_workloads(packaged_spec_dir())
    assert spec.stores == {6: (Store(2, 0, 1),)} and spec.stores_of(1) == ()
    bound = Model.load("NaiveReplay").bound
    assert bound.stores_of(6) == (Store(2, 0, 1),) and bound.stores_of(3) == ()


@pytest.mark.parametrize(("arm", "says"), [
    ("    CASE k = 6 -> << Store(2, 0, 0) >>\n",
     "StoresOf(6), store 1: after 0: a store comes after the workload's 1 notification(s)"),
    ("    CASE k = 6 -> << Store(3, 0, 1) >>\n",
     "StoresOf(6), store 1: region 3: the model has regions 1, 2"),
    ("    CASE k = 6 -> << Store(2, 0) >>\n",
     "StoresOf(6), store 1: expected Store(region, value, after) with literal arguments"),
    ("    CASE k = 6 -> << Store(2, TRUE, 1) >>\n",
     "StoresOf(6), store 1: value = TRUE: expected a natural number"),
])
def test_a_store_the_model_cannot_take_is_a_one_line_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        arm: str, says: str) -> None:
    spec = with_stores(tmp_path, arm)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--spec-dir", str(spec), "--design", "NaiveReplay",
                 "--engine", "explorer", "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[check]")]
    assert len(err) == 1 and says in err[0] and str(spec / "Workloads.tla") in err[0], err


def test_stores_of_takes_an_empty_other_arm_only(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    tla = spec / "Workloads.tla"
    head, stores = tla.read_text().split("StoresOf(k) ==")
    tla.write_text(head + "StoresOf(k) ==" + stores.replace(
        "      [] OTHER -> << >>", "      [] OTHER -> << Store(1, 1, 1) >>"))
    lines = tla.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if "OTHER -> << Store" in ln)
    with pytest.raises(SpecError, match=rf"Workloads.tla:{at}: StoresOf: only arms"):
        read_workloads(spec)
