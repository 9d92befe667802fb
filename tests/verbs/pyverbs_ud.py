"""Run under `shift run`: one host's UD QP through pyverbs (socket mode: the hosts are two
processes). Lines on stdin/stdout carry what the test relays: this end's address (JSON),
the peer's, then

- host A (sender): for each "WORD QKEY", a datagram of WORD to the peer's UD QP with that
  Q_Key through an address handle of the peer's LID; prints its send completion;
- host B (receiver): posts four receive WRs, prints "ready"; for each "next", waits for a
  receive completion and prints it with the bytes after the buffer's 40 (the GRH's room).

"bye" ends either."""

from __future__ import annotations

import json
import sys

from pyverbs import libibverbs_enums as e
from pyverbs.addr import AH, AHAttr
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

QKEY, GRH, SLOT = 0x1234, 40, 256


def say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def hear() -> str:
    return sys.stdin.readline().strip()


def one_completion(cq: CQ) -> dict[str, int]:
    while True:
        got, wcs = cq.poll(1)
        if got:
            w = wcs[0]
            return {"wr_id": w.wr_id, "status": w.status, "opcode": w.opcode,
                    "byte_len": w.byte_len, "src_qp": w.src_qp}


def ud_qp(pd: PD, cq: CQ) -> QP:
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap))
    attr = QPAttr(port_num=1)
    attr.qkey, attr.pkey_index, attr.sq_psn = QKEY, 0, 0
    qp.to_rts(attr)
    return qp


def sender(pd: PD, cq: CQ, mr: MR, qp: QP, peer: dict[str, int]) -> None:
    ah = AH(pd, attr=AHAttr(dlid=peer["lid"], port_num=1))
    for command in iter(hear, "bye"):
        word, qkey = command.split()
        mr.write(word.encode(), len(word), 0)
        wr = SendWR(wr_id=len(word), opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf, len(word), mr.lkey)])
        wr.set_wr_ud(ah, peer["qpn"], int(qkey))
        qp.post_send(wr)
        say(one_completion(cq))


def receiver(cq: CQ, mr: MR, qp: QP) -> None:
    for i in range(4):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * SLOT, SLOT, mr.lkey)]))
    say("ready")
    for _ in iter(hear, "bye"):
        wc = one_completion(cq)
        data = mr.read(wc["byte_len"] - GRH, wc["wr_id"] * SLOT + GRH).decode()
        say({**wc, "data": data})


def main(host: str, device: str) -> None:
    ctx = Context(name=device)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    mr = MR(pd, 4 * SLOT, e.IBV_ACCESS_LOCAL_WRITE)
    qp = ud_qp(pd, cq)
    say({"qpn": qp.qp_num, "lid": ctx.query_port(1).lid})
    peer = json.loads(hear())
    if host == "A":
        sender(pd, cq, mr, qp, peer)
    else:
        receiver(cq, mr, qp)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
