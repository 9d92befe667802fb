"""One action at a time: the concrete state change each event makes, and when it cannot
happen. Workloads (spec/Workloads.tla): 1 = WRITE, WRITE_IMM; 2 = SEND, SEND; 3 = FADD,
WRITE_IMM; 4 = WRITE, WRITE_IMM, WRITE, WRITE_IMM (buffer reuse); 7 = ping-pong (A's SEND,
B's SEND in reply). Every per-host variable is a pair, A's then B's ([host][path - 1] for
the QPs' and queues')."""

from __future__ import annotations

import dataclasses

from modelkit import changed, model, reach, step
from shift.model.layer import trigger
from shift.model.next import Model
from shift.model.state import (
    SPEAKING,
    TAKEN_OVER,
    Ack,
    Cqe,
    Ctl,
    RcvSeen,
    Req,
    Rnr,
    SndSeen,
    State,
    set_at,
)
from shift.vocabulary import make

SHIFT = model("Shift")
A, B = 0, 1
EMPTY = ((), ())


def on(s: State, h: int, **per_host: object) -> State:
    """s with host h's entry of each named variable replaced."""
    return s._replace(**{k: set_at(getattr(s, k), h, v) for k, v in per_host.items()})

# Workload 1 with everything posted: WRITE (unsignaled), WRITE_IMM (signaled, note 1).
POSTED1 = (("PostSend", "A", 1), ("PostRecv", "B", 1), ("PostSend", "A", 2))


# ------------------------------------------------------------ RC transport ----

def test_transmit_sends_the_next_psn() -> None:
    s = reach(SHIFT, 1, *POSTED1)
    t = step(SHIFT, s, "Transmit", "A", 1)
    assert t.wire[0][0] == (Req(1, 1),) and t.nxt[A] == (2, 1)
    assert changed(s, t) == {"wire", "nxt"}
    t = step(SHIFT, t, "Transmit", "A", 1)
    assert t.wire[0][0] == (Req(1, 1), Req(2, 2)) and t.nxt[A] == (3, 1)
    assert SHIFT.step(t, make("Transmit", "A", 1)) is None  # nothing left to send
    assert SHIFT.step(t, make("Transmit", "B", 1)) is None  # B's send queue is empty


def test_transmit_is_held_on_the_default_path_while_the_fence_drains() -> None:
    s = on(reach(SHIFT, 1, ("PostSend", "A", 1)), A, sendMode="WaitDrained")
    assert SHIFT.step(s, make("Transmit", "A", 1)) is None
    s = on(s, A, sq=((1,), (1,)))
    assert step(SHIFT, s, "Transmit", "A", 2).wire[1][0] == (Req(1, 1),)


def test_transmit_on_a_dead_link_is_lost() -> None:
    s = reach(SHIFT, 1, ("PostSend", "A", 1))._replace(link=(False, True))
    t = step(SHIFT, s, "Transmit", "A", 1)
    assert t.wire == s.wire and t.nxt[A] == (2, 1)


def test_responder_executes_the_expected_psn_and_acks() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1))
    t = step(SHIFT, s, "Deliver", 1, "AtoB")
    assert t.mem[B] == (1, 0) and t.execs[A] == (1, 0) and t.epsn[B] == (2, 1)
    assert t.wire[0] == ((Req(2, 2),), (Ack(1, 0),))  # a WRITE's ACK returns nothing
    assert changed(s, t) == {"mem", "execs", "epsn", "wire"}
    # The notification consumes receive WR 1 and completes at B.
    u = step(SHIFT, t, "Deliver", 1, "AtoB")
    assert u.rq[B] == EMPTY and u.cq[B][0] == (Cqe(2, 1, "SUCCESS", 0),)
    assert u.execs[A] == (1, 1) and u.epsn[B] == (3, 1)
    assert u.wire[0][1] == (Ack(1, 0), Ack(2, 0))


def test_responder_reacks_a_duplicate_without_executing_it() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Deliver", 1, "AtoB"))
    dup = s._replace(wire=((((Req(1, 1),)), s.wire[0][1]), s.wire[1]))
    t = step(SHIFT, dup, "Deliver", 1, "AtoB")
    assert t.execs == s.execs and t.mem == s.mem and t.epsn == s.epsn
    assert t.wire[0] == ((), (Ack(1, 0), Ack(1, 0)))


def test_duplicate_atomic_returns_its_saved_result() -> None:
    s = reach(SHIFT, 3, ("PostSend", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"))
    assert s.mem[B] == (1, 0) and s.saved[B] == (frozenset({(1, 0)}), frozenset())
    dup = s._replace(wire=(((Req(1, 1),), ()), s.wire[1]))
    t = step(SHIFT, dup, "Deliver", 1, "AtoB")
    assert t.mem[B] == (1, 0) and t.execs[A] == (1, 0)  # not added twice
    assert t.wire[0][1] == (Ack(1, 0),)  # the saved old value, not the current one


def test_responder_discards_a_request_ahead_of_its_psn() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1))
    skip = s._replace(wire=(((Req(2, 2),), ()), s.wire[1]))
    t = step(SHIFT, skip, "Deliver", 1, "AtoB")
    assert changed(skip, t) == {"wire"} and t.wire[0] == ((), ())


def test_responder_discards_a_notification_without_receive_wr() -> None:
    s = reach(SHIFT, 2, ("PostRecv", "B", 1), ("PostSend", "A", 1))
    s = on(s._replace(wire=(((Req(1, 1),), ()), EMPTY)), B, rq=EMPTY)
    s = on(s, A, nxt=(2, 1), sq=((1,), ()))
    t = step(SHIFT, s, "Deliver", 1, "AtoB")
    assert changed(s, t) == {"wire"} and t.execs[A] == (0, 0)  # receiver not ready


# RnrNak (bound rnr): workload 2 (SEND, SEND) with B's receive WR 1 gone from its QP.
RNR = model("Shift", "rnr")


def not_ready(m: Model) -> State:
    """A's SEND #1 and #2 transmitted on path 1, SEND #1 about to reach B with no receive
    WR there."""
    s = reach(m, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2), ("PostSend", "A", 1),
              ("PostSend", "A", 2), ("Transmit", "A", 1), ("Transmit", "A", 1))
    return on(s, B, rq=EMPTY)


def test_with_rnr_nak_the_responder_answers_a_notification_without_receive_wr() -> None:
    s = not_ready(RNR)
    t = step(RNR, s, "Deliver", 1, "AtoB")
    assert t.wire[0] == ((Req(2, 2),), (Rnr(1),)) and t.execs == s.execs
    assert changed(s, t) == {"wire"}
    # SEND #2, ahead of the expected PSN 1, is discarded as before.
    assert step(RNR, t, "Deliver", 1, "AtoB").wire[0] == ((), (Rnr(1),))


def test_an_rnr_nak_sends_the_requester_back_for_ever() -> None:
    s = step(RNR, step(RNR, not_ready(RNR), "Deliver", 1, "AtoB"), "Deliver", 1, "AtoB")
    t = step(RNR, s, "Deliver", 1, "BtoA")
    assert t.nxt[A] == (1, 1) and t.una[A] == (1, 1) and t.rnrLeft[A] == (7, 7)
    assert t.qp[A] == ("RTS", "RTS") and t.cq[A] == EMPTY  # no error: it retries
    # B's receive WR comes back; the retransmission executes.
    u = step(RNR, on(t, B, rq=((1, 2), ())), "Transmit", "A", 1)
    u = step(RNR, u, "Deliver", 1, "AtoB")
    assert u.execs[A] == (1, 0) and u.bufs[B][0] == s.program[A][0].value


def test_rnr_retries_run_out_with_a_finite_count() -> None:
    once = Model(RNR.design, dataclasses.replace(RNR.bound, rnr_retry=1))
    s = step(once, step(once, not_ready(once), "Deliver", 1, "AtoB"), "Deliver", 1, "AtoB")
    assert s.rnrLeft[A] == (1, 1)
    t = step(once, s, "Deliver", 1, "BtoA")
    assert t.rnrLeft[A] == (0, 1) and t.nxt[A] == (1, 1)
    t = step(once, step(once, t, "Transmit", "A", 1), "Deliver", 1, "AtoB")
    u = step(once, t, "Deliver", 1, "BtoA")
    assert u.qp[A] == ("ERR", "RTS")
    assert u.cq[A][0] == (Cqe(1, 0, "RNR_RETRY_EXC_ERR", 0), Cqe(2, 0, "WR_FLUSH_ERR", 0))


def test_an_rnr_nak_acknowledges_the_requests_before_it_and_renews_the_count() -> None:
    once = Model(RNR.design, dataclasses.replace(RNR.bound, rnr_retry=1))
    s = reach(once, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2), ("PostSend", "A", 1),
              ("PostSend", "A", 2), ("Transmit", "A", 1), ("Transmit", "A", 1))
    s = on(s, A, rnrLeft=(0, 1))  # spent by an earlier RNR NAK
    s = step(once, s, "Deliver", 1, "AtoB")  # SEND #1 consumes receive WR 1
    s = step(once, on(s, B, rq=EMPTY), "Deliver", 1, "AtoB")  # SEND #2 finds none
    assert s.wire[0][1] == (Ack(1, 0), Rnr(2))
    t = step(once, step(once, s, "Deliver", 1, "BtoA"), "Deliver", 1, "BtoA")
    assert t.una[A] == (2, 1) and t.nxt[A] == (2, 1) and t.qp[A] == ("RTS", "RTS")
    assert t.rnrLeft[A] == (0, 1)  # renewed to 1 by the ACK, spent by the RNR NAK


# DeviceFatal (bound fatal): a dead NIC completes nothing; the layer reads the event.
FATAL = model("Shift", "fatal")


def acked_write(m: Model) -> State:
    """Workload 1 posted; A's unsignaled WRITE #1 executed and ACKed (no completion of its
    own), the signaled WRITE_IMM #2 not yet transmitted."""
    return reach(m, 1, *POSTED1, ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
                 ("Deliver", 1, "BtoA"))


def test_a_nic_in_fatal_error_completes_nothing() -> None:
    s = acked_write(FATAL)
    t = step(FATAL, s, "NicFail", "A", 1)
    assert changed(s, t) == {"nic", "faults", "qp", "fatal"}  # no flush, no CQE
    # silent, its event's flush to start at WR #1 (no completion covers the unsignaled WRITE)
    assert t.fatal[A] == (1, SPEAKING) and t.cq[A] == EMPTY
    # Without DeviceFatal the driver flushes from the oldest unacknowledged WR.
    plain = step(SHIFT, acked_write(SHIFT), "NicFail", "A", 1)
    assert plain.cq[A][0] == (Cqe(2, 0, "WR_FLUSH_ERR", 0),)
    assert plain.fatal == ((SPEAKING, SPEAKING),) * 2


def test_the_layer_flushes_every_wr_no_completion_covers() -> None:
    t = step(FATAL, acked_write(FATAL), "NicFail", "A", 1)
    u = step(FATAL, t, "FatalEvent", "A", 1)
    assert changed(t, u) == {"cq", "fatal"} and u.fatal[A] == (TAKEN_OVER, SPEAKING)
    # the ACKed unsignaled WRITE #1 too: only a completion frees a send queue's slot
    assert u.cq[A][0] == (Cqe(1, 0, "WR_FLUSH_ERR", 0), Cqe(2, 0, "WR_FLUSH_ERR", 0))
    assert FATAL.step(u, make("FatalEvent", "A", 1)) is None  # read once


def test_posts_to_a_silent_qp_wait_for_the_event_then_flush_at_once() -> None:
    s = reach(FATAL, 2, ("PostRecv", "B", 1), ("NicFail", "B", 1))
    t = step(FATAL, s, "PostRecv", "B", 2)
    assert t.rq[B] == ((1, 2), ()) and t.cq[B] == EMPTY  # no flush before the event
    u = step(FATAL, t, "FatalEvent", "B", 1)
    assert u.cq[B][0] == (Cqe(0, 1, "WR_FLUSH_ERR", 0), Cqe(0, 2, "WR_FLUSH_ERR", 0))
    assert u.rq[B] == EMPTY


def test_a_receive_completion_lost_with_the_nic_leaves_its_receive_wr_to_flush() -> None:
    s = reach(FATAL, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2))
    s = on(s, B, rq=((2,), ()), unwritten=(((Cqe(1, 1, "SUCCESS", 0)),), ()))
    t = step(FATAL, s, "NicFail", "B", 1)
    assert t.rq[B] == ((1, 2), ()) and t.unwritten[B] == EMPTY


def test_a_handshake_reposts_onto_a_silent_backup_qp_without_a_flush() -> None:
    s = reach(FATAL, 2, ("PostRecv", "B", 1), ("NicFail", "B", 1), ("FatalEvent", "B", 1),
              ("PollCq", "B"))
    s = s._replace(qp=set_at(s.qp, B, ("ERR", "ERR")), fatal=set_at(s.fatal, B, (TAKEN_OVER, 1)))
    t = step(FATAL, s, "Progress", "B")
    assert t.rq[B][1] == (1,) and t.cq[B][1] == ()  # it waits for the event's flushes


def test_a_failover_drains_a_silent_qp_in_place_of_its_event() -> None:
    t = step(FATAL, acked_write(FATAL), "NicFail", "A", 1)
    u = trigger(t, A, FATAL.design, "RETRY_EXC_ERR")
    assert u.fatal[A] == (SPEAKING, SPEAKING) and u.cq[A] == EMPTY
    assert FATAL.step(u, make("FatalEvent", "A", 1)) is None


def failed_recv_qp() -> State:
    """Workload 2, B's receive WR 1 posted; B's default QP then failed (as by the peer's
    NIC dying under its retries): in the error state, receive WR 1 flushed, its NIC alive."""
    s = reach(FATAL, 2, ("PostRecv", "B", 1))
    return on(s, B, qp=("ERR", "RTS"), rq=EMPTY, cq=((Cqe(0, 1, "WR_FLUSH_ERR", 0),), ()))


def test_a_qp_already_in_error_falls_silent_when_its_nic_dies() -> None:
    s = failed_recv_qp()
    t = step(FATAL, s, "NicFail", "B", 1)
    assert t.fatal[B] == (1, SPEAKING) and t.cq[B] == s.cq[B]  # its event flushes WRs after #0
    u = step(FATAL, t, "PostRecv", "B", 2)
    assert u.rq[B] == ((2,), ()) and u.cq[B] == s.cq[B]  # no flush before the event
    v = step(FATAL, u, "FatalEvent", "B", 1)
    # receive WR 1's flush is not repeated: only the post made since the death
    assert v.cq[B][0] == (Cqe(0, 1, "WR_FLUSH_ERR", 0), Cqe(0, 2, "WR_FLUSH_ERR", 0))
    assert v.fatal[B] == (TAKEN_OVER, SPEAKING)


def test_a_qp_the_layer_took_over_stays_so_through_a_second_death() -> None:
    s = step(FATAL, step(FATAL, failed_recv_qp(), "NicFail", "B", 1), "FatalEvent", "B", 1)
    s = s._replace(nic=set_at(s.nic, B, (True, True)), faults=0)  # the NIC came back
    t = step(FATAL, s, "NicFail", "B", 1)
    assert t.fatal[B] == (TAKEN_OVER, SPEAKING)
    assert FATAL.step(t, make("FatalEvent", "B", 1)) is None
    u = step(FATAL, t, "PostRecv", "B", 2)  # the layer flushes it at once
    assert u.cq[B][0][-1] == Cqe(0, 2, "WR_FLUSH_ERR", 0)


# ImplicitNak (bound implicit): workload 3 (FADD, WRITE_IMM), FADD #1's ACK lost.
IMPLICIT = model("Shift", "implicit")


def fadd_response_lost(m: Model) -> State:
    """Both WRs executed at B; the ACK of FADD #1 (its response) dropped; the ACK of
    WRITE_IMM #2 on its way to A."""
    return reach(m, 3, ("PostRecv", "B", 1), ("PostSend", "A", 1), ("PostSend", "A", 2),
                 ("Transmit", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
                 ("Deliver", 1, "AtoB"), ("Drop", 1, "BtoA"))


def test_an_ack_past_a_lost_atomic_response_is_an_implicit_nak() -> None:
    once = Model(IMPLICIT.design, dataclasses.replace(IMPLICIT.bound, max_retries=1))
    s = fadd_response_lost(once)
    t = step(once, s, "Deliver", 1, "BtoA")
    assert t.una[A] == (1, 1) and t.nxt[A] == (1, 1) and t.retry[A] == (0, 1)
    assert t.cq[A] == EMPTY and t.qp[A] == ("RTS", "RTS")  # it goes back, a retry spent
    # The retransmitted FADD is a duplicate: answered from the saved result, not re-executed.
    u = step(once, step(once, t, "Transmit", "A", 1), "Deliver", 1, "AtoB")
    assert u.execs[A] == s.execs[A] and u.wire[0][1] == (Ack(1, 0),)


def test_an_implicit_nak_with_no_retry_left_fails_the_atomic() -> None:
    s = fadd_response_lost(IMPLICIT)
    t = step(IMPLICIT, s, "Deliver", 1, "BtoA")
    assert t.qp[A] == ("ERR", "RTS")
    assert t.cq[A][0] == (Cqe(1, 0, "RETRY_EXC_ERR", 0), Cqe(2, 0, "WR_FLUSH_ERR", 0))
    # Without ImplicitNak the ACK completes both, the FADD with the value 0.
    plain = step(SHIFT, fadd_response_lost(SHIFT), "Deliver", 1, "BtoA")
    assert plain.cq[A][0] == (Cqe(1, 0, "SUCCESS", 0), Cqe(2, 0, "SUCCESS", 0))


def test_responder_on_a_dead_nic_discards() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1))._replace(
        nic=((True, True), (False, True)))
    t = step(SHIFT, s, "Deliver", 1, "AtoB")
    assert changed(s, t) == {"wire"}


def test_staging_copies_a_payload_once_by_sequence_number() -> None:
    staging = model("Staging")
    s = reach(staging, 1, *POSTED1, ("Transmit", "A", 1), ("Deliver", 1, "AtoB"))
    assert s.copies == 1 and s.execs[A] == (1, 0)
    # The same WR again on the backup path, at its expected PSN: deduplicated by the copy.
    again = on(s._replace(wire=(s.wire[0], ((Req(1, 1),), ()))), A, sq=(s.sq[A][0], (1,)))
    t = step(staging, again, "Deliver", 2, "AtoB")
    assert t.copies == 1 and t.execs[A] == (1, 0) and t.epsn[B] == (2, 2)
    assert t.wire[1][1] == (Ack(1, 0),)  # a WRITE's ACK returns nothing


def test_cumulative_ack_completes_every_wr_up_to_its_psn() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1),
              ("Deliver", 1, "AtoB"), ("Deliver", 1, "AtoB"), ("Drop", 1, "BtoA"))
    assert s.wire[0][1] == (Ack(2, 0),)
    t = step(SHIFT, s, "Deliver", 1, "BtoA")
    # WR 1 (unsignaled) completes silently, WR 2 with a CQE; retries are restored.
    assert t.cq[A][0] == (Cqe(2, 0, "SUCCESS", 0),) and t.una[A] == (3, 1)
    assert changed(s, t) == {"cq", "una", "wire"}


def test_ack_is_ignored_by_a_qp_in_error() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Deliver", 1, "AtoB"))
    s = on(s, A, qp=("ERR", "RTS"))
    t = step(SHIFT, s, "Deliver", 1, "BtoA")
    assert changed(s, t) == {"wire"}


def test_timeout_goes_back_n_while_retries_remain() -> None:
    m = model("Shift", "default")  # MaxRetries = 1
    s = reach(m, 1, *POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1), ("Drop", 1, "AtoB"),
              ("Deliver", 1, "AtoB"))  # WR 2 arrives ahead of its PSN: discarded
    assert s.wire[0] == EMPTY and s.una[A] == (1, 1) and s.nxt[A] == (3, 1)
    t = step(m, s, "Timeout", "A", 1)
    assert t.nxt[A] == (1, 1) and t.retry[A] == (0, 1) and changed(s, t) == {"nxt", "retry"}
    u = step(m, t, "Transmit", "A", 1)  # WR 1 again, with its old PSN
    assert u.wire[0][0] == (Req(1, 1),)
    # The ACK of the retransmission gives the retry back.
    v = step(m, step(m, u, "Deliver", 1, "AtoB"), "Deliver", 1, "BtoA")
    assert v.una[A] == (2, 1) and v.retry[A] == (1, 1)


def test_timeout_waits_for_a_quiet_wire() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1))
    assert SHIFT.step(s, make("Timeout", "A", 1)) is None  # the request is in flight
    assert SHIFT.step(reach(SHIFT, 1, *POSTED1), make("Timeout", "A", 1)) is None  # none sent


def test_timeout_without_retries_errors_and_flushes() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1),
              ("Drop", 1, "AtoB"), ("Deliver", 1, "AtoB"))
    t = step(SHIFT, s, "Timeout", "A", 1)  # small bound: MaxRetries = 0
    assert t.qp[A] == ("ERR", "RTS")
    assert t.cq[A][0] == (Cqe(1, 0, "RETRY_EXC_ERR", 0), Cqe(2, 0, "WR_FLUSH_ERR", 0))
    assert changed(s, t) == {"qp", "cq"}  # A's QP has no receive WR to flush
    # A post on the errored QP is flushed at once (here: a QP in ERR, layer still Default).


def test_drop_requests_on_fault_paths_and_control_messages_anywhere_within_the_budget(
        ) -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1))
    t = step(SHIFT, s, "Drop", 1, "AtoB")
    assert t.wire[0][0] == (Req(2, 2),) and t.drops == 1
    assert SHIFT.step(t, make("Drop", 1, "AtoB")) is None  # MaxDrops = 1
    other = s._replace(wire=(s.wire[1], s.wire[0]))  # the packets on path 2
    assert SHIFT.step(other, make("Drop", 2, "AtoB")) is None  # FaultPaths = {1}
    # CtlLoss: the layer's control messages are lost like any packet, on either path
    ctl = s._replace(wire=(EMPTY, ((Ctl("counter", 0, 1, True),), ())))
    u = step(SHIFT, ctl, "Drop", 2, "AtoB")
    assert u.wire == (EMPTY, EMPTY) and changed(ctl, u) == {"wire", "drops"}
    lossless = Model(SHIFT.design, dataclasses.replace(SHIFT.bound, ctl_loss=False))
    assert lossless.step(ctl, make("Drop", 2, "AtoB")) is None


# AckBeforeCqe (bound ackfirst): workload 1's WRITE_IMM #2 executed at B and ACKed.
ACKFIRST = model("Shift", "ackfirst")
EXECUTED1 = (*POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
             ("Deliver", 1, "AtoB"))


def test_a_receive_completion_is_written_after_the_ack_leaves() -> None:
    s = reach(ACKFIRST, 1, *EXECUTED1)
    note = Cqe(2, 1, "SUCCESS", 0)
    assert s.unwritten[B] == ((note,), ()) and s.cq[B] == EMPTY and s.rq[B] == EMPTY
    assert s.wire[0][1] == (Ack(1, 0), Ack(2, 0))  # both ACKs already on their way
    assert ACKFIRST.step(s, make("PollCq", "B")) is None  # nothing to poll yet
    t = step(ACKFIRST, s, "WriteCqe", "B", 1)
    assert t.cq[B] == ((note,), ()) and t.unwritten[B] == EMPTY
    assert changed(s, t) == {"cq", "unwritten"}
    assert ACKFIRST.step(t, make("WriteCqe", "B", 1)) is None
    assert ACKFIRST.step(s, make("WriteCqe", "A", 1)) is None  # A's NIC made none
    # without AckBeforeCqe the completion is in memory with the ACK
    assert reach(SHIFT, 1, *EXECUTED1).cq[B] == ((note,), ())


def test_a_later_completion_of_the_cq_writes_the_unwritten_ones_first() -> None:
    s = reach(ACKFIRST, 1, *EXECUTED1)
    assert ACKFIRST.step(s, make("Timeout", "B", 1)) is None  # B has nothing in flight
    # B's QP to the error state (its own Timeout with a WR of its own): written, then flushed
    own = s._replace(sq=set_at(s.sq, B, ((1,), ())), nxt=set_at(s.nxt, B, (2, 1)),
                     wire=(EMPTY, EMPTY), program=set_at(s.program, B, s.program[A][:1]))
    t = step(ACKFIRST, own, "Timeout", "B", 1)  # small's MaxRetries = 0
    assert t.cq[B][0] == (Cqe(2, 1, "SUCCESS", 0), Cqe(1, 0, "RETRY_EXC_ERR", 0))
    assert t.unwritten[B] == EMPTY and t.qp[B] == ("ERR", "RTS")


def test_a_dying_nic_loses_the_completions_it_had_not_written() -> None:
    s = reach(ACKFIRST, 1, *EXECUTED1)
    t = step(ACKFIRST, s, "NicFail", "B", 1)
    assert t.unwritten[B] == EMPTY and t.cq[B] == EMPTY and t.qp[B] == ("ERR", "RTS")
    assert t.rpend[B] == (1,)  # B's layer still owes receive WR 1 to its application
    assert ACKFIRST.step(t, make("WriteCqe", "B", 1)) is None


def test_the_layers_drain_takes_what_a_live_nic_had_not_written() -> None:
    """A's counter moves B off the default path (Trigger): the drain, as ib_drain_qp,
    takes the unwritten completion of receive WR 1 with the flushes."""
    s = reach(ACKFIRST, 1, *EXECUTED1)
    s = s._replace(wire=(EMPTY, ((Ctl("counter", 0, 1, True),), ())))
    t = step(ACKFIRST, s, "Deliver", 2, "AtoB")
    u = step(ACKFIRST, t, "Progress", "B")  # woken: B takes its sides off path 1
    assert u.unwritten[B] == EMPTY and u.qp[B][0] == "ERR" and u.recvDone[B] == 1
    assert u.buffered[B] == (Cqe(2, 1, "SUCCESS", 0),) and u.rpend[B] == ()


# ------------------------------------------------------------------ faults ----

def test_link_down_loses_the_wire_and_counts_a_fault() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1))
    t = step(SHIFT, s, "LinkDown", 1)
    assert t.link == (False, True) and t.wire[0] == EMPTY and t.faults == 1
    assert changed(s, t) == {"link", "wire", "faults"}
    assert SHIFT.step(t, make("LinkDown", 1)) is None
    assert SHIFT.step(t, make("LinkUp", 1)) is None  # small: Recover = FALSE
    assert SHIFT.step(s, make("LinkDown", 2)) is None  # FaultPaths = {1}
    up = step(model("Shift", "default"), t, "LinkUp", 1)
    assert up.link == (True, True) and up.qp == t.qp  # the QPs stay as they are


def test_nic_fail_at_the_requester_flushes_from_the_oldest_unacked() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
              ("Deliver", 1, "BtoA"))
    assert s.una[A] == (2, 1)
    t = step(SHIFT, s, "NicFail", "A", 1)
    assert t.nic[A] == (False, True) and t.qp[A] == ("ERR", "RTS") and t.faults == 1
    assert t.cq[A][0] == (Cqe(2, 0, "WR_FLUSH_ERR", 0),)  # WR 1 is acknowledged


def test_nic_fail_at_the_responder_flushes_its_receive_wrs() -> None:
    s = reach(SHIFT, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2))
    t = step(SHIFT, s, "NicFail", "B", 1)
    assert t.rq[B] == EMPTY and t.qp[B] == ("ERR", "RTS")
    assert t.cq[B][0] == (Cqe(0, 1, "WR_FLUSH_ERR", 0), Cqe(0, 2, "WR_FLUSH_ERR", 0))


def test_nic_fail_of_a_qp_already_in_error_flushes_nothing_more() -> None:
    s = on(reach(SHIFT, 1, ("PostSend", "A", 1)), A, qp=("ERR", "RTS"))
    t = step(SHIFT, s, "NicFail", "A", 1)
    assert t.cq == s.cq and changed(s, t) == {"nic", "faults"}


def test_nic_recover_only_with_recovery() -> None:
    m = model("Shift", "default")
    s = reach(m, 1, ("NicFail", "A", 1))
    t = step(m, s, "NicRecover", "A", 1)
    assert t.nic[A] == (True, True) and t.qp[A] == ("ERR", "RTS")
    assert SHIFT.step(s, make("NicRecover", "A", 1)) is None


# ------------------------------------------------------------ applications ----

def test_post_send_waits_for_the_receive_wr_of_a_notification() -> None:
    s = reach(SHIFT, 1, ("PostSend", "A", 1))
    assert SHIFT.step(s, make("PostSend", "A", 2)) is None
    t = step(SHIFT, step(SHIFT, s, "PostRecv", "B", 1), "PostSend", "A", 2)
    assert t.posted == (2, 0) and t.pending[A] == (1, 2) and t.sq[A][0] == (1, 2)


def test_post_send_reuses_a_buffer_only_after_the_notification_was_taken() -> None:
    s = reach(SHIFT, 4, *POSTED1, ("PostRecv", "B", 2))
    assert SHIFT.step(s, make("PostSend", "A", 3)) is None  # B has not read round 1
    done = reach(SHIFT, 4, *POSTED1, ("PostRecv", "B", 2), ("Transmit", "A", 1),
                 ("Transmit", "A", 1), ("Deliver", 1, "AtoB"), ("Deliver", 1, "AtoB"),
                 ("PollCq", "B"))
    assert step(SHIFT, done, "PostSend", "A", 3).sq[A][0] == (1, 2, 3)


def test_post_send_event_names_the_next_wr() -> None:
    assert SHIFT.step(reach(SHIFT, 1), make("PostSend", "A", 2)) is None
    assert SHIFT.step(reach(SHIFT, 1), make("PostSend", "B", 1)) is None  # B's program is empty
    # Ping-pong: B's SEND is a reply, posted once B took A's.
    two = model("Shift", "twoway")
    pong = reach(two, 7, ("PostRecv", "B", 1), ("PostRecv", "A", 1), ("PostSend", "A", 1))
    assert two.step(pong, make("PostSend", "B", 1)) is None
    took = reach(two, 7, ("PostRecv", "B", 1), ("PostRecv", "A", 1), ("PostSend", "A", 1),
                 ("Transmit", "A", 1), ("Deliver", 1, "AtoB"), ("PollCq", "B"))
    t = step(two, took, "PostSend", "B", 1)
    assert t.posted == (1, 1) and t.sq[B][0] == (1,) and t.pending[B] == (1,)


def test_post_send_is_routed_by_the_send_side() -> None:
    base = reach(SHIFT, 1, ("PostSend", "A", 1), ("PostRecv", "B", 1))
    # Fallback before the replay: held by the layer (pending only).
    held = step(SHIFT, on(base, A, sendMode="Fallback"), "PostSend", "A", 2)
    assert held.sq == base.sq and held.pending[A] == (1, 2)
    # Fallback after the replay: the backup QP.
    after = on(base, A, sendMode="Fallback", replayed=True)
    assert step(SHIFT, after, "PostSend", "A", 2).sq[A] == ((1,), (2,))
    # WaitSignaled: the backup QP, and a signaled WR becomes the fence.
    ws = step(SHIFT, on(base, A, sendMode="WaitSignaled"), "PostSend", "A", 2)
    assert ws.sq[A] == ((1,), (2,)) and ws.sendMode[A] == "WaitDrained" and ws.fence[A] == 2
    # WaitDrained: held on the default QP (its doorbell is not rung, see Transmit).
    wd = step(SHIFT, on(base, A, sendMode="WaitDrained"), "PostSend", "A", 2)
    assert wd.sq[A] == ((1, 2), ())
    # Error: failed at once, behind every completion still to be polled.
    err = step(SHIFT, on(base, A, sendMode="Error"), "PostSend", "A", 2)
    assert err.cq[A][1] == (Cqe(2, 0, "WR_FLUSH_ERR", 0),) and err.pending[A] == (1,)


def test_post_on_a_qp_in_error_is_flushed() -> None:
    s = reach(model("NoFailover"), 1, ("PostSend", "A", 1), ("PostRecv", "B", 1))
    s = on(s, A, qp=("ERR", "RTS"))
    t = step(model("NoFailover"), s, "PostSend", "A", 2)
    assert t.sq[A][0] == (1, 2) and t.cq[A][0] == (Cqe(2, 0, "WR_FLUSH_ERR", 0),)


def test_post_recv_is_routed_by_the_receive_side() -> None:
    s = reach(SHIFT, 2)
    assert step(SHIFT, s, "PostRecv", "B", 1).rq[B] == ((1,), ())
    held = step(SHIFT, on(s, B, recvMode="Moving"), "PostRecv", "B", 1)
    assert held.rq[B] == EMPTY and held.rpend[B] == (1,)
    moved = on(s, B, recvMode="Fallback")
    assert step(SHIFT, moved, "PostRecv", "B", 1).rq[B] == ((), (1,))
    dead = on(s, B, qp=("ERR", "RTS"))
    assert step(SHIFT, dead, "PostRecv", "B", 1).cq[B][0] == (Cqe(0, 1, "WR_FLUSH_ERR", 0),)
    assert SHIFT.step(reach(SHIFT, 1, ("PostRecv", "B", 1)), make("PostRecv", "B", 2)) is None
    assert SHIFT.step(s, make("PostRecv", "A", 1)) is None  # B's program has no notification


def test_poll_takes_buffered_completions_first() -> None:
    s = on(reach(SHIFT, 1), A, buffered=(Cqe(1, 0, "SUCCESS", 0),),
           cq=((Cqe(2, 0, "SUCCESS", 0),), ()))
    t = step(SHIFT, s, "PollCq", "A")
    assert t.sndSeen[A] == (SndSeen(1, "SUCCESS", 0),) and t.buffered == EMPTY
    assert t.cq == s.cq


def test_poll_success_at_the_sender_and_notification_at_the_receiver() -> None:
    s = reach(SHIFT, 1, *POSTED1, ("Transmit", "A", 1), ("Transmit", "A", 1),
              ("Deliver", 1, "AtoB"), ("Deliver", 1, "AtoB"), ("Deliver", 1, "BtoA"),
              ("Deliver", 1, "BtoA"))
    a = step(SHIFT, s, "PollCq", "A")
    assert a.sndSeen[A] == (SndSeen(2, "SUCCESS", 0),) and a.pending[A] == ()
    b = step(SHIFT, s, "PollCq", "B")
    assert b.rcvSeen[B] == (RcvSeen(2, 1, "SUCCESS", (1, 0), 0),)
    assert b.recvDone[B] == 1 and b.rpend[B] == ()
    assert SHIFT.step(b, make("PollCq", "B")) is None  # nothing left


def test_poll_of_an_error_without_failover_reaches_the_application() -> None:
    nf = model("NoFailover")
    s = reach(nf, 1, *POSTED1, ("NicFail", "A", 1), ("PollCq", "A"))
    assert s.sndSeen[A] == (SndSeen(1, "WR_FLUSH_ERR", 0),)
    assert s.sendMode == s.recvMode == ("Default", "Default")
    assert s.pending[A] == (2,)  # only the failed WR leaves the outstanding set


def test_poll_of_an_error_from_the_backup_path_puts_the_send_side_in_error() -> None:
    s = on(reach(SHIFT, 1, ("PostSend", "A", 1)), A, sendMode="Fallback",
           cq=((), (Cqe(1, 0, "WR_FLUSH_ERR", 0),)))
    t = step(SHIFT, s, "PollCq", "A")
    assert t.sendMode[A] == "Error" and t.sndSeen[A] == (SndSeen(1, "WR_FLUSH_ERR", 0),)


def test_the_backup_cq_is_polled_first_while_a_side_is_off_the_default_path() -> None:
    """PollPath: a host whose receive side moved polls the backup CQ while it has
    entries, then the default CQ its send side still completes on."""
    s = on(reach(SHIFT, 1), A, recvMode="Fallback",
           cq=((Cqe(2, 0, "SUCCESS", 0),), (Cqe(1, 0, "SUCCESS", 0),)))
    t = step(SHIFT, s, "PollCq", "A")
    assert t.sndSeen[A] == (SndSeen(1, "SUCCESS", 0),)
    assert t.cq[A] == ((Cqe(2, 0, "SUCCESS", 0),), ())
    u = step(SHIFT, t, "PollCq", "A")
    assert [e.wr for e in u.sndSeen[A]] == [1, 2]
    # Both sides off the default path: its CQ is not polled.
    off = on(s, A, sendMode="Fallback", cq=((Cqe(2, 0, "SUCCESS", 0),), ()))
    assert SHIFT.step(off, make("PollCq", "A")) is None


# ------------------------------------------------- SHIFT's failover layer ----

FAILED1 = POSTED1 + (("Transmit", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
                     ("Deliver", 1, "AtoB"), ("NicFail", "A", 1))


def test_default_to_fallback_on_an_error_completion() -> None:
    s = reach(SHIFT, 1, *FAILED1)
    assert s.cq[A][0] == (Cqe(1, 0, "WR_FLUSH_ERR", 0), Cqe(2, 0, "WR_FLUSH_ERR", 0))
    t = step(SHIFT, s, "PollCq", "A")
    assert t.sendMode == ("Fallback", "Default") and t.recvMode == ("Moving", "Default")
    assert t.qp[A] == ("ERR", "RTS") and t.cq[A][0] == () and t.pending[A] == (1, 2)
    assert t.sndSeen[A] == ()  # the application sees nothing


def test_trigger_holds_the_good_completions_for_the_application() -> None:
    # Woken by the peer's counter with a success in the default CQ: it is buffered and
    # the completed WRs leave the outstanding set.
    s = on(reach(SHIFT, 1, *POSTED1), A,
           cq=((Cqe(2, 0, "SUCCESS", 0), Cqe(9, 0, "WR_FLUSH_ERR", 0)), ()),
           peerCtr=0, fresh=True)
    t = step(SHIFT, s, "Progress", "A")
    assert t.sendMode[A] == "Fallback" and t.buffered[A] == (Cqe(2, 0, "SUCCESS", 0),)
    assert t.pending[A] == () and t.cq[A][0] == ()
    assert t.fresh[A] and t.peerCtr[A] == 0  # the counter is kept for the handshake


def test_an_atomic_in_flight_is_refused() -> None:
    s = reach(SHIFT, 3, ("PostSend", "A", 1), ("PostRecv", "B", 1), ("PostSend", "A", 2),
              ("NicFail", "A", 1), ("PollCq", "A"))
    assert s.sendMode[A] == "Error" and s.refused[A] == frozenset({1, 2}) and s.pending[A] == ()
    assert s.buffered[A] == (Cqe(1, 0, "WR_FLUSH_ERR", 0), Cqe(2, 0, "WR_FLUSH_ERR", 0))
    naive = reach(model("NaiveReplay"), 3, ("PostSend", "A", 1), ("PostRecv", "B", 1),
                  ("PostSend", "A", 2), ("NicFail", "A", 1), ("PollCq", "A"))
    assert naive.sendMode[A] == "Fallback" and naive.refused[A] == frozenset()


def test_handshake_sends_the_counter_on_the_backup_path_and_asks() -> None:
    s = reach(SHIFT, 1, *FAILED1, ("PollCq", "A"))
    t = step(SHIFT, s, "Progress", "A")
    assert t.sentCtr == (True, False) and t.wire[1][0] == (Ctl("counter", 0, 1, True),)
    assert t.asked == (True, False) and t.recvMode[A] == "Fallback"
    assert t.ctrSeq == (1, 0) and t.ctrVal == (0, 0)
    assert changed(s, t) == {"sentCtr", "wire", "asked", "recvMode", "ctrSeq"}
    u = step(SHIFT, t, "Deliver", 2, "AtoB")
    assert u.peerCtr == (-1, 0) and u.fresh == (False, True) and u.sentCtr == (True, False)
    assert u.peerSeq == (0, 1)


def test_peer_counter_moves_b_off_the_default_path_and_b_answers() -> None:
    s = reach(SHIFT, 1, *FAILED1, ("PollCq", "A"), ("Progress", "A"), ("Deliver", 2, "AtoB"))
    # B executed the notification: its completion is in B's default CQ, not yet polled.
    t = step(SHIFT, s, "Progress", "B")
    assert t.sendMode[B] == "Fallback" and t.recvMode[B] == "Moving"
    assert t.qp[B] == ("ERR", "RTS")
    assert t.buffered[B] == (Cqe(2, 1, "SUCCESS", 0),) and t.recvDone[B] == 1
    assert t.rpend[B] == ()
    u = step(SHIFT, t, "Progress", "B")  # handshake: repost (none left), answer
    assert u.sentCtr[B] and u.wire[1][1] == (Ctl("counter", 1, 1, False),)
    assert u.ctrSeq[B] == 1 and u.ctrVal[B] == 1
    assert u.asked[B] is False and u.recvMode[B] == "Fallback"
    # A's counter stays fresh for B's own replay (of no WR: B posts none here).
    assert u.fresh[B] is True


def test_b_reposts_its_outstanding_receive_wrs_before_answering() -> None:
    s = on(reach(SHIFT, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2)), B,
           sendMode="Fallback", recvMode="Moving", rq=EMPTY)
    t = step(SHIFT, s, "Progress", "B")
    assert t.rq[B] == ((), (1, 2)) and t.wire[1][1] == (Ctl("counter", 0, 1, True),)
    dead = on(s, B, qp=("RTS", "ERR"))
    u = step(SHIFT, dead, "Progress", "B")
    assert u.cq[B][1] == (Cqe(0, 1, "WR_FLUSH_ERR", 0), Cqe(0, 2, "WR_FLUSH_ERR", 0))
    assert u.wire == s.wire and u.sentCtr == (False, True)  # an errored QP sends nothing


# A asked (counter #1 = 0), B took it and answered (counter #1 = 1); B's answer in flight.
ANSWERED = FAILED1 + (("PollCq", "A"), ("Progress", "A"), ("Deliver", 2, "AtoB"),
                      ("Progress", "B"), ("Progress", "B"))


def test_a_lost_answer_is_resent_after_the_askers_timer() -> None:
    s = reach(SHIFT, 1, *ANSWERED)
    assert SHIFT.step(s, make("HandshakeTimeout", "A")) is None  # the answer is in flight
    t = step(SHIFT, s, "Drop", 2, "BtoA")
    u = step(SHIFT, t, "HandshakeTimeout", "A")
    assert u.wire[1] == ((Ctl("counter", 0, 1, True),), ()) and changed(t, u) == {"wire"}
    v = step(SHIFT, u, "Deliver", 2, "AtoB")  # a resend B took already, asking: answered
    assert v.wire[1] == ((), (Ctl("counter", 1, 1, False),)) and changed(u, v) == {"wire"}
    w = step(SHIFT, v, "Deliver", 2, "BtoA")
    assert w.peerCtr[A] == 1 and w.peerSeq[A] == 1 and w.asked[A] is False and w.fresh[A]
    assert SHIFT.step(w, make("HandshakeTimeout", "A")) is None  # nothing awaited


def test_a_lost_first_counter_is_resent_and_taken_once() -> None:
    s = reach(SHIFT, 1, *FAILED1, ("PollCq", "A"), ("Progress", "A"))
    t = step(SHIFT, s, "Drop", 2, "AtoB")
    assert t.peerSeq[B] == 0
    u = step(SHIFT, step(SHIFT, t, "HandshakeTimeout", "A"), "Deliver", 2, "AtoB")
    assert u.peerCtr[B] == 0 and u.peerSeq[B] == 1 and u.fresh[B]
    # B is about to answer: A's timer does not fire while B is slow (docs/model.md)
    assert SHIFT.step(u, make("HandshakeTimeout", "A")) is None


def test_a_resend_that_does_not_ask_or_an_older_counter_changes_nothing() -> None:
    s = reach(SHIFT, 1, *FALLBACK_READY)  # B took A's #1 and A took B's #1
    for m in (Ctl("counter", 0, 1, False), Ctl("counter", 0, 0, True)):
        dup = s._replace(wire=(EMPTY, ((m,), ())))
        assert changed(dup, step(SHIFT, dup, "Deliver", 2, "AtoB")) == {"wire"}


FALLBACK_READY = FAILED1 + (("PollCq", "A"), ("Progress", "A"), ("Deliver", 2, "AtoB"),
                            ("Progress", "B"), ("Progress", "B"), ("Deliver", 2, "BtoA"))


def test_replay_skips_what_the_peer_counter_shows_received() -> None:
    s = reach(SHIFT, 1, *FALLBACK_READY)
    assert s.peerCtr == (1, 0) and s.pending[A] == (1, 2)  # each has the other's count
    assert s.fresh[A]  # the answer A asked for
    t = step(SHIFT, s, "Progress", "A")
    # The WRITE is replayed (exactly-once is given up); the notification is not, and
    # completes as a success.
    assert t.sq[A][1] == (1,) and t.pending[A] == (1,) and t.replayed == (True, False)
    assert t.buffered[A] == (Cqe(2, 0, "SUCCESS", 0),) and not t.fresh[A]


def test_replay_filters_of_the_other_designs() -> None:
    def replayed(design: str) -> tuple[int, ...]:
        m = model(design)
        return step(m, reach(m, 1, *FALLBACK_READY), "Progress", "A").sq[A][1]

    assert replayed("ShiftPrefix") == ()  # the prefix up to the counted notification
    assert replayed("NaiveReplay") == (1, 2)  # everything
    assert replayed("ReceiverQuery") == ()  # both below the responder's expected PSN
    assert replayed("NcclResiliency") == (1, 2)  # B's app has not polled: no flag set
    rq = model("ReceiverQuery")
    assert step(rq, reach(rq, 1, *FALLBACK_READY), "Progress", "A").queried


def test_replay_waits_for_the_peer_counter() -> None:
    s = reach(SHIFT, 1, *FAILED1, ("PollCq", "A"), ("Progress", "A"))
    assert SHIFT.step(s, make("Progress", "A")) is None  # sent its counter, has none back


def deliver_all(m: Model, s: State, p: int, direction: str) -> State:
    """s after everything in flight on path p in direction arrived."""
    while s.wire[p - 1][0 if direction == "AtoB" else 1]:
        s = step(m, s, "Deliver", p, direction)
    return s


def test_fail_back_reconnect_fence_release() -> None:
    m = model("Shift", "default")
    s = reach(m, 4, *FALLBACK_READY, ("Progress", "A"), ("NicRecover", "A", 1))
    # B replays its (empty) send side and A's receive side awaits B's fail-back: the
    # default path is reset only once no side of B holds WRs there.
    s = step(m, s, "Progress", "B")
    assert s.replayed == (True, True)
    # A resets its own default QP into incarnation 1 and asks B, on the backup path, to reset its
    # end; it waits for the answer in Fallback.
    t = step(m, s, "Progress", "A")
    assert t.sendMode[A] == "Fallback" and t.reconnecting == (1, 0) and t.incarnation == (1, 0)
    assert t.qp[A][0] == "RTS" and t.qp[B][0] == "ERR"
    assert t.sq[A][0] == () and t.una[A][0] == t.nxt[A][0] == 1 and t.cq[A][0] == ()
    assert t.wire[1][0][-1] == Ctl("reconnect", 0, 1)
    assert m.step(t, make("Progress", "A")) is None  # nothing until the answer
    # B resets its end into incarnation 1 and answers; the answer ends A's wait.
    t = deliver_all(m, deliver_all(m, t, 2, "AtoB"), 2, "BtoA")
    assert t.incarnation == (1, 1) and t.qp[B][0] == "RTS" and t.epsn[B][0] == 1
    assert t.reconnecting == (0, 0) and t.sendMode[A] == "WaitSignaled"
    # B took notification 1, so A may reuse the buffer: WR 3 (unsignaled) to the backup.
    t = step(m, step(m, t, "PollCq", "B"), "PostRecv", "B", 2)
    t = step(m, t, "PostSend", "A", 3)
    assert t.sq[A][1] == (1, 3) and t.sendMode[A] == "WaitSignaled"
    t = step(m, t, "PostSend", "A", 4)  # signaled: the fence
    assert t.sendMode[A] == "WaitDrained" and t.fence[A] == 4 and t.sq[A][1] == (1, 3, 4)
    assert m.step(t, make("Progress", "A")) is None  # the fence is outstanding
    # The fence completes on the backup path, then the release notice goes on path 1.
    done = on(t, A, pending=())
    u = step(m, done, "Progress", "A")
    assert u.sendMode[A] == "Default" and u.fence[A] == 0
    # it counts A's notifications up to the fence: WRITE_WITH_IMMs 2 and 4
    # in incarnation 1, the reconnected QP's
    assert u.wire[0][0] == (Ctl("failback", 2, 0, False, 1),) and u.replayed[A] is False


def test_failback_notice_moves_the_receive_side_back_to_default() -> None:
    s = on(reach(SHIFT, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2)), B,
           sendMode="Fallback", recvMode="Fallback", sentCtr=True, peerCtr=0,
           rq=((), (2,)), rpend=(1, 2), cq=((), (Cqe(1, 1, "SUCCESS", 0),)))
    s = s._replace(wire=(((Ctl("failback", 0),), ()), EMPTY))
    t = step(SHIFT, s, "Deliver", 1, "AtoB")
    assert t.recvMode[B] == "Default" and t.sendMode[B] == "Fallback"
    assert t.rq[B] == ((2,), ())
    assert t.buffered[B] == (Cqe(1, 1, "SUCCESS", 0),) and t.cq[B][1] == ()
    assert t.recvDone[B] == 1 and t.rpend[B] == (2,)
    assert t.sentCtr[B] is True and t.peerCtr[B] == 0  # the send side is not touched


def test_failback_notice_waits_for_the_completions_it_counts() -> None:
    """F11: the notice counts two notifications; B has the completion of one in host
    memory, the other's its backup NIC made and ACKed but has not written. B's receive
    side waits on the backup path (no drain: its own sends there would not survive one)
    and moves back at the poll that takes the second."""
    s = on(reach(SHIFT, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2)), B,
           sendMode="Fallback", recvMode="Fallback", sentCtr=True, peerCtr=0,
           rq=((), ()), rpend=(1, 2), cq=((), (Cqe(1, 1, "SUCCESS", 0),)),
           unwritten=((), (Cqe(2, 2, "SUCCESS", 0),)))
    s = s._replace(wire=(((Ctl("failback", 2),), ()), EMPTY))
    t = step(SHIFT, s, "Deliver", 1, "AtoB")
    assert t.failbackAt[B] == 2 and t.recvMode[B] == "Fallback"
    assert changed(s, t) == {"wire", "failbackAt"}
    t = step(SHIFT, t, "PollCq", "B")  # the first: still one to come
    assert t.recvDone[B] == 1 and t.recvMode[B] == "Fallback" and t.failbackAt[B] == 2
    t = step(SHIFT, step(SHIFT, t, "WriteCqe", "B", 2), "PollCq", "B")
    assert t.recvDone[B] == 2 and t.recvMode[B] == "Default" and t.failbackAt[B] == 0
    assert t.rpend[B] == () and t.rq[B] == ((), ())
    assert [(c.wr, c.recv) for c in t.rcvSeen[B]] == [(1, 1), (2, 2)]


def test_a_counter_of_the_peer_ends_the_wait_of_a_failback() -> None:
    s = on(reach(SHIFT, 2, ("PostRecv", "B", 1)), B, sendMode="Fallback",
           recvMode="Fallback", sentCtr=True, peerCtr=0, rpend=(1,), failbackAt=1)
    s = s._replace(wire=(EMPTY, ((Ctl("counter", 0, 1, True),), ())))
    t = step(SHIFT, s, "Deliver", 2, "AtoB")
    assert t.failbackAt[B] == 0 and t.recvMode[B] == "Fallback"


def test_control_message_to_a_dead_qp_is_lost() -> None:
    s = on(reach(SHIFT, 1)._replace(wire=(EMPTY, ((Ctl("counter", 0, 1, True),), ()))), B,
           qp=("RTS", "ERR"))
    t = step(SHIFT, s, "Deliver", 2, "AtoB")
    assert changed(s, t) == {"wire"}


def test_no_failover_design_has_no_layer_steps() -> None:
    nf = model("NoFailover")
    s = reach(nf, 1)._replace(peerCtr=(0, 0), fresh=(True, True))
    assert nf.step(s, make("Progress", "A")) is None


def test_a_send_places_its_payload_in_the_buffer_of_the_receive_wr_it_consumes() -> None:
    s = reach(SHIFT, 2, ("PostRecv", "B", 1), ("PostRecv", "B", 2), ("PostSend", "A", 1),
              ("PostSend", "A", 2), ("Transmit", "A", 1), ("Transmit", "A", 1),
              ("Deliver", 1, "AtoB"), ("Deliver", 1, "AtoB"))
    assert s.bufs[B] == (1, 2) and s.mem[B] == (0, 0)  # SEND k carries payload k
    b = step(SHIFT, step(SHIFT, s, "PollCq", "B"), "PollCq", "B")
    assert [(e.recv, e.data) for e in b.rcvSeen[B]] == [(1, 1), (2, 2)]


def test_a_cas_swaps_once_and_run_again_fails_returning_what_it_swapped_in() -> None:
    naive = model("NaiveReplay")
    s = reach(naive, 6, ("PostSend", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"))
    assert s.mem[B] == (0, 1) and s.wire[0][1] == (Ack(1, 0),)  # compare 0 held: swapped
    # The same CAS again (a replay) at the next PSN: 1 is not the compare value.
    again = on(s._replace(wire=(((Req(2, 1),), ()), s.wire[1])), A, sq=((1, 1), ()))
    t = step(naive, again, "Deliver", 1, "AtoB")
    assert t.mem[B] == (0, 1) and t.execs[A] == (2, 0) and t.wire[0][1] == (Ack(2, 1),)
    # A's application sees what the first run returned.
    u = step(naive, step(naive, s, "Deliver", 1, "BtoA"), "PollCq", "A")
    assert u.sndSeen[A] == (SndSeen(1, "SUCCESS", 0),)


def test_b_makes_its_store_once_it_took_the_notification_and_only_as_written() -> None:
    s = reach(SHIFT, 6, ("PostSend", "A", 1), ("PostRecv", "B", 1), ("PostSend", "A", 2),
              ("Transmit", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
              ("Deliver", 1, "AtoB"))
    assert s.stores[B][0] == (2, 0, 1) and s.mem[B] == (0, 1)
    assert SHIFT.step(s, make("AppWrite", "B", 2, 0)) is None  # notification 1 not taken yet
    t = step(SHIFT, s, "PollCq", "B")
    assert SHIFT.step(t, make("AppWrite", "B", 2, 7)) is None  # not the store it makes
    assert SHIFT.step(t, make("AppWrite", "A", 2, 0)) is None  # A makes no store here
    u = step(SHIFT, t, "AppWrite", "B", 2, 0)
    assert changed(t, u) == {"mem", "stored"} and u.mem[B] == (0, 0) and u.stored == (0, 1)
    assert SHIFT.step(u, make("AppWrite", "B", 2, 0)) is None  # each store once


def test_a_workload_without_stores_has_no_app_write() -> None:
    s = reach(SHIFT, 1, *POSTED1)
    assert s.stores == EMPTY and SHIFT.step(s, make("AppWrite", "B", 1, 0)) is None

