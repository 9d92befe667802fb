"""Run under `shift run`: what the provider cannot express is refused with an errno, and
the device stays usable; prints each attempt's errno (0: it worked) as JSON."""

from __future__ import annotations

import json

from pyverbs import libibverbs_enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR


def errno_of(action) -> int:  # type: ignore[no-untyped-def]
    try:
        action()
    except PyverbsRDMAError as ex:
        return int(ex.error_code)
    return 0


def qp(pd: PD, cq: CQ, qp_type: int = e.IBV_QPT_RC, sge: int = 1) -> QP:
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=sge, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq, cap=cap))


with Context(name="sim0") as ctx:
    pd = PD(ctx)
    cq = CQ(ctx, 8)
    mr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
    rc = qp(pd, cq)
    two = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=2,
                 sg=[SGE(mr.buf, 8, mr.lkey), SGE(mr.buf + 8, 8, mr.lkey)])
    one = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)])
    print(json.dumps({
        "cq_of_no_entries": errno_of(lambda: CQ(ctx, 0)),
        "cq_on_vector_1": errno_of(lambda: CQ(ctx, 8, None, None, 1)),
        "qp_of_nine_sges": errno_of(lambda: qp(pd, cq, sge=9)),  # max_sge is 8
        "uc_qp": errno_of(lambda: qp(pd, cq, e.IBV_QPT_UC)),
        "send_of_two_sges": errno_of(lambda: rc.post_send(two)),  # the QP asked for one
        "send_before_rts": errno_of(lambda: rc.post_send(one)),
        "still_usable": errno_of(lambda: qp(pd, cq)),
    }))
