"""DeviceFatal (issue 17, item 2): a NIC in fatal error completes nothing under
user-space verbs, and only its asynchronous event says it died. The layer's reading of
that event (FatalEvent) is what keeps Liveness: without it, the failover never starts
(docs/findings.md, F10)."""

from __future__ import annotations

import pytest
from shift.model import next as model_next
from shift.model.config import bound_from_constants
from shift.model.explore import explore
from shift.model.liveness import check_liveness
from shift.model.next import Model
from shift.spec.catalog import load_catalog
from shift.spec.workloads import read_workloads


def small_fatal(design: str) -> Model:
    """Bound fatal cut to workload 1 (WRITE, WRITE_WITH_IMM), no retransmission, no
    recovery: a NIC death and what follows it."""
    catalog = load_catalog(None)
    constants = {**catalog.bounds["fatal"].constants, "Workloads": "{1}",
                 "MaxRetries": "0", "Recover": "FALSE"}
    bound = bound_from_constants("fatal", constants, read_workloads(catalog.spec_dir))
    return Model(Model.load(design, "fatal").design, bound)


@pytest.mark.parametrize("design", ["Shift", "ShiftPrefix"])
def test_reading_the_event_keeps_liveness(design: str) -> None:
    ex = explore(small_fatal(design), [])
    assert check_liveness(ex) is None
    assert any(e.name == "FatalEvent" for e, _ in ex.graph.labels)


@pytest.mark.parametrize("design", ["Shift", "ShiftPrefix"])
def test_a_layer_blind_to_the_event_waits_for_ever(design: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """SHIFT as published triggers on error completions it polls; a NIC in fatal error
    gives none, so the layer that does not read the event never fails over."""
    monkeypatch.setattr(model_next, "_FIXED",
                        [(ev, fn) for ev, fn in model_next._FIXED if ev.name != "FatalEvent"])
    cex = check_liveness(explore(small_fatal(design), []))
    assert cex is not None
    names = [e.name for e in cex.events]
    assert "NicFail" in names and "FatalEvent" not in names
