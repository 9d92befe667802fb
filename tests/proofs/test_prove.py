"""The proofs: each assumption of the trilemma matters, SHIFT's counter filter matters,
and `shift prove` reports every theorem and fails on an unexpected status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import z3
from shift.proofs import decisions as d
from shift.proofs import impossibility, registry, safety
from shift.proofs.core import ProofVerdict, Theorem, run
from shift.proofs.protocol import SHIFT


def test_opacity_and_zero_copy_make_the_trilemma() -> None:
    # Under opacity and zero-copy, no rule: unsat.
    assert impossibility.impossible_with(d.View(counter=True)) == z3.unsat
    # Let the rule read the responder NIC's expected PSN (drop opacity): a rule exists.
    assert impossibility.impossible_with(d.View(counter=True, epsn=True)) == z3.sat
    # Let the responder stage payloads (drop zero-copy): a rule exists.
    assert impossibility.impossible_with(d.View(counter=True), staged=True) == z3.sat


def test_without_the_filter_the_notification_invariant_is_not_inductive() -> None:
    verdict = safety.inductive(safety.SHIFT_NO_FILTER, ["NotificationIntegrity"], ("notes",))
    assert verdict.status == "refuted", verdict.detail
    assert verdict.detail.startswith("not inductive:") and verdict.witness


def test_the_stale_data_search_assumes_only_invariants() -> None:
    """The search for F3 (buffer reuse) is restricted to states satisfying the base groups,
    `notes` and `memory`: they are inductive for SHIFT on every program, reuse included."""
    from shift.proofs import invariants as iv
    from shift.proofs.programs import program
    p = program(safety.N)
    verdict = iv.check_inductive(p, SHIFT, lambda pp, s: z3.BoolVal(True), p.wellformed(),
                                 safety.BASE + ("notes", "memory"))
    assert verdict.status == "proved", verdict.detail


def test_the_refutations_need_no_lost_control_message() -> None:
    """The searches leave out the lossy control plane (a sub-relation): its actions are
    the drops of either counter, either host's timer and the two resend deliveries."""
    from shift.proofs.programs import fixed
    from shift.proofs.protocol import action_names, lossy_control_actions
    p = fixed(safety.BUFFER_REUSE)
    names = action_names(p, SHIFT)
    lossy = [names[i] for i in lossy_control_actions(p, SHIFT)]
    assert len(lossy) == 6 and sum(n.startswith("Drop(2") for n in lossy) == 2
    assert sum(n.startswith("HandshakeTimeout") for n in lossy) == 2
    assert sum("again" in n for n in lossy) == 2


def test_every_theorem_has_a_statement_and_a_formula() -> None:
    names = [t.name for t in registry.THEOREMS]
    assert len(names) == len(set(names)) >= 20
    for t in registry.THEOREMS:
        assert t.statement.endswith(".") and len(t.statement) > 40, t.name
        assert t.formula and t.expected in ("proved", "refuted") and t.scope, t.name


def test_a_solver_error_is_unknown_not_a_crash() -> None:
    def broken() -> ProofVerdict:
        raise z3.Z3Exception("out of memory")
    r = run(Theorem("x", "g", "A theorem whose solver fails.", "false", broken))
    assert r.verdict.status == "unknown" and not r.as_expected


def shift_prove(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shift", "prove", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_shift_prove_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    proc = shift_prove("--json", "out.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "out.json").read_text())["results"]
    assert [r["theorem"] for r in results] == [t.name for t in registry.THEOREMS]
    assert all(r["as_expected"] and r["status"] == r["expected"] for r in results)
    statuses = {r["theorem"]: r["status"] for r in results}
    assert statuses["trilemma.no_transparent_rule"] == "proved"
    assert statuses["shift.notification_integrity"] == "proved"
    assert statuses["shift.exactly_once"] == "refuted"
    for name in registry.THEOREMS:
        assert name.name in proc.stdout
    assert f"{len(results)} of {len(results)} theorems as expected" in proc.stdout
    for t in registry.THEOREMS:  # every theorem with its scope
        assert f"  {t.name}: {t.scope}" in proc.stdout
    assert all(r["scope"] and r["weakenings"] for r in results)
    assert "[prove]" in proc.stderr  # progress


def test_an_unexpected_status_fails_the_run(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from shift.cli import main
    fake = Theorem("fake.claim", "g", "A claim Z3 refutes though it should prove it.",
                   "false", lambda: ProofVerdict("refuted", "counterexample", ["x = 1"]))
    monkeypatch.setattr(registry, "THEOREMS", [fake])
    monkeypatch.setattr("shift.commands.prove.THEOREMS", [fake])
    assert main(["prove", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "REFUTED" in out and "not as expected: fake.claim" in out and "x = 1" in out


def test_an_unknown_theorem_is_a_one_line_error(tmp_path: Path) -> None:
    proc = shift_prove("--theorem", "no.such", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("shift prove: unknown theorem 'no.such'; "
                                   "`shift prove --list` lists them")


def test_one_theorem_by_name(tmp_path: Path) -> None:
    proc = shift_prove("--theorem", "trilemma.t1_t2", "--verbose", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "T1:" in proc.stdout and "T2:" in proc.stdout
    assert "1 of 1 theorems as expected" in proc.stdout
