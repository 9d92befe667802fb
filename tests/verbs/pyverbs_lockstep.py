"""Run under `shift run --lockstep`: one process is both hosts. It makes a two-host fabric
with shift.impl's Fabric (the Python extension's copy of simnic), gives the provider that
copy's table and the fabric (shiftsim_lockstep_attach, through cffi in ABI mode on the
provider libibverbs loaded), opens host A's sim0 and host B's sim2 with pyverbs, connects
an RC pair and a UD pair, and steps the wire by hand - transmit, deliver, drop, timeout,
write_cqe, nic_fail - checking after each step what the verbs show: no verbs call moves
the wire. Prints one JSON line of what it saw; an assertion that fails ends it (exit 1).

    python pyverbs_lockstep.py PROVIDER_SO
"""

from __future__ import annotations

import json
import sys
from typing import Any

import cffi
from pyverbs import libibverbs_enums as e
from pyverbs.addr import AH, AHAttr
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from shift.impl import Fabric
from shift.impl._native import ffi as native_ffi
from shift.impl._native import lib as native_lib

ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
          | e.IBV_ACCESS_REMOTE_ATOMIC)
QKEY, GRH, EBUSY = 0x5348, 40, 16
API = """
typedef struct sn_fabric_opaque *sn_fabric;
struct sn_ops;
int shiftsim_lockstep_attach(const struct sn_ops *ops, sn_fabric fabric);
int shiftsim_lockstep_detach(void);
int shiftsim_lockstep_events(void);
"""


class Provider:
    """The provider's lock-step entry points, on the fabric's copy of simnic."""

    def __init__(self, path: str, fabric: Fabric):
        self.ffi = cffi.FFI()
        self.ffi.cdef(API)
        self.lib = self.ffi.dlopen(path)  # the instance libibverbs loaded (same path)
        self.ops = native_ffi.new("struct sn_ops *")
        native_lib.sn_get_ops(self.ops)
        self.fabric = fabric

    def _cast(self, ctype: str, cdata: Any) -> Any:  # across the two FFIs, by address
        return self.ffi.cast(ctype, int(native_ffi.cast("uintptr_t", cdata)))

    def attach(self, handle: Any = None) -> int:
        handle = self.fabric.handle if handle is None else handle
        return self.lib.shiftsim_lockstep_attach(self._cast("struct sn_ops *", self.ops),
                                                 self._cast("sn_fabric", handle))

    def detach(self) -> int:
        return self.lib.shiftsim_lockstep_detach()

    def events(self) -> int:
        return self.lib.shiftsim_lockstep_events()


class Host:
    """One host's verbs objects on its device: PD, CQ, a region in its fabric memory."""

    def __init__(self, device: str, base: int, size: int = 16384):
        self.ctx = Context(name=device)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 32)
        self.mr = MR(self.pd, size, ACCESS, address=base)
        self.lid = self.ctx.query_port(1).lid

    def qp(self, qp_type: int) -> QP:
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        return QP(self.pd, QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, cap=cap,
                                      sq_sig_all=0))

    def poll(self) -> list[dict[str, int]]:
        got, wcs = self.cq.poll(8)
        return [{"wr_id": w.wr_id, "status": w.status, "opcode": w.opcode,
                 "byte_len": w.byte_len, "src_qp": w.src_qp} for w in wcs[:got]]

    def recv(self, qp: QP, wr_id: int, off: int, length: int) -> None:
        qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                            sg=[SGE(self.mr.buf + off, length, self.mr.lkey)]))

    def send_wr(self, wr_id: int, opcode: int, off: int, length: int) -> SendWR:
        return SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, send_flags=e.IBV_SEND_SIGNALED,
                      sg=[SGE(self.mr.buf + off, length, self.mr.lkey)])


def rc_pair(a: Host, b: Host) -> tuple[QP, QP]:
    qa, qb = a.qp(e.IBV_QPT_RC), b.qp(e.IBV_QPT_RC)
    for qp, peer, lid in ((qa, qb, b.lid), (qb, qa, a.lid)):
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
        attr.qp_access_flags = ACCESS
        attr.dest_qp_num = peer.qp_num
        attr.rq_psn = attr.sq_psn = 0
        attr.path_mtu = e.IBV_MTU_1024
        attr.ah_attr = AHAttr(dlid=lid, port_num=1)
        qp.to_rts(attr)
    return qa, qb


def ud_qp(h: Host) -> QP:
    qp = h.qp(e.IBV_QPT_UD)
    attr = QPAttr(port_num=1)
    attr.qkey, attr.pkey_index, attr.sq_psn = QKEY, 0, 0
    qp.to_rts(attr)
    assert qp.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_RTS
    return qp


def ud_counters(fabric: Fabric) -> dict[str, int]:
    c = native_ffi.new("struct sn_counters *")
    assert native_lib.sn_counters_get(fabric.handle, c) == 0
    return {"dropped": c.dropped, "ud_discarded": c.ud_discarded}


def rc_steps(fabric: Fabric, a: Host, b: Host, seen: dict[str, Any]) -> None:
    qa, qb = rc_pair(a, b)
    a.mr.write(b"lock-step", 9, 0)
    w = a.send_wr(1, e.IBV_WR_RDMA_WRITE, 0, 9)
    w.set_wr_rdma(b.mr.rkey, b.mr.buf + 512)
    qa.post_send(w)
    assert fabric.wire(1, "AtoB") == 0 and a.poll() == []  # no verbs call moves the wire
    assert fabric.transmit("A", 1) and fabric.wire(1, "AtoB") == 1
    assert fabric.deliver(1, "AtoB") and b.mr.read(9, 512) == b"lock-step"
    assert fabric.head_kind(1, "BtoA") == "ack" and a.poll() == []
    assert fabric.deliver(1, "BtoA")
    seen["rc_write"] = a.poll()
    # a SEND whose first transmission is dropped: the timer the caller fires sends it again
    b.recv(qb, 20, 1024, 64)
    a.mr.write(b"again", 5, 64)
    qa.post_send(a.send_wr(2, e.IBV_WR_SEND, 64, 5))
    assert fabric.transmit("A", 1) and fabric.drop(1, "AtoB") and b.poll() == []
    assert not fabric.transmit("A", 1)  # sent: waits for its ACK
    assert fabric.timeout("A", 1) and fabric.transmit("A", 1) and fabric.deliver(1, "AtoB")
    assert b.poll() == []  # hardware's order: the completion is written after the ACK left
    assert fabric.write_cqe("B", 1)
    seen["rc_recv"] = b.poll()
    assert b.mr.read(5, 1024) == b"again"
    assert fabric.deliver(1, "BtoA")
    seen["rc_send"] = a.poll()
    seen["rc_b"] = qb


def ud_steps(fabric: Fabric, a: Host, b: Host, seen: dict[str, Any]) -> None:
    ua, ub = ud_qp(a), ud_qp(b)
    ah = AH(a.pd, attr=AHAttr(dlid=b.lid, port_num=1))
    try:  # host A's NIC 2 is not on path 1: no address handle reaches it from sim0
        AH(a.pd, attr=AHAttr(dlid=a.lid + 1, port_num=1))
        seen["other_path_ah"] = "created"
    except PyverbsRDMAError as err:
        seen["other_path_ah"] = err.error_code

    def datagram(wr_id: int, qkey: int = QKEY) -> None:
        w = a.send_wr(wr_id, e.IBV_WR_SEND, 4096, 11)
        w.set_wr_ud(ah, ub.qp_num, qkey)
        ua.post_send(w)

    a.mr.write(b"a datagram!", 11, 4096)
    b.recv(ub, 30, 8192, GRH + 64)
    datagram(3)
    assert fabric.wire(1, "AtoB") == 1 and fabric.head_kind(1, "AtoB") == "ud"  # at post
    seen["ud_send"] = a.poll()  # its completion at once: no ACK comes
    assert not fabric.transmit("A", 1) and b.poll() == []
    assert fabric.deliver(1, "AtoB") and fabric.wire(1, "BtoA") == 0
    seen["ud_recv"] = b.poll()
    assert b.mr.read(11, 8192 + GRH) == b"a datagram!"
    seen["ud_qpns"] = [ua.qp_num, ub.qp_num]
    before = ud_counters(fabric)
    b.recv(ub, 31, 8192, GRH + 64)
    datagram(4)
    assert fabric.drop(1, "AtoB") and b.poll() == []
    datagram(5, qkey=QKEY + 1)  # a Q_Key B's QP does not take: discarded at delivery
    assert fabric.deliver(1, "AtoB") and b.poll() == []
    seen["ud_lost"] = {k: v - before[k] for k, v in ud_counters(fabric).items()}
    seen["ud_sends_lost"] = a.poll()  # both left: their sends completed anyway
    datagram(6)  # the receive WR was kept: this one takes it
    assert fabric.deliver(1, "AtoB")
    seen["ud_recv_after"] = b.poll()


def fatal_steps(fabric: Fabric, provider: Provider, b: Host, seen: dict[str, Any]) -> None:
    assert provider.events() == 0
    assert fabric.nic_fail("B", 1)
    seen["events"] = provider.events()
    event = b.ctx.get_async_event()
    seen["event"] = event.event_type
    event.ack()
    seen["port_b"] = b.ctx.query_port(1).state
    seen["rc_b_state"] = seen.pop("rc_b").query(e.IBV_QP_STATE)[0].qp_state


def main(provider_path: str) -> None:
    fabric = Fabric()  # RC as hardware runs it: device_fatal, ack_before_cqe
    provider = Provider(provider_path, fabric)
    seen: dict[str, Any] = {}
    try:
        Context(name="sim0")
        seen["open_unattached"] = "opened"
    except PyverbsRDMAError as err:
        seen["open_unattached"] = err.error_code
    one_host = native_ffi.new("sn_fabric *")
    assert native_lib.sn_host_create(native_ffi.NULL, 0, one_host) == 0
    seen["attach_refused"] = [provider.attach(one_host[0]),  # one host: not both here
                              provider.attach(native_ffi.NULL)]
    assert native_lib.sn_fabric_destroy(one_host[0]) == 0
    seen["attach"] = provider.attach()
    base = fabric._base_addr
    a, b = Host("sim0", base[0]), Host("sim2", base[1])
    seen["lids"] = [a.lid, b.lid]
    seen["busy"] = [provider.attach(), provider.detach()]
    try:  # a region outside host A's memory
        MR(a.pd, 64, ACCESS, address=base[1])
        seen["foreign_mr"] = "registered"
    except PyverbsRDMAError as err:
        seen["foreign_mr"] = err.error_code
    rc_steps(fabric, a, b, seen)
    ud_steps(fabric, a, b, seen)
    fatal_steps(fabric, provider, b, seen)
    for h in (a, b):
        h.ctx.close()
    seen["detach"] = provider.detach()
    fabric.close()
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
