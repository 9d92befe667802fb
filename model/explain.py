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

from shift.model.config import Constants, DesignRecord
from shift.model.state import (
    DEFAULT,
    DIR,
    ERROR,
    FALLBACK,
    HOST,
    RTS,
    WAIT_DRAINED,
    WAIT_SIGNALED,
    WRITERS,
    State,
    notes_before,
    notes_taken,
    num_notes,
    path_healthy,
)
from shift.vocabulary import Event

if TYPE_CHECKING:
    from shift.model.next import Model

Reason = Callable[..., str | None]

ONE_WAY = "traffic is one-way, A to B"
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
    if host != "A":
        return f"only A posts sends in this model ({ONE_WAY}; B posts receive WRs)"
    n, posted = len(s.program), s.posted
    if wr < 1:
        return f"A's WRs are numbered from 1 (WR {wr})"
    if wr > n:
        return f"A's program has only {n} WRs (posted {posted} of {n})"
    if wr <= posted:
        return f"A already posted WR {wr} (posted {posted} of {n}; WRs go in program order)"
    if wr != posted + 1:
        return (f"WR {wr} is not the next WR of A's program (posted {posted} of {n}; "
                f"the next is WR {posted + 1})")
    x = s.program[wr - 1]
    if x.note > 0 and s.recvPosted < x.note:
        return (f"NCCL's flow control (CanPost): WR {wr}, a {x.op}, is notification "
                f"{x.note}, which A posts only once B has posted receive WR {x.note} "
                f"(B posted {s.recvPosted})")
    before, taken = notes_before(s.program, wr - 1), len(notes_taken(s))
    if x.op in WRITERS and x.region != 0 and taken < before:
        return (f"NCCL's flow control (CanPost): A waits for B's application to take "
                f"notification {taken + 1} before reusing its buffer (WR {wr}, a {x.op} "
                f"into region {x.region}; B took {taken} of the {before} notifications "
                f"posted before it)")
    return None


def post_recv(s: State, d: DesignRecord, b: Constants, host: str, recv: int) -> str | None:
    if host != "B":
        return f"only B posts receive WRs in this model ({ONE_WAY}; A posts sends)"
    k, posted = num_notes(s.program), s.recvPosted
    if recv < 1:
        return f"B's receive WRs are numbered from 1 (receive WR {recv})"
    if recv > k:
        if k == 0:
            return "A's program has no notification (SEND, WRITE_WITH_IMM), so B posts " \
                   "no receive WR"
        return (f"A's program has only {_count(k, 'notification')}, so B posts only "
                f"{_count(k, 'receive WR')} (posted {posted} of {k})")
    if recv <= posted:
        return f"B already posted receive WR {recv} (posted {posted} of {k})"
    if recv != posted + 1:
        return (f"receive WR {recv} is not B's next (posted {posted} of {k}; the next is "
                f"receive WR {posted + 1})")
    return None


def app_write(s: State, d: DesignRecord, b: Constants, host: str, region: int,
              value: int) -> str | None:
    if host != "B":
        return (f"only B's application writes its own regions in this model ({ONE_WAY}; "
                f"A's buffers are the sources of its WRs)")
    n, done = len(s.stores), s.stored
    if done >= n:
        return (f"B's application makes {_count(n, 'store')} in this workload "
                f"(made {done})")
    x = s.stores[done]
    if (region, value) != (x.region, x.value):
        return (f"B's next store writes {x.value} into region {x.region} (store "
                f"{done + 1} of {n}), not {value} into region {region}")
    taken = len(notes_taken(s))
    if taken < x.after:
        return (f"B makes store {done + 1} once it took {_count(x.after, 'notification')} "
                f"(it took {taken})")
    return None


def poll_cq(s: State, d: DesignRecord, b: Constants, host: str) -> str | None:
    h = HOST[host]
    if s.buffered[h]:
        return None
    mode = s.layer[h]
    p = 1 if mode == DEFAULT else 2
    if s.cq[h][p - 1]:
        return None
    return (f"{host}'s completion queue is empty: nothing on the CQ of {_qp(p)}, which "
            f"{host}'s layer polls in state {mode}, and no completion held back by the layer")


# -- the NICs and the wire (transport.py, next.deliver; RCTransport.tla) --

def transmit(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    if host != "A":
        return (f"only A's NIC sends requests in this model ({ONE_WAY}; B's NIC only "
                f"answers with ACKs)")
    i = p - 1
    if s.qp[0][i] != RTS:
        return f"A's QP on path {p} is in the error state (ERR): it sends nothing"
    n, q = s.nxt[i], s.sq[i]
    if n > len(q):
        if not q:
            return f"A's send queue on path {p} is empty: nothing to send"
        return (f"nothing to send on path {p}: A's NIC has sent every request of its send "
                f"queue there ({_count(len(q), 'WR')}, next PSN {n})")
    if p == 1 and s.layer[0] == WAIT_DRAINED:
        return (f"the fence holds the WR: A is in WaitDrained and WR {q[n - 1]} is after "
                f"the fence (WR {s.fence}, on path 2), so path 1 sends nothing until the "
                f"fence completes")
    return None


def deliver(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> str | None:
    if not s.wire[p - 1][DIR[direction]]:
        return f"{_channel(p, direction)} is empty: nothing in flight to deliver"
    return None  # a request, an ACK or a control message: each is always taken


def drop(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> str | None:
    if p not in b.fault_paths:
        return (f"the bound excludes path {p} from faults and drops "
                f"(FaultPaths = {_paths(b.fault_paths)})")
    if s.drops >= b.max_drops:
        if b.max_drops == 0:
            return "the bound allows no drop (MaxDrops = 0)"
        return (f"MaxDrops reached: the bound allows MaxDrops = {b.max_drops} and "
                f"{_count(s.drops, 'packet')} {'was' if s.drops == 1 else 'were'} "
                f"dropped already")
    ch = s.wire[p - 1][DIR[direction]]
    if not ch:
        return f"{_channel(p, direction)} is empty: nothing to drop"
    if ch[0].kind == "ctl":
        return (f"the head of {_channel(p, direction)} is a control message of the layer "
                f"(the {ch[0].what}), which rides a reliable QP and is not dropped "
                f"(a LinkDown or NicFail can still lose it)")
    return None


def timeout(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> str | None:
    if host != "A":
        return (f"only A's NIC has a retransmission timer in this model ({ONE_WAY}: only A "
                f"sends requests)")
    i = p - 1
    if s.qp[0][i] != RTS:
        return (f"A's QP on path {p} is in the error state (ERR): its retransmission timer "
                f"is off")
    if not s.una[i] < s.nxt[i]:
        return (f"no retransmission timer can fire: nothing unacknowledged on path {p} "
                f"(every request A's NIC sent there is acknowledged)")
    ab, ba = s.wire[i]
    if ab or ba:
        return (f"the retransmission timer fires only on a quiet wire (spec/README.md, Known "
                f"issues) and path {p} has packets in flight ({len(ab)} from A to B, "
                f"{len(ba)} from B to A)")
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

def _path1_down(s: State) -> str:
    """What keeps the default path from being healthy (PathHealthy(1))."""
    out = [] if s.link[0] else ["its link is down"]
    out += [f"NIC 1 of {h} has failed" for h, i in HOST.items() if not s.nic[i][0]]
    return " and ".join(out)


def progress(s: State, d: DesignRecord, b: Constants, host: str) -> str | None:
    """Progress(h) is a disjunction: Trigger (woken by the peer's counter), Handshake,
    Replay, Reconnect, Release. Which of them could apply depends on the host's layer
    state, so the reason follows that state to the step that would come next."""
    if not d.failover:
        return (f"{d.name} has no failover layer (failover = FALSE): Progress has no "
                f"step")
    h, peer = HOST[host], PEER[host]
    mode = s.layer[h]
    if mode == DEFAULT:
        if s.peerCtr[h] >= 0:
            return None  # Trigger
        return (f"no step of {host}'s layer is enabled in state Default: {peer}'s counter "
                f"has not arrived (a failover starts when {host}'s application polls an "
                f"error completion from the default QP, or when the peer's counter arrives)")
    if mode == FALLBACK:
        if not s.sentCtr[h]:
            return None  # Handshake
        if h == 1:
            return ("B is in Fallback and has sent its counter: its layer has no step "
                    "until A's fail-back notice arrives")
        if s.peerCtr[0] < 0:
            return ("A is in Fallback and has sent its counter: the replay waits for B's "
                    "counter")
        if not s.replayed[0]:
            return None  # Replay
        done = "A replayed its outstanding WRs on the backup path"
        if not d.failBack:
            return (f"{done}, and {d.name} has no fail-back (failBack = FALSE): A stays on "
                    f"path 2")
        if not b.recover:
            return (f"{done}; failing back needs path 1 healthy again, and the bound has no "
                    f"recovery (Recover = FALSE)")
        if not path_healthy(s, 1):
            return (f"{done} and waits for path 1 to be healthy again to fail back "
                    f"({_path1_down(s)})")
        return None  # Reconnect
    if mode == WAIT_SIGNALED:
        return ("A is in WaitSignaled: failing back waits for the application to post a "
                "signaled WR, the fence (PostSend)")
    if mode == WAIT_DRAINED:
        if s.fence not in s.pending:
            return None  # Release
        return (f"A is in WaitDrained: the fence, WR {s.fence}, is still outstanding (A's "
                f"application has not polled its completion), so A holds the WRs after it")
    if mode == ERROR:
        return f"{host}'s layer is in Error, a terminal state: it takes no more steps"
    return f"{host}'s layer is in {mode}, where Progress has no step"


WHY_NOT: dict[str, Reason] = {
    "PostSend": post_send,
    "PostRecv": post_recv,
    "AppWrite": app_write,
    "PollCq": poll_cq,
    "Transmit": transmit,
    "Deliver": deliver,
    "Drop": drop,
    "Timeout": timeout,
    "LinkDown": link_down,
    "LinkUp": link_up,
    "NicFail": nic_fail,
    "NicRecover": nic_recover,
    "Progress": progress,
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
