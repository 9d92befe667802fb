"""spec/Failover.tla, the failover layer on both hosts: Trigger, the Progress steps
(trigger on the peer's counter, handshake, replay, reconnect, release) and the delivery of
its control messages.

Hosts are indices here (0: A, 1: B); each has a send side (`sendMode`) and a receive side
(`recvMode`); `design.skip` selects the replay filter.
"""

from __future__ import annotations

from shift.model.config import Constants, DesignRecord
from shift.model.state import (
    APP_ERRORS,
    ATOMICS,
    DEFAULT,
    DIR,
    ERR,
    ERROR,
    FALLBACK,
    FLUSH,
    HOST,
    MOVING,
    RETRY_EXC,
    RNR_FOREVER,
    RTS,
    SPEAKING,
    SUCCESS,
    TAKEN_OVER,
    TWO_SIDED,
    WAIT_DRAINED,
    WAIT_SIGNALED,
    Cqe,
    Ctl,
    State,
    Wire,
    flushes_at_once,
    good_prefix,
    incarnation_of,
    note_wr,
    notes_before,
    notes_taken,
    peer,
    set_at,
    set_in,
    silent,
)
from shift.model.transport import push


def on_path1(s: State, h: int) -> bool:
    """OnPath1(h): a side of h is on the default path."""
    return s.sendMode[h] in (DEFAULT, WAIT_SIGNALED, WAIT_DRAINED) or s.recvMode[h] == DEFAULT


def holds1(s: State, h: int) -> bool:
    """Holds1(h): ... and uses the default QP so that a reset of it would lose WRs."""
    return s.sendMode[h] in (DEFAULT, WAIT_DRAINED) or s.recvMode[h] == DEFAULT


def _flushed(ws: tuple[int, ...]) -> tuple[Cqe, ...]:
    return tuple(Cqe(w, 0, FLUSH, 0) for w in ws)


def _flushed_recvs(rs: tuple[int, ...]) -> tuple[Cqe, ...]:
    return tuple(Cqe(0, r, FLUSH, 0) for r in rs)


def acked_with(s: State, h: int, d: DesignRecord, ws: tuple[int, ...]) -> tuple[int, ...]:
    """Acked(h, D, ws): h's acked notifications once its WRs ws completed successfully:
    with D.keepNotes the notifications among ws join them (a success says the peer's NIC
    executed one, not that the peer's layer counted it: F7)."""
    if not d.keepNotes:
        return s.acked[h]
    prog = s.program[h]
    return s.acked[h] + tuple(w for w in ws if prog[w - 1].note > 0)


def uncounted(s: State, h: int, n: int) -> tuple[int, ...]:
    """Uncounted(h, n): h's acked notifications that no counter of the peer up to n
    covers."""
    prog = s.program[h]
    return tuple(w for w in s.acked[h] if prog[w - 1].note > n)


def _trigger_send(s: State, h: int, d: DesignRecord, status: str, good: tuple[Cqe, ...],
                  ) -> State:
    """Trigger's send side: in Default, Fallback (or Error when the design refuses with an
    atomic outstanding); in fail-back, abandon it (the WRs held on the default QP go to
    the backup QP); otherwise unchanged. Also the buffered completions."""
    mode = s.sendMode[h]
    sends = [c for c in good if c.recv == 0]
    pending = s.pending[h]
    rest = pending if not sends else tuple(w for w in pending if w > sends[-1].wr)
    prog = s.program[h]
    refuse = (mode == DEFAULT and d.refuseAtomics
              and any(prog[w - 1].op in ATOMICS for w in rest))
    failed = tuple(Cqe(w, 0, status if k == 0 else FLUSH, 0)
                   for k, w in enumerate(rest)) if refuse else ()
    s = s._replace(buffered=set_at(s.buffered, h, s.buffered[h] + good + failed))
    if mode == DEFAULT:
        done = pending[:len(pending) - len(rest)]
        return s._replace(pending=set_at(s.pending, h, () if refuse else rest),
                          acked=set_at(s.acked, h, acked_with(s, h, d, done)),
                          refused=set_at(s.refused, h, s.refused[h] | frozenset(rest))
                          if refuse else s.refused,
                          sendMode=set_at(s.sendMode, h, ERROR if refuse else FALLBACK),
                          replayed=set_at(s.replayed, h, False))
    if mode in (WAIT_SIGNALED, WAIT_DRAINED):  # abandon the fail-back
        held = s.sq[h][0]
        return s._replace(sq=set_at(s.sq, h, ((), s.sq[h][1] + held)),
                          sendMode=set_at(s.sendMode, h, FALLBACK),
                          fence=set_at(s.fence, h, 0))
    return s


def trigger(s: State, h: int, d: DesignRecord, status: str) -> State:
    """Trigger(h, D, status): host h takes its sides off the default path: its default QP
    to the error state, the default CQ drained up to its first error (its good completions
    held for the application); the send side to Fallback (or Error, or it abandons a
    fail-back), the receive side, if on the default QP, to Moving. The drain (as
    ib_drain_qp's) takes what a live NIC had not yet written too (AckBeforeCqe)."""
    good = good_prefix(s.cq[h][0] + s.unwritten[h][0])
    abandon = s.sendMode[h] in (WAIT_SIGNALED, WAIT_DRAINED)
    cq2 = s.cq[h][1] + _flushed(s.sq[h][0]) if abandon and flushes_at_once(s, h, 1) else s.cq[h][1]
    s2 = _trigger_send(s, h, d, status, good)
    s2 = s2._replace(qp=set_in(s.qp, h, 0, ERR), cq=set_at(s.cq, h, ((), cq2)),
                     unwritten=set_in(s.unwritten, h, 0, ()),
                     # an unread death of the default NIC is stale (C: silent_reset);
                     # a take-over already read keeps flushing
                     fatal=set_in(s.fatal, h, 0, SPEAKING if silent(s, h, 0) else s.fatal[h][0]),
                     sentCtr=set_at(s.sentCtr, h, False))
    if s.recvMode[h] != DEFAULT:
        return s2
    recvs = [c.recv for c in good if c.recv > 0]
    return s2._replace(rq=set_in(s2.rq, h, 0, ()),
                       recvDone=set_at(s.recvDone, h, s.recvDone[h] + len(recvs)),
                       rpend=set_at(s.rpend, h, tuple(r for r in s.rpend[h] if r not in recvs)),
                       recvMode=set_at(s.recvMode, h, MOVING))


def first_fault(s: State, h: int) -> str:
    """FirstFault(h): what failed h's default QP: the status of the first CQE of its CQ
    that is an error other than a flush (SUCCESS when none). A flush only says the QP is
    in the error state; the CQE of the WR that put it there may come after it."""
    for c in s.cq[h][0]:
        if c.status not in (SUCCESS, FLUSH):
            return c.status
    return SUCCESS


def app_fault(s: State, h: int) -> bool:
    """FirstFault(h) \\in AppErrors: h's default QP failed because of its application."""
    return first_fault(s, h) in APP_ERRORS


def own_app_error(s: State, h: int) -> bool:
    """OwnAppError(h): the layer handed h's application an error of its own (a bad key),
    seen or still held."""
    return any(c.status in APP_ERRORS for c in s.sndSeen[h] + s.buffered[h])


def app_owned(s: State, h: int) -> bool:
    """AppOwned(h): h's QP pair is its application's: its own error (`own_app_error`) or
    the peer's word that its application failed the pair (`peerFailed`). h's layer takes
    no further part in a failover, and later errors off its default QP go to the
    application."""
    return own_app_error(s, h) or s.peerFailed[h]


def tell_app_error(s: State, wire: Wire, h: int) -> Wire:
    """TellAppError(w, h): wire with h's word to its peer that its application failed the
    QP pair, sent on the backup path if h can send there."""
    if not (s.nic[h][1] and s.qp[h][1] == RTS):
        return wire
    return push(s.link, wire, 1, h, Ctl("apperr", 0))


def app_error(s: State, h: int) -> State:
    """AppError(h): h's default QP failed because of its application: no failover. Every
    completion of the default CQ goes to the application in order (the error on its WR
    with its own status, the flushes around it), no WR stays outstanding, the send side
    fails later WRs at once (Error), and the peer is told (F6b)."""
    cs = s.cq[h][0]
    recvs = {c.recv for c in cs}
    good = sum(1 for c in cs if c.recv > 0 and c.status == SUCCESS)
    return s._replace(cq=set_in(s.cq, h, 0, ()), buffered=set_at(s.buffered, h, s.buffered[h] + cs),
                      pending=set_at(s.pending, h, ()),
                      rpend=set_at(s.rpend, h, tuple(r for r in s.rpend[h] if r not in recvs)),
                      recvDone=set_at(s.recvDone, h, s.recvDone[h] + good),
                      sendMode=set_at(s.sendMode, h, ERROR), wire=tell_app_error(s, s.wire, h))


def _after_all(s: State, h: int, i: int) -> int:
    """h's fatal[i] once every WR so far is completed: an unread death's event will
    flush only the posts made after now."""
    return len(s.sq[h][i]) + 1 if silent(s, h, i) else s.fatal[h][i]


def peer_app_error(s: State, h: int) -> State:
    """PeerAppError(h): the peer's application failed the QP pair, so h's is failed too,
    as plain RC's would be (F6b). Both QPs go to the error state; the application gets
    everything the CQs hold (default first; on each, what its NIC had not yet written
    last), then every WR and receive WR still outstanding, flushed; the send side is in
    Error, the receive side back on the default QP; h's QP pair is its application's."""
    cs = s.cq[h][0] + s.unwritten[h][0] + s.cq[h][1] + s.unwritten[h][1]
    sends = [c for c in cs if c.recv == 0]
    in_cq = {c.wr for c in sends}
    oks = [c.wr for c in sends if c.status == SUCCESS]
    left = tuple(w for w in s.pending[h] if w not in in_cq and all(w > v for v in oks))
    recvs = {c.recv for c in cs}
    owed = tuple(r for r in s.rpend[h] if r not in recvs)
    taken = sum(1 for c in cs if c.recv > 0 and c.status == SUCCESS)
    return s._replace(
        qp=set_at(s.qp, h, (ERR, ERR)), cq=set_at(s.cq, h, ((), ())),
        unwritten=set_at(s.unwritten, h, ((), ())),
        # every WR so far is completed here: an unread death's event flushes later posts only
        fatal=set_at(s.fatal, h, (_after_all(s, h, 0), _after_all(s, h, 1))),
        rq=set_at(s.rq, h, ((), ())),
        buffered=set_at(s.buffered, h, s.buffered[h] + cs + _flushed(left) + _flushed_recvs(owed)),
        pending=set_at(s.pending, h, ()), rpend=set_at(s.rpend, h, ()),
        recvDone=set_at(s.recvDone, h, s.recvDone[h] + taken),
        sendMode=set_at(s.sendMode, h, ERROR), recvMode=set_at(s.recvMode, h, DEFAULT),
        failbackAt=set_at(s.failbackAt, h, 0),
        fence=set_at(s.fence, h, 0), asked=set_at(s.asked, h, False),
        peerFailed=set_at(s.peerFailed, h, True))


def _resend(s: State, wire: Wire, h: int, ask: bool) -> Wire:
    """Failover.tla's Resend: wire with h's latest counter sent again on the backup path,
    if h can send there (a dead NIC or a QP in the error state sends nothing)."""
    if not (s.nic[h][1] and s.qp[h][1] == RTS):
        return wire
    return push(s.link, wire, 1, h, Ctl("counter", s.ctrVal[h], s.ctrSeq[h], ask))


def handshake(s: State, h: int) -> State | None:
    """Handshake(h), step 2: repost the outstanding receive WRs on the backup QP (flushed
    if that QP is in the error state) if the receive side is moving, then send the receive
    counter over the backup path, numbered so that a resend is told from a new counter:
    first (then h awaits the peer's: it asks), or answering the peer's. A counter no replay
    needs is used up."""
    if s.sentCtr[h] or on_path1(s, h):
        return None
    rq, cq, recv_mode = s.rq, s.cq, s.recvMode
    if s.recvMode[h] == MOVING:
        if not flushes_at_once(s, h, 1):  # ready to send, or silent (DeviceFatal)
            rq = set_in(rq, h, 1, rq[h][1] + s.rpend[h])
        else:
            cq = set_in(cq, h, 1, cq[h][1] + _flushed_recvs(s.rpend[h]))
        recv_mode = set_at(recv_mode, h, FALLBACK)
    seq = s.ctrSeq[h] + 1
    wire = s.wire
    if s.nic[h][1] and s.qp[h][1] == RTS:  # a dead NIC or an errored QP sends nothing
        wire = push(s.link, wire, 1, h, Ctl("counter", s.recvDone[h], seq, not s.fresh[h]))
    fresh = s.fresh[h] and s.sendMode[h] == FALLBACK and not s.replayed[h]
    return s._replace(rq=rq, cq=cq, recvMode=recv_mode, wire=wire,
                      sentCtr=set_at(s.sentCtr, h, True),
                      asked=set_at(s.asked, h, not s.fresh[h]),
                      fresh=set_at(s.fresh, h, fresh), ctrSeq=set_at(s.ctrSeq, h, seq),
                      ctrVal=set_at(s.ctrVal, h, s.recvDone[h]))


def message_of(prog: tuple, w: int) -> int:
    """MessageOf: the notification that ends the message WR w belongs to (0: none)."""
    for x in prog[w - 1:]:
        if x.note > 0:
            return int(x.note)
    return 0


def skip(s: State, h: int, d: DesignRecord, w: int) -> bool:
    """Skip(h, D, w), the design's replay filter: is h's outstanding WR w known to have
    executed?"""
    prog = s.program[h]
    if d.skip == "none":
        return False
    if d.skip == "counter":
        return 0 < prog[w - 1].note <= s.peerCtr[h]
    if d.skip == "prefix":
        return any(v >= w and 0 < prog[v - 1].note <= s.peerCtr[h] for v in s.pending[h])
    if d.skip == "psn":
        # w's PSN on the default QP is below the peer NIC's expected PSN.
        return any(v == w and k < s.epsn[peer(h)][0] for k, v in enumerate(s.sq[h][0], 1))
    if d.skip == "flag":
        msg = message_of(prog, w)
        return msg > 0 and any(e.wr == note_wr(prog, msg) for e in notes_taken(s, peer(h)))
    raise ValueError(f"unknown replay filter {d.skip!r}")


def replay(s: State, h: int, d: DesignRecord) -> State | None:
    """Replay(h, D), step 3: re-post h's outstanding WRs on the backup QP in post order,
    except those the filter skips; a skipped signaled WR completes as a success. First
    the acked notifications the peer's counter does not cover (D.keepNotes: F7), whose
    completions the layer will drop (`resent`)."""
    if s.sendMode[h] != FALLBACK or not s.sentCtr[h] or not s.fresh[h] or s.replayed[h]:
        return None
    flags = [(w, skip(s, h, d, w)) for w in s.pending[h]]
    again = uncounted(s, h, s.peerCtr[h])
    keep = tuple(w for w, skipped in flags if not skipped)
    prog = s.program[h]
    done = tuple(Cqe(w, 0, SUCCESS, 0) for w, skipped in flags
                 if skipped and prog[w - 1].signaled)
    cq = s.cq
    if flushes_at_once(s, h, 1):
        cq = set_in(cq, h, 1, cq[h][1] + _flushed(again + keep))
    return s._replace(sq=set_in(s.sq, h, 1, s.sq[h][1] + again + keep), cq=cq,
                      acked=set_at(s.acked, h, again),
                      resent=set_at(s.resent, h, s.resent[h] | frozenset(again)),
                      buffered=set_at(s.buffered, h, s.buffered[h] + done),
                      pending=set_at(s.pending, h, keep),
                      replayed=set_at(s.replayed, h, True), fresh=set_at(s.fresh, h, False),
                      queried=s.queried or d.readsResponder)


def reset_path1(s: State, b: Constants, x: int, e: int) -> State:
    """ResetPath1(x, e): host x's default QP starts afresh in incarnation e (queues, CQ, PSN
    state; a NIC's unread death is stale, a take-over ends)."""
    return s._replace(qp=set_in(s.qp, x, 0, RTS), sq=set_in(s.sq, x, 0, ()),
                      rq=set_in(s.rq, x, 0, ()), cq=set_in(s.cq, x, 0, ()),
                      fatal=set_in(s.fatal, x, 0, SPEAKING),
                      incarnation=set_at(s.incarnation, x, e),
                      una=set_in(s.una, x, 0, 1), nxt=set_in(s.nxt, x, 0, 1),
                      retry=set_in(s.retry, x, 0, b.max_retries),
                      rnrLeft=set_in(s.rnrLeft, x, 0, b.rnr_retry), epsn=set_in(s.epsn, x, 0, 1),
                      saved=set_in(s.saved, x, 0, frozenset()))


def _ask_reconnect(s: State, wire: Wire, h: int, e: int) -> Wire:
    """wire with h's request that the peer reset its default QP into incarnation e, on the backup
    path."""
    return push(s.link, wire, 1, h, Ctl("reconnect", 0, e))


def reconnect(s: State, h: int, d: DesignRecord, b: Constants) -> State | None:
    """Reconnect(h, D), step 4a: h's default NIC is up again. If its default QP is ready to
    send, the peer reset the pair since h left it: wait for the fence. Else reset its own QP
    into the next incarnation and ask the peer (on the backup path, if h can send there) to reset
    its end into it; await the answer (reconnecting). A reset waits until h holds no WR on
    the QP and its NIC wrote every completion it made there."""
    if not (d.failBack and b.recover and s.sendMode[h] == FALLBACK and s.replayed[h]
            and s.sentCtr[h] and not s.fresh[h] and not s.reconnecting[h] and s.nic[h][0]):
        return None
    if s.qp[h][0] == RTS:
        return s._replace(sendMode=set_at(s.sendMode, h, WAIT_SIGNALED))
    if s.recvMode[h] == DEFAULT or s.unwritten[h][0]:
        return None
    e = s.incarnation[h] + 1
    wire = s.wire
    if s.nic[h][1] and s.qp[h][1] == RTS:
        wire = _ask_reconnect(s, wire, h, e)
    return reset_path1(s, b, h, e)._replace(wire=wire,
                                            reconnecting=set_at(s.reconnecting, h, e))


def release(s: State, h: int) -> State | None:
    """Release(h), step 4b: the fence completed on the backup path: notify the peer on
    the default path alone (a dead NIC sends nothing) and release the held WRs."""
    if s.sendMode[h] != WAIT_DRAINED or s.fence[h] in s.pending[h] or s.fresh[h]:
        return None
    wire = s.wire
    if s.nic[h][0] and s.qp[h][0] == RTS:
        notes = notes_before(s.program[h], s.fence[h])
        wire = push(s.link, wire, 0, h, Ctl("failback", notes, incarnation=s.incarnation[h]))
    return s._replace(wire=wire, sendMode=set_at(s.sendMode, h, DEFAULT),
                      fence=set_at(s.fence, h, 0), replayed=set_at(s.replayed, h, False))


def woken(s: State, h: int, d: DesignRecord) -> State | None:
    """Progress's first step: a counter of the peer h must answer arrived while a side of
    h is on the default path: take its sides off it (Trigger)."""
    if not (on_path1(s, h) and s.fresh[h] and not s.sentCtr[h]):
        return None
    return trigger(s, h, d, FLUSH)


def progress_all(s: State, d: DesignRecord, b: Constants, host: str) -> list[State]:
    """Every successor of Progress(host): one per enabled disjunct, as TLC generates them.
    The spec says at most one is enabled at a time; `progress` relies on it."""
    h = HOST[host]
    if not d.failover or app_owned(s, h):
        return []
    steps = (woken(s, h, d), handshake(s, h), replay(s, h, d), reconnect(s, h, d, b),
             release(s, h))
    return [t for t in steps if t is not None]


class Nondeterministic(Exception):
    """An event with more than one successor: the spec's determinism claim is broken."""


def progress(s: State, d: DesignRecord, b: Constants, host: str) -> State | None:
    succ = progress_all(s, d, b, host)
    if len(succ) > 1:
        raise Nondeterministic(f"Progress({host}) has {len(succ)} enabled steps")
    return succ[0] if succ else None


def _take_counter(s: State, h: int, m: Ctl) -> State:
    """A counter numbered after the last one h took arrives at h: the answer h awaited
    (used up at once unless a replay needs it), or the peer starting a failover, which h
    answers."""
    asked = s.asked[h]
    fresh = not asked or (s.sendMode[h] == FALLBACK and not s.replayed[h])
    return s._replace(peerCtr=set_at(s.peerCtr, h, m.count), fresh=set_at(s.fresh, h, fresh),
                      acked=set_at(s.acked, h, uncounted(s, h, m.count)),
                      asked=set_at(s.asked, h, False),
                      sentCtr=s.sentCtr if asked else set_at(s.sentCtr, h, False),
                      peerSeq=set_at(s.peerSeq, h, m.seq),
                      failbackAt=set_at(s.failbackAt, h, 0))


def _backup_good(s: State, h: int) -> tuple[Cqe, ...]:
    """The good prefix of the receive completions h's backup CQ holds."""
    return good_prefix(tuple(c for c in s.cq[h][1] if c.recv > 0))


def _take_failback(s: State, h: int, notes: int) -> State:
    """The fail-back notice arrives at h's receive side: its sender posted `notes`
    notifications before its fence, all executed here. If the backup CQ's written good
    receive completions make up the rest of them, the receive side moves back at once
    (`move_back`); else some of their completions are not yet in host memory
    (AckBeforeCqe; F11), and it waits for them (failbackAt), taking them as they come
    (`poll_cq`). A drain would not do: it moves the backup QP to the error state, which
    h's own sends there do not survive."""
    if s.recvDone[h] + len(_backup_good(s, h)) >= notes:
        return move_back(s, h)
    return s._replace(failbackAt=set_at(s.failbackAt, h, notes))


def move_back(s: State, h: int) -> State:
    """h's receive side moves back to the default path: it holds the backup CQ's good
    receive completions, drops its other receive CQEs, and reposts on the default QP every
    receive WR its application is still owed. A receive side that waited (failbackAt)
    moves only onto a default QP still ready to send; else it stays on the backup path."""
    if s.failbackAt[h] and not (s.nic[h][0] and s.qp[h][0] == RTS):
        return s._replace(failbackAt=set_at(s.failbackAt, h, 0))
    good = _backup_good(s, h)
    recvs = {c.recv for c in good}
    on1 = s.rq[h][0]
    owed = tuple(r for r in s.rpend[h] if r not in recvs and r not in on1)
    return s._replace(
        rq=set_at(s.rq, h, (on1 + owed, ())),
        cq=set_in(s.cq, h, 1, tuple(c for c in s.cq[h][1] if c.recv == 0)),
        buffered=set_at(s.buffered, h, s.buffered[h] + good),
        recvDone=set_at(s.recvDone, h, s.recvDone[h] + len(good)),
        rpend=set_at(s.rpend, h, tuple(r for r in s.rpend[h] if r not in recvs)),
        recvMode=set_at(s.recvMode, h, DEFAULT), failbackAt=set_at(s.failbackAt, h, 0))


def take_reconnect(s: State, b: Constants, i: int, j: int, m: Ctl) -> State:
    """TakeReconnect(p, d): a request to reconnect the default path, or its answer, arrives
    at host To(d). A request for an incarnation after h's: h resets its default QP into it and
    answers, if it does not use the QP (holds1), its NIC there is up and wrote every
    completion it made (else it drops it: the peer's timer resends); a request for h's own
    incarnation is answered again, and is as good as the answer if h awaits one for that incarnation
    itself; the answer to the reconnect h awaits ends the wait (its send side waits for the
    fence: `_reconnect_done`). Anything else, or at a host whose QP pair is its
    application's: nothing."""
    h = 1 - j
    rest = set_in(s.wire, i, j, s.wire[i][j][1:])
    takes = (s.nic[h][i] and s.qp[h][i] == RTS and m.incarnation == incarnation_of(s, h, i)
             and not app_owned(s, h))
    answer = push(s.link, rest, i, h,
                  Ctl("reconnected", 0, m.seq, incarnation=incarnation_of(s, h, i)))
    if (takes and m.what == "reconnect" and m.seq > s.incarnation[h] and not holds1(s, h)
            and s.nic[h][0] and not s.unwritten[h][0]):
        return reset_path1(s, b, h, m.seq)._replace(
            wire=answer, reconnecting=set_at(s.reconnecting, h, 0))
    if takes and m.what == "reconnect" and m.seq == s.incarnation[h]:
        return _reconnect_done(s._replace(wire=answer), h, m.seq)
    if takes and m.what == "reconnected":
        return _reconnect_done(s._replace(wire=rest), h, m.seq)
    return s._replace(wire=rest)


def _reconnect_done(s: State, h: int, e: int) -> State:
    """ReconnectDone(h, e): the peer's end is in incarnation e; if h awaits that reconnect, the
    wait ends and its send side waits for the fence."""
    if s.reconnecting[h] != e:
        return s
    mode = WAIT_SIGNALED if s.sendMode[h] == FALLBACK else s.sendMode[h]
    return s._replace(reconnecting=set_at(s.reconnecting, h, 0),
                      sendMode=set_at(s.sendMode, h, mode))


def deliver_control(s: State, d: DesignRecord, b: Constants, p: int,
                    direction: str) -> State | None:
    """DeliverControl(p, d): a control message of the layer arrives at host To(d); a dead
    NIC, a QP in the error state or one of another incarnation drops it. A request to reconnect
    or its answer: `take_reconnect`. A counter numbered after the last one taken is
    taken; the last one again, resent by the peer's timer, is answered with h's own counter
    if it asks and h sent one (its answer may have been lost); an older one changes
    nothing. The peer's word that its application failed the QP pair: `peer_app_error`.
    A host whose QP pair is its application's (`app_owned`) takes nothing; if its own
    application's error is why, it answers a counter with that word."""
    i, j = p - 1, DIR[direction]
    ch = s.wire[i][j]
    if not ch or ch[0].kind != "ctl":
        return None
    m = ch[0]
    assert isinstance(m, Ctl)
    if m.what in ("reconnect", "reconnected"):
        return take_reconnect(s, b, i, j, m)
    h = 1 - j
    s2 = s._replace(wire=set_in(s.wire, i, j, ch[1:]))
    alive = s.nic[h][i] and s.qp[h][i] == RTS and m.incarnation == incarnation_of(s, h, i)
    takes = alive and not app_owned(s, h)
    if takes and m.what == "counter" and m.seq > s.peerSeq[h]:
        return _take_counter(s2, h, m)
    if takes and m.what == "counter" and m.seq == s.peerSeq[h] and m.ask and s.sentCtr[h]:
        return s2._replace(wire=_resend(s, s2.wire, h, s.asked[h]))
    if takes and m.what == "apperr":
        return peer_app_error(s2, h)
    if takes and m.what == "failback" and s.recvMode[h] == FALLBACK:
        return _take_failback(s2, h, m.count)
    if alive and m.what == "counter" and own_app_error(s, h):
        return s2._replace(wire=tell_app_error(s, s2.wire, h))
    return s2


def counter_unanswered(s: State, h: int) -> bool:
    """CounterUnanswered(h): h sent its counter first and awaits the answer, which the peer
    is not about to send (it did not take h's counter, or it answered)."""
    o = 1 - h
    slow_peer = s.peerSeq[o] == s.ctrSeq[h] and not s.sentCtr[o]
    return s.asked[h] and s.sentCtr[h] and not slow_peer


def handshake_timeout(s: State, d: DesignRecord, b: Constants, host: str) -> State | None:
    """HandshakeTimeout(h): h awaits the answer to its counter (`counter_unanswered`) or to
    its request to reconnect (reconnecting) and nothing is in flight on the backup path: h
    resends what it awaits the answer to (only where the resend can leave: h's NIC 2
    alive, its QP 2 ready to send, link 2 up)."""
    h = HOST[host]
    counter = counter_unanswered(s, h)
    if app_owned(s, h) or not (counter or s.reconnecting[h]):
        return None
    if not (s.nic[h][1] and s.qp[h][1] == RTS and s.link[1]
            and not s.wire[1][0] and not s.wire[1][1]):
        return None
    wire = _resend(s, s.wire, h, True) if counter else s.wire
    if s.reconnecting[h]:
        wire = _ask_reconnect(s, wire, h, s.reconnecting[h])
    return s._replace(wire=wire)


def waits_for_ever(s: State, b: Constants, h: int) -> bool:
    """WaitsForEver(h): the oldest WR h's NIC has not had acknowledged on the default path
    is a notification, the peer has no receive WR on its default QP and posts none there
    (its receive side is off the default path, and no fail-back notice of h's is on its
    way to move it back), and RC retries RNR NAKs for ever."""
    o, una, q = 1 - h, s.una[h][0], s.sq[h][0]
    return (b.rnr_nak and b.rnr_retry == RNR_FOREVER and s.qp[h][0] == RTS and una <= len(q)
            and s.program[h][q[una - 1] - 1].op in TWO_SIDED
            and not s.rq[o][0] and s.recvMode[o] != DEFAULT
            and s.nic[o][0] and s.qp[o][0] == RTS and not s.failbackAt[o]
            and not any(m.kind == "ctl" for m in s.wire[0][h]))


def completion_timeout(s: State, d: DesignRecord, b: Constants, host: str) -> State | None:
    """CompletionTimeout(h, D): h's completion timer fires where a WR on the default path
    waits for ever (`waits_for_ever`): the layer takes it as a failure of the default path
    (Trigger, RETRY_EXC_ERR) and fails over; only from Default, and never once h's QP pair
    is its application's."""
    h = HOST[host]
    if not d.failover or app_owned(s, h) or s.sendMode[h] != DEFAULT:
        return None
    if not waits_for_ever(s, b, h):
        return None
    return trigger(s, h, d, RETRY_EXC)


def fatal_event(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """FatalEvent(h, p): h's layer reads the asynchronous event of its NIC p's silent death
    (IBV_EVENT_DEVICE_FATAL; DeviceFatal) and completes for the NIC what the kernel
    completes for its own consumers: every WR of the QP no completion covers, flushed (the
    send WRs from the one its death recorded, then the receive WRs), behind the CQ's
    entries; from then on it flushes each post itself (TAKEN_OVER) until the QP is reset.
    A failover starts from them as from any error polled off the default QP."""
    h, i = HOST[host], p - 1
    if not silent(s, h, i):
        return None
    flushed = _flushed(s.sq[h][i][s.fatal[h][i] - 1:]) + _flushed_recvs(s.rq[h][i])
    return s._replace(fatal=set_in(s.fatal, h, i, TAKEN_OVER),
                      cq=set_in(s.cq, h, i, s.cq[h][i] + flushed), rq=set_in(s.rq, h, i, ()))
