"""The runner and its mapping: it catches a wrong implementation, every documented
difference between the two sides is real (the implementation does differ there) and
narrow (the same difference elsewhere is still reported), and the generator biases
faults towards WRs in flight."""

from __future__ import annotations

import itertools
import random

import pytest
from diff_helpers import CORPUS
from shift.model.events import load_trace
from shift.model.next import Model
from shift.model.observable import completion_order
from shift.model.observe import Observation, observe
from shift.model.properties import INVARIANTS
from shift.model.state import State
from shift.vocabulary import make

from shift import differential as D


def random_runs(model: Model, n: int, seed: int) -> list[D.Run]:
    rng = random.Random(seed)
    return [D.run_trace(model, D.trace_from_choices(
        model, [rng.randrange(1 << 16) for _ in range(61)])) for _ in range(n)]


def build_as(monkeypatch: pytest.MonkeyPatch, impl_design: str) -> None:
    """Make every Bridge build the C core of impl_design, whatever the model's design."""
    init = D.Bridge.__init__

    def wrong(self, design, retries, program, *rest, **kw):  # type: ignore[no-untyped-def]
        init(self, impl_design, retries, program, *rest, **kw)

    monkeypatch.setattr(D.Bridge, "__init__", wrong)


@pytest.mark.parametrize(("model_design", "impl_design"),
                         [("Shift", "NaiveReplay"), ("NaiveReplay", "Shift"),
                          ("NoFailover", "Shift")])
def test_a_different_implementation_diverges(monkeypatch, model_design, impl_design) -> None:
    """Driving one design's model against another design's implementation must diverge."""
    build_as(monkeypatch, impl_design)
    runs = random_runs(Model.load(model_design, "default"), 60, 1)
    assert sum(r.divergence is not None for r in runs) >= 10


@pytest.mark.parametrize(("model_design", "impl_design"),
                         [("ShiftPrefix", "Shift"), ("Shift", "ShiftPrefix")])
def test_shift_and_shift_prefix_tell_apart(monkeypatch: pytest.MonkeyPatch, model_design: str,
                                          impl_design: str) -> None:
    """The two differ only in a replay after a received notification with a WR before it
    still outstanding, and visibly only when that WR is signaled or a later WRITE of its
    region executed before it: rarer, so more runs than above."""
    build_as(monkeypatch, impl_design)
    runs = random_runs(Model.load(model_design, "default"), 200, 2)
    assert sum(r.divergence is not None for r in runs) >= 3


def test_random_runs_agree_and_reach_every_failover_state() -> None:
    model = Model.load("Shift", "default")
    runs = random_runs(model, 150, 2)
    assert all(r.ok for r in runs), next(D.report(model, r) for r in runs if not r.ok)
    sends = {m for r in runs for s in r.states for m in s.sendMode}
    assert sends == {"Default", "Fallback", "WaitSignaled", "WaitDrained", "Error"}
    recvs = {m for r in runs for s in r.states for m in s.recvMode}
    assert recvs == {"Default", "Moving", "Fallback"}


@pytest.mark.parametrize(("bound", "name", "peer_ctr", "fence"), [
    ("small", "error-discards-peer-counter", 0, 0),
    ("large", "error-keeps-no-fence", 0, 4)])
def test_a_send_side_in_error_keeps_the_counter_exchange_and_its_fence_on_both_sides(
        bound: str, name: str, peer_ctr: int, fence: int) -> None:
    """A's send side in Error (a refusal; the backup path failing under the fence): its
    host still takes B's counter (its receive side fails over too) and keeps its fence,
    in the spec and in the core alike; the comparison leaves nothing out there."""
    model = Model.load("Shift", bound)
    events = load_trace(CORPUS / f"Shift/{bound}/{name}.jsonl")
    run = D.run_trace(model, events)
    assert run.ok and run.gap is None and len(run.events) == len(events), D.report(model, run)
    s = run.states[-1]
    assert s.sendMode[0] == "Error" and s.peerCtr[0] == peer_ctr and s.fence[0] == fence
    # in Error as elsewhere, a difference of a counter or a fence is a divergence
    obs = observe(s).as_dict()
    other = {**obs, "peerCtr": {**obs["peerCtr"], "A": -1}, "fence": {**obs["fence"], "A": 9}}
    assert set(D.compare(obs, other)) == {"peerCtr.A", "fence.A"}


def test_fail_back_keeps_the_counter_exchange_on_both_sides() -> None:
    """Release keeps sentCtr and peerCtr (a fresh counter alone wakes the next failover):
    B's NIC 1 fails and recovers, both fail over, A fails back behind its fence and B's
    receive side moves back on the notice; A is in Default with B's counter kept and
    nothing fresh, in the model and the core alike (the one-way core reset both at its
    release), and A takes no step of its own afterwards (enabledness)."""
    events = load_trace(CORPUS / "Shift/default/failback-keeps-the-counter-exchange.jsonl")
    model = Model.load("Shift", "default")
    run = D.run_trace(model, events)
    assert run.ok and run.gap is None and len(run.events) == len(events), D.report(model, run)
    s = run.states[-1]
    assert s.sendMode[0] == "Default" and s.recvMode[1] == "Default"
    assert s.sentCtr == (True, True) and s.peerCtr == (0, 0) and not s.fresh[0]
    assert s.fresh[1] and not s.replayed[1]  # B's (empty) replay is still due
    assert [(e.wr, e.recv) for e in s.rcvSeen[1]] == [(2, 1)]


def test_a_refused_send_side_still_answers_with_its_hosts_counter() -> None:
    """An atomic outstanding at the trigger: A's send side refuses (Error), but its
    receive side fails over, so A sends its counter; B, woken by it, fails over and
    answers; A takes the answer. Both sides agree on every step (the one-way core sent
    nothing from Error)."""
    events = load_trace(CORPUS / "Shift/default/refused-send-side-still-answers.jsonl")
    model = Model.load("Shift", "default")
    run = D.run_trace(model, events)
    assert run.ok and run.gap is None and len(run.events) == len(events), D.report(model, run)
    s = run.states[-1]
    assert s.sendMode == ("Error", "Fallback") and s.recvMode == ("Fallback", "Fallback")
    assert s.peerCtr == (0, 0) and s.sentCtr == (True, True)
    assert [(e.wr, e.status) for e in s.sndSeen[0]] == [(1, "RETRY_EXC_ERR"),
                                                        (2, "WR_FLUSH_ERR")]


def test_the_implicit_nak_is_real() -> None:
    """After a cumulative ACK covering an atomic whose response was lost, the model
    without ImplicitNak has completed the atomic; the implementation took the ACK as an
    implicit NAK, which at small's retry count of 0 fails the atomic (RETRY_EXC_ERR)."""
    model = Model.load("NoFailover", "small")
    events = load_trace(CORPUS / "NoFailover/small/implicit-nak-atomic.jsonl")
    run = D.run_trace(model, events)
    assert run.ok and run.gap is not None and "implicit NAK" in run.gap
    states = model.run(events + [make("PollCq", "A")])
    assert [e.wr for e in states[-1].sndSeen[0]] == [1]
    bridge = D.Bridge("NoFailover", model.bound, states[0].program[0])
    try:
        for ev in events[1:]:
            bridge.apply(ev)
        c = bridge.apply(make("PollCq", "A"))
        assert c is not None and c.wr_id == 1 and c.status.name == "RETRY_EXC_ERR"
        assert [e["status"] for e in bridge.observation()["sndSeen"]["A"]] == ["RETRY_EXC_ERR"]
    finally:
        bridge.close()
    # the generator never picks such an event
    s = states[-3]
    assert make("Deliver", 1, "BtoA") in model.enabled(s)
    assert make("Deliver", 1, "BtoA") not in sum(D.options(model, s), [])


def test_f4_stops_the_comparison_only_where_the_model_breaks_the_property() -> None:
    model = Model.load("Shift", "large")
    events = load_trace(CORPUS / "Shift/large/f4-completion-order.jsonl")
    run = D.run_trace(model, events)
    assert run.ok and run.gap is not None and "CompletionIntegrity" in run.gap
    assert len(run.events) == len(events)
    # every earlier prefix is compared in full, and agrees
    prefix = D.run_trace(model, events[:-1])
    assert prefix.ok and prefix.gap is None


@pytest.mark.parametrize(("prop", "seen"), [
    ("NotificationIntegrity", {"rcvSeen": {"A": [], "B": [
        {"wr": 2, "recv": 1, "status": "SUCCESS", "mem": {1: 1, 2: 0}, "data": 0},
        {"wr": 2, "recv": 2, "status": "SUCCESS", "mem": {1: 1, 2: 0}, "data": 0}]}}),
    ("DataAtNotification", {"rcvSeen": {"A": [], "B": [
        {"wr": 2, "recv": 1, "status": "SUCCESS", "mem": {1: 0, 2: 0}, "data": 0}]}}),
    ("CompletionIntegrity", {"sndSeen": {"A": [{"wr": 2, "status": "SUCCESS", "val": 0},
                                               {"wr": 1, "status": "WR_FLUSH_ERR", "val": 0}],
                                         "B": []}}),
])
def test_each_observable_invariant_is_checked_on_the_implementations_observation(
        prop: str, seen: dict) -> None:
    """The runner's judgement of a step whose projections agree: an observation in the
    implementation's dict form that breaks one kept invariant is named, and only a kept
    one."""
    model = Model.load("NoFailover", "small")
    s = model.init(make("Init", 1))
    s = s._replace(posted=(2, 0), sndSeen=((), ()), rcvSeen=((), ()))
    obs = {**observe(s).as_dict(), **seen}
    assert Observation.from_dict(obs).as_dict() == obs
    j = D.judge("NoFailover", s, obs, s.mem, D.OBSERVABLE_INVARIANTS)
    assert j.violated == [prop] and not j.fixed
    assert D.judge("NoFailover", s, obs, s.mem, ()).violated == []


def test_the_dict_form_reads_back_and_completion_integrity_implies_its_observable_half(
        ) -> None:
    """On every state of random runs: the projection in the dict form (the
    implementation's, as compared and recorded) reads back as the observation; and the
    model's CompletionIntegrity, which also reads the responder's executions, implies the
    post order the runner checks on the implementation."""
    model = Model.load("Shift", "large")
    for r in random_runs(model, 60, 5):
        for s in r.states:
            view = observe(s)
            assert Observation.from_dict(view.as_dict()) == view
            assert completion_order(view.direction(0)) or \
                not INVARIANTS["CompletionIntegrity"](s)


def test_faults_are_biased_towards_wrs_in_flight() -> None:
    model = Model.load("Shift", "default")
    rest = model.init(make("Init", 1))
    busy = model.step(rest, make("PostSend", "A", 1))
    assert busy is not None and D.in_flight(busy) and not D.in_flight(rest)

    def fault_rate(s: State) -> float:
        picks = [D.pick(model, s, c) for c in range(0, 1 << 16, 7)]
        return sum(p is not None and p.name in D.FAULT_NAMES for p in picks) / len(picks)

    assert abs(fault_rate(busy) - D.FAULT_SHARE_BUSY / 1000) < 0.02
    assert abs(fault_rate(rest) - D.FAULT_SHARE_REST / 1000) < 0.02
    assert D.pick(model, busy, 0).name not in D.FAULT_NAMES  # zero: no fault


def test_random_runs_replay_after_the_peer_received_a_notification() -> None:
    """The generator reaches the heart of SHIFT: a replay filtered by a counter >= 1."""
    runs = random_runs(Model.load("Shift", "default"), 200, 4)
    assert sum(any(s.replayed[0] and s.peerCtr[0] >= 1 for s in r.states) for r in runs) >= 5


def test_random_runs_skip_a_one_sided_wr_before_a_received_notification() -> None:
    """The generator reaches what ShiftPrefix adds to SHIFT: a replay that skips a WRITE
    (one-sided) because a notification after it was received."""
    model = Model.load("ShiftPrefix", "default")

    def skips_one_sided(r: D.Run) -> bool:
        return any(t.replayed[0] and not s.replayed[0]
                   and any(s.program[0][w - 1].note == 0
                           for w in set(s.pending[0]) - set(t.pending[0]))
                   for s, t in itertools.pairwise(r.states))

    # 30 runs per workload of the bound (eight at default)
    runs = random_runs(model, 30 * len(model.bound.workloads), 4)
    assert all(r.ok for r in runs), next(D.report(model, r) for r in runs if not r.ok)
    assert sum(map(skips_one_sided, runs)) >= 5


def test_f3_shift_prefix_skips_the_write_shift_replays_on_both_sides() -> None:
    """F3's trace: two rounds into region 1, all four WRs executed, every ACK lost, B
    counts both notifications. ShiftPrefix skips all four: nothing goes out on the backup
    path, and B reads 2 under notification 2, in the model and the core alike. Shift
    replays WRITE #1, which executes before B polls: both sides show the stale 1."""
    events = load_trace(CORPUS / "ShiftPrefix/small/f3-executed-writes-skipped.jsonl")
    replay = 24  # the events up to A's replay; then B polls notification 2
    assert events[replay - 1] == make("Progress", "A") and events[replay] == make("PollCq", "B")
    model = Model.load("ShiftPrefix", "small")
    run = D.run_trace(model, events)
    assert run.ok and run.gap is None and len(run.events) == len(events)
    assert make("Transmit", "A", 2) not in sum(D.options(model, run.states[replay]), [])
    assert [c.mem[0] for c in run.states[-1].rcvSeen[1]] == [1, 2]
    shift = [*events[:replay], make("Transmit", "A", 2), make("Deliver", 2, "AtoB"),
             make("PollCq", "B")]
    run = D.run_trace(Model.load("Shift", "small"), shift)
    assert run.ok and run.gap is None and len(run.events) == len(shift)
    assert [c.mem[0] for c in run.states[-1].rcvSeen[1]] == [1, 1]
    assert not INVARIANTS["DataAtNotification"](run.states[-1])


def test_f4_shift_prefix_needs_no_fix_of_the_core() -> None:
    """F4's trace up to the poll: with the backup NIC dead before the replay, Shift
    replays WRITE #1 into it (the model then shows #2 SUCCESS before #1's error; the
    core fixes that, IMPL_FIXES). ShiftPrefix skips #1 as well: #2's success is all there
    is, and the two sides agree to the end without a fix to account for."""
    events = load_trace(CORPUS / "ShiftPrefix/large/f4-backup-fails-nothing-replayed.jsonl")
    assert events == load_trace(CORPUS / "Shift/large/f4-completion-order.jsonl")[:-1]
    run = D.run_trace(Model.load("ShiftPrefix", "large"), events)
    assert run.ok and run.gap is None and len(run.events) == len(events)
    assert [(c.wr, c.status) for c in run.states[-1].sndSeen[0]] == [(2, "SUCCESS")]
    assert run.states[-1].pending[0] == () and "ShiftPrefix" not in D.IMPL_FIXES


def test_f5_shift_prefix_completes_the_skipped_prefix_in_post_order() -> None:
    """F5's program (signaled WRITE, notification; both executed, both ACKs lost): the
    replay skips both and both sides report #1 then #2 SUCCESS at once; the F5 gap
    (Shift's model completes #2 while #1 is replayed) never arises."""
    events = load_trace(CORPUS / "ShiftPrefix/small/f5-skipped-prefix-in-post-order.jsonl")
    run = D.run_trace(Model.load("ShiftPrefix", "small"), events)
    assert run.ok and run.gap is None and len(run.events) == len(events)
    assert [(c.wr, c.status) for c in run.states[-1].sndSeen[0]] == [(1, "SUCCESS"),
                                                                     (2, "SUCCESS")]


def test_shift_prefix_replays_the_writes_after_the_last_received_notification() -> None:
    """Round 1 executed and counted, round 2 never left A: the replay re-posts exactly
    round 2 (WRITE #3, notification #4), and B reads #3's value under notification 2."""
    events = load_trace(CORPUS / "ShiftPrefix/default/write-after-last-notification-"
                                 "replayed.jsonl")
    model = Model.load("ShiftPrefix", "default")
    run = D.run_trace(model, events)
    assert run.ok and run.gap is None and len(run.events) == len(events)
    k = next(i for i, s in enumerate(run.states) if s.replayed[0])
    assert run.states[k - 1].pending[0] == (1, 2, 3, 4) and run.states[k].pending[0] == (3, 4)
    assert run.states[k].sq[0][1] == (3, 4)
    assert [(c.wr, c.mem[0]) for c in run.states[-1].rcvSeen[1]] == [(2, 1), (4, 2)]


def test_kept_invariants_follow_the_declarations() -> None:
    # Shift breaks CompletionIntegrity from small on (F5; F4 at large)
    assert D.kept_invariants("Shift", "default") == ("NotificationIntegrity",)
    assert D.kept_invariants("Shift", "large") == ("NotificationIntegrity",)
    assert D.kept_invariants("NoFailover", "large") == D.OBSERVABLE_INVARIANTS
    # F3's fix keeps every observable invariant, at every bound
    assert D.kept_invariants("ShiftPrefix", "large") == D.OBSERVABLE_INVARIANTS


# A failover without a hardware fault (a lost packet, no retransmission left): after the
# replay the default path is healthy, and only a bound with recovery lets A fail back.
NO_FAULT_FAILOVER = [make("Init", 2), make("PostRecv", "B", 1), make("PostSend", "A", 1),
                     make("Transmit", "A", 1), make("Drop", 1, "AtoB"),
                     make("Timeout", "A", 1), make("PollCq", "A"), make("Progress", "A"),
                     make("Deliver", 2, "AtoB"), make("Progress", "B"),
                     make("Progress", "B"), make("Deliver", 2, "BtoA"),
                     make("Progress", "A")]


def test_at_a_bound_without_recovery_the_core_does_not_fail_back(monkeypatch) -> None:
    """`small` has Recover = FALSE: the spec's Reconnect is never enabled. The bridge
    opens the connection without fail-back there, so the two sides agree; with it (the
    core's default) the core reconnects the healthy default path and the runner says so."""
    model = Model.load("Shift", "small")
    assert not model.bound.recover
    run = D.run_trace(model, NO_FAULT_FAILOVER)
    assert run.ok, D.report(model, run)
    assert run.states[-1].sendMode[0] == "Fallback"
    init = D.Bridge.__init__

    def failing_back(self, design, bound, program, peer_program=(), copy_posts=False,  # type: ignore[no-untyped-def]
                     fail_back=None, side="core"):
        init(self, design, bound, program, peer_program, copy_posts, fail_back=True,
             side=side)

    monkeypatch.setattr(D.Bridge, "__init__", failing_back)
    run = D.run_trace(model, NO_FAULT_FAILOVER)
    assert run.divergence is not None
    assert "Progress(A)" in D.report(model, run)
