"""The state of spec/State.tla as immutable, hashable Python values.

A `State` holds the specification's variables except `event` (the View): actions never
read `event`, so two states that differ only in it have the same successors, and TLC
(under `VIEW View`) counts them as one. The event that produced a state travels on the
transition instead (see `shift.model.next`).

Representation, chosen so that hashing and comparison stay in C (tuples all the way down):
- a function over Hosts is a pair indexed by `HOST` ("A" -> 0, "B" -> 1); every variable
  but the wire and the faults is one (both hosts are peers), so `s.sq[h][p - 1]` is
  TLA+'s `sq[h][p]` with h a host index;
- a function over Paths is a pair indexed by path - 1;
- a function over Directions is a pair indexed by `DIR` ("AtoB" -> 0, "BtoA" -> 1);
- per host, `mem`, `bufs` and `execs` are tuples indexed by region - 1, receive WR id - 1
  and WR id - 1;
- sets are frozensets; sequences and records are tuples and NamedTuples.
`shift.model.tla.to_tla` turns a state into the values TLC prints, field for field.
"""

from __future__ import annotations

from typing import NamedTuple

from shift.spec.workloads import WR, Store
from shift.vocabulary import DIRECTIONS, HOSTS, RECV_MODES, SEND_MODES

HOST = {h: i for i, h in enumerate(HOSTS)}
DIR = {d: i for i, d in enumerate(DIRECTIONS)}

# Operation classes of Workloads.tla.
ONE_SIDED = frozenset({"WRITE", "READ", "FADD", "CAS"})
TWO_SIDED = frozenset({"SEND", "WRITE_IMM"})
ATOMICS = frozenset({"FADD", "CAS"})
RETURNS = frozenset({"READ", "FADD", "CAS"})
WRITERS = frozenset({"WRITE", "WRITE_IMM", "FADD", "CAS"})
REGIONS = (1, 2)

SUCCESS, FLUSH, RETRY_EXC = "SUCCESS", "WR_FLUSH_ERR", "RETRY_EXC_ERR"
RNR_RETRY_EXC = "RNR_RETRY_EXC_ERR"
RNR_FOREVER = 7  # an RNR retry count of 7 retries for ever (IBTA's encoding)
SPEAKING = 0  # fatal[h][i]: the QP completes its own WRs (State.tla's Speaking)
TAKEN_OVER = -1  # its NIC's death was read: the layer completes its WRs (TakenOver)
# State.tla's AppErrors: the statuses of a WR with a bad key (Workloads.tla's KeyStatus).
LOC_PROT, REM_ACCESS = "LOC_PROT_ERR", "REM_ACCESS_ERR"
APP_ERRORS = frozenset({LOC_PROT, REM_ACCESS})
KEY_STATUS = {"OK": SUCCESS, "LKEY": LOC_PROT, "RKEY": REM_ACCESS}
RTS, ERR = "RTS", "ERR"
DEFAULT, FALLBACK, WAIT_SIGNALED, WAIT_DRAINED, ERROR = SEND_MODES
MOVING = RECV_MODES[1]


class Cqe(NamedTuple):
    """A completion queue entry: State.tla's Cqe(wr, recv, status, val)."""

    wr: int
    recv: int
    status: str
    val: int


class SndSeen(NamedTuple):
    """One send completion a host's application polled: [wr, status, val] (val: what a
    READ or atomic returned)."""

    wr: int
    status: str
    val: int


class RcvSeen(NamedTuple):
    """One receive completion a host's application polled, with its host's memory and the
    receive WR's buffer as it read them then."""

    wr: int
    recv: int
    status: str
    mem: tuple[int, ...]
    data: int


# Packets. `kind` is a field (last, so that the constructors read naturally) because the
# spec's packets are records told apart by it; it also keeps a Req and an Ack with equal
# numbers from comparing equal as tuples. `incarnation`: that of the QP that sent it (State.tla's
# IncarnationOf: the default QP's, which a reset renews; 0 on the backup path).
class Req(NamedTuple):
    psn: int
    wr: int
    incarnation: int = 0
    kind: str = "req"


class Ack(NamedTuple):
    psn: int
    val: int
    incarnation: int = 0
    kind: str = "ack"


class Nak(NamedTuple):
    """The responder's NAK of a request with a bad rkey (remote access error)."""

    psn: int
    incarnation: int = 0
    kind: str = "nak"


class Rnr(NamedTuple):
    """The responder's RNR NAK of a notification that found no receive WR (RnrNak)."""

    psn: int
    incarnation: int = 0
    kind: str = "rnr"


class Ctl(NamedTuple):
    what: str  # "counter" | "failback" | "apperr" | "reconnect" | "reconnected"
    count: int
    # a counter's number (from 1; a resend repeats it); a reconnect's incarnation; else 0
    seq: int = 0
    ask: bool = False  # a counter sent first: its sender awaits the answer
    incarnation: int = 0
    kind: str = "ctl"


Packet = Req | Ack | Nak | Rnr | Ctl
Channel = tuple[Packet, ...]
# Functions over two keys (hosts, paths or directions), see the module doc.
Hosts = tuple  # (A's, B's)
Paths = tuple  # (path 1's, path 2's)
Wire = tuple[tuple[Channel, Channel], tuple[Channel, Channel]]  # [path][direction]
Queues = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]
Cqs = tuple[tuple[tuple[Cqe, ...], tuple[Cqe, ...]], tuple[tuple[Cqe, ...], tuple[Cqe, ...]]]
IntPaths = tuple[tuple[int, int], tuple[int, int]]  # [host][path]


class State(NamedTuple):
    """The variables of spec/State.tla in View order (all but `event`). Every variable but
    the wire and the faults is a function over Hosts: a pair, A's then B's; the
    requester's, responder's and QPs' are pairs over paths within it ([host][path - 1])."""

    program: tuple[tuple[WR, ...], tuple[WR, ...]]
    posted: tuple[int, int]
    recvPosted: tuple[int, int]
    sndSeen: tuple[tuple[SndSeen, ...], tuple[SndSeen, ...]]
    rcvSeen: tuple[tuple[RcvSeen, ...], tuple[RcvSeen, ...]]
    stores: tuple[tuple[Store, ...], tuple[Store, ...]]
    stored: tuple[int, int]
    sq: Queues
    una: IntPaths
    nxt: IntPaths
    retry: IntPaths
    rnrLeft: IntPaths
    epsn: IntPaths
    saved: tuple[tuple[frozenset[tuple[int, int]], frozenset[tuple[int, int]]], ...]
    rq: Queues
    qp: tuple[tuple[str, str], tuple[str, str]]
    cq: Cqs
    unwritten: Cqs
    fatal: IntPaths  # per host and path: SPEAKING, TAKEN_OVER, or a silent QP's first unflushed WR
    incarnation: tuple[int, int]  # per host: its default QP's incarnation (a reset renews it)
    wire: Wire
    link: tuple[bool, bool]
    nic: tuple[tuple[bool, bool], tuple[bool, bool]]
    faults: int
    drops: int
    mem: tuple[tuple[int, ...], tuple[int, ...]]
    bufs: tuple[tuple[int, ...], tuple[int, ...]]
    execs: tuple[tuple[int, ...], tuple[int, ...]]
    copies: int
    queried: bool
    sendMode: tuple[str, str]
    recvMode: tuple[str, str]
    pending: tuple[tuple[int, ...], tuple[int, ...]]
    buffered: tuple[tuple[Cqe, ...], tuple[Cqe, ...]]
    rpend: tuple[tuple[int, ...], tuple[int, ...]]
    recvDone: tuple[int, int]
    # the notifications of the peer's the fail-back notice said came before its fence, while
    # the receive side waits to have taken them all before it moves back; 0: none waits
    failbackAt: tuple[int, int]
    sentCtr: tuple[bool, bool]
    peerCtr: tuple[int, int]
    fresh: tuple[bool, bool]
    asked: tuple[bool, bool]
    replayed: tuple[bool, bool]
    fence: tuple[int, int]
    refused: tuple[frozenset[int], frozenset[int]]
    ctrSeq: tuple[int, int]
    ctrVal: tuple[int, int]
    peerSeq: tuple[int, int]
    peerFailed: tuple[bool, bool]
    # per host: the incarnation of the reconnect it asked the peer for and awaits the answer to, 0
    reconnecting: tuple[int, int]
    acked: tuple[tuple[int, ...], tuple[int, ...]]
    resent: tuple[frozenset[int], frozenset[int]]


VARIABLES: tuple[str, ...] = State._fields


def initial(programs: tuple[tuple[WR, ...], tuple[WR, ...]], max_retries: int,
            stores: tuple[tuple[Store, ...], tuple[Store, ...]] = ((), ()),
            rnr_retry: int = RNR_FOREVER) -> State:
    """Failover.tla's Init with program = programs and stores = stores, per host: one of
    Workloads.tla's ProgramOf(k, h) and StoresAt(k, h) (the bound's
    `Constants.programs_of(k)`, `stores_at(k)`)."""
    two = ((), ())
    ones, zeros = ((1, 1), (1, 1)), (0, 0)
    a, b = programs
    return State(
        program=programs, posted=zeros, recvPosted=zeros, sndSeen=two, rcvSeen=two,
        stores=stores, stored=zeros,
        sq=(two, two), una=ones, nxt=ones, retry=((max_retries,) * 2,) * 2,
        rnrLeft=((rnr_retry,) * 2,) * 2,
        epsn=ones, saved=((frozenset(), frozenset()),) * 2, rq=(two, two),
        qp=((RTS, RTS), (RTS, RTS)), cq=(two, two), unwritten=(two, two),
        fatal=((SPEAKING, SPEAKING), (SPEAKING, SPEAKING)), incarnation=zeros,
        wire=(two, two),
        link=(True, True), nic=((True, True), (True, True)), faults=0, drops=0,
        mem=(tuple(0 for _ in REGIONS),) * 2,
        bufs=((0,) * num_notes(b), (0,) * num_notes(a)),
        execs=((0,) * len(a), (0,) * len(b)), copies=0, queried=False,
        sendMode=(DEFAULT, DEFAULT), recvMode=(DEFAULT, DEFAULT), pending=two, buffered=two,
        rpend=two, recvDone=zeros, failbackAt=zeros, sentCtr=(False, False), peerCtr=(-1, -1),
        fresh=(False, False), asked=(False, False), replayed=(False, False), fence=zeros,
        refused=(frozenset(), frozenset()), ctrSeq=zeros, ctrVal=zeros, peerSeq=zeros,
        peerFailed=(False, False), reconnecting=zeros, acked=two, resent=(frozenset(), frozenset()),
    )


# -- helpers of State.tla and Workloads.tla over the Python representation --

def set_at(t: tuple, i: int, v: object) -> tuple:
    """t with element i (0-based) replaced: the EXCEPT of a pair or a tuple."""
    return t[:i] + (v,) + t[i + 1:]


def set_in(t: tuple, i: int, j: int, v: object) -> tuple:
    """t with t[i][j] replaced: [f EXCEPT ![i][j] = v]."""
    return t[:i] + (t[i][:j] + (v,) + t[i][j + 1:],) + t[i + 1:]


def peer(h: int) -> int:
    """State.tla's Peer, on host indices."""
    return 1 - h


def flushes_at_once(s: State, h: int, i: int) -> bool:
    """FlushesAtOnce(h, p) for i = p - 1: a WR posted to h's QP of path p completes at
    once, flushed: the QP is in the error state and its NIC did not die silently."""
    return s.qp[h][i] == ERR and not silent(s, h, i)


def silent(s: State, h: int, i: int) -> bool:
    """Silent(h, p) for i = p - 1: NIC p of h died in fatal error, its event unread."""
    return s.fatal[h][i] > 0


def covered(s: State, h: int, i: int) -> int:
    """Covered(h, p) for i = p - 1: the index of the last signaled send WR of h's QP
    the peer acknowledged (a completion covers it and those before it), or 0."""
    q, prog = s.sq[h][i], s.program[h]
    return max((k for k in range(1, s.una[h][i]) if prog[q[k - 1] - 1].signaled), default=0)


def path_healthy(s: State, p: int) -> bool:
    i = p - 1
    return s.link[i] and s.nic[0][i] and s.nic[1][i]


def incarnation_of(s: State, h: int, i: int) -> int:
    """IncarnationOf(h, p) for i = p - 1: the incarnation of h's QP on that path (backup: 0)."""
    return s.incarnation[h] if i == 0 else 0


def good_prefix(cqes: tuple[Cqe, ...]) -> tuple[Cqe, ...]:
    """State.tla's GoodPrefix: the entries before the first error."""
    for i, c in enumerate(cqes):
        if c.status != SUCCESS:
            return cqes[:i]
    return cqes


def notes_taken(s: State, h: int) -> tuple[RcvSeen, ...]:
    """Failover.tla's NotesTaken(h): the notifications host h's application took, in
    order."""
    return tuple(e for e in s.rcvSeen[h] if e.status == SUCCESS)


def taken(s: State, h: int) -> int:
    """Len(NotesTaken(h))."""
    return sum(1 for e in s.rcvSeen[h] if e.status == SUCCESS)


def num_notes(prog: tuple[WR, ...]) -> int:
    return sum(1 for w in prog if w.note > 0)


def notes_before(prog: tuple[WR, ...], k: int) -> int:
    """The number of notifications among the first k WRs."""
    return sum(1 for w in prog[:k] if w.note > 0)


def note_wr(prog: tuple[WR, ...], k: int) -> int:
    """The id of the k-th notification (CHOOSE: an error in TLC when there is none)."""
    for i, w in enumerate(prog, 1):
        if w.note == k:
            return i
    raise ValueError(f"NoteWr: the program has no notification {k}")


def applied(w: WR, old: int) -> int:
    """Workloads.tla's Applied(w, old): the value w leaves in its region."""
    if w.op in ("WRITE", "WRITE_IMM"):
        return w.value
    if w.op == "FADD":
        return old + w.value
    if w.op == "CAS" and old == w.compare:
        return w.value
    return old


def value_after(prog: tuple[WR, ...], r: int, k: int) -> int:
    """Workloads.tla's ValueAfter(prog, r, k)."""
    v = 0
    for w in prog[:k]:
        if w.region == r:
            v = applied(w, v)
    return v
