"""The Pythonic face of the native core: a two-host fabric, resilient connections, events.

Everything here validates its arguments before any C call, so a wrong type or value from
Python raises TypeError/ValueError and never reaches the core. Failures the core reports
raise :class:`PostError` (an errno, as ``ibv_post_send`` returns) or, for completions the
application chooses to check, :class:`CompletionError` (a verbs status name).
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

from ._native import ffi, lib

HOSTS = {"A": 0, "B": 1}
HOST_NAMES = ("A", "B")
DIRECTIONS = {"AtoB": 0, "BtoA": 1}
PATHS = (1, 2)
SLOT = 8  # bytes per region: one little-endian 64-bit value
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1


class Status(IntEnum):
    """Work completion status: ``ibv_wc_status`` values under their verbs names."""

    SUCCESS = 0
    LOC_LEN_ERR = 1
    LOC_QP_OP_ERR = 2
    LOC_EEC_OP_ERR = 3
    LOC_PROT_ERR = 4
    WR_FLUSH_ERR = 5
    MW_BIND_ERR = 6
    BAD_RESP_ERR = 7
    LOC_ACCESS_ERR = 8
    REM_INV_REQ_ERR = 9
    REM_ACCESS_ERR = 10
    REM_OP_ERR = 11
    RETRY_EXC_ERR = 12
    RNR_RETRY_EXC_ERR = 13
    LOC_RDD_VIOL_ERR = 14
    REM_INV_RD_REQ_ERR = 15
    REM_ABORT_ERR = 16
    INV_EECN_ERR = 17
    INV_EEC_STATE_ERR = 18
    FATAL_ERR = 19
    RESP_TIMEOUT_ERR = 20
    GENERAL_ERR = 21


class Op(StrEnum):
    """Operations of the event vocabulary (docs/design.md, the event vocabulary)."""

    WRITE = "WRITE"
    WRITE_IMM = "WRITE_IMM"
    SEND = "SEND"
    READ = "READ"
    FADD = "FADD"
    CAS = "CAS"


OP_CODES = {
    Op.WRITE: lib.SHIFT_WR_RDMA_WRITE,
    Op.WRITE_IMM: lib.SHIFT_WR_RDMA_WRITE_WITH_IMM,
    Op.SEND: lib.SHIFT_WR_SEND_WITH_IMM,
    Op.READ: lib.SHIFT_WR_RDMA_READ,
    Op.FADD: lib.SHIFT_WR_ATOMIC_FETCH_AND_ADD,
    Op.CAS: lib.SHIFT_WR_ATOMIC_CMP_AND_SWP,
}
TWO_SIDED = (Op.WRITE_IMM, Op.SEND)


class Design(StrEnum):
    """Failover designs selectable per connection (names as in spec/designs.toml)."""

    SHIFT = "Shift"
    NAIVE_REPLAY = "NaiveReplay"
    NO_FAILOVER = "NoFailover"


DESIGN_CODES = {
    Design.SHIFT: lib.SHIFT_DESIGN_SHIFT,
    Design.NAIVE_REPLAY: lib.SHIFT_DESIGN_NAIVE_REPLAY,
    Design.NO_FAILOVER: lib.SHIFT_DESIGN_NO_FAILOVER,
}

STATE_NAMES = ("Default", "Fallback", "WaitSignaled", "WaitDrained", "Error")
STEP_NAMES = (
    "none", "trigger", "handshake", "replay", "reconnect", "probe_done", "probe_failed",
    "release",
)


class Access(IntEnum):
    LOCAL_WRITE = 1
    REMOTE_WRITE = 2
    REMOTE_READ = 4
    REMOTE_ATOMIC = 8


ALL_ACCESS = 15


# ----------------------------------------------------------------- errors ----

class ShiftError(Exception):
    """Base of every error shift.impl raises for a failure of the core."""


class PostError(ShiftError):
    """A post (or another call) was refused: ``errno`` as a real verbs call returns it."""

    def __init__(self, err: int, what: str):
        self.errno = err
        self.errno_name = _errno.errorcode.get(err, str(err))
        super().__init__(f"{what}: {self.errno_name} ({err})")


class CompletionError(ShiftError):
    """A completion the application checked carries an error status (verbs name)."""

    def __init__(self, completion: Completion):
        self.completion = completion
        self.status = completion.status
        self.status_name = completion.status.name
        super().__init__(f"WR {completion.wr}: {self.status_name}")


class ClosedError(ShiftError):
    """The fabric or connection was closed."""


def _check(err: int, what: str) -> None:
    if err:
        raise PostError(err, what)


# ---------------------------------------------------------------- validation ---

def _int(name: str, v: Any, lo: int = 0, hi: int = U64) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} = {v} out of range [{lo}, {hi}]")
    return v


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, not {type(v).__name__}")
    return v


def _host(h: Any) -> int:
    if not isinstance(h, str):
        raise TypeError(f"host must be 'A' or 'B', not {type(h).__name__}")
    if h not in HOSTS:
        raise ValueError(f"unknown host {h!r} (expected 'A' or 'B')")
    return HOSTS[h]


def _path(p: Any, name: str = "path") -> int:
    return _int(name, p, 1, 2)


def _dir(d: Any) -> int:
    if not isinstance(d, str):
        raise TypeError(f"direction must be 'AtoB' or 'BtoA', not {type(d).__name__}")
    if d not in DIRECTIONS:
        raise ValueError(f"unknown direction {d!r} (expected 'AtoB' or 'BtoA')")
    return DIRECTIONS[d]


def _op(op: Any) -> Op:
    if isinstance(op, Op):
        return op
    if not isinstance(op, str):
        raise TypeError(f"op must be an Op or its name, not {type(op).__name__}")
    try:
        return Op(op)
    except ValueError:
        raise ValueError(f"unknown op {op!r} (expected one of {[o.value for o in Op]})") from None


def _design(d: Any) -> Design:
    if isinstance(d, Design):
        return d
    if not isinstance(d, str):
        raise TypeError(f"design must be a Design or its name, not {type(d).__name__}")
    for x in Design:
        if d in (x.value, x.name, x.name.lower()):
            return x
    raise ValueError(f"unknown design {d!r} (expected one of {[x.value for x in Design]})")


# ---------------------------------------------------------------- values ----

@dataclass(frozen=True)
class Wr:
    """A work request in the vocabulary's terms: {id, op, region, value, imm, signaled}.

    ``region`` (1..regions, 0 for none) names an 8-byte slot of the responder's memory:
    WRITE/WRITE_IMM store ``value`` there, FADD adds it, CAS swaps it in when the slot
    holds ``compare``, READ reads it. ``inline`` WRITEs carry the value in the WR (fixed
    at post time); otherwise the NIC reads it from the requester's buffer for that region
    at transmit time (zero-copy: see ``AppWrite``). ``imm`` defaults to the id for
    notifications. ``eligible=False`` marks a WR that must not be re-executed on another
    path (the layer refuses a failover while it is outstanding).
    """

    id: int
    op: Op | str
    region: int = 0
    value: int = 0
    signaled: bool = True
    imm: int | None = None
    compare: int = 0
    inline: bool = True
    eligible: bool = True


@dataclass(frozen=True)
class RawSendWr:
    """A verbs-level send WR, passed through unchecked by Python (the core checks it)."""

    wr_id: int
    opcode: int
    send_flags: int = 2
    addr: int = 0
    length: int = 0
    lkey: int = 0
    num_sge: int = 1
    remote_addr: int = 0
    rkey: int = 0
    imm_data: int = 0
    compare_add: int = 0
    swap: int = 0


@dataclass(frozen=True)
class RawRecvWr:
    wr_id: int
    addr: int = 0
    length: int = 0
    lkey: int = 0
    num_sge: int = 0


@dataclass(frozen=True)
class Completion:
    """What the application polled: ``wr`` is its WR id (the receive WR's on the
    responder), ``status`` a :class:`Status`; ``imm`` for notifications."""

    host: str
    wr: int
    status: Status
    opcode: int
    byte_len: int = 0
    imm: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == Status.SUCCESS

    def raise_for_status(self) -> Completion:
        if self.status != Status.SUCCESS:
            raise CompletionError(self)
        return self


@dataclass(frozen=True)
class SenderSeen:
    """One entry of the sender application's view (the spec's ``sndSeen``)."""

    wr: int
    status: str


@dataclass(frozen=True)
class ReceiverSeen:
    """One entry of the receiver application's view (the spec's ``rcvSeen``): the
    notification's sender WR (carried as immediate data; 0 for a flushed receive), the
    receive WR it consumed, the status, and the regions as read right after polling."""

    wr: int
    recv: int
    status: str
    mem: tuple[int, ...]


@dataclass(frozen=True)
class HostState:
    state: str
    sent_ctr: bool
    peer_ctr: int
    replayed: bool
    fence: int | None
    epoch: int
    outstanding: int
    held: int
    buffered: int
    sends_posted: int
    sends_completed: int
    recvs_posted: int
    recvs_completed: int


@dataclass(frozen=True)
class Stats:
    failovers: int
    replayed: int
    skipped: int
    refused: int
    failbacks: int
    ctl_sent: int
    ctl_received: int
    backup_state_bytes: int


@dataclass(frozen=True)
class Observation:
    """The observable projection: what each application saw, failover states, counters."""

    snd_seen: tuple[SenderSeen, ...]
    rcv_seen: tuple[ReceiverSeen, ...]
    layer: dict[str, str] = field(hash=False)
    recv_done: int = 0
    peer_ctr: dict[str, int] = field(default_factory=dict, hash=False)
    sent_ctr: dict[str, bool] = field(default_factory=dict, hash=False)
    replayed: bool = False
    fence: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The projection with the specification's variable names (spec/State.tla)."""
        return {
            "sndSeen": [{"wr": s.wr, "status": s.status} for s in self.snd_seen],
            "rcvSeen": [
                {"wr": r.wr, "recv": r.recv, "status": r.status,
                 "mem": {i + 1: v for i, v in enumerate(r.mem)}}
                for r in self.rcv_seen
            ],
            "layer": dict(self.layer),
            "recvDone": self.recv_done,
            "peerCtr": dict(self.peer_ctr),
            "sentCtr": dict(self.sent_ctr),
            "replayed": self.replayed,
            "fence": self.fence or 0,
        }


# ---------------------------------------------------------------- memory ----

class MemoryRegion:
    """A registered range of one host's memory (on both its NICs)."""

    def __init__(self, conn: Connection, host: str, offset: int, length: int, keys: Any):
        self._conn = conn
        self.host = host
        self.offset = offset
        self.length = length
        self.addr = conn._fabric._base_addr[HOSTS[host]] + offset
        self.lkey = keys.lkey
        self.rkey = keys.rkey
        self.lkey_backup = keys.lkey_backup
        self.rkey_backup = keys.rkey_backup

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        _int("offset", offset, 0, self.length)
        n = self.length - offset if length is None else _int("length", length, 0)
        if offset + n > self.length:
            raise ValueError("read past the end of the region")
        return self._conn._fabric._mem(self.host)[self.offset + offset:self.offset + offset + n]

    def write(self, offset: int, data: bytes) -> None:
        _int("offset", offset, 0, self.length)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if offset + len(data) > self.length:
            raise ValueError("write past the end of the region")
        start = self.offset + offset
        self._conn._fabric._mem(self.host)[start:start + len(data)] = bytes(data)


# ---------------------------------------------------------------- fabric ----

class Fabric:
    """Two hosts (A, B), each with NIC 1 and NIC 2; path p = NIC p of A, link p, NIC p of
    B. Path 1 is the default, path 2 the backup. Nothing moves unless an event says so."""

    def __init__(self, *, mem_size: int = 1 << 16, retries: int = 7, rnr_retry: int = 7,
                 rnr_nak: bool = False):
        attr = ffi.new("struct sn_fabric_attr *")
        attr.mem_size = _int("mem_size", mem_size, 4096, 1 << 30)
        attr.retry_cnt = _int("retries", retries, 0, 7)
        attr.rnr_retry = _int("rnr_retry", rnr_retry, 0, 7)
        attr.rnr_nak = int(_bool("rnr_nak", rnr_nak))
        out = ffi.new("sn_fabric *")
        _check(lib.sn_fabric_create(attr, out), "sn_fabric_create")
        self._h = out[0]
        self._conns: list[Connection] = []
        self._base_addr = []
        self._buffers = []
        for h in (0, 1):
            base = ffi.new("uint8_t **")
            size = ffi.new("size_t *")
            _check(lib.sn_host_mem(self._h, h, base, size), "sn_host_mem")
            self._base_addr.append(int(ffi.cast("uintptr_t", base[0])))
            self._buffers.append(ffi.buffer(base[0], size[0]))
        self.mem_size = mem_size
        self._next_off = [0, 0]

    # -- plumbing
    @property
    def handle(self) -> Any:
        if self._h is None:
            raise ClosedError("fabric is closed")
        return self._h

    def _mem(self, host: str) -> Any:
        self.handle  # noqa: B018 - raises once closed
        return self._buffers[HOSTS[host]]

    def _alloc(self, host: int, n: int) -> int:
        off = (self._next_off[host] + 63) & ~63
        if off + n > self.mem_size:
            raise ValueError(f"host {HOST_NAMES[host]} memory exhausted ({self.mem_size} bytes)")
        self._next_off[host] = off + n
        return off

    def close(self) -> None:
        if self._h is None:
            return
        for c in list(self._conns):
            c.close()
        _check(lib.sn_fabric_destroy(self._h), "sn_fabric_destroy")
        self._h = None

    def __enter__(self) -> Fabric:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self, design: Design | str = Design.SHIFT, *, regions: int = 4,
                max_wr: int = 64, probe: str = "wire", ctl_retries: int = 3,
                copy_posts: bool = False) -> Connection:
        """Open a resilient connection from A (requester) to B (responder). With
        copy_posts the layer keeps its own copy of every WR it posts instead of reading
        the WRs to replay back from the default QP's send queue at a failure."""
        return Connection(self, _design(design), regions=regions, max_wr=max_wr, probe=probe,
                          ctl_retries=ctl_retries, copy_posts=copy_posts)

    # -- the fabric's events: True if the event did something
    def transmit(self, host: str, path: int) -> bool:
        return self._ev(lib.sn_transmit(self.handle, _host(host), _path(path)), "transmit")

    def deliver(self, path: int, direction: str) -> bool:
        return self._ev(lib.sn_deliver(self.handle, _path(path), _dir(direction)), "deliver")

    def drop(self, path: int, direction: str) -> bool:
        return self._ev(lib.sn_drop(self.handle, _path(path), _dir(direction)), "drop")

    def timeout(self, host: str, path: int) -> bool:
        """The NICs' retransmission timers of host on path fire: go-back-N, or
        RETRY_EXC_ERR once retries are spent. Only the NIC's: `Connection.timeout` also
        fires the failover layer's handshake timer, which the spec does not have."""
        return self._ev(lib.sn_timeout(self.handle, _host(host), _path(path)), "timeout")

    def link_down(self, path: int) -> bool:
        return self._ev(lib.sn_link_down(self.handle, _path(path)), "link_down")

    def link_up(self, path: int) -> bool:
        return self._ev(lib.sn_link_up(self.handle, _path(path)), "link_up")

    def nic_fail(self, host: str, nic: int) -> bool:
        return self._ev(lib.sn_nic_fail(self.handle, _host(host), _path(nic, "nic")), "nic_fail")

    def nic_recover(self, host: str, nic: int) -> bool:
        return self._ev(lib.sn_nic_recover(self.handle, _host(host), _path(nic, "nic")),
                        "nic_recover")

    def pump(self, budget: int = 1_000_000) -> int:
        """Transmit and deliver until the wire is quiet (no drops, timeouts or faults)."""
        return self._ev_n(lib.sn_pump(self.handle, _int("budget", budget, 0, 1 << 62)), "pump")

    def wire(self, path: int, direction: str) -> int:
        return lib.sn_wire_len(self.handle, _path(path), _dir(direction))

    def path_healthy(self, path: int) -> bool:
        return bool(lib.sn_path_healthy(self.handle, _path(path)))

    def counters(self) -> dict[str, int]:
        c = ffi.new("struct sn_counters *")
        _check(lib.sn_counters_get(self.handle, c), "sn_counters_get")
        return {k: getattr(c, k) for k in ("transmitted", "delivered", "dropped", "lost",
                                           "executed", "duplicates", "timeouts")}

    @staticmethod
    def _ev(r: int, what: str) -> bool:
        if r < 0:
            raise PostError(-r, what)
        return r > 0

    @staticmethod
    def _ev_n(r: int, what: str) -> int:
        if r < 0:
            raise PostError(-r, what)
        return r


# ---------------------------------------------------------------- connection --

class PreparedChain:
    """A chain of send WRs encoded once (see :meth:`Connection.prepare`)."""

    def __init__(self, conn: Connection, arr: Any, n: int, keep: list[Any]):
        self.conn = conn
        self.arr = arr
        self.n = n
        self.bad = ffi.new("struct shift_send_wr **")
        self._keep = keep


_EVENT_ALIASES = {
    "postsend": "post_send", "postrecv": "post_recv", "pollcq": "poll_cq",
    "transmit": "transmit", "deliver": "deliver", "drop": "drop", "timeout": "timeout",
    "linkdown": "link_down", "linkup": "link_up", "nicfail": "nic_fail",
    "nicrecover": "nic_recover", "progress": "progress", "appwrite": "app_write",
}


class Connection:
    """A resilient connection from A (requester) to B (responder) over paths 1 and 2.

    Regions 1..regions are 8-byte slots registered on both hosts (A: the WRs' sources
    and the landing slots of READs and atomics; B: the targets). Every event of the
    vocabulary is a method, and :meth:`apply` takes one by name.
    """

    def __init__(self, fabric: Fabric, design: Design, *, regions: int, max_wr: int,
                 probe: str, ctl_retries: int, copy_posts: bool = False):
        self._fabric = fabric
        self.design = design
        self.regions = _int("regions", regions, 1, 4096)
        _int("max_wr", max_wr, 1, 16384)
        if not isinstance(probe, str):
            raise TypeError("probe must be 'wire' or 'instant'")
        if probe not in ("wire", "instant"):
            raise ValueError(f"unknown probe {probe!r} (expected 'wire' or 'instant')")
        attr = ffi.new("struct shift_conn_attr *")
        attr.design = DESIGN_CODES[design]
        attr.max_send_wr = max_wr
        attr.max_recv_wr = max_wr
        attr.ctl_retries = _int("ctl_retries", ctl_retries, 0, 255)
        if not isinstance(copy_posts, bool):
            raise TypeError("copy_posts must be a bool")
        attr.flags = ((lib.SHIFT_EP_WIRE_PROBE if probe == "wire" else 0)
                      | (lib.SHIFT_EP_COPY_POSTS if copy_posts else 0))
        out = ffi.new("shift_conn *")
        _check(lib.shift_sim_connect(fabric.handle, attr, out), "shift_sim_connect")
        self._h = out[0]
        fabric._conns.append(self)
        self._ep = []
        for h in (0, 1):
            ep = ffi.new("shift_ep *")
            _check(lib.shift_sim_ep(self._h, h, ep), "shift_sim_ep")
            self._ep.append(ep[0])
        nbytes = self.regions * SLOT
        # A: sources (regions) then landing slots; B: targets (regions)
        self._src = self.register("A", 2 * nbytes, ALL_ACCESS)
        self._dst = self.register("B", nbytes, ALL_ACCESS)
        self._wc = ffi.new("struct shift_wc *")
        self._wcs = ffi.new("struct shift_wc[]", 256)
        self._inline = ffi.new("uint64_t *")
        self._snd_seen: list[SenderSeen] = []
        self._rcv_seen: list[ReceiverSeen] = []
        self.completions: list[Completion] = []
        self.record = True

    # -- plumbing
    @property
    def handle(self) -> Any:
        if self._h is None:
            raise ClosedError("connection is closed")
        return self._h

    def _eph(self, host: str) -> Any:
        self.handle  # noqa: B018 - raises once closed
        return self._ep[_host(host)]

    def close(self) -> None:
        if self._h is None:
            return
        _check(lib.shift_sim_close(self._h), "shift_sim_close")
        self._h = None
        self._fabric._conns.remove(self)

    def register(self, host: str, nbytes: int, access: int = ALL_ACCESS) -> MemoryRegion:
        """Register nbytes of host's memory on both its NICs; the peer learns the keys."""
        h = _host(host)
        _int("nbytes", nbytes, 1, self._fabric.mem_size)
        _int("access", access, 0, 0xFFFFFFFF)
        off = self._fabric._alloc(h, nbytes)
        keys = ffi.new("struct shift_mr_keys *")
        _check(lib.shift_sim_reg_mr(self.handle, h, self._fabric._base_addr[h] + off, nbytes,
                                    access, keys), "shift_reg_mr")
        return MemoryRegion(self, host, off, nbytes, keys)

    # -- regions
    def _region(self, r: int) -> int:
        return _int("region", r, 1, self.regions)

    def read(self, host: str, region: int) -> int:
        """The value of a region: B's target slot, or A's source slot."""
        mr = self._dst if _host(host) == 1 else self._src
        off = (self._region(region) - 1) * SLOT
        return int.from_bytes(mr.read(off, SLOT), "little")

    def landing(self, region: int) -> int:
        """What the last READ/atomic on region returned into A's landing slot."""
        off = (self.regions + self._region(region) - 1) * SLOT
        return int.from_bytes(self._src.read(off, SLOT), "little")

    def memory(self) -> tuple[int, ...]:
        """B's regions, in order (what the receiving application reads)."""
        raw = self._dst.read(0, self.regions * SLOT)
        return tuple(int.from_bytes(raw[i:i + SLOT], "little") for i in range(0, len(raw), SLOT))

    def app_write(self, host: str, region: int, value: int) -> bool:
        """AppWrite: the application rewrites its buffer for a region."""
        mr = self._dst if _host(host) == 1 else self._src
        off = (self._region(region) - 1) * SLOT
        mr.write(off, _int("value", value).to_bytes(SLOT, "little"))
        return True

    # -- posting
    def _fill(self, c: Any, wr: Wr | RawSendWr) -> None:
        if isinstance(wr, RawSendWr):
            for name in ("wr_id", "addr", "remote_addr", "compare_add", "swap"):
                _int(name, getattr(wr, name))
            for name in ("length", "lkey", "rkey", "imm_data", "send_flags"):
                _int(name, getattr(wr, name), 0, U32)
            _int("opcode", wr.opcode, -(1 << 31), (1 << 31) - 1)
            _int("num_sge", wr.num_sge, -(1 << 31), (1 << 31) - 1)
            c.wr_id = wr.wr_id
            c.opcode = wr.opcode
            c.send_flags = wr.send_flags
            c.num_sge = wr.num_sge
            c.sg.addr = wr.addr
            c.sg.length = wr.length
            c.sg.lkey = wr.lkey
            c.remote_addr = wr.remote_addr
            c.rkey = wr.rkey
            c.imm_data = wr.imm_data
            c.compare_add = wr.compare_add
            c.swap = wr.swap
            return
        if not isinstance(wr, Wr):
            raise TypeError(f"wr must be a Wr or RawSendWr, not {type(wr).__name__}")
        op = _op(wr.op)
        c.wr_id = _int("id", wr.id)
        region = _int("region", wr.region, 0, self.regions)
        value = _int("value", wr.value)
        flags = lib.SHIFT_SEND_SIGNALED if _bool("signaled", wr.signaled) else 0
        if not _bool("eligible", wr.eligible):
            flags |= lib.SHIFT_SEND_INELIGIBLE
        inline = _bool("inline", wr.inline)
        _int("compare", wr.compare)
        imm = wr.id & U32 if wr.imm is None else _int("imm", wr.imm, 0, U32)
        c.opcode = OP_CODES[op]
        c.imm_data = imm if op in TWO_SIDED else 0
        c.num_sge = 0
        c.sg.addr = c.sg.length = c.sg.lkey = 0
        c.remote_addr = c.rkey = c.compare_add = c.swap = 0
        if region:
            c.remote_addr = self._dst.addr + (region - 1) * SLOT
            c.rkey = self._dst.rkey
        if op in (Op.WRITE, Op.WRITE_IMM) and region:
            c.num_sge = 1
            c.sg.length = SLOT
            if inline:
                self._inline[0] = value
                c.sg.addr = int(ffi.cast("uintptr_t", self._inline))
                flags |= lib.SHIFT_SEND_INLINE
            else:
                self.app_write("A", region, value)
                c.sg.addr = self._src.addr + (region - 1) * SLOT
                c.sg.lkey = self._src.lkey
        elif op in (Op.READ, Op.FADD, Op.CAS):
            if not region:
                raise ValueError(f"{op.value} needs a region")
            c.num_sge = 1
            c.sg.length = SLOT
            c.sg.addr = self._src.addr + (self.regions + region - 1) * SLOT
            c.sg.lkey = self._src.lkey
            if op == Op.FADD:
                c.compare_add = value
            elif op == Op.CAS:
                c.compare_add = wr.compare
                c.swap = value
        c.send_flags = flags

    def post_send(self, *args: Any) -> bool:
        """PostSend(host, wr) — or post_send(wr): A posts a WR through the layer."""
        host, wr = ("A", args[0]) if len(args) == 1 else args
        h = _host(host)
        if h != 0:
            raise ValueError("host B is the responder of this connection: it posts receives")
        c = ffi.new("struct shift_send_wr *")
        self._fill(c, wr)
        _check(lib.shift_post_send(self._eph("A"), c, ffi.NULL), "post_send")
        return True

    def post_send_many(self, wrs: Sequence[Wr | RawSendWr]) -> int:
        """Post a list of WRs with one call into the core (chained, as ibv_post_send)."""
        if not isinstance(wrs, Sequence):
            raise TypeError("wrs must be a sequence of Wr")
        if not wrs:
            return 0
        return self.post_prepared(self.prepare(wrs))

    def prepare(self, wrs: Sequence[Wr | RawSendWr]) -> PreparedChain:
        """Check and encode a chain of WRs once, to post it many times with
        :meth:`post_prepared` (one C call per chain: the fast way to drive the core)."""
        if not isinstance(wrs, Sequence) or not wrs:
            raise TypeError("wrs must be a non-empty sequence of Wr")
        n = len(wrs)
        arr = ffi.new("struct shift_send_wr[]", n)
        values = ffi.new("uint64_t[]", n)  # each inline WR's own source
        for i, wr in enumerate(wrs):
            self._fill(arr[i], wr)
            if arr[i].send_flags & lib.SHIFT_SEND_INLINE and isinstance(wr, Wr):
                values[i] = wr.value
                arr[i].sg.addr = int(ffi.cast("uintptr_t", values + i))
            if i + 1 < n:
                arr[i].next = arr + i + 1
        keep = [values]
        return PreparedChain(self, arr, n, keep)

    def post_prepared(self, chain: PreparedChain) -> int:
        """Post a chain made by :meth:`prepare`; returns how many WRs were posted."""
        if not isinstance(chain, PreparedChain) or chain.conn is not self:
            raise TypeError("chain must come from this connection's prepare()")
        err = lib.shift_post_send(self._eph("A"), chain.arr, chain.bad)
        if err:
            raise PostError(err, f"post_send (WR #{int(chain.bad[0] - chain.arr)})")
        return chain.n

    def post_recv(self, *args: Any) -> bool:
        """PostRecv(host, id) — or post_recv(id): B posts a receive WR."""
        host, wr = ("B", args[0]) if len(args) == 1 else args
        if _host(host) != 1:
            raise ValueError("host A is the requester of this connection: it posts sends")
        c = ffi.new("struct shift_recv_wr *")
        if isinstance(wr, RawRecvWr):
            c.wr_id = _int("wr_id", wr.wr_id)
            c.sg.addr = _int("addr", wr.addr)
            c.sg.length = _int("length", wr.length, 0, U32)
            c.sg.lkey = _int("lkey", wr.lkey, 0, U32)
            c.num_sge = _int("num_sge", wr.num_sge, -(1 << 31), (1 << 31) - 1)
        else:
            c.wr_id = _int("id", wr)
        _check(lib.shift_post_recv(self._eph("B"), c, ffi.NULL), "post_recv")
        return True

    # -- polling
    def _completion(self, host: str, wc: Any) -> Completion:
        imm = wc.imm_data if wc.wc_flags & lib.SHIFT_WC_WITH_IMM else None
        return Completion(host, wc.wr_id, Status(wc.status), wc.opcode, wc.byte_len, imm)

    def _record(self, c: Completion) -> None:
        if not self.record:
            return
        self.completions.append(c)
        if c.host == "A":
            self._snd_seen.append(SenderSeen(c.wr, c.status.name))
        else:
            self._rcv_seen.append(ReceiverSeen(c.imm or 0, c.wr, c.status.name, self.memory()))

    def poll_cq(self, host: str, *, check: bool = False) -> Completion | None:
        """PollCq(host): the application takes one completion (None if there is none, or
        if an error on the default QP started a failover instead). With ``check``, an
        error completion raises :class:`CompletionError` (after being recorded)."""
        h = _host(host)
        _bool("check", check)
        r = lib.shift_poll_step(self._eph(host), self._wc)
        if r < 0:
            raise PostError(-r, "poll_cq")
        if r != 1:
            return None
        c = self._completion(HOST_NAMES[h], self._wc)
        self._record(c)
        return c.raise_for_status() if check else c

    def poll(self, host: str, n: int = 256, *, check: bool = False) -> list[Completion]:
        """Up to n completions for host's application in one call; with ``check``, the
        first error completion raises :class:`CompletionError` (all are recorded)."""
        h = _host(host)
        _int("n", n, 0, 1 << 20)
        _bool("check", check)
        out: list[Completion] = []
        while len(out) < n:
            k = min(n - len(out), 256)
            got = lib.shift_poll_cq(self._eph(host), k, self._wcs)
            if got < 0:
                raise PostError(-got, "poll_cq")
            for i in range(got):
                c = self._completion(HOST_NAMES[h], self._wcs[i])
                self._record(c)
                out.append(c)
            if got < k:
                break
        if check:
            for c in out:
                c.raise_for_status()
        return out

    # -- the layer and the wire
    def progress(self, host: str) -> str:
        """Progress(host): one step of the layer's background work; returns its name."""
        r = lib.shift_progress(self._eph(host))
        if r < 0:
            raise PostError(-r, "progress")
        return STEP_NAMES[r]

    def timeout(self, host: str, path: int) -> bool:
        """Timeout(host, path): the NIC's retransmission timers on that path fire; if none
        was armed, the layer's handshake timer does."""
        r = lib.shift_sim_timeout(self.handle, _host(host), _path(path))
        if r < 0:
            raise PostError(-r, "timeout")
        return r > 0

    def transmit(self, host: str, path: int) -> bool:
        return self._fabric.transmit(host, path)

    def deliver(self, path: int, direction: str) -> bool:
        return self._fabric.deliver(path, direction)

    def drop(self, path: int, direction: str) -> bool:
        return self._fabric.drop(path, direction)

    def link_down(self, path: int) -> bool:
        return self._fabric.link_down(path)

    def link_up(self, path: int) -> bool:
        return self._fabric.link_up(path)

    def nic_fail(self, host: str, nic: int) -> bool:
        return self._fabric.nic_fail(host, nic)

    def nic_recover(self, host: str, nic: int) -> bool:
        return self._fabric.nic_recover(host, nic)

    def pump(self, budget: int = 1_000_000) -> int:
        return self._fabric.pump(budget)

    def settle(self, rounds: int = 1000) -> None:
        """Run wire and layers until nothing moves (no faults, drops or timeouts)."""
        for _ in range(_int("rounds", rounds, 1)):
            moved = self.pump() > 0
            for h in HOST_NAMES:
                while self.progress(h) != "none":
                    moved = True
            if not moved:
                return

    def apply(self, event: Sequence[Any] | dict[str, Any]) -> Any:
        """Apply an event of the vocabulary by name, e.g. ``("NicFail", "A", 1)``,
        ``("PostSend", "A", Wr(...))`` or ``{"event": "Deliver", "args": [1, "AtoB"]}``."""
        if isinstance(event, dict):
            name, args = event.get("event"), list(event.get("args", ()))
        elif isinstance(event, (tuple, list)) and event:
            name, args = event[0], list(event[1:])
        else:
            raise TypeError("event must be a non-empty tuple (Name, *args) or a dict")
        if not isinstance(name, str):
            raise TypeError(f"event name must be a str, not {type(name).__name__}")
        key = _EVENT_ALIASES.get(name.replace("_", "").lower())
        if key is None:
            raise ValueError(f"unknown event {name!r}")
        if key == "post_send" and len(args) == 2 and isinstance(args[1], dict):
            args[1] = Wr(**args[1])
        return getattr(self, key)(*args)

    def run(self, events: Iterable[Sequence[Any]]) -> list[Any]:
        return [self.apply(e) for e in events]

    # -- what can be observed
    def host_state(self, host: str) -> HostState:
        i = ffi.new("struct shift_ep_info *")
        _check(lib.shift_ep_query(self._eph(host), i), "shift_ep_query")
        return HostState(
            STATE_NAMES[i.state], bool(i.sent_ctr), i.peer_ctr, bool(i.replayed),
            i.fence if i.has_fence else None, i.epoch, i.outstanding, i.held, i.buffered,
            i.sends_posted, i.sends_completed, i.recvs_posted, i.recvs_completed,
        )

    def state(self, host: str) -> str:
        return self.host_state(host).state

    def observe(self) -> Observation:
        a, b = self.host_state("A"), self.host_state("B")
        return Observation(
            snd_seen=tuple(self._snd_seen),
            rcv_seen=tuple(self._rcv_seen),
            layer={"A": a.state, "B": b.state},
            recv_done=b.recvs_completed,
            peer_ctr={"A": a.peer_ctr, "B": b.peer_ctr},
            sent_ctr={"A": a.sent_ctr, "B": b.sent_ctr},
            replayed=a.replayed,
            fence=a.fence,
        )

    def stats(self, host: str | None = None) -> Stats:
        """Failover statistics of one host, or summed over both."""
        hosts = HOST_NAMES if host is None else (host,)
        tot = dict.fromkeys(("failovers", "replayed_wrs", "skipped_wrs", "refused_wrs",
                             "failbacks", "ctl_sent", "ctl_received", "backup_state_bytes"), 0)
        for h in hosts:
            i = ffi.new("struct shift_ep_info *")
            _check(lib.shift_ep_query(self._eph(h), i), "shift_ep_query")
            for k in tot:
                tot[k] += getattr(i, k)
        return Stats(tot["failovers"], tot["replayed_wrs"], tot["skipped_wrs"],
                     tot["refused_wrs"], tot["failbacks"], tot["ctl_sent"],
                     tot["ctl_received"], tot["backup_state_bytes"])

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
