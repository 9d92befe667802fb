"""The proofs' own seeded bugs: every theorem `shift prove` runs rests on hypotheses (the
counter filter, the atomic refusal, what the rule sees, the staging buffer's record, the
responder's duplicate detection, ...), and each of them, dropped, must make the theorem
fail — a proof must then be refuted, an expected counterexample must then be gone. A
theorem that survives the loss of its hypothesis did not depend on it: its statement
proves nothing about the design. The kill table is also in docs/proofs.md and printed by
`shift prove --weakened`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from shift.proofs import achievability, registry
from shift.proofs.core import Theorem, Weakening, killed

PAIRS = [(t, w) for t in registry.THEOREMS for w in t.weakenings]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "proofs.md"


def test_every_theorem_has_a_scope_and_a_weakened_hypothesis() -> None:
    for t in registry.THEOREMS:
        assert len(t.scope) > 20, t.name
        assert t.weakenings, f"{t.name} has no weakened hypothesis"
        names = [w.name for w in t.weakenings]
        assert len(names) == len(set(names)), t.name
        assert all(w.hypothesis.strip() for w in t.weakenings), t.name


@pytest.mark.parametrize(("theorem", "weakening"), PAIRS,
                         ids=[f"{t.name}/{w.name}" for t, w in PAIRS])
def test_each_theorem_fails_without_its_hypothesis(theorem: Theorem,
                                                   weakening: Weakening) -> None:
    verdict = weakening.check()
    assert killed(theorem, verdict), (
        f"{theorem.name} survives '{weakening.name}': {verdict.status} {verdict.detail}")
    if verdict.status == "refuted":  # a counterexample, not just "no proof"
        assert verdict.witness or verdict.detail, theorem.name


def test_the_achievability_for_every_n_is_not_a_tautology() -> None:
    """The receiver query's and the staging buffer's statements for every n hold with the
    design's mechanism and fail without it: the rule reading the requester's una instead
    of the responder's expected PSN replays an executed WR; a staging buffer that keeps
    no record applies it again."""
    assert achievability._receiver_query_parametric(True).status == "proved"
    assert achievability._receiver_query_parametric(False).status == "refuted"
    assert achievability._staging_parametric(True).status == "proved"
    assert achievability._staging_parametric(False).status == "refuted"


def test_the_kill_table_in_the_docs_lists_every_weakening() -> None:
    rows = {(m.group(1), m.group(2)) for m in
            re.finditer(r"^\| `([\w.]+)` \| ([^|]+?) \|", DOCS.read_text(), re.M)}
    missing = [(t.name, w.name) for t, w in PAIRS if (t.name, w.name) not in rows]
    assert not missing, f"docs/proofs.md's kill table lacks {missing}"


def test_shift_prove_weakened_prints_the_kill_table(tmp_path: Path) -> None:
    cheap = ["trilemma.t1_t2", "achieve.shift", "cases.cas_aba_probe"]
    args = [a for name in cheap for a in ("--theorem", name)]
    proc = subprocess.run([sys.executable, "-m", "shift", "prove", "--weakened", "--quiet",
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = sum(len(t.weakenings) for t in registry.THEOREMS if t.name in cheap)
    assert f"killed {n}/{n}" in proc.stdout
    assert "no counter filter" in proc.stdout and "SURVIVED" not in proc.stdout


def test_a_weakening_that_changes_nothing_survives_and_fails_the_run(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The kill table is itself testable: a 'weakening' that is the theorem's own check
    does not kill it, and `shift prove --weakened` then exits 1."""
    from shift.cli import main
    t = registry.by_name("trilemma.t1_t2")
    assert t is not None
    idle = Theorem(t.name, t.group, t.statement, t.formula, t.check, scope=t.scope,
                   weakenings=(Weakening("nothing dropped", "the same check", t.check),))
    monkeypatch.setattr("shift.commands.prove.THEOREMS", [idle])
    assert main(["prove", "--weakened", "--quiet"]) == 1
    assert "SURVIVED" in capsys.readouterr().out
