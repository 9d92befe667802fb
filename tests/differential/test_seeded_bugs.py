"""The seeded-bug script (tests/differential/seeded_bugs.py): every seeded bug still
applies to the current C sources (exactly one match), and a mutant core built by the
script is loaded in place of the real one and killed: the whole kill table, as
`python tests/differential/seeded_bugs.py` prints it, one row per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import seeded_bugs as S


@pytest.mark.parametrize("mutant", S.MUTANTS, ids=[m.name for m in S.MUTANTS])
def test_each_seeded_bug_applies_once(mutant: S.Mutant, tmp_path: Path) -> None:
    shutil.copytree(S.NATIVE / "src", tmp_path / "src")
    before = (tmp_path / "src" / mutant.file).read_text()
    S.mutate(tmp_path, mutant)
    after = (tmp_path / "src" / mutant.file).read_text()
    assert after != before and after.count(mutant.new) == 1


@pytest.mark.parametrize("mutant", S.BACKEND_MUTANTS, ids=[m.name for m in S.BACKEND_MUTANTS])
def test_each_seeded_bug_of_the_libibverbs_backend_applies_once(mutant: S.Mutant,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    shutil.copy(S.BACKEND / mutant.file, tmp_path / "src" / mutant.file)
    before = (tmp_path / "src" / mutant.file).read_text()
    S.mutate(tmp_path, mutant)
    after = (tmp_path / "src" / mutant.file).read_text()
    assert after != before and after.count(mutant.new) == 1


def test_there_are_at_least_eight_seeded_bugs() -> None:
    assert len({m.name for m in S.MUTANTS}) >= 8


@pytest.mark.parametrize("mutant", S.MUTANTS, ids=[m.name for m in S.MUTANTS])
def test_each_seeded_bug_is_killed(mutant: S.Mutant, capsys) -> None:
    """The kill table's row of each mutant, at the script's own budget (one test each, so
    that the workers share the table): killed, or the suite is too weak. A mutant the
    table says only the corpus kills is replayed against the corpus alone (the campaign's
    4,000 traces and trace validation would take five minutes to confirm they miss it;
    the script run by hand still tries them)."""
    args = ["--only", mutant.name, "--known-misses-to-corpus"]
    assert S.main(args) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "killed 1/1 (100%)" in out
    assert f"{mutant.name:<28} killed" in out
