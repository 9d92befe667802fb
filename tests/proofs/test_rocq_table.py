"""docs/proofs.md's table of the authors' Rocq development names every Theorem, Lemma,
Corollary and Example of it (docs/rocq_theorems.txt, listed at a named commit), gives each
a verdict from the page's legend, and names as counterparts only theorems `shift prove`
runs."""

from __future__ import annotations

import re
from pathlib import Path

from shift.proofs import registry

DOCS = Path(__file__).resolve().parents[2] / "docs"
VERDICTS = {"same", "stronger", "weaker", "different", "missing", "not needed",
            "weaker here"}


def _rows() -> list[list[str]]:
    text = (DOCS / "proofs.md").read_text()
    table = text[text.index("### Theorem by theorem"):]
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines() if line.startswith("| ") and ".v |" in line]


def _listed() -> list[tuple[str, str]]:
    lines = (DOCS / "rocq_theorems.txt").read_text().splitlines()
    return [tuple(line.split()) for line in lines if line and not line.startswith("#")]


def test_the_rocq_list_is_at_a_named_commit() -> None:
    head = (DOCS / "rocq_theorems.txt").read_text().splitlines()[0]
    commit = re.search(r"commit ([0-9a-f]{40})", head)
    assert commit and commit.group(1) in (DOCS / "proofs.md").read_text()
    assert len(_listed()) >= 100


def test_every_rocq_theorem_has_a_row_with_a_verdict() -> None:
    rows = _rows()
    named = {(f"coq/{r[0]}", n) for r in rows for n in re.findall(r"`(\w+)`", r[1])}
    missing = [x for x in _listed() if x not in named]
    assert not missing, f"no row for {missing}"
    for r in rows:
        assert r[4] in VERDICTS, r


def test_the_counterparts_are_theorems_shift_prove_runs() -> None:
    names = {t.name for t in registry.THEOREMS}
    for r in _rows():
        for ref in re.findall(r"`((?:trilemma|lemma1|lemma2|cases|achieve|shift|consensus|"
                              r"transport|shift_prefix|ablation)\.\w+)`", r[3]):
            assert ref in names, f"{r[1]}: {ref} is not a theorem of shift prove"
