"""The decision layer's setting (`shift.proofs.decisions`) against the states the model's
explorer reaches (issue 21, item 2): every state of SHIFT's `small` graph in which A's
default QP has failed and A has not replayed yet is one of the failure worlds (U, E) the
trilemma's theorems quantify over — the responder executed exactly WRs 1..E of the
default path, once each, A's NIC saw 1..U acknowledged, U <= E <= n — and when A holds
B's counter, it is NotesBefore(program, E): the view `decisions.view_args` gives a rule.
One-way workloads (A's WRs to B) only: the setting is one direction's."""

from __future__ import annotations

from typing import Any

import pytest
from shift.model.explore import explore
from shift.model.next import Model
from shift.proofs import decisions as d

# one worker explores the graph once (pytest-xdist, --dist loadgroup)
pytestmark = pytest.mark.xdist_group("decision-worlds-graph")

A, B = 0, 1


@pytest.fixture(scope="module")
def graph() -> Any:
    return explore(Model.load("Shift", "small"), []).graph


def notes_before(program: tuple, k: int) -> int:
    return sum(1 for wr in program[:k] if wr.op in ("WRITE_IMM", "SEND"))


def world_of(s: Any) -> tuple[int, int, int]:
    """(U, E, n) of a model state: acknowledged and executed prefixes of A's default QP."""
    return s.una[A][0] - 1, s.epsn[B][0] - 1, len(s.sq[A][0])


def decision_points(g: Any) -> list[Any]:
    return [s for s in g.states if not s.program[B] and s.qp[A][0] == "ERR"
            and not s.replayed[A]]


def test_every_decision_point_the_explorer_reaches_is_a_failure_world(graph: Any) -> None:
    points = decision_points(graph)
    assert len(points) >= 1000
    seen_worlds = set()
    for s in points:
        u, e, n = world_of(s)
        assert 0 <= u <= e <= n, (u, e, n)
        assert list(s.execs[A][:n]) == [1] * e + [0] * (n - e), (s.execs[A], e)
        if u < n:
            assert d.World(u, e) in d.worlds(n)
            seen_worlds.add((n, u, e))
    # T1 and T2 of one WR, and worlds with an executed, unacknowledged suffix, all occur
    assert {(1, 0, 0), (1, 0, 1)} <= seen_worlds
    assert any(e - u >= 2 for _, u, e in seen_worlds)


def test_the_counter_a_rule_sees_is_the_notes_before_the_executed_prefix(graph: Any) -> None:
    """B's counter as A receives it equals NotesBefore(program, E), the `counter` of the
    decision layer's view; and the check can fail: counted one WR further, it would be
    wrong in some reached state."""
    with_counter = [s for s in decision_points(graph) if s.peerCtr[A] >= 0]
    assert len(with_counter) >= 100
    off_by_one = 0
    for s in with_counter:
        _, e, _ = world_of(s)
        assert s.peerCtr[A] == notes_before(s.program[A], e), (s.peerCtr[A], e)
        off_by_one += s.peerCtr[A] != notes_before(s.program[A], e + 1)
    assert off_by_one > 0


def test_the_rc_prefix_lemma_holds_on_every_state_before_a_replay(graph: Any) -> None:
    """`transport.rc_prefix`'s conclusion, on the model: on A's default path the responder
    executed exactly WRs 1..E (E = epsn - 1), once each, and A's acknowledged prefix lies
    within them — in every state of a one-way workload before A replays (after it, the
    backup path executes WRs again: SHIFT gives up exactly-once)."""
    states = [s for s in graph.states if not s.program[B] and not s.replayed[A]]
    assert len(states) >= 20_000
    for s in states:
        u, e, n = world_of(s)
        assert 0 <= u <= e <= n
        assert list(s.execs[A][:n]) == [1] * e + [0] * (n - e)
        assert not any(s.execs[A][n:]), s.execs[A]
