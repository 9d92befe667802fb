"""Why an event cannot happen: the first guard of its action that fails, in RDMA terms.

`why_not(model, state, event)` is None when the event is enabled in the state, else one
sentence naming the guard that stops it: "only A posts sends in this model", "the bound
excludes path 2 from faults (FaultPaths = {1})", "A's completion queue is empty", ...
`Model.run` (so `shift replay`) puts it after the list of enabled events when a trace's
event cannot happen (`Model.not_enabled`).

One function per event (`WHY_NOT`, by name, like `next.EVENT_FUNCTIONS`), taking the
same (state, design, bound, *event arguments). Each walks the guards of its action in the
order the model's function (apps.py, transport.py, faults.py, layer.py, next.deliver)
tests them, which is the order of the conjuncts of the spec's action, and returns the
first that fails; None means every guard holds. Nothing here decides enabledness for
the model: tests/model/test_explain.py checks, over whole state graphs and runs at every
bound, that `why_not` is None exactly when `Model.step` has a successor, so a guard
changed in an action and not here fails that test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from shift.model.apps import poll_path, polls1
from shift.model.config import Constants, DesignRecord
from shift.model.layer import app_owned, on_path1, waits_for_ever
from shift.model.state import (
    DEFAULT,
    DIR,
    ERROR,
    FALLBACK,
    HOST,
    RNR_FOREVER,
    RTS,
    WAIT_DRAINED,
    WAIT_SIGNALED,
    WRITERS,
    State,
    notes_before,
    num_notes,
    silent,
    taken,
)
from shift.vocabulary import Event

if TYPE_CHECKING:
    from shift.model.next import Model

Reason = Callable[..., str | None]

PEER = {"A": "B", "B": "A"}


def _count(n: int, noun: str) -> str:
    """'no fault', '1 fault', '2 faults'."""
    return f"no {noun}" if n == 0 else f"{n} {noun}" + ("" if n == 1 else "s")


def _paths(ps: frozenset[int]) -> str:
    """A set of paths as TLA+ writes it: {1, 2}."""
    return "{" + ", ".join(map(str, sorted(ps))) + "}"


def _qp(p: int) -> str:
    return f"the {'default' if p == 1 else 'backup'} QP (path {p})"


def _channel(p: int, direction: str) -> str:
    src, dst = ("A", "B") if direction == "AtoB" else ("B", "A")
    return f"the channel {direction} of path {p} (from {src} to {dst})"


def _why_fault(b: Constants, faults: int, p: int) -> str | None:
    """The guards LinkDown and NicFail share: the path may fail, and faults remain."""
    if p not in b.fault_paths:
        return f"the bound excludes path {p} from faults (FaultPaths = {_paths(b.fault_paths)})"
    if faults >= b.max_faults:
        if b.max_faults == 0:
            return "the bound allows no fault (MaxFaults = 0)"
        happened = "one fault" if faults == 1 else _count(faults, "fault")
        return (f"the bound allows MaxFaults = {b.max_faults} and {happened} "
                f"happened already")
    return None


def _no_recovery(b: Constants) -> str | None:
    return None if b.recover else "the bound has no recovery (Recover = FALSE)"


# -- the applications (apps.py; Failover.tla's PostSend, CanPost, PostRecv, AppWrite,
# PollCq) --

def post_send(s: State, d: DesignRecord, b: Constants, host: str, wr: int) -> str | None:
    h = HOST[host]
    prog, peer = s.program[h], PEER[host]
    n, posted = len(prog), s.posted[h]
    if wr < 1:
        return f"{host}'s WRs are numbered from 1 (WR {wr})"
    if wr > n:
        if n == 0:
            return f"{host}'s program is empty in this workload: {host} posts no WR"
        return f"{host}'s program has only {n} WRs (posted {posted} of {n})"
    if wr <= posted:
        return (f"{host} already posted WR {wr} (posted {posted} of {n}; WRs go in program "
                f"order)")
    if wr != posted + 1:
        return (f"WR {wr} is not the next WR of {host}'s program (posted {posted} of {n}; "
                f"the next is WR {posted + 1})")
    x = prog[wr - 1]
    if x.note > 0 and s.recvPosted[1 - h] < x.note:
        return (f"NCCL's flow control (CanPost): WR {wr}, a {x.op}, is notification "
                f"{x.note}, which {host} posts only once {peer} has posted receive WR "
                f"{x.note} ({peer} posted {s.recvPosted[1 - h]})")
    before, took = notes_before(prog, wr - 1), taken(s, 1 - h)
    if x.op in WRITERS and x.region != 0 and took < before:
        return (f"NCCL's flow control (CanPost): {host} waits for {peer}'s application to "
                f"take notification {took + 1} before reusing its buffer (WR {wr}, a "
                f"{x.op} into region {x.region}; {peer} took {took} of the {before} "
                f"notifications posted before it)")
    mine = taken(s, h)
    if mine < x.after:
        return (f"WR {wr} is a reply: {host} posts it once it took "
                f"{_count(x.after, 'notification')} of {peer}'s (it took {mine})")
    return None


def post_recv(s: State, d: DesignRecord, b: Constants, host: str, recv: int) -> str | None:
    h, peer = HOST[host], PEER[host]
    k, posted = num_notes(s.program[1 - h]), s.recvPosted[h]
    if recv < 1:
        return f"{host}'s receive WRs are numbered from 1 (receive WR {recv})"
    if recv > k:
        if k == 0:
            return (f"{peer}'s program has no notification (SEND, WRITE_WITH_IMM), so "
                    f"{host} posts no receive WR")
        return (f"{peer}'s program has only {_count(k, 'notification')}, so {host} posts "
                f"only {_count(k, 'receive WR')} (posted {posted} of {k})")
    if recv <= posted:
        return f"{host} already posted receive WR {recv} (posted {posted} of {k})"
    if recv != posted + 1:
        return (f"receive WR {recv} is not {host}'s next (posted {posted} of {k}; the next "
                f"is receive WR {posted + 1})")
    return None


def app_write(s: State, d: DesignRecord, b: Constants, host: str, region: int,
              value: int) -> str | None:
    h = HOST[host]
    stores = s.stores[h]
    n, done = len(stores), s.stored[h]
    if done >= n:
        return (f"{host}'s application makes {_count(n, 'store')} in this workload "
                f"(made {done})")
    x = stores[done]
    if (region, value) != (x.region, x.value):
        return (f"{host}'s next store writes {x.value} into region {x.region} (store "
                f"{done + 1} of {n}), not {value} into region {region}")
    took = taken(s, h)
    if took < x.after:
        return (f"{host} makes store {done + 1} once it took "
                f"{_count(x.after, 'notification')} (it took {took})")
    return None


def poll_cq(s: State, d: DesignRecord, b: Constants, host: str) -> str | None:
    h = HOST[host]
    if s.buffered[h]:
        return None
    p = poll_path(s, h)
    sides = f"send side {s.sendMode[h]}, receive side {s.recvMode[h]}"
    if p == 1 and not polls1(s, h):
        return (f"{host}'s completion queues are empty: both of its sides are off the "
                f"default path ({sides}) and nothing is on the CQ of {_qp(2)} nor held "
                f"back by the layer")
    if s.cq[h][p - 1]:
        return None
    return (f"{host}'s completion queue is empty: nothing on the CQ of {_qp(p)}, which "
            f"{host}'s layer polls ({sides}), and no completion held back by the layer")


# -- the NICs and the wire (transport.py, next.deliver; RCTransport.tla) --

def transmit(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    h, i = HOST[host], p - 1
    if s.qp[h][i] != RTS:
        return f"{host}'s QP on path {p} is in the error state (ERR): it sends nothing"
    n, q = s.nxt[h][i], s.sq[h][i]
    if n > len(q):
        if not q:
            return f"{host}'s send queue on path {p} is empty: nothing to send"
        return (f"nothing to send on path {p}: {host}'s NIC has sent every request of its "
                f"send queue there ({_count(len(q), 'WR')}, next PSN {n})")
    if p == 1 and s.sendMode[h] == WAIT_DRAINED:
        return (f"the fence holds the WR: {host} is in WaitDrained and WR {q[n - 1]} is "
                f"after the fence (WR {s.fence[h]}, on path 2), so path 1 sends nothing "
                f"until the fence completes")
    return None


def deliver(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> str | None:
    if not s.wire[p - 1][DIR[direction]]:
        return f"{_channel(p, direction)} is empty: nothing in flight to deliver"
    return None  # a request, an ACK or a control message: each is always taken


def drop(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> str | None:
    if s.drops >= b.max_drops:
        if b.max_drops == 0:
            return "the bound allows no drop (MaxDrops = 0)"
        return (f"MaxDrops reached: the bound allows MaxDrops = {b.max_drops} and "
                f"{_count(s.drops, 'packet')} {'was' if s.drops == 1 else 'were'} "
                f"dropped already")
    ch = s.wire[p - 1][DIR[direction]]
    if not ch:
        return f"{_channel(p, direction)} is empty: nothing to drop"
    if ch[0].kind == "ctl" and not b.ctl_loss:
        return (f"the head of {_channel(p, direction)} is a control message of the layer "
                f"(the {ch[0].what}), and the bound's wire loses none (CtlLoss = FALSE; a "
                f"LinkDown or NicFail can still lose it)")
    if ch[0].kind != "ctl" and p not in b.fault_paths:
        return (f"the bound excludes path {p} from faults and drops of requests and ACKs "
                f"(FaultPaths = {_paths(b.fault_paths)})")
    return None


def timeout(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    h, i = HOST[host], p - 1
    if s.qp[h][i] != RTS:
        return (f"{host}'s QP on path {p} is in the error state (ERR): its retransmission "
                f"timer is off")
    if not s.una[h][i] < s.nxt[h][i]:
        return (f"no retransmission timer can fire: nothing unacknowledged on path {p} "
                f"(every request {host}'s NIC sent there is acknowledged)")
    ab, ba = s.wire[i]
    if ab or ba:
        return (f"the retransmission timer fires only on a quiet wire (spec/README.md, Known "
                f"issues) and path {p} has packets in flight ({len(ab)} from A to B, "
                f"{len(ba)} from B to A)")
    return None


def write_cqe(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    h, i = HOST[host], p - 1
    if not s.nic[h][i]:
        return f"{host}'s NIC {p} is dead: what it had not yet written died with it"
    if not s.unwritten[h][i]:
        why = ("" if b.ack_before_cqe else
               f" (AckBeforeCqe = FALSE at bound {b.name}: a receive completion is in host "
               f"memory when its ACK leaves)")
        return f"{host}'s NIC {p} has no receive completion left to write{why}"
    return None


# -- faults (faults.py; Faults.tla) --

def link_down(s: State, d: DesignRecord, b: Constants, p: int) -> str | None:
    why = _why_fault(b, s.faults, p)
    if why is not None:
        return why
    if not s.link[p - 1]:
        return f"the link of path {p} is already down"
    return None


def link_up(s: State, d: DesignRecord, b: Constants, p: int) -> str | None:
    why = _no_recovery(b)
    if why is not None:
        return why
    if s.link[p - 1]:
        return f"the link of path {p} is up: it has not failed"
    return None


def nic_fail(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    why = _why_fault(b, s.faults, p)
    if why is not None:
        return why if p in b.fault_paths else f"{why}, and NIC {p} of {host} is on it"
    if not s.nic[HOST[host]][p - 1]:
        return f"NIC {p} of {host} has already failed"
    return None


def nic_recover(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    why = _no_recovery(b)
    if why is not None:
        return why
    if s.nic[HOST[host]][p - 1]:
        return f"NIC {p} of {host} is up: it has not failed"
    return None


# -- the failover layer (layer.py; Failover.tla's Progress) --

def _why_not_fallback(s: State, d: DesignRecord, b: Constants, host: str) -> str | None:
    """Progress in a send side in Fallback whose counter went out: Replay, then
    Reconnect."""
    h = HOST[host]
    if not s.replayed[h]:
        if not s.fresh[h]:
            return (f"{host} is in Fallback and has sent its counter: the replay waits for "
                    f"{PEER[host]}'s counter")
        return None  # Replay
    done = f"{host} replayed its outstanding WRs on the backup path"
    if not d.failBack:
        return (f"{done}, and {d.name} has no fail-back (failBack = FALSE): {host} stays on "
                f"path 2")
    if not b.recover:
        return (f"{done}; failing back needs path 1 healthy again, and the bound has no "
                f"recovery (Recover = FALSE)")
    if s.fresh[h]:
        return f"{done}; a counter of {PEER[host]} it has not used yet is pending"
    if s.reconnecting[h]:
        return (f"{done}; it reset its default QP into incarnation {s.reconnecting[h]} and waits "
                f"for {PEER[host]}'s answer to its request to reconnect (its handshake timer "
                f"asks again)")
    if not s.nic[h][0]:
        return f"{done} and waits for its NIC on path 1 to come back to fail back"
    if s.qp[h][0] != RTS:
        if s.recvMode[h] == DEFAULT:
            return (f"{done}; resetting its default QP would lose its receive WRs, which "
                    f"are there")
        if s.unwritten[h][0]:
            return (f"{done}; its NIC on path 1 has receive completions still to write "
                    f"before the QP can be reset")
    return None  # Reconnect


def progress(s: State, d: DesignRecord, b: Constants, host: str) -> str | None:
    """Progress(h) is a disjunction: Trigger (woken by the peer's counter), Handshake,
    Replay, Reconnect, Release. Which of them could apply depends on the host's sides,
    so the reason follows them to the step that would come next."""
    if not d.failover:
        return (f"{d.name} has no failover layer (failover = FALSE): Progress has no "
                f"step")
    h, peer = HOST[host], PEER[host]
    if app_owned(s, h):
        return _owned(s, host)
    mode, on1 = s.sendMode[h], on_path1(s, h)
    if not s.sentCtr[h] and (on1 and s.fresh[h] or not on1):
        return None  # Trigger, Handshake
    if mode == FALLBACK and s.sentCtr[h]:
        return _why_not_fallback(s, d, b, host)  # Replay, Reconnect
    if mode == WAIT_DRAINED:
        if s.fence[h] in s.pending[h]:
            return (f"{host} is in WaitDrained: the fence, WR {s.fence[h]}, is still "
                    f"outstanding ({host}'s application has not polled its completion), so "
                    f"{host} holds the WRs after it")
        if not s.fresh[h]:
            return None  # Release
        return (f"{host} is in WaitDrained and its fence completed, but a counter of "
                f"{peer} it has not used yet is pending")
    if mode == WAIT_SIGNALED:
        return (f"{host} is in WaitSignaled: failing back waits for the application to "
                f"post a signaled WR, the fence (PostSend)")
    if on1:
        return (f"no step of {host}'s layer is enabled while a side of it is on the default "
                f"path (send side {mode}, receive side {s.recvMode[h]}): no counter of "
                f"{peer} to answer (a failover starts when {host}'s application polls an "
                f"error completion from the default QP, or when {peer}'s counter arrives)")
    if mode == ERROR:
        return (f"{host}'s send side is in Error, a terminal state, and it has sent its "
                f"counter: its layer takes no step until a counter of {peer} arrives")
    return f"{host}'s layer (send side {mode}) has no Progress step"


def _owned(s: State, host: str) -> str:
    """Why a host whose QP pair is its application's (AppOwned) takes no layer step."""
    why = ("its peer's layer said that its application failed the QP pair"
           if s.peerFailed[HOST[host]] else "its application saw an error of its own")
    return (f"{host}'s QP pair is its application's ({why}): its layer takes no further "
            f"part in a failover, as under plain RC")


def handshake_timeout(s: State, d: DesignRecord, b: Constants, host: str) -> str | None:
    h, o, peer = HOST[host], 1 - HOST[host], PEER[host]
    if app_owned(s, h):
        return _owned(s, host)
    if not (s.asked[h] and s.sentCtr[h]) and not s.reconnecting[h]:
        return (f"{host}'s handshake timer is off: {host} awaits no answer to a counter it "
                f"sent first nor to a request to reconnect")
    if (not s.reconnecting[h] and s.peerSeq[o] == s.ctrSeq[h] and not s.sentCtr[o]):
        return (f"{peer} took {host}'s counter and is about to answer it: the timer outlasts "
                f"a round trip (docs/model.md) and does not fire while the peer is slow")
    if not (s.nic[h][1] and s.qp[h][1] == RTS and s.link[1]):
        return (f"{host}'s resend could not leave: its NIC 2, its QP on path 2 or link 2 is "
                f"down")
    ab, ba = s.wire[1]
    if ab or ba:
        return (f"the handshake timer fires only on a quiet backup path, and path 2 has "
                f"packets in flight ({len(ab)} from A to B, {len(ba)} from B to A)")
    return None


def completion_timeout(s: State, d: DesignRecord, b: Constants, host: str) -> str | None:
    h = HOST[host]
    if not d.failover:
        return f"{d.name} has no failover layer, so no completion timer"
    if app_owned(s, h):
        return _owned(s, host)
    if s.sendMode[h] != DEFAULT:
        return (f"{host}'s completion timer runs on the default path only, and its send side "
                f"is in {s.sendMode[h]}")
    if not (b.rnr_nak and b.rnr_retry == RNR_FOREVER):
        return (f"no WR waits for ever at bound {b.name}: without RNR NAKs retried for ever "
                f"(RnrNak, RnrRetry = 7) the transport ends every wait with a completion")
    if not waits_for_ever(s, b, h):
        return (f"no WR of {host}'s waits for ever on the default path: the oldest "
                f"unacknowledged one is no notification, or {PEER[host]} has a receive WR "
                f"on its default QP or will post one there (a fail-back notice on its way "
                f"moves its receive side back): the timer fires only once the wait is for "
                f"ever (docs/model.md)")
    return None


def fatal_event(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    h, i = HOST[host], p - 1
    if silent(s, h, i):
        return None
    if not b.device_fatal:
        return (f"no NIC dies silently at bound {b.name} (DeviceFatal = FALSE): a dead NIC's "
                f"QP flushes its WRs, and no asynchronous event is waiting")
    if s.nic[h][i] and s.qp[h][i] == RTS:
        return f"{host}'s NIC {p} is alive: no IBV_EVENT_DEVICE_FATAL is waiting"
    return (f"no event of {host}'s NIC {p} is left for the layer to act on: it read it (and "
            f"flushes the QP's posts itself), or the NIC died before the QP's death was read, "
            f"or the QP was drained by a failover or reset by a reconnect")


WHY_NOT: dict[str, Reason] = {
    "PostSend": post_send,
    "PostRecv": post_recv,
    "AppWrite": app_write,
    "PollCq": poll_cq,
    "Transmit": transmit,
    "Deliver": deliver,
    "Drop": drop,
    "Timeout": timeout,
    "WriteCqe": write_cqe,
    "LinkDown": link_down,
    "LinkUp": link_up,
    "NicFail": nic_fail,
    "NicRecover": nic_recover,
    "Progress": progress,
    "HandshakeTimeout": handshake_timeout,
    "CompletionTimeout": completion_timeout,
    "FatalEvent": fatal_event,
}


def why_not(model: Model, s: State, ev: Event) -> str | None:
    """None when ev is enabled in s; else why not: the first guard of its action that
    fails, as one sentence."""
    if ev.name == "Init":
        return "Init starts a trace; it is not a step"
    fn = WHY_NOT.get(ev.name)
    if fn is None:
        return f"{ev.name} is not an event of the model"
    return fn(s, model.design, model.bound, *ev.args)
