"""The state of spec/State.tla as immutable, hashable Python values.

A `State` holds the specification's variables except `event` (the View): actions never
read `event`, so two states that differ only in it have the same successors, and TLC
(under `VIEW View`) counts them as one. The event that produced a state travels on the
transition instead (see `shift.model.next`).

Representation, chosen so that hashing and comparison stay in C (tuples all the way down):
- a function over Hosts is a pair indexed by `HOST` ("A" -> 0, "B" -> 1);
- a function over Paths is a pair indexed by path - 1;
- a function over Directions is a pair indexed by `DIR` ("AtoB" -> 0, "BtoA" -> 1);
- `mem`, `bufs` and `execs` are tuples indexed by region - 1, receive WR id - 1 and
  WR id - 1;
- sets are frozensets; sequences and records are tuples and NamedTuples.
`shift.model.tla.to_tla` turns a state into the values TLC prints, field for field.
"""

from __future__ import annotations

from typing import NamedTuple

from shift.spec.workloads import WR, Store
from shift.vocabulary import DIRECTIONS, HOSTS, LAYER_STATES

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
RTS, ERR = "RTS", "ERR"
DEFAULT, FALLBACK, WAIT_SIGNALED, WAIT_DRAINED, ERROR = LAYER_STATES


class Cqe(NamedTuple):
    """A completion queue entry: State.tla's Cqe(wr, recv, status, val)."""

    wr: int
    recv: int
    status: str
    val: int


class SndSeen(NamedTuple):
    """One completion A's application polled: [wr, status, val] (val: what a READ or
    atomic returned)."""

    wr: int
    status: str
    val: int


class RcvSeen(NamedTuple):
    """One completion B's application polled, with memory and the receive WR's buffer as
    it read them then."""

    wr: int
    recv: int
    status: str
    mem: tuple[int, ...]
    data: int


# Packets. `kind` is a field (last, so that the constructors read naturally) because the
# spec's packets are records told apart by it; it also keeps a Req and an Ack with equal
# numbers from comparing equal as tuples.
class Req(NamedTuple):
    psn: int
    wr: int
    kind: str = "req"


class Ack(NamedTuple):
    psn: int
    val: int
    kind: str = "ack"


class Ctl(NamedTuple):
    what: str  # "counter" | "failback"
    count: int
    kind: str = "ctl"


Packet = Req | Ack | Ctl
Channel = tuple[Packet, ...]
Pair = tuple  # a function over two keys (hosts, paths or directions), see module doc


class State(NamedTuple):
    """The variables of spec/State.tla in View order (all but `event`)."""

    program: tuple[WR, ...]
    posted: int
    recvPosted: int
    sndSeen: tuple[SndSeen, ...]
    rcvSeen: tuple[RcvSeen, ...]
    stores: tuple[Store, ...]
    stored: int
    sq: tuple[tuple[int, ...], tuple[int, ...]]
    una: tuple[int, int]
    nxt: tuple[int, int]
    retry: tuple[int, int]
    epsn: tuple[int, int]
    saved: tuple[frozenset[tuple[int, int]], frozenset[tuple[int, int]]]
    rq: tuple[tuple[int, ...], tuple[int, ...]]
    qp: tuple[tuple[str, str], tuple[str, str]]
    cq: tuple[tuple[tuple[Cqe, ...], tuple[Cqe, ...]], tuple[tuple[Cqe, ...], tuple[Cqe, ...]]]
    wire: tuple[tuple[Channel, Channel], tuple[Channel, Channel]]
    link: tuple[bool, bool]
    nic: tuple[tuple[bool, bool], tuple[bool, bool]]
    faults: int
    drops: int
    mem: tuple[int, ...]
    bufs: tuple[int, ...]
    execs: tuple[int, ...]
    copies: int
    queried: bool
    layer: tuple[str, str]
    pending: tuple[int, ...]
    buffered: tuple[tuple[Cqe, ...], tuple[Cqe, ...]]
    rpend: tuple[int, ...]
    recvDone: int
    sentCtr: tuple[bool, bool]
    peerCtr: tuple[int, int]
    replayed: tuple[bool, bool]
    fence: int
    refused: frozenset[int]


VARIABLES: tuple[str, ...] = State._fields


def initial(prog: tuple[WR, ...], max_retries: int, stores: tuple[Store, ...] = ()) -> State:
    """Failover.tla's Init with program = prog and stores = stores, one of Workloads.tla's
    Program(k) and its StoresOf(k) (the bound's `Constants.program(k)`, `stores_of(k)`)."""
    empty2: tuple[tuple[()], tuple[()]] = ((), ())
    return State(
        program=prog, posted=0, recvPosted=0, sndSeen=(), rcvSeen=(), stores=stores, stored=0,
        sq=empty2, una=(1, 1), nxt=(1, 1), retry=(max_retries, max_retries),
        epsn=(1, 1), saved=(frozenset(), frozenset()), rq=empty2,
        qp=((RTS, RTS), (RTS, RTS)), cq=(empty2, empty2), wire=(empty2, empty2),
        link=(True, True), nic=((True, True), (True, True)), faults=0, drops=0,
        mem=tuple(0 for _ in REGIONS), bufs=tuple(0 for _ in range(num_notes(prog))),
        execs=tuple(0 for _ in prog), copies=0,
        queried=False, layer=(DEFAULT, DEFAULT), pending=(), buffered=empty2, rpend=(),
        recvDone=0, sentCtr=(False, False), peerCtr=(-1, -1), replayed=(False, False),
        fence=0, refused=frozenset(),
    )


# -- helpers of State.tla and Workloads.tla over the Python representation --

def set_at(t: tuple, i: int, v: object) -> tuple:
    """t with element i (0-based) replaced: the EXCEPT of a pair or a tuple."""
    return t[:i] + (v,) + t[i + 1:]


def set_in(t: tuple, i: int, j: int, v: object) -> tuple:
    """t with t[i][j] replaced: [f EXCEPT ![i][j] = v]."""
    return t[:i] + (t[i][:j] + (v,) + t[i][j + 1:],) + t[i + 1:]


def path_healthy(s: State, p: int) -> bool:
    i = p - 1
    return s.link[i] and s.nic[0][i] and s.nic[1][i]


def good_prefix(cqes: tuple[Cqe, ...]) -> tuple[Cqe, ...]:
    """State.tla's GoodPrefix: the entries before the first error."""
    for i, c in enumerate(cqes):
        if c.status != SUCCESS:
            return cqes[:i]
    return cqes


def notes_taken(s: State) -> tuple[RcvSeen, ...]:
    """Failover.tla's NotesTaken: the notifications B's application took, in order."""
    return tuple(e for e in s.rcvSeen if e.status == SUCCESS)


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
