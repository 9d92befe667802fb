"""Every variable keeps its type: TLC checks TypeOK (spec/State.tla).

TypeOK is not a property of the trilemma table: `designs.toml`'s `invariants` are the
table's columns, and `shift check` checks nothing else. The TLC runs that dump each
design's graph for the conformance test (tests/model/test_conformance.py: every design
at `small`, `twoway` and `apperr`) check TypeOK as well, so every state of those graphs is
typed. Here: a copy of the spec whose TypeOK is wrong fails that run, and the harness's
runner reports the violation with its trace; otherwise the check proves nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from shift.spec.catalog import Catalog, load_catalog

from shift.errors import ShiftError
from shift.tlc.conformance import dump_graph
from shift.tlc.runner import INVARIANT, RunConfig, run_tlc

CATALOG: Catalog = load_catalog()


@pytest.fixture(scope="module")
def narrowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spec with QP states narrowed to RTS: the first QP moved to ERR breaks TypeOK."""
    spec = tmp_path_factory.mktemp("spec")
    for f in [*CATALOG.spec_dir.glob("*.tla"), CATALOG.spec_dir / "designs.toml"]:
        shutil.copyfile(f, spec / f.name)
    state = spec / "State.tla"
    text = state.read_text()
    right = 'QpStates   == {"RTS", "ERR"}'
    assert text.count(right) == 1, "State.tla no longer defines QpStates this way"
    state.write_text(text.replace(right, 'QpStates   == {"RTS"}'))
    return spec


def test_a_wrong_type_is_reported(narrowed: Path) -> None:
    cfg = RunConfig(narrowed, CATALOG.design("NoFailover").module,
                    CATALOG.bound("small").constants, heap_mb=1024)
    result = run_tlc(cfg, ["TypeOK"], [])
    assert (result.outcome, result.violated) == (INVARIANT, "TypeOK"), result.message
    assert result.trace is not None
    qp = result.trace.steps[-1].state["qp"]  # the last state has a QP in ERR
    assert any("ERR" in qps for qps in qp.values()), qp


def test_a_wrong_type_stops_the_conformance_dump(narrowed: Path, tmp_path: Path) -> None:
    catalog = load_catalog(narrowed)
    with pytest.raises(ShiftError, match="Invariant TypeOK is violated"):
        dump_graph(catalog, catalog.design("NoFailover"), catalog.bound("small"),
                   tmp_path / "graph", invariants=["TypeOK"])
