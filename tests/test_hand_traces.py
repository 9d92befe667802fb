"""Hand-written traces (tests/traces/): each a scenario a reader can follow step by step,
replayed through the model with its verdict, and through the C core where one applies.

A trace is named for what it shows; the table says which design and bound run it, which
properties the model's last state breaks, and what the implementation does with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shift.model.events import load_trace
from shift.model.next import Model, NotEnabled
from shift.model.properties import INVARIANTS, done
from shift.vocabulary import FAULT_EVENTS, Event

from shift.differential import report, run_trace

TRACES = Path(__file__).parent / "traces"

# trace -> (design, bound, invariants the model breaks at the last event and not before)
VERDICTS: dict[str, tuple[str, str, frozenset[str]]] = {
    # F5: A's replay re-posts the signaled WRITE #1 and skips the WRITE_WITH_IMM #2 that B
    # counted; #2's success reaches A's application before #1's.
    "f5_signaled_write_completes_late": ("Shift", "small",
                                         frozenset({"CompletionIntegrity"})),
    # CAS's ABA case: the CAS swapped 0 -> 1 and its ACK is lost with A's NIC; B's
    # application, done with the message, puts region 2 back to 0; NaiveReplay's replayed
    # CAS finds its compare value again and swaps a second time.
    "cas_aba_replayed_cas_swaps_twice": ("NaiveReplay", "small",
                                         frozenset({"AtomicSafety", "ExactlyOnceExecution"})),
    # F7: B's NIC 1 ACKs SEND #1 and dies before its receive completion is in B's memory
    # (AckBeforeCqe); A forgot #1 at its success, B reposts receive WR 1, and the replayed
    # SEND #2 lands in it.
    "f7_ack_before_cqe_lost_notification_slides": ("Shift", "ackfirst",
                                                   frozenset({"NotificationIntegrity"})),
}


# trace -> (designs, bound): two-way traffic that survives a NIC failure. No invariant
# breaks at any step, both applications finish (Properties.tla's Done), and each took
# the peer's one notification once, with its payload in the buffer.
SURVIVES: dict[str, tuple[tuple[str, ...], str]] = {
    # ping-pong: A's SEND executed at B, its ACK still on the wire; B's reply on the wire
    # to A when A's NIC 1 dies. Both send sides fail over (B's on A's counter) and B's
    # reply is replayed on the backup path.
    "pingpong_survives_nic_failure_on_a": (("Shift", "ShiftPrefix"), "twoway"),
    # the same moment, B's NIC 1 dies: the mirror image, B's layer leads.
    "pingpong_survives_nic_failure_on_b": (("Shift", "ShiftPrefix"), "twoway"),
    # A's NIC 1 dies with A's SEND executed at B; B's application replies while A's
    # layer fails over (A in Fallback, B still on the default path): B's SEND sits on
    # the dead path until A's counter moves B's send side over too.
    "b_sends_to_a_while_a_fails_over": (("Shift", "ShiftPrefix"), "twoway"),
}


# trace -> (designs, bound): a run that stops short of Done with nothing enabled
# (Liveness lost), though no invariant breaks.
STALLS: dict[str, tuple[tuple[str, ...], str]] = {
    # F2: A's backup NIC dies while idle and comes back with its QP in ERR, then the
    # default NIC fails: A's counter never leaves the backup QP, and the handshake timer
    # cannot resend it (QP 2 not ready to send). Every design with a pre-built backup QP
    # stops there, ReceiverQuery included (its Liveness at large rests on this alone since
    # the timer resends a counter lost to a link flap).
    "f2_dead_idle_backup_qp_no_timer_helps": (("Shift", "ReceiverQuery"), "large"),
}


# trace -> (design, bound): a stall the layer's completion timer ends (F8): up to the
# timer the default path waits for ever; after it the run reaches Done.
RECOVERS: dict[str, tuple[str, str]] = {
    "f8_lost_failback_notice_completion_timer": ("Shift", "rnr"),
}


# (trace, design): every run of SURVIVES, for the model's test and the C core's
SURVIVING_RUNS = [(n, d) for n, (ds, _) in sorted(SURVIVES.items()) for d in ds]


def broken(states: list) -> list[frozenset[str]]:
    return [frozenset(p for p, ok in INVARIANTS.items() if not ok(s)) for s in states]


def test_every_trace_has_a_verdict() -> None:
    assert sorted(p.stem for p in TRACES.glob("*.jsonl")) == sorted(
        {**VERDICTS, **SURVIVES, **STALLS, **RECOVERS, F7C: (), F9: (), F11: ()})


@pytest.mark.parametrize("name", sorted(STALLS))
def test_the_model_stops_short_of_done_where_the_trace_stalls(name: str) -> None:
    designs, bound = STALLS[name]
    for design in designs:
        m = Model.load(design, bound)
        states = m.run(load_trace(TRACES / f"{name}.jsonl"))
        assert not any(broken(states)), design
        last = states[-1]
        assert m.enabled(last) == [] and not done(last), design
        # A asked and its counter never left: the timer has nothing it could send on
        assert last.asked[0] and last.sentCtr[0] and last.qp[0][1] == "ERR", design


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_the_model_breaks_what_the_trace_shows_at_its_last_event(name: str) -> None:
    design, bound, last = VERDICTS[name]
    states = Model.load(design, bound).run(load_trace(TRACES / f"{name}.jsonl"))
    seen = broken(states)
    assert last <= seen[-1] and not last & seen[-2]


def test_f5_the_c_core_holds_the_skipped_success_where_the_model_gives_it() -> None:
    model = Model.load("Shift", "small")
    events = load_trace(TRACES / "f5_signaled_write_completes_late.jsonl")
    run = run_trace(model, events)
    assert run.divergence is None, report(model, run)
    # equal up to the poll that takes #2's success, where the documented difference starts
    assert run.gap is not None and "(F5)" in run.gap
    assert run.events == events[:17] and events[17] == Event("PollCq", ("A",))


F7 = "f7_ack_before_cqe_lost_notification_slides"


def test_f7_the_c_core_slides_the_notification_as_the_model_does() -> None:
    """The C core (simnic with ack_before_cqe) agrees with the model at every step of F7,
    and its own observation breaks NotificationIntegrity at the last one: B's NIC 1 lost
    the completion of receive WR 1 (written by neither side), and B's application takes
    SEND #2 in receive WR 1."""
    model = Model.load("Shift", "ackfirst")
    events = load_trace(TRACES / f"{F7}.jsonl")
    run = run_trace(model, events)
    assert run.divergence is None and run.gap is None, report(model, run)
    assert run.events == events
    checked = run_trace(model, events, kept=("NotificationIntegrity",))
    assert checked.divergence is not None and checked.divergence.step == len(events)
    assert checked.divergence.violated == ["NotificationIntegrity"]
    assert checked.divergence.fields == {}  # the two sides agree on what B took
    fail = events.index(Event("NicFail", ("B", 1)))
    before = run.states[fail - 1]  # receive WR 1's completion made, not in memory
    assert [c.recv for c in before.unwritten[1][0]] == [1] and before.cq[1][0] == ()
    assert run.states[fail].unwritten[1][0] == ()


def test_f7_is_not_a_behaviour_where_the_completion_comes_with_the_ack() -> None:
    """With AckBeforeCqe = FALSE (bound small) receive WR 1's completion is in B's memory
    when the ACK leaves: it survives the NIC, B's first poll takes SEND #1 in it, and the
    rest of the trace cannot happen."""
    events = load_trace(TRACES / f"{F7}.jsonl")
    model = Model.load("Shift", "small")
    poll = events.index(Event("PollCq", ("B",)))
    states = model.run(events[:poll + 1])
    assert [(e.wr, e.recv, e.status) for e in states[-1].rcvSeen[1]] == [(1, 1, "SUCCESS")]
    with pytest.raises(NotEnabled, match="is not enabled"):
        model.run(events)
    executed = states[events.index(Event("Deliver", (1, "AtoB")))]
    why = model.not_enabled(1, executed, Event("WriteCqe", ("B", 1)))
    assert "AckBeforeCqe = FALSE" in why


def test_f7_shift_counted_sends_the_acked_notification_again() -> None:
    """F7's trace under ShiftCounted: up to A taking B's counter 0 it is the same run; then
    A replays SEND #1 (acked, not counted) before SEND #2 and drops #1's second completion.
    Run to the end with the first fair event each time: B takes #1 in receive WR 1 and #2
    in receive WR 2, and A's application saw each success once."""
    model = Model.load("ShiftCounted", "ackfirst")
    events = load_trace(TRACES / f"{F7}.jsonl")
    counter = events.index(Event("Deliver", (2, "BtoA")))
    states = model.run(events[:counter + 1])
    s = states[-1]
    assert s.acked[0] == (1,) and s.peerCtr[0] == 0
    replayed = None
    for _ in range(200):
        evs = [ev for ev in model.enabled(s) if ev.name not in FAULT_EVENTS]
        if not evs:
            break
        s = model.step(s, evs[0])
        if s.resent[0] and replayed is None:
            replayed = s
    assert replayed is not None and replayed.sq[0][1][:2] == (1, 2)
    # SEND #1 executed twice (once into the completion that died): exactly-once is the
    # trilemma's price, declared; every notification property holds
    assert done(s) and broken([s])[0] == {"ExactlyOnceExecution"}
    assert s.execs[0] == (2, 1)
    assert [(e.wr, e.recv) for e in s.rcvSeen[1]] == [(1, 1), (2, 2)]
    assert [e.wr for e in s.sndSeen[0]] == [1, 2] and s.resent[0] == frozenset()


ABA = "cas_aba_replayed_cas_swaps_twice"
ABA_REST = [Event("Deliver", (2, "BtoA")), Event("PollCq", ("A",))]


def test_aba_the_requester_sees_one_cas_that_returned_its_compare_value() -> None:
    """After the replayed CAS, A's application polls exactly what one execution gives
    (SUCCESS, returned 0 = compare): nothing it sees tells it the CAS ran twice, and B's
    store is gone (region 2 holds the swapped-in 1 again). The C core shows the same:
    run_trace compares its observation (with `val`) and B's memory at every step."""
    model = Model.load("NaiveReplay", "small")
    events = load_trace(TRACES / f"{ABA}.jsonl") + ABA_REST
    last = model.run(events)[-1]
    assert [(e.wr, e.status, e.val) for e in last.sndSeen[0]] == [(1, "SUCCESS", 0)]
    assert last.mem[1][1] == 1
    run = run_trace(model, events)
    assert run.divergence is None and run.gap is None, report(model, run)
    assert run.events == events


def test_aba_shift_refuses_before_the_cas_can_run_again() -> None:
    """The same trace under SHIFT: A's first poll after the NIC failure finds the CAS
    outstanding and refuses; the CAS's error reaches A's application, no replay starts."""
    events = load_trace(TRACES / f"{ABA}.jsonl")
    poll = events.index(Event("PollCq", ("A",)))
    model = Model.load("Shift", "small")
    states = model.run(events[:poll + 1] + [Event("PollCq", ("A",))])
    s = states[-1]
    assert s.sendMode[0] == "Error" and s.refused[0] == frozenset({1, 2})
    assert [(e.wr, e.status) for e in s.sndSeen[0]] == [(1, "WR_FLUSH_ERR")]
    # A's receive side still moves to the backup QP and sends its counter (the
    # handshake); its send side replays nothing.
    t = model.step(s, Event("Progress", ("A",)))
    assert t is not None and t.sentCtr[0] and t.sq[0][1] == () and t.sendMode[0] == "Error"
    assert model.step(t, Event("Progress", ("A",))) is None


@pytest.mark.parametrize("name,design", SURVIVING_RUNS)
def test_two_way_traffic_survives_the_failure(name: str, design: str) -> None:
    _, bound = SURVIVES[name]
    events = load_trace(TRACES / f"{name}.jsonl")
    states = Model.load(design, bound).run(events)
    assert not any(broken(states))
    last = states[-1]
    assert done(last)
    for h, peer in ((0, 1), (1, 0)):
        (seen,) = last.rcvSeen[h]  # one notification, once
        assert seen.status == "SUCCESS" and seen.data == last.program[peer][seen.wr - 1].value
        assert [e.status for e in last.sndSeen[h]] == ["SUCCESS"]
    # the failure happened with both directions in flight, and both send sides failed over
    fail = next(k for k, ev in enumerate(events) if ev.name == "NicFail")
    if name.startswith("pingpong"):
        before = states[fail - 1]
        assert before.posted == (1, 1) and not before.sndSeen[0]
    assert any(s.sendMode[0] != "Default" for s in states)
    assert any(s.sendMode[1] != "Default" for s in states)


def test_b_posts_its_reply_while_a_is_failing_over() -> None:
    events = load_trace(TRACES / "b_sends_to_a_while_a_fails_over.jsonl")
    states = Model.load("Shift", "twoway").run(events)
    post = events.index(Event("PostSend", ("B", 1)))
    before = states[post - 1]
    assert before.sendMode == ("Fallback", "Default") and not before.nic[0][0]


def test_a_two_way_trace_without_failover_does_not_survive() -> None:
    """NoFailover cannot run the surviving traces: after the NIC failure nothing moves
    the connection to the backup path (the model says why at the first layer step)."""
    for name in SURVIVES:
        events = load_trace(TRACES / f"{name}.jsonl")
        with pytest.raises(NotEnabled, match="no failover layer"):
            Model.load("NoFailover", "twoway").run(events)


@pytest.mark.parametrize("name,design", SURVIVING_RUNS)
def test_the_c_core_survives_the_same_failure(name: str, design: str) -> None:
    """The C core, both endpoints posting sends and receives, runs each surviving trace to
    its end with the model's observation at every step (no divergence, no gap)."""
    _, bound = SURVIVES[name]
    model = Model.load(design, bound)
    events = load_trace(TRACES / f"{name}.jsonl")
    run = run_trace(model, events)
    assert run.divergence is None and run.gap is None, report(model, run)
    assert run.events == events


F8 = "f8_lost_failback_notice_completion_timer"
TIMER = Event("CompletionTimeout", ("A",))


def test_f8_without_the_completion_timer_the_default_path_waits_for_ever() -> None:
    """Up to A's completion timer, F8's run is the lasso TLC found: A's SEND #2 on the
    default path, RNR-NAKed by B's NIC (its receive WR 2 is on the backup QP: A's fail-back
    notice was lost), retransmitted for ever. Nothing but the loop and the timer can
    happen, and the loop comes back to the same state."""
    model = Model.load(*RECOVERS[F8])
    events = load_trace(TRACES / f"{F8}.jsonl")
    k = events.index(TIMER)
    states = model.run(events[:k])
    stall = states[-1]
    assert Event("Drop", (1, "AtoB")) in events[:k] and not any(broken(states))
    assert stall.sendMode[0] == "Default" and stall.recvMode[1] == "Fallback"
    assert stall.rq[1] == ((), (2,))  # B's receive WR 2 is on its backup QP
    system = [e for e in model.enabled(stall) if e.name not in FAULT_EVENTS]
    assert system == [Event("Transmit", ("A", 1)), TIMER]
    loop = model.run([events[0], *events[1:k], Event("Transmit", ("A", 1)),
                      Event("Deliver", (1, "AtoB")), Event("Deliver", (1, "BtoA"))])
    assert loop[-1] == stall and loop[-2].wire[0][1][0].kind == "rnr"


def test_f8_the_completion_timer_ends_the_stall() -> None:
    """A's completion timer fails A's side over; the failover re-aligns both hosts and the
    run ends (Done): B took SEND #1 and #2 once each, in receive WRs 1 and 2, with their
    payloads, and A saw both succeed."""
    model = Model.load(*RECOVERS[F8])
    events = load_trace(TRACES / f"{F8}.jsonl")
    states = model.run(events)
    k = events.index(TIMER)
    assert not any(broken(states)) and done(states[-1])
    assert states[k].sendMode[0] == "Fallback" and states[k].qp[0][0] == "ERR"
    last = states[-1]
    assert [(e.wr, e.recv, e.data) for e in last.rcvSeen[1]] == [(1, 1, 1), (2, 2, 2)]
    assert [e.status for e in last.sndSeen[0]] == ["SUCCESS", "SUCCESS"]


def test_f8_the_c_core_fails_over_on_its_completion_timer() -> None:
    """The C core (simnic with RNR NAKs retried for ever, the layer's shift_timer on the
    default path) agrees with the model at every step of F8, the RNR loop and the
    completion timer's failover included."""
    model = Model.load(*RECOVERS[F8])
    events = load_trace(TRACES / f"{F8}.jsonl")
    run = run_trace(model, events)
    assert run.divergence is None and run.gap is None, report(model, run)
    assert run.events == events


F7C = "f7_counted_replays_the_acked_notification"


def test_f7_counted_the_acked_notification_is_replayed_in_model_and_core() -> None:
    """F7's run under ShiftCounted, its fix: A's layer kept SEND #1 after its success, and
    replays it first when B's counter (0) does not cover it. B takes #1 in receive WR 1
    and #2 in receive WR 2; A's application sees each success once (the layer dropped the
    replayed #1's). Only ExactlyOnceExecution breaks, as declared (#1 executed twice at
    B's NICs). The C core (SHIFT_DESIGN_SHIFT_COUNTED) agrees at every step."""
    events = load_trace(TRACES / f"{F7C}.jsonl")
    model = Model.load("ShiftCounted", "ackfirst")
    states = model.run(events)
    assert set().union(*broken(states)) == {"ExactlyOnceExecution"}
    last = states[-1]
    assert done(last)
    assert [(e.wr, e.recv) for e in last.rcvSeen[1]] == [(1, 1), (2, 2)]
    assert [(e.wr, e.status) for e in last.sndSeen[0]] == [(1, "SUCCESS"), (2, "SUCCESS")]
    run = run_trace(model, events)
    assert run.divergence is None and run.gap is None, report(model, run)
    assert run.events == events


F9 = "f9_counted_success_from_the_backup_path"


def test_f9_a_success_from_the_backup_path_is_not_kept() -> None:
    """ShiftCounted keeps a notification until a counter covers it only if its success
    came from the default path: SEND #1, the fail-back's fence, succeeded on the backup
    path, so the second failover (B's counter 0: its layer had not polled SEND #1's
    completion from its backup CQ) does not replay it. B takes SEND #1 and #2 once each,
    in receive WRs 1 and 2; nothing breaks (before the rule, NotificationIntegrity: B took
    the replayed SEND #1 in receive WR 2)."""
    model = Model.load("ShiftCounted", "default")
    events = load_trace(TRACES / f"{F9}.jsonl")
    states = model.run(events)
    assert not any(broken(states))
    poll = events.index(Event("PollCq", ("A",)))
    assert [e.wr for e in states[poll].sndSeen[0]] == [1] and states[poll].acked[0] == ()
    # a second failover: B answered A's second counter with 0, before its layer polled
    # SEND #1's receive completion from the backup CQ
    answer = next(s for s in states[poll:] if s.ctrSeq[1] == 2)
    assert answer.ctrVal[1] == 0 and answer.cq[1][1][:1] and answer.cq[1][1][0].wr == 1
    last = states[-1]
    assert [(e.wr, e.recv, e.data) for e in last.rcvSeen[1]] == [(1, 1, 1), (2, 2, 2)]
    assert last.execs[0] == (1, 1)
    run = run_trace(model, events)  # the C core's ShiftCounted, step by step
    assert run.divergence is None and run.gap is None, report(model, run)


F11 = "f11_failback_reposts_an_unwritten_receive"


def test_f11_the_failback_waits_for_the_completion_the_backup_nic_had_not_written() -> None:
    """At faithful B's backup NIC ACKs SEND #1 (the fail-back's fence) before writing its
    receive completion. A's fail-back notice says one notification came before its fence;
    B has taken none, so its receive side waits on the backup path (failbackAt): SEND #2
    on the default path is RNR-NAKed, the NIC writes SEND #1's completion, B's poll takes
    it and moves back, and the retransmitted SEND #2 lands in receive WR 2 (before F11's
    fix, in receive WR 1 reposted: NotificationIntegrity). No drain: B's own sends on its
    backup QP would not survive one. ShiftCounted and ShiftPrefix, in the model and the C
    core: the two sides agree at every step."""
    events = load_trace(TRACES / f"{F11}.jsonl")
    states = Model.load("ShiftCounted", "faithful").run(events)
    assert not any(broken(states))
    notice = next(k for k, s in enumerate(states) if s.failbackAt[1])
    assert states[notice].failbackAt[1] == 1 and states[notice].recvMode[1] == "Fallback"
    assert states[notice].unwritten[1][1] and states[notice].recvDone[1] == 0
    assert any(m.kind == "rnr" for s in states[notice:] for m in s.wire[0][1])
    back = next(k for k, s in enumerate(states) if k > notice and s.recvMode[1] == "Default")
    assert states[back].recvDone[1] == 1 and states[back].rq[1][0] == (2,)
    assert [(e.wr, e.recv) for e in states[-1].rcvSeen[1]] == [(1, 1), (2, 2)]
    for design in ("ShiftCounted", "ShiftPrefix"):
        model = Model.load(design, "faithful")
        run = run_trace(model, events)
        assert run.divergence is None and run.gap is None, report(model, run)
        assert [(e.wr, e.recv) for e in run.states[-1].rcvSeen[1]] == [(1, 1), (2, 2)]
