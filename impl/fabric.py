"""The fabric: two hosts, two NICs each, two links, and the events of the wire and of
faults. Nothing moves unless an event says so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._native import ffi, lib
from .connection import Connection
from .errors import ClosedError, check_errno, event_result
from .validate import bool_arg, design_arg, dir_arg, host_arg, int_arg, path_arg
from .verbs import HOST_NAMES, HOSTS, DesignCode


class Fabric:
    """Two hosts (A, B), each with NIC 1 and NIC 2; path p = NIC p of A, link p, NIC p of
    B. Path 1 is the default, path 2 the backup. Nothing moves unless an event says so.

    By default the NICs run RC as hardware does, as the spec's bounds do
    (`sn_fabric_attr_init`). With rnr_nak, a SEND or WRITE_WITH_IMM that finds no receive
    WR is RNR-NAKed and sent again, rnr_retry times before RNR_RETRY_EXC_ERR, or for ever
    at 7 (RnrNak, RnrRetry). With ack_before_cqe, a responder's successful receive
    completion reaches host memory only after its ACK left, when its NIC writes it
    (`write_cqe`, `write_cqes`), and a NIC that dies first loses it (AckBeforeCqe). With
    device_fatal, a NIC that dies completes nothing, not even flushes, and raises an
    asynchronous event its host's layer reads (`Connection.fatal_event`, `fatal_events`;
    DeviceFatal). The implicit NAK is always on. So an event loop writes the NICs'
    completions with the wire and reads each host's NIC events (docs/library.md). The
    idealised NIC (a completion in memory with its ACK, a dead NIC's WRs flushed, a
    request without a receive WR dropped for the timer) is
    ``Fabric(rnr_nak=False, ack_before_cqe=False, device_fatal=False)``."""

    def __init__(self, *, mem_size: int = 1 << 16, retries: int = 7, rnr_retry: int = 7,
                 rnr_nak: bool = True, ack_before_cqe: bool = True,
                 device_fatal: bool = True):
        attr = ffi.new("struct sn_fabric_attr *")
        lib.sn_fabric_attr_init(attr)  # hardware's RC; then what the caller asked for
        attr.mem_size = int_arg("mem_size", mem_size, 4096, 1 << 30)
        attr.retry_cnt = int_arg("retries", retries, 0, 7)
        attr.rnr_retry = int_arg("rnr_retry", rnr_retry, 0, 7)
        attr.rnr_nak = int(bool_arg("rnr_nak", rnr_nak))
        attr.ack_before_cqe = int(bool_arg("ack_before_cqe", ack_before_cqe))
        attr.device_fatal = int(bool_arg("device_fatal", device_fatal))
        out = ffi.new("sn_fabric *")
        check_errno(lib.sn_fabric_create(attr, out), "sn_fabric_create")
        self._h = out[0]
        self._conns: list[Connection] = []
        self._cqs: list[SharedCq] = []
        self._base_addr = []
        self._buffers = []
        for h in (0, 1):
            base = ffi.new("uint8_t **")
            size = ffi.new("size_t *")
            check_errno(lib.sn_host_mem(self._h, h, base, size), "sn_host_mem")
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
        for q in list(self._cqs):
            q.close()
        check_errno(lib.sn_fabric_destroy(self._h), "sn_fabric_destroy")
        self._h = None

    def __enter__(self) -> Fabric:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self, design: DesignCode | str = DesignCode.SHIFT, *, regions: int = 4,
                max_wr: int = 64, probe: str = "wire", ctl_retries: int = 3,
                copy_posts: bool = False, fail_back: bool = True,
                record: bool = False, two_phase: bool = False,
                cq: Mapping[str, SharedCq] | None = None) -> Connection:
        """Open a resilient connection from A (requester) to B (responder). With
        copy_posts the layer keeps its own copy of every WR it posts instead of reading
        the WRs to replay back from the default QP's send queue at a failure; without
        fail_back it stays on the backup path once the replay is done. With record the
        connection keeps a history for `Connection.completions` and `observe()` (tests,
        the differential runner): every completion is kept and each receive completion
        copies all of the host's regions, so memory grows with every completion and a
        poll costs O(regions) per notification. With two_phase each host's endpoint is
        made alone and the hosts exchange their default QPs' information only, as a verbs
        program does over its socket (`Connection.local_info`, `connect_path`); the
        layers set the backup path up in-band as they progress, and a host is
        failover-ready once `Connection.setup_state` says so. With cq, a host's endpoint
        puts its QPs on that host's `SharedCq` (``{"A": fab.shared_cq("A")}``), which
        other connections' endpoints on the host share; each still polls its own
        completions only, those it would have polled alone, in the same order (not with
        two_phase)."""
        return Connection(self, design_arg(design), regions=regions, max_wr=max_wr,
                          probe=probe, ctl_retries=ctl_retries, copy_posts=copy_posts,
                          fail_back=fail_back, record=record, two_phase=two_phase,
                          cq=_cq_arg(self, cq))

    def shared_cq(self, host: str, cqe: int = 1024) -> SharedCq:
        """A CQ pair of host (one CQ of cqe entries per path) for several connections'
        endpoints on it (`connect`'s cq). An endpoint joins while the QPs' shares fit:
        max_wr + max_wr each (the backup QP's one more), else `connect` raises
        (ENOMEM)."""
        return SharedCq(self, host, cqe)

    # -- the fabric's events: True if the event did something
    def transmit(self, host: str, path: int) -> bool:
        return _did(lib.sn_transmit(self.handle, host_arg(host), path_arg(path)), "transmit")

    def deliver(self, path: int, direction: str) -> bool:
        return _did(lib.sn_deliver(self.handle, path_arg(path), dir_arg(direction)), "deliver")

    def drop(self, path: int, direction: str) -> bool:
        return _did(lib.sn_drop(self.handle, path_arg(path), dir_arg(direction)), "drop")

    def timeout(self, host: str, path: int) -> bool:
        """The NICs' retransmission timers of host on path fire: go-back-N, or
        RETRY_EXC_ERR once retries are spent. Only the NIC's: `Connection.timeout` also
        fires the failover layer's handshake timer, which the spec does not have."""
        return _did(lib.sn_timeout(self.handle, host_arg(host), path_arg(path)), "timeout")

    def write_cqe(self, host: str, nic: int) -> bool:
        """WriteCqe(host, nic): the NIC writes the oldest receive completion it made (and
        ACKed) into host memory, where a poll finds it."""
        return _did(lib.sn_write_cqe(self.handle, host_arg(host), path_arg(nic, "nic")),
                    "write_cqe")

    def write_cqes(self) -> int:
        """Every live NIC writes into host memory every receive completion it made and
        has not written yet (`write_cqe` until none is left), as a NIC does on its own
        right after the ACK left; how many it wrote (0 without ack_before_cqe). An event
        loop calls it with `pump`: together they are what the NICs do on hardware."""
        written = 0
        for host in HOST_NAMES:
            for nic in (1, 2):
                while self.write_cqe(host, nic):
                    written += 1
        return written

    def link_down(self, path: int) -> bool:
        return _did(lib.sn_link_down(self.handle, path_arg(path)), "link_down")

    def link_up(self, path: int) -> bool:
        return _did(lib.sn_link_up(self.handle, path_arg(path)), "link_up")

    def nic_fail(self, host: str, nic: int) -> bool:
        return _did(lib.sn_nic_fail(self.handle, host_arg(host), path_arg(nic, "nic")),
                    "nic_fail")

    def nic_recover(self, host: str, nic: int) -> bool:
        return _did(lib.sn_nic_recover(self.handle, host_arg(host), path_arg(nic, "nic")),
                    "nic_recover")

    def pump(self, budget: int = 1_000_000) -> int:
        """Transmit and deliver until the wire is quiet (no drops, timeouts or faults)."""
        return event_result(lib.sn_pump(self.handle, int_arg("budget", budget, 0, 1 << 62)),
                            "pump")

    def wire(self, path: int, direction: str) -> int:
        return lib.sn_wire_len(self.handle, path_arg(path), dir_arg(direction))

    def path_healthy(self, path: int) -> bool:
        return bool(lib.sn_path_healthy(self.handle, path_arg(path)))

    def head_kind(self, path: int, direction: str) -> str | None:
        """What the packet at the head of a channel is: "req", "ack", "ctl" (a control
        message of the layer), "ud" (a UD datagram), or None when the channel is empty."""
        kind = lib.sn_wire_head_kind(self.handle, path_arg(path), dir_arg(direction))
        return {1: "req", 2: "ack", 3: "ctl", 4: "ud"}.get(kind)

    def can_send(self, host: str, path: int) -> bool:
        """Would a packet host sends on path leave: its NIC alive and the link up?"""
        p = path_arg(path)
        return bool(lib.sn_nic_alive(self.handle, host_arg(host), p)
                    and lib.sn_link_is_up(self.handle, p))

    def counters(self) -> dict[str, int]:
        c = ffi.new("struct sn_counters *")
        check_errno(lib.sn_counters_get(self.handle, c), "sn_counters_get")
        return {k: getattr(c, k) for k in ("transmitted", "delivered", "dropped", "lost",
                                           "executed", "duplicates", "timeouts")}


class SharedCq:
    """A CQ pair of one host of a fabric (one CQ per path) that several connections'
    endpoints on that host share (`Fabric.shared_cq`, `Fabric.connect`'s cq). The layer
    demultiplexes by QP number: a completion of another endpoint's QP that a poll reads
    is kept for that endpoint, in order, and its next poll takes it (`Stats.cq_kept`).
    Closed by `close` once no open connection uses it (else CoreError, EBUSY), or with
    its fabric."""

    def __init__(self, fabric: Fabric, host: str, cqe: int):
        self.fabric = fabric
        self.host = HOST_NAMES[host_arg(host)]
        out = ffi.new("shift_cq *")
        check_errno(lib.shift_sim_cq_create(fabric.handle, HOSTS[self.host],
                                            int_arg("cqe", cqe, 1, 1 << 20), out),
                    "shift_sim_cq_create")
        self._h = out[0]
        fabric._cqs.append(self)

    @property
    def handle(self) -> Any:
        if self._h is None:
            raise ClosedError("shared CQ is closed")
        return self._h

    def close(self) -> None:
        if self._h is None:
            return
        check_errno(lib.shift_sim_cq_destroy(self._h), "shift_sim_cq_destroy")
        self._h = None
        self.fabric._cqs.remove(self)

    def __enter__(self) -> SharedCq:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cq_arg(fabric: Fabric, cq: Mapping[str, SharedCq] | None) -> tuple[Any, Any]:
    """connect's cq as the C call's two handles (ffi.NULL: the endpoint's own CQs)."""
    if cq is None:
        return (ffi.NULL, ffi.NULL)
    if not isinstance(cq, Mapping):
        raise TypeError("cq must map host names to SharedCq, e.g. {'A': fab.shared_cq('A')}")
    out = [ffi.NULL, ffi.NULL]
    for host, q in cq.items():
        h = host_arg(host)
        if not isinstance(q, SharedCq):
            raise TypeError(f"cq[{host!r}] must be a SharedCq, not {type(q).__name__}")
        if q.fabric is not fabric or q.host != HOST_NAMES[h]:
            raise ValueError(f"cq[{host!r}] is a CQ pair of host {q.host} of "
                             f"{'this' if q.fabric is fabric else 'another'} fabric")
        out[h] = q.handle
    return (out[0], out[1])


def _did(r: int, what: str) -> bool:
    return event_result(r, what) > 0
