"""The provider's lock-step mode (issue 18): one process is both hosts of a fabric it made
with shift.impl and steps by hand; pyverbs sees each step's result and nothing moves
between steps (tests/verbs/pyverbs_lockstep.py checks each step as it goes and prints
what it saw; this test holds it to the values verbs must give)."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import pytest
from shift.verbs import devices
from shift.verbs.rdma_core import Build
from verbs_helpers import run_as

pytestmark = pytest.mark.xdist_group("verbs")

PROGRAM = str(Path(__file__).with_name("pyverbs_lockstep.py"))
SUCCESS, SEND, RDMA_WRITE, RECV = 0, 0, 1, 128  # ibv_wc_status, ibv_wc_opcode
DEVICE_FATAL, PORT_DOWN, QPS_ERR = 8, 1, 6      # ibv_event_type, ibv_port_state, ibv_qp_state


def wc(wr_id: int, opcode: int, byte_len: int, src_qp: int = 0) -> dict[str, int]:
    return {"wr_id": wr_id, "status": SUCCESS, "opcode": opcode, "byte_len": byte_len,
            "src_qp": src_qp}


def test_lockstep_rc_and_ud_stepped_by_hand(rdma: Build) -> None:
    proc = run_as(rdma, devices.LOCKSTEP, sys.executable, PROGRAM, str(rdma.provider))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    # a device opens only once a fabric is attached, which no open context may see change
    assert seen["open_unattached"] == errno.ENODEV
    assert "no fabric attached" in proc.stderr
    assert seen["attach_refused"] == [errno.EINVAL, errno.EINVAL]
    assert seen["attach"] == 0 and seen["busy"] == [errno.EBUSY, errno.EBUSY]
    assert seen["lids"] == [1, 17]  # sim0 is host A's NIC 1, sim2 host B's
    assert seen["foreign_mr"] == errno.EFAULT  # a region lies in its own host's memory
    # RC: each completion only after the step that makes it (the program checked between)
    assert seen["rc_write"] == [wc(1, RDMA_WRITE, 9)]
    assert seen["rc_recv"] == [wc(20, RECV, 5)]
    assert seen["rc_send"] == [wc(2, SEND, 5)]
    # UD: the send completes at post, the receive at delivery with the sender's QP
    ud_a, ud_b = seen["ud_qpns"]
    assert ud_a != ud_b and seen["other_path_ah"] == errno.EINVAL
    assert seen["ud_send"] == [wc(3, SEND, 11)]
    assert seen["ud_recv"] == [wc(30, RECV, 40 + 11, ud_a)]
    assert seen["ud_lost"] == {"dropped": 1, "ud_discarded": 1}
    assert seen["ud_sends_lost"] == [wc(4, SEND, 11), wc(5, SEND, 11)]
    assert seen["ud_recv_after"] == [wc(31, RECV, 40 + 11, ud_a)]
    # a NIC's death reaches its device's context when the caller hands the events over
    assert seen["events"] == 1 and seen["event"] == DEVICE_FATAL
    assert seen["port_b"] == PORT_DOWN and seen["rc_b_state"] == QPS_ERR
    assert seen["detach"] == 0


def test_lockstep_lists_both_hosts_devices(rdma: Build) -> None:
    proc = run_as(rdma, devices.LOCKSTEP, "ibv_devices")
    assert proc.returncode == 0, proc.stderr
    guids = {dev: guid for dev, guid in (ln.split() for ln in proc.stdout.splitlines()[2:])}
    assert guids == {f"sim{i}": devices.node_guid(h, d).replace(":", "")
                     for i, (h, d) in enumerate((h, d) for h in "AB" for d in range(2))}


def test_lockstep_entry_points_refuse_outside_lockstep(rdma: Build) -> None:
    """Under a socket-mode run (one host, SHIFT_SIM_LOCKSTEP unset) nothing attaches."""
    script = f"""
import cffi, json
from shift.impl import Fabric
from shift.impl._native import ffi as n, lib
ffi = cffi.FFI()
ffi.cdef("struct sn_ops; int shiftsim_lockstep_attach(const struct sn_ops *, void *);"
         "int shiftsim_lockstep_detach(void); int shiftsim_lockstep_events(void);")
p = ffi.dlopen({str(rdma.provider)!r})
ops = n.new("struct sn_ops *")
lib.sn_get_ops(ops)
f = Fabric()
attach = p.shiftsim_lockstep_attach(ffi.cast("struct sn_ops *", int(n.cast("uintptr_t", ops))),
                                    ffi.cast("void *", int(n.cast("uintptr_t", f.handle))))
print(json.dumps([attach, p.shiftsim_lockstep_detach(), p.shiftsim_lockstep_events()]))
"""
    proc = run_as(rdma, "A", sys.executable, "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [errno.EINVAL, errno.EINVAL, -errno.EINVAL]
