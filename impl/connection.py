"""A resilient connection between A and B: posting, polling, the events of the vocabulary
(one method each, and `apply` by the event's name), and what can be observed. Both hosts
post sends and receives on the same QPs (two-way traffic)."""

from __future__ import annotations

import errno
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shift.vocabulary import VOCABULARY, Event, parse

from ._native import ffi, lib
from .errors import ClosedError, CompletionError, PostError, check_errno, event_result
from .memory import MemoryRegion
from .validate import U32, bool_arg, host_arg, int_arg, op_arg, path_arg
from .values import (
    Completion,
    FailoverEvent,
    HostState,
    ImplObservation,
    PathInfo,
    RawRecvWr,
    RawSendWr,
    ReceiverSeen,
    SenderSeen,
    SetupState,
    Stats,
    Wr,
)
from .verbs import (
    ALL_ACCESS,
    DESIGN_CODES,
    HOST_NAMES,
    OP_CODES,
    RECV_STATE_NAMES,
    RETURNING,
    STATE_NAMES,
    STEP_NAMES,
    WITH_IMM,
    DesignCode,
    EventType,
    Op,
    Status,
    WcOpcode,
)

if TYPE_CHECKING:
    from .fabric import Fabric

SLOT = 8  # bytes per region: one little-endian 64-bit value
WC_OPCODES = {int(o): o for o in WcOpcode}


class PreparedChain:
    """A chain of send WRs encoded once (see :meth:`Connection.prepare`)."""

    def __init__(self, conn: Connection, arr: Any, n: int, keep: list[Any]):
        self.conn = conn
        self.arr = arr
        self.n = n
        self.bad = ffi.new("struct shift_send_wr **")
        self._keep = keep


# The connection's method for each event of the vocabulary (Init is `Fabric.connect`);
# `apply` dispatches on it.
EVENT_METHODS = {
    "PostSend": "post_send", "PostRecv": "post_recv", "PollCq": "poll_cq",
    "Transmit": "transmit", "Deliver": "deliver", "Drop": "drop", "Timeout": "timeout",
    "LinkDown": "link_down", "LinkUp": "link_up", "NicFail": "nic_fail",
    "NicRecover": "nic_recover", "Progress": "progress", "AppWrite": "app_write",
    "HandshakeTimeout": "handshake_timeout", "WriteCqe": "write_cqe",
    "CompletionTimeout": "completion_timeout", "FatalEvent": "fatal_event",
}


def _wr_arg(wr: Any) -> Any:
    """PostSend's wr in an event: a Wr, or its fields as an object."""
    if isinstance(wr, Mapping):
        return Wr(**wr)
    if isinstance(wr, int) and not isinstance(wr, bool):
        raise ValueError(f"wr = {wr} is a WR number of a workload's program; a connection "
                         "posts a Wr (shift.differential.Bridge maps one onto the other)")
    return wr


class Connection:
    """A resilient connection between A (requester) and B (responder) over paths 1 and 2;
    both hosts post sends and receives (the roles only name the hosts).

    Each host registers one memory region of 8-byte slots: its regions 1..regions (what
    the peer's WRITEs and atomics target and its application reads; also the source of
    its own WRITEs that are not inline), then one buffer per receive WR id for a SEND's
    payload, then one landing slot per WR id for what its READ or atomic returns (ids
    map onto max_wr slots). Every event of the vocabulary is a method, and
    :meth:`apply` takes one by name.
    """

    def __init__(self, fabric: Fabric, design: DesignCode, *, regions: int, max_wr: int,
                 probe: str, ctl_retries: int, copy_posts: bool = False,
                 fail_back: bool = True, record: bool = False, two_phase: bool = False,
                 cq: tuple[Any, Any] = (ffi.NULL, ffi.NULL)):
        self._fabric = fabric
        self.design = design
        self.regions = int_arg("regions", regions, 1, 4096)
        self.max_wr = int_arg("max_wr", max_wr, 1, 16384)
        if not isinstance(probe, str):
            raise TypeError("probe must be 'wire' or 'instant'")
        if probe not in ("wire", "instant"):
            raise ValueError(f"unknown probe {probe!r} (expected 'wire' or 'instant')")
        attr = ffi.new("struct shift_conn_attr *")
        attr.design = DESIGN_CODES[design]
        attr.max_send_wr = max_wr
        attr.max_recv_wr = max_wr
        attr.ctl_retries = int_arg("ctl_retries", ctl_retries, 0, 255)
        attr.flags = ((lib.SHIFT_EP_WIRE_PROBE if probe == "wire" else 0)
                      | (lib.SHIFT_EP_COPY_POSTS if bool_arg("copy_posts", copy_posts) else 0)
                      | (0 if bool_arg("fail_back", fail_back) else lib.SHIFT_EP_NO_FAIL_BACK))
        # one handle for both hosts (shift_sim_connect, on shared CQs or not), or one per
        # host made alone (shift_sim_open: the two-phase set-up)
        self.two_phase = bool_arg("two_phase", two_phase)
        if self.two_phase and not (cq[0] == ffi.NULL and cq[1] == ffi.NULL):
            raise ValueError("a two-phase connection has CQs of its own (no shared CQ)")
        self._hs = self._open(fabric, attr, cq)
        self._h = self._hs[0]
        fabric._conns.append(self)
        self._ep = [self._endpoint(h) for h in (0, 1)]
        nbytes = (self.regions + 2 * self.max_wr) * SLOT
        self._mr = (self.register("A", nbytes, ALL_ACCESS), self.register("B", nbytes, ALL_ACCESS))
        if self.two_phase:  # the applications' own exchange: the default path alone
            infos = (self.local_info("A", 1), self.local_info("B", 1))
            self.connect_path("A", 1, infos[1])
            self.connect_path("B", 1, infos[0])
        self._src, self._dst = self._mr  # A's and B's (one-way names: A sends to B)
        self._wc = ffi.new("struct shift_wc *")
        self._ev = ffi.new("struct shift_event *")
        self._wcs = ffi.new("struct shift_wc[]", 256)
        self._inline = ffi.new("uint64_t *")
        # per host: the send and the receive completions its application polled
        self._snd_seen: tuple[list[SenderSeen], list[SenderSeen]] = ([], [])
        self._rcv_seen: tuple[list[ReceiverSeen], list[ReceiverSeen]] = ([], [])
        self._completions: list[Completion] = []
        self._refused_flagged = [0, 0]  # per host: completions flagged refused so far
        # Keep a history for `completions` and `observe()` (tests, the differential
        # runner). Its cost: every completion is kept, and each receive completion
        # copies all of the host's regions; memory grows without bound.
        self.record = bool_arg("record", record)

    def _open(self, fabric: Fabric, attr: Any, cq: tuple[Any, Any]) -> list[Any]:
        out = ffi.new("shift_conn *")
        if not self.two_phase:
            if cq[0] == ffi.NULL and cq[1] == ffi.NULL:
                err = lib.shift_sim_connect(fabric.handle, attr, out)
            else:  # an endpoint on its host's shared CQ pair (Fabric.shared_cq)
                err = lib.shift_sim_connect_on_cq(fabric.handle, attr, cq[0], cq[1], out)
            check_errno(err, "shift_sim_connect")
            return [out[0], out[0]]
        check_errno(lib.shift_sim_open(fabric.handle, 0, attr, out), "shift_sim_open")
        hs = [out[0]]
        r = lib.shift_sim_open(fabric.handle, 1, attr, out)
        if r:
            lib.shift_sim_close(hs[0])
            check_errno(r, "shift_sim_open")
        return hs + [out[0]]

    def _endpoint(self, h: int) -> Any:
        """Host h's endpoint (shift_ep) of the handles `_open` made."""
        ep = ffi.new("shift_ep *")
        check_errno(lib.shift_sim_ep(self._hs[h], h, ep), "shift_sim_ep")
        return ep[0]

    def _close_handles(self) -> None:
        for h in dict.fromkeys(self._hs):  # (once each: one handle, or one per host)
            check_errno(lib.shift_sim_close(h), "shift_sim_close")

    def _reg_mr(self, h: int, addr: int, nbytes: int, access: int, keys: Any) -> None:
        """Register [addr, addr + nbytes) of host h on both its NICs; the peer learns the
        keys (two_phase: its layer, in-band)."""
        check_errno(lib.shift_sim_reg_mr(self._hs[h], h, addr, nbytes, access, keys),
                    "shift_reg_mr")

    # -- the two-phase set-up (two_phase=True)
    def local_info(self, host: str, path: int) -> PathInfo:
        """What the peer needs to connect to host's QP of path (`shift_ep_local_info`):
        the first phase of a verbs set-up, sent to the peer out of band."""
        i = ffi.new("struct shift_path_info *")
        check_errno(lib.shift_ep_local_info(self._eph(host), path_arg(path), i),
                    "shift_ep_local_info")
        return PathInfo(i.qp_num, i.psn, i.lid, i.port, bytes(i.gid), i.ctl_qp_num)

    def connect_path(self, host: str, path: int, remote: PathInfo) -> None:
        """Connect host's QP of path to the peer's, as remote describes it
        (`shift_ep_connect`: INIT, RTR, RTS). A two-phase connection's constructor
        connects path 1 so; path 2 the layers set up in-band."""
        if not isinstance(remote, PathInfo):
            raise TypeError(f"remote: PathInfo expected, got {type(remote).__name__}")
        i = ffi.new("struct shift_path_info *")
        i.qp_num, i.psn, i.lid, i.port = remote.qp_num, remote.psn, remote.lid, remote.port
        i.ctl_qp_num = remote.ctl_qp_num
        if len(remote.gid) != 16:
            raise ValueError("remote.gid: 16 bytes expected")
        ffi.memmove(i.gid, remote.gid, 16)
        check_errno(lib.shift_ep_connect(self._eph(host), path_arg(path), i), "shift_ep_connect")

    def setup_state(self, host: str) -> SetupState:
        """How far host's two-phase set-up got: failover-ready or not, the keys."""
        i = self._query(host_arg(host))
        return SetupState(bool(i.setup_inband), bool(i.backup_ready), i.keys_announced,
                          i.keys_acked, i.peer_keys, i.peer_keys_held)

    # -- plumbing
    @property
    def handle(self) -> Any:
        if self._h is None:
            raise ClosedError("connection is closed")
        return self._h

    def _eph(self, host: str) -> Any:
        self.handle  # noqa: B018 - raises once closed
        return self._ep[host_arg(host)]

    def close(self) -> None:
        if self._h is None:
            return
        self._close_handles()
        self._h = None
        self._fabric._conns.remove(self)

    def register(self, host: str, nbytes: int, access: int = ALL_ACCESS) -> MemoryRegion:
        """Register nbytes of host's memory on both its NICs; the peer learns the keys
        (two_phase: its layer, in-band)."""
        h = host_arg(host)
        int_arg("nbytes", nbytes, 1, self._fabric.mem_size)
        int_arg("access", access, 0, 0xFFFFFFFF)
        off = self._fabric._alloc(h, nbytes)
        keys = ffi.new("struct shift_mr_keys *")
        self.handle  # noqa: B018 - raises once closed
        self._reg_mr(h, self._fabric._base_addr[h] + off, nbytes, access, keys)
        return MemoryRegion(self, host, off, nbytes, keys)

    # -- regions
    def _region(self, r: int) -> int:
        return int_arg("region", r, 1, self.regions)

    def read(self, host: str, region: int) -> int:
        """The value of one of host's regions."""
        mr = self._mr[host_arg(host)]
        off = (self._region(region) - 1) * SLOT
        return int.from_bytes(mr.read(off, SLOT), "little")

    def _slot(self, wr_id: int) -> int:
        """The offset of receive WR id's buffer, past the regions."""
        return (self.regions + (int_arg("id", wr_id) - 1) % self.max_wr) * SLOT

    def _landing(self, wr_id: int) -> int:
        """The offset of WR id's landing slot (a READ's or atomic's result), past the
        receive buffers."""
        return (self.regions + self.max_wr + (int_arg("id", wr_id) - 1) % self.max_wr) * SLOT

    def returned(self, wr_id: int, host: str = "A") -> int:
        """What host's READ or atomic with this id returned into its landing slot."""
        mr = self._mr[host_arg(host)]
        return int.from_bytes(mr.read(self._landing(wr_id), SLOT), "little")

    def received(self, recv_id: int, host: str = "B") -> int:
        """The buffer of host's receive WR recv_id: the payload of the SEND it took, or 0."""
        mr = self._mr[host_arg(host)]
        return int.from_bytes(mr.read(self._slot(recv_id), SLOT), "little")

    def memory(self, host: str = "B") -> tuple[int, ...]:
        """host's regions, in order (what its application reads)."""
        raw = self._mr[host_arg(host)].read(0, self.regions * SLOT)
        return tuple(int.from_bytes(raw[i:i + SLOT], "little") for i in range(0, len(raw), SLOT))

    def app_write(self, host: str, region: int, value: int) -> bool:
        """AppWrite: host's application rewrites its buffer for a region."""
        mr = self._mr[host_arg(host)]
        off = (self._region(region) - 1) * SLOT
        mr.write(off, int_arg("value", value).to_bytes(SLOT, "little"))
        return True

    # -- posting
    def _fill(self, c: Any, wr: Wr | RawSendWr, h: int = 0) -> None:
        """Encode wr as host h posts it: its own region as the source, the peer's as the
        target."""
        if isinstance(wr, RawSendWr):
            for name in ("wr_id", "addr", "remote_addr", "compare_add", "swap"):
                int_arg(name, getattr(wr, name))
            for name in ("length", "lkey", "rkey", "imm_data", "send_flags"):
                int_arg(name, getattr(wr, name), 0, U32)
            int_arg("opcode", wr.opcode, -(1 << 31), (1 << 31) - 1)
            int_arg("num_sge", wr.num_sge, -(1 << 31), (1 << 31) - 1)
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
        local, remote = self._mr[h], self._mr[1 - h]
        op = op_arg(wr.op)
        c.wr_id = int_arg("id", wr.id)
        region = int_arg("region", wr.region, 0, self.regions)
        value = int_arg("value", wr.value)
        flags = lib.SHIFT_SEND_SIGNALED if bool_arg("signaled", wr.signaled) else 0
        if not bool_arg("eligible", wr.eligible):
            flags |= lib.SHIFT_SEND_INELIGIBLE
        inline = bool_arg("inline", wr.inline)
        int_arg("compare", wr.compare)
        if wr.imm is not None and op not in WITH_IMM:
            raise ValueError(f"imm: {op.value} carries no immediate data "
                             f"(WRITE_IMM and SEND_IMM do)")
        imm = wr.id & U32 if wr.imm is None else int_arg("imm", wr.imm, 0, U32)
        c.opcode = OP_CODES[op]
        c.imm_data = imm if op in WITH_IMM else 0
        c.num_sge = 0
        c.sg.addr = c.sg.length = c.sg.lkey = 0
        c.remote_addr = c.rkey = c.compare_add = c.swap = 0
        if region:
            c.remote_addr = remote.addr + (region - 1) * SLOT
            c.rkey = remote.rkey
        if op in (Op.WRITE, Op.WRITE_IMM) and region:
            c.num_sge = 1
            c.sg.length = SLOT
            if inline:
                self._inline[0] = value
                c.sg.addr = int(ffi.cast("uintptr_t", self._inline))
                flags |= lib.SHIFT_SEND_INLINE
            else:
                self.app_write(HOST_NAMES[h], region, value)
                c.sg.addr = local.addr + (region - 1) * SLOT
                c.sg.lkey = local.lkey
        elif op in (Op.SEND, Op.SEND_IMM):  # the payload: inline, into the receive's buffer
            c.num_sge = 1
            c.sg.length = SLOT
            self._inline[0] = value
            c.sg.addr = int(ffi.cast("uintptr_t", self._inline))
            flags |= lib.SHIFT_SEND_INLINE
        elif op in (Op.READ, Op.FADD, Op.CAS):
            if not region:
                raise ValueError(f"{op.value} needs a region")
            c.num_sge = 1
            c.sg.length = SLOT
            c.sg.addr = local.addr + self._landing(wr.id)
            c.sg.lkey = local.lkey
            if op == Op.FADD:
                c.compare_add = value
            elif op == Op.CAS:
                c.compare_add = wr.compare
                c.swap = value
        c.send_flags = flags

    def post_send(self, *args: Any) -> bool:
        """PostSend(host, wr) — or post_send(wr), A's: host posts a WR through the layer
        (its target is the peer's memory)."""
        host, wr = ("A", args[0]) if len(args) == 1 else args
        h = host_arg(host)
        c = ffi.new("struct shift_send_wr *")
        self._fill(c, wr, h)
        check_errno(lib.shift_post_send(self._eph(host), c, ffi.NULL), "post_send")
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
        """PostRecv(host, id) — or post_recv(id), B's: host posts a receive WR (into its
        buffer for that id)."""
        host, wr = ("B", args[0]) if len(args) == 1 else args
        mr = self._mr[host_arg(host)]
        c = ffi.new("struct shift_recv_wr *")
        if isinstance(wr, RawRecvWr):
            c.wr_id = int_arg("wr_id", wr.wr_id)
            c.sg.addr = int_arg("addr", wr.addr)
            c.sg.length = int_arg("length", wr.length, 0, U32)
            c.sg.lkey = int_arg("lkey", wr.lkey, 0, U32)
            c.num_sge = int_arg("num_sge", wr.num_sge, -(1 << 31), (1 << 31) - 1)
        else:
            c.wr_id = int_arg("id", wr)
            c.num_sge = 1
            c.sg.addr = mr.addr + self._slot(wr)
            c.sg.length = SLOT
            c.sg.lkey = mr.lkey
        check_errno(lib.shift_post_recv(self._eph(host), c, ffi.NULL), "post_recv")
        return True

    # -- polling
    def _completion(self, h: int, wc: Any) -> Completion:
        imm = wc.imm_data if wc.wc_flags & lib.SHIFT_WC_WITH_IMM else None
        status = Status(wc.status)
        # a verbs opcode as its name; another is shown as the number the core gave
        opcode: WcOpcode | int = WC_OPCODES.get(wc.opcode, wc.opcode)
        refused = (status != Status.SUCCESS and not opcode & lib.SHIFT_WC_RECV
                   and self._refusal_due(h))
        return Completion(HOST_NAMES[h], wc.wr_id, status, opcode, wc.byte_len, imm,
                          refused, wc.qp_num, wc.wc_flags)

    def _refusal_due(self, h: int) -> bool:
        """Is host h's send error completion polled now one of a refusal? A refusal
        completes every outstanding send WR in error at once (the send side enters Error,
        terminal), and the application polls them as the next send errors of that host,
        in post order: the first `refused_wrs` send errors a host polls are its refused
        WRs. Queried only at an error, so the failure-free path pays nothing."""
        if self.design not in (DesignCode.SHIFT, DesignCode.SHIFT_PREFIX,
                               DesignCode.SHIFT_COUNTED):
            return False
        if self._query(h).refused_wrs <= self._refused_flagged[h]:
            return False
        self._refused_flagged[h] += 1
        return True

    def _record(self, c: Completion) -> None:
        if not self.record:
            return
        self._completions.append(c)
        h = host_arg(c.host)
        if c.is_recv:
            self._rcv_seen[h].append(ReceiverSeen(c.imm or 0, c.wr_id, c.status.name,
                                                  self.memory(c.host),
                                                  self.received(c.wr_id, c.host)))
        else:
            val = self.returned(c.wr_id, c.host) if c.ok and c.opcode in RETURNING else 0
            self._snd_seen[h].append(SenderSeen(c.wr_id, c.status.name, val))

    def _history(self, what: str) -> None:
        if not self.record:
            raise RuntimeError(f"{what} needs the connection's history: open it with "
                               "Fabric.connect(..., record=True)")

    @property
    def completions(self) -> list[Completion]:
        """Every completion the applications polled, both hosts, in order (record=True)."""
        self._history("completions")
        return self._completions

    def poll_cq(self, host: str, *, check: bool = False) -> Completion | None:
        """PollCq(host): the application takes one completion (None if there is none, or
        if the layer took it: an error on the default QP that started a failover, or
        ShiftCounted's replayed copy of a notification whose success the application
        had). With ``check``, an
        error completion raises :class:`CompletionError` carrying it."""
        bool_arg("check", check)
        _, c = self.poll_step(host)
        return c.raise_for_status() if check and c is not None else c

    def poll_step(self, host: str) -> tuple[bool, Completion | None]:
        """PollCq(host) as the spec counts it: whether the poll was a step (the
        application took a completion, or the layer took one: see `poll_cq`), and the
        completion the application took, if any."""
        h = host_arg(host)
        r = event_result(lib.shift_poll_step(self._eph(host), self._wc), "poll_cq")
        if r != 1:
            return r == 2, None
        c = self._completion(h, self._wc)
        self._record(c)
        return True, c

    def poll(self, host: str, n: int = 256, *, check: bool = False) -> list[Completion]:
        """Up to n completions for host's application in one call, in order. With
        ``check``, if any of them is an error, :class:`CompletionError` is raised instead
        of returning: its ``completion`` is the first error, its ``completions`` every
        completion taken (none is lost)."""
        h = host_arg(host)
        int_arg("n", n, 0, 1 << 20)
        bool_arg("check", check)
        out: list[Completion] = []
        while len(out) < n:
            k = min(n - len(out), 256)
            got = event_result(lib.shift_poll_cq(self._eph(host), k, self._wcs), "poll_cq")
            for i in range(got):
                c = self._completion(h, self._wcs[i])
                self._record(c)
                out.append(c)
            if got < k:
                break
        first_error = next((c for c in out if not c.ok), None) if check else None
        if first_error is not None:
            raise CompletionError(first_error, out)
        return out

    # -- the layer's events
    def poll_event(self, host: str) -> FailoverEvent | None:
        """The oldest of host's failover events its application has not taken (None if
        there is none): its paths going down, failovers starting, finishing or refused,
        fail-backs (`EventType`). Taking them, or not, changes nothing in the layer."""
        h = host_arg(host)
        if event_result(lib.shift_poll_event(self._eph(host), self._ev), "poll_event") == 0:
            return None
        ev = self._ev
        return FailoverEvent(HOST_NAMES[h], EventType(ev.type), ev.path, Status(ev.status),
                             ev.wrs)

    def events(self, host: str) -> Iterator[FailoverEvent]:
        """host's failover events not yet taken, oldest first, each taken as the
        iteration reaches it (``for ev in conn.events("A")``)."""
        host_arg(host)  # a bad host raises here, not at the first iteration
        return iter(lambda: self.poll_event(host), None)

    # -- the layer and the wire
    def progress(self, host: str) -> str:
        """Progress(host): one step of the layer's background work; returns its name."""
        return STEP_NAMES[event_result(lib.shift_progress(self._eph(host)), "progress")]

    def timeout(self, host: str, path: int) -> bool:
        """Timeout(host, path): the NIC's retransmission timers on that path fire; if none
        was armed, the layer's handshake timer does."""
        self.handle  # noqa: B018 - raises once closed
        h = host_arg(host)
        r = lib.shift_sim_timeout(self._hs[h], h, path_arg(path))
        return event_result(r, "timeout") > 0

    def handshake_timeout(self, host: str) -> bool:
        """HandshakeTimeout(host): the layer's handshake timer fires (`shift_timer` on the
        backup path): a host that awaits the peer's answer resends its latest counter.
        True if it acted (it awaited an answer); after the connection's ``ctl_retries``
        resends it gives up instead (not in the spec: the error reaches the application)."""
        r = lib.shift_timer(self._eph(host), 2)
        return event_result(r, "handshake_timeout") > 0

    def completion_timeout(self, host: str) -> bool:
        """CompletionTimeout(host): the layer's completion timer fires (`shift_timer` on the
        default path): a WR there waited too long (RNR NAKs retried for ever, F8); from
        Default with a WR outstanding on the default path, the layer fails over. True if it
        acted."""
        r = lib.shift_timer(self._eph(host), 1)
        return event_result(r, "completion_timeout") > 0

    def fatal_event(self, host: str, nic: int) -> bool:
        """FatalEvent(host, nic): host's layer reads the asynchronous events of its NIC
        (`shift_async_event`); at the NIC's death in fatal error (a fabric with
        device_fatal), it completes that QP's WRs itself, flushed. True if it read one."""
        r = lib.shift_async_event(self._eph(host), path_arg(nic, "nic"))
        return event_result(r, "fatal_event") > 0

    def fatal_events(self, host: str) -> int:
        """host's layer reads every asynchronous event waiting on either of its NICs
        (`fatal_event` until none is left), as a deployment's thread per device does; how
        many it read (0 without device_fatal). An event loop calls it for each host: on a
        fabric with device_fatal a dead NIC completes nothing until its host reads this."""
        read = 0
        for nic in (1, 2):
            while self.fatal_event(host, nic):
                read += 1
        return read

    def ctl_input(self, host: str, path: int, msg: bytes) -> bool:
        """A control message arrives at host on path, as the backend hands one over (not
        an event of the vocabulary: a test's forged or damaged message). True if the layer
        took it; False if it rejected it as a message the peer's layer could not have sent
        (counted in `Stats.ctl_rejected`, nothing else changed)."""
        if not isinstance(msg, bytes | bytearray):
            raise TypeError(f"msg: bytes expected, got {type(msg).__name__}")
        buf = ffi.new("char[]", bytes(msg))
        r = lib.shift_ctl_input(self._eph(host), path_arg(path), buf, len(msg))
        if r == -errno.EINVAL:  # rejected
            return False
        return event_result(r, "ctl_input") == 0

    def transmit(self, host: str, path: int) -> bool:
        return self._fabric.transmit(host, path)

    def deliver(self, path: int, direction: str) -> bool:
        return self._fabric.deliver(path, direction)

    def drop(self, path: int, direction: str) -> bool:
        return self._fabric.drop(path, direction)

    def write_cqe(self, host: str, path: int) -> bool:
        return self._fabric.write_cqe(host, path)

    def write_cqes(self) -> int:
        return self._fabric.write_cqes()

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
        """Run wire, NICs and layers until nothing moves (no faults, drops or timeouts):
        the wire, the NICs writing their receive completions, each layer reading its
        NICs' events and taking its background steps."""
        for _ in range(int_arg("rounds", rounds, 1)):
            moved = self.pump() > 0
            moved |= self.write_cqes() > 0
            for h in HOST_NAMES:
                moved |= self.fatal_events(h) > 0
                while self.progress(h) != "none":
                    moved = True
            if not moved:
                return

    def apply(self, event: Event | Mapping[str, Any] | Sequence[Any]) -> Any:
        """Apply one event of the vocabulary, written as in a trace file
        (``{"event": "Deliver", "path": 1, "direction": "AtoB"}``), as an `Event`, or as
        the spec's tuple (``("NicFail", "A", 1)``); what its method returns. PostSend's
        ``wr`` is a `Wr` (in an object, its fields: ``{"id": 1, "op": "WRITE", ...}``):
        a connection has no workload whose WR number it could mean."""
        if not isinstance(event, (Event, Mapping, tuple, list)):
            raise TypeError(f"event must be an Event, its JSON object or a tuple "
                            f"(Name, *args), not {type(event).__name__}")
        if isinstance(event, (tuple, list)) and not (event and isinstance(event[0], str)):
            raise TypeError("an event tuple is (Name, *args) with the name a str, "
                            f"not {event!r}")
        name, args = parse(event, VOCABULARY)  # ValueError: unknown name, fields or arity
        if name == "Init":
            raise ValueError("Init is not an event of a connection: Fabric(...).connect(...) "
                             "is its Init")
        try:
            if name == "PostSend":
                args = (args[0], _wr_arg(args[1]))
            return getattr(self, EVENT_METHODS[name])(*args)
        except (TypeError, ValueError) as e:  # the method's check, naming the argument
            raise (TypeError if isinstance(e, TypeError) else ValueError)(
                f"{name}: {e}") from None

    def run(self, events: Iterable[Event | Mapping[str, Any] | Sequence[Any]]) -> list[Any]:
        return [self.apply(e) for e in events]

    # -- what can be observed
    def _query(self, h: int) -> Any:
        i = ffi.new("struct shift_ep_info *")
        check_errno(lib.shift_ep_query(self._eph(HOST_NAMES[h]), i), "shift_ep_query")
        return i

    def host_state(self, host: str) -> HostState:
        i = self._query(host_arg(host))
        return HostState(
            STATE_NAMES[i.state], bool(i.sent_ctr), i.peer_ctr, bool(i.replayed),
            i.fence if i.has_fence else None, i.epoch, i.outstanding, i.held, i.buffered,
            i.sends_posted, i.sends_completed, i.recvs_posted, i.recvs_completed,
            STATE_NAMES[i.send_state], RECV_STATE_NAMES[i.recv_state], bool(i.fresh),
            bool(i.asked), i.ctr_seq, i.peer_seq,
        )

    def state(self, host: str) -> str:
        return self.host_state(host).state

    def observe(self) -> ImplObservation:
        """What each application saw (record=True), the failover states, the counters."""
        self._history("observe()")
        a, b = self.host_state("A"), self.host_state("B")
        return ImplObservation(
            snd_seen=tuple(self._snd_seen[0]),
            rcv_seen=tuple(self._rcv_seen[1]),
            layer={"A": a.state, "B": b.state},
            recv_done=b.recvs_completed,
            peer_ctr={"A": a.peer_ctr, "B": b.peer_ctr},
            sent_ctr={"A": a.sent_ctr, "B": b.sent_ctr},
            replayed=a.replayed,
            fence=a.fence,
            hosts={"A": a, "B": b},
            snd_seen_b=tuple(self._snd_seen[1]),
            rcv_seen_a=tuple(self._rcv_seen[0]),
        )

    def stats(self, host: str) -> Stats:
        """host's failover statistics: one failover counts once per host (both hosts'
        endpoints take part in each); :meth:`stats_by_host` gives both."""
        i = self._query(host_arg(host))
        return Stats(i.failovers, i.replayed_wrs, i.skipped_wrs, i.refused_wrs, i.failbacks,
                     i.ctl_sent, i.ctl_received, i.backup_state_bytes, i.ctl_rejected,
                     i.events_dropped, i.kept_notes, i.notes_forgotten, i.cq_kept)

    def qp_num(self, host: str) -> int:
        """host's application QP number (the default QP's): what `Completion.qp_num`
        carries, the same before, during and after a failover."""
        return int(self._query(host_arg(host)).qp_num)

    def stats_by_host(self) -> dict[str, Stats]:
        """Each host's statistics: ``{"A": Stats, "B": Stats}``."""
        return {h: self.stats(h) for h in HOST_NAMES}

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
