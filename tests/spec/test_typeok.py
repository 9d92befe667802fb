"""Every variable keeps its type: TLC checks TypeOK (spec/State.tla) at bound small.

TypeOK is not a property of the trilemma table: `designs.toml`'s `invariants` are the
table's columns, and `shift check` checks nothing else. So this test asks the harness's
runner for one TLC run per design with `INVARIANT TypeOK` and the bound's constants. A copy
of the spec whose TypeOK is wrong must fail, or the check proves nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from shift.spec.catalog import Catalog, load_catalog

from shift.tlc.runner import INVARIANT, OK, RunConfig, RunResult, run_tlc

CATALOG: Catalog = load_catalog()
BOUND = "small"


def check_typeok(spec: Path, module: str, bound: str = BOUND) -> RunResult:
    """TLC on `module` of the folder `spec` at the bound, checking TypeOK alone."""
    cfg = RunConfig(spec, module, CATALOG.bound(bound).constants, heap_mb=1024)
    return run_tlc(cfg, ["TypeOK"], [])


@pytest.mark.parametrize("design", list(CATALOG.designs))
def test_every_variable_keeps_its_type(design: str) -> None:
    result = check_typeok(CATALOG.spec_dir, CATALOG.design(design).module)
    assert result.outcome == OK, (result.violated, result.message)
    # The whole graph was searched, not a fragment cut short.
    assert result.distinct > 1000, result.distinct


@pytest.mark.parametrize("design", ["Shift", "NaiveReplay"])
def test_every_variable_keeps_its_type_when_both_hosts_send(design: str) -> None:
    """At bound twoway B posts WRs too: B's send side, A's receive side, the BtoA
    requests and A's memory are typed as well."""
    result = check_typeok(CATALOG.spec_dir, CATALOG.design(design).module, "twoway")
    assert result.outcome == OK, (result.violated, result.message)
    assert result.distinct > 1000, result.distinct


def test_every_variable_keeps_its_type_with_application_errors() -> None:
    """At bound apperr WRs carry bad keys: the NAK packet, the application errors'
    statuses and the WRs' key field are typed as well."""
    result = check_typeok(CATALOG.spec_dir, CATALOG.design("Shift").module, "apperr")
    assert result.outcome == OK, (result.violated, result.message)
    assert result.distinct > 100_000, result.distinct


def test_a_wrong_type_is_reported(tmp_path: Path) -> None:
    """With QP states narrowed to RTS, the first QP moved to ERR breaks TypeOK."""
    spec = tmp_path / "spec"
    spec.mkdir()
    for tla in CATALOG.spec_dir.glob("*.tla"):
        shutil.copyfile(tla, spec / tla.name)
    state = spec / "State.tla"
    text = state.read_text()
    right = 'QpStates   == {"RTS", "ERR"}'
    assert text.count(right) == 1, "State.tla no longer defines QpStates this way"
    state.write_text(text.replace(right, 'QpStates   == {"RTS"}'))
    result = check_typeok(spec, CATALOG.design("NoFailover").module)
    assert (result.outcome, result.violated) == (INVARIANT, "TypeOK"), result.message
    assert result.trace is not None
    qp = result.trace.steps[-1].state["qp"]  # the last state has a QP in ERR
    assert any("ERR" in qps for qps in qp.values()), qp
