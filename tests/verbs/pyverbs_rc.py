"""Run under `shift run`: one host's end of an RC connection through pyverbs, in the
order rdma-core's tests use (resources → traffic → validate). Lines on stdin/stdout
carry the exchange the test relays: this end's address (JSON), the peer's, then

- host A (requester): after "go", a WRITE, a SEND, a READ and a FETCH_AND_ADD into B's
  region; prints what its completions and its memory show;
- host B (responder): posts a receive, prints "ready", waits for the SEND's receive
  completion, then for "bye"; prints what its memory shows."""

from __future__ import annotations

import json
import sys

from pyverbs import libibverbs_enums as e
from pyverbs.addr import AHAttr
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
          | e.IBV_ACCESS_REMOTE_ATOMIC)
WRITTEN, SENT, READ_BACK = b"written by A", b"sent by A", b"B's own bytes"
COUNTER = 2048  # B's 8-byte counter for the FETCH_AND_ADD


def say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def hear() -> str:
    return sys.stdin.readline().strip()


def resources(device: str) -> tuple[Context, PD, CQ, MR, QP]:
    ctx = Context(name=device)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    mr = MR(pd, 4096, ACCESS)
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    return ctx, pd, cq, mr, qp


def connect(ctx: Context, qp: QP, peer: dict[str, int]) -> None:
    attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
    attr.qp_access_flags = ACCESS
    attr.dest_qp_num = peer["qpn"]
    attr.rq_psn = attr.sq_psn = 0
    attr.path_mtu = e.IBV_MTU_1024
    attr.ah_attr = AHAttr(dlid=peer["lid"], port_num=1)
    qp.to_rts(attr)


def completions(cq: CQ, n: int) -> list[dict[str, int]]:
    seen: list[dict[str, int]] = []
    while len(seen) < n:
        got, wcs = cq.poll(n - len(seen))
        seen += [{"wr_id": w.wr_id, "status": w.status, "opcode": w.opcode,
                  "byte_len": w.byte_len} for w in wcs[:got]]
    return seen


def post(qp: QP, mr: MR, wr_id: int, opcode: int, off: int, length: int) -> SendWR:
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                sg=[SGE(mr.buf + off, length, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    return wr


def requester(qp: QP, cq: CQ, mr: MR, peer: dict[str, int]) -> None:
    mr.write(WRITTEN, len(WRITTEN), 0)
    mr.write(SENT, len(SENT), 512)
    w = post(qp, mr, 1, e.IBV_WR_RDMA_WRITE, 0, len(WRITTEN))
    w.set_wr_rdma(peer["rkey"], peer["addr"])
    qp.post_send(w)
    qp.post_send(post(qp, mr, 2, e.IBV_WR_SEND, 512, len(SENT)))
    r = post(qp, mr, 3, e.IBV_WR_RDMA_READ, 1024, len(READ_BACK))
    r.set_wr_rdma(peer["rkey"], peer["addr"] + 1024)
    qp.post_send(r)
    a = post(qp, mr, 4, e.IBV_WR_ATOMIC_FETCH_AND_ADD, COUNTER, 8)
    a.set_wr_atomic(peer["rkey"], peer["addr"] + COUNTER, 2, 0)
    qp.post_send(a)
    wcs = completions(cq, 4)
    say({"completions": wcs, "read": mr.read(len(READ_BACK), 1024).decode(),
         "fetched": int.from_bytes(mr.read(8, COUNTER), "little")})


def responder(qp: QP, cq: CQ, mr: MR) -> None:
    mr.write(READ_BACK, len(READ_BACK), 1024)
    mr.write((40).to_bytes(8, "little"), 8, COUNTER)
    qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(mr.buf + 512, 64, mr.lkey)]))
    say("ready")
    wcs = completions(cq, 1)
    assert hear() == "bye"
    say({"completions": wcs, "written": mr.read(len(WRITTEN), 0).decode(),
         "received": mr.read(len(SENT), 512).decode(),
         "counter": int.from_bytes(mr.read(8, COUNTER), "little")})


def main(host: str, device: str) -> None:
    ctx, pd, cq, mr, qp = resources(device)
    say({"qpn": qp.qp_num, "lid": ctx.query_port(1).lid, "addr": mr.buf, "rkey": mr.rkey})
    peer = json.loads(hear())
    connect(ctx, qp, peer)
    if host == "A":
        assert hear() == "go"
        requester(qp, cq, mr, peer)
    else:
        responder(qp, cq, mr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
