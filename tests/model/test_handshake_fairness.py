"""The handshake timer is strongly fair (FailoverFairness, docs/findings.md): a host's
timer runs on its own clock, so a peer that keeps resending a request the host cannot
answer (its NIC dead for good) does not hold the host's own resend off for ever. Under
weak fairness alone the explorer finds that starvation at `default`; under the spec's
fairness it finds none, and replaying the starving lasso judges it unfair."""

from __future__ import annotations

import pytest
from shift.model import next as model_next
from shift.model.config import bound_from_constants
from shift.model.explore import Exploration, explore
from shift.model.liveness import check_liveness
from shift.model.next import Model
from shift.model.replay import judge
from shift.spec.catalog import load_catalog
from shift.spec.workloads import read_workloads


def default_one_write(design: str) -> Model:
    """Bound default cut to workload 1 (WRITE, WRITE_WITH_IMM) without retransmission: a
    NIC that dies for good, a lost counter and a reconnect the peer cannot answer."""
    catalog = load_catalog(None)
    constants = {**catalog.bounds["default"].constants, "Workloads": "{1}",
                 "MaxRetries": "0"}
    bound = bound_from_constants("default", constants, read_workloads(catalog.spec_dir))
    return Model(Model.load(design, "default").design, bound)


@pytest.fixture(scope="module", params=["Shift", "ShiftPrefix"])
def explored(request: pytest.FixtureRequest) -> tuple[Model, Exploration]:
    model = default_one_write(request.param)
    return model, explore(model, [])


def test_the_strongly_fair_timer_keeps_liveness(explored: tuple[Model, Exploration]) -> None:
    _, ex = explored
    assert {"HandshakeTimeout"} == model_next.STRONG_ACTIONS
    assert check_liveness(ex) is None


def test_a_weakly_fair_timer_starves(explored: tuple[Model, Exploration],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    model, ex = explored
    monkeypatch.setattr(model_next, "STRONG_ACTIONS", frozenset())
    cex = check_liveness(ex)
    assert cex is not None and cex.loop is not None
    names = [str(e) for e in cex.events]
    assert "NicFail(A, 1)" in names and "Drop(2, BtoA)" in names
    cycle = names[cex.loop + 1:]
    # B resends its request round after round; A's resend, enabled whenever path 2 is
    # quiet, is never taken
    assert "HandshakeTimeout(B)" in cycle and "HandshakeTimeout(A)" not in cycle
    assert judge(model, cex.events).liveness is not None
    monkeypatch.setattr(model_next, "STRONG_ACTIONS", frozenset({"HandshakeTimeout"}))
    assert judge(model, cex.events).liveness is None
