"""The layer over libibverbs: a connection whose two endpoints run the C core over the
libibverbs backend (``shift_ibv.h``, ``libshift_ibv.so``), on the simulated provider in
lock-step, so that the same events drive it as drive the direct core.

The process must run in the lock-step environment (``verbs.devices``: both hosts' four
devices, sim0/sim1 host A's, sim2/sim3 host B's). The fabric is the ordinary one
(`shift.impl.Fabric`): the provider is attached to it, so its wire, its NICs and its
faults are the ones every event steps; what differs is only how each layer reaches its
NICs - ``ibv_*`` calls through libibverbs and the provider instead of the simulator's
backend table. The set-up is a deployment's that connects both paths before the layer
starts (``shift_ibv_path_info``, ``shift_ibv_connect``), the model's Init.

Two things the simulator's backend does inside itself are steps here: a control message
that arrives is taken at once (``shift_ctl_poll`` on the receiving host, after each
delivery: the spec's DeliverControl is one step), and a NIC's asynchronous events reach
the device contexts after each fault (the provider's ``shiftsim_lockstep_events``).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from cffi import FFI
from shift.impl import Connection, Fabric
from shift.impl._native import ffi, lib
from shift.impl.errors import check_errno, event_result
from shift.impl.validate import host_arg, path_arg
from shift.impl.verbs import DesignCode

from . import lockstep
from .rdma_core import Build, ensure_built

# The hosts' devices in lock-step: (default path's, backup path's).
DEVICES = (("sim0", "sim1"), ("sim2", "sim3"))
PORT = 1
CTL_MEM = 2 * 17 * 320  # SHIFT_IBV_CTL_MEM

# shift_ibv.h's calls, with the core's types as plain pointers (they are the extension's)
CDEF = """
const void *shift_ibv_ops(void);
int shift_ibv_open(const char *default_dev, const char *backup_dev, uint8_t port,
                   void *ctl_mem, size_t ctl_len, void **out);
int shift_ibv_close(void *ctx);
int shift_ibv_path_info(void *ctx, int path, void *out);
int shift_ibv_connect(void *ctx, int path, const void *remote);
int shift_ibv_qp_state(void *ctx, int path, int *state);
"""


class Backend:
    """libshift_ibv.so, loaded (cffi, ABI mode): the build's, or $SHIFT_IBV_BACKEND (another
    build of the same source: a seeded bug's)."""

    def __init__(self, build: Build):
        self.ffi = FFI()
        self.ffi.cdef(CDEF)
        self.lib: Any = self.ffi.dlopen(os.environ.get("SHIFT_IBV_BACKEND")
                                        or str(build.backend))

    def ptr(self, p: Any) -> Any:
        """A pointer of the backend's FFI as the extension's ``void *``."""
        return ffi.cast("void *", int(self.ffi.cast("uintptr_t", p)))

    def mine(self, p: Any) -> Any:
        """An extension's pointer as the backend's ``void *``."""
        return self.ffi.cast("void *", int(ffi.cast("uintptr_t", p)))


@cache
def backend() -> Backend:
    return Backend(ensure_built())


class VerbsConnection(Connection):
    """`Connection` whose endpoints reach their NICs through libibverbs (the backend
    table of ``shift_ibv.h``) in lock-step with its fabric. Own CQs, both paths
    connected by the deployment (no two-phase set-up, no shared CQ)."""

    def _open(self, fabric: Fabric, attr: Any, cq: tuple[Any, Any]) -> list[Any]:
        if self.two_phase or not (cq[0] == ffi.NULL and cq[1] == ffi.NULL):
            raise ValueError("a connection over libibverbs connects both paths itself, on "
                             "CQs of its own (no two_phase, no shared cq)")
        self._ibv = backend()
        lockstep.attach(fabric)
        self._ctxs: list[Any] = []
        eps: list[Any] = []
        try:
            for h in (0, 1):
                self._ctxs.append(self._open_ctx(h))
                eps.append(self._make_ep(h, attr))
            for p in (1, 2):
                self._connect(p)
        except BaseException:
            for ep in eps:
                lib.shift_ep_destroy(ep)
            self._close_ctxs()
            raise
        return eps

    def _open_ctx(self, h: int) -> Any:
        """Host h's context; its control QPs' buffers in the host's memory (where the
        simulated NIC's registrations must lie)."""
        out = self._ibv.ffi.new("void **")
        default, backup = DEVICES[h]
        mem = self._fabric._base_addr[h] + self._fabric._alloc(h, CTL_MEM)
        check_errno(self._ibv.lib.shift_ibv_open(default.encode(), backup.encode(), PORT,
                                                 self._ibv.ffi.cast("void *", mem), CTL_MEM,
                                                 out), "shift_ibv_open")
        return out[0]

    def _make_ep(self, h: int, attr: Any) -> Any:
        ea = ffi.new("struct shift_ep_attr *")
        ea.role = lib.SHIFT_ROLE_REQUESTER if h == 0 else lib.SHIFT_ROLE_RESPONDER
        ea.design = attr.design
        ea.max_send_wr, ea.max_recv_wr = attr.max_send_wr, attr.max_recv_wr
        ea.ctl_retries, ea.flags = attr.ctl_retries, attr.flags
        ep = ffi.new("shift_ep *")
        ops = ffi.cast("const struct shift_backend_ops *",
                       self._ibv.ptr(self._ibv.lib.shift_ibv_ops()))
        check_errno(lib.shift_ep_create(ops, self._ibv.ptr(self._ctxs[h]), ea, ep),
                    "shift_ep_create")
        return ep[0]

    def _connect(self, path: int) -> None:
        """Both hosts' QPs of path, each to the other's (the deployment's exchange)."""
        infos = [ffi.new("struct shift_path_info *") for _ in (0, 1)]
        for h in (0, 1):
            check_errno(self._ibv.lib.shift_ibv_path_info(self._ctxs[h], path,
                                                          self._ibv.mine(infos[h])),
                        "shift_ibv_path_info")
        for h in (0, 1):
            check_errno(self._ibv.lib.shift_ibv_connect(self._ctxs[h], path,
                                                        self._ibv.mine(infos[1 - h])),
                        "shift_ibv_connect")

    def _close_ctxs(self) -> None:
        for ctx in self._ctxs:
            check_errno(self._ibv.lib.shift_ibv_close(ctx), "shift_ibv_close")
        self._ctxs = []
        lockstep.detach()

    def _endpoint(self, h: int) -> Any:
        return self._hs[h]

    def _close_handles(self) -> None:
        for ep in self._hs:
            check_errno(lib.shift_ep_destroy(ep), "shift_ep_destroy")
        self._close_ctxs()

    def _reg_mr(self, h: int, addr: int, nbytes: int, access: int, keys: Any) -> None:
        check_errno(lib.shift_reg_mr(self._hs[h], addr, nbytes, access, keys), "shift_reg_mr")
        check_errno(lib.shift_add_remote_keys(self._hs[1 - h], keys.rkey, keys.rkey_backup),
                    "shift_add_remote_keys")

    # -- the events the simulator's backend completes inside itself
    def timeout(self, host: str, path: int) -> bool:
        """Timeout(host, path): the NIC's timers on the path; if none was armed, the
        layer's timer of that path (as shift_sim_timeout)."""
        if self._fabric.timeout(host, path):
            return True
        h = host_arg(host)
        return event_result(lib.shift_timer(self._hs[h], path_arg(path)), "timeout") > 0

    def deliver(self, path: int, direction: str) -> bool:
        """Deliver(path, direction); a control message that arrived is taken at once."""
        if not self._fabric.deliver(path, direction):
            return False
        to = 1 if direction == "AtoB" else 0
        event_result(lib.shift_ctl_poll(self._hs[to]), "ctl_poll")
        return True

    def pump(self, budget: int = 1_000_000) -> int:
        """Transmit and deliver until the wire is quiet, in sn_pump's order (per path: each
        host transmits, each direction delivers), each delivery through `deliver` so that a
        control message is taken as it arrives; the number of steps."""
        steps, moved = 0, True
        while moved and steps < budget:
            moved = False
            for p in (1, 2):
                for h in ("A", "B"):
                    while steps < budget and self.transmit(h, p):
                        steps, moved = steps + 1, True
                for d in ("AtoB", "BtoA"):
                    while steps < budget and self.deliver(p, d):
                        steps, moved = steps + 1, True
        return steps

    def _fault(self, did: bool) -> bool:
        lockstep.events()  # the NICs' asynchronous events, to the device contexts
        return did

    def link_down(self, path: int) -> bool:
        return self._fault(self._fabric.link_down(path))

    def link_up(self, path: int) -> bool:
        return self._fault(self._fabric.link_up(path))

    def nic_fail(self, host: str, nic: int) -> bool:
        return self._fault(self._fabric.nic_fail(host, nic))

    def nic_recover(self, host: str, nic: int) -> bool:
        return self._fault(self._fabric.nic_recover(host, nic))

    def qp_state(self, host: str, path: int) -> int:
        """host's RC QP of path: its state (enum shift_qp_state), as the NIC has it."""
        out = self._ibv.ffi.new("int *")
        check_errno(self._ibv.lib.shift_ibv_qp_state(self._ctxs[host_arg(host)],
                                                     path_arg(path), out),
                    "shift_ibv_qp_state")
        return int(out[0])


def connect(fabric: Fabric, design: DesignCode, **kw: Any) -> VerbsConnection:
    """`Fabric.connect`'s connection, over libibverbs (the keywords are its own)."""
    return VerbsConnection(fabric, design, **kw)
