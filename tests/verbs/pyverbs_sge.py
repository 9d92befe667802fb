"""Run under `shift run`: one host's end of an RC connection whose WRs have several
SGEs (the provider gathers and scatters them, verbs/provider/sge.c), messages above
4 KiB, and on B a CQ with a completion channel. Lines on stdin/stdout carry the
exchange the test relays: this end's address (JSON), the peer's, then

- host B: posts three receives of 4, 2 and 2 SGEs, arms its CQ, prints "ready"; waits
  for the receive completions through its channel; SENDs a reply of 4 SGEs to A; prints
  its memory, completions and the events it had;
- host A: has posted a receive of 2 SGEs; after "go" a SEND of 3 SGEs, a WRITE of 2, a
  SEND of 10,000 bytes in 3, an unsignaled READ into 3 then a signaled one into 2, an
  inline SEND of 2; then B's reply; then what the provider refuses (more SGEs than the
  QP's, than the device's, a message above the largest) and a bad key among several
  SGEs; prints all of it.

Every byte of data is distinct (a pattern per piece), so a piece in the wrong place, or
a byte written past a piece's end (the guard bytes, 0xee, stay), shows."""

from __future__ import annotations

import json
import sys

from pyverbs import libibverbs_enums as e
from pyverbs.addr import AHAttr
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
BIG, SMALL = 65536, 4096  # region sizes
GUARD = 0xEE
SGES = 4  # each QP's max_send_sge and max_recv_sge


def pattern(seed: int, n: int) -> bytes:
    return bytes((seed * 31 + i * 7) % 251 for i in range(n))


def say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def hear() -> str:
    return sys.stdin.readline().strip()


def guarded(mr: MR, size: int) -> None:
    mr.write(bytes([GUARD]) * size, size, 0)


def cap(sges: int = SGES) -> QPCap:
    return QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=sges, max_recv_sge=sges)


def connect(ctx: Context, qp: QP, peer: dict[str, int]) -> None:
    attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
    attr.qp_access_flags = ACCESS
    attr.dest_qp_num = peer["qpn"]
    attr.rq_psn = attr.sq_psn = 0
    attr.path_mtu = e.IBV_MTU_4096
    attr.ah_attr = AHAttr(dlid=peer["lid"], port_num=1)
    qp.to_rts(attr)


def wc_dicts(wcs: list) -> list[dict[str, int]]:
    return [{"wr_id": w.wr_id, "status": w.status, "opcode": w.opcode,
             "byte_len": w.byte_len} for w in wcs]


def completions(cq: CQ, n: int) -> list[dict[str, int]]:
    seen: list[dict[str, int]] = []
    while len(seen) < n:
        got, wcs = cq.poll(n - len(seen))
        seen += wc_dicts(wcs[:got])
    return seen


def sges(pieces: list[tuple[MR, int, int]]) -> list[SGE]:
    return [SGE(mr.buf + off, n, mr.lkey) for mr, off, n in pieces]


def send(wr_id: int, opcode: int, pieces: list[tuple[MR, int, int]],
         flags: int = e.IBV_SEND_SIGNALED) -> SendWR:
    return SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(pieces), sg=sges(pieces),
                  send_flags=flags)


def fill(pieces: list[tuple[MR, int, int]], seed: int) -> bytes:
    """Each piece its own bytes; the message they make, in order."""
    out = b""
    for k, (mr, off, n) in enumerate(pieces):
        data = pattern(seed + k, n)
        mr.write(data, n, off)
        out += data
    return out


def refused(fn) -> str:
    try:
        fn()
    except (PyverbsRDMAError, PyverbsError) as ex:
        return f"refused: {ex}"
    return "accepted"


def host_a(ctx: Context, pd: PD, cq: CQ, rcq: CQ, qp: QP, a1: MR, peer: dict[str, int]) -> None:
    a2 = MR(pd, SMALL, ACCESS)
    guarded(a2, SMALL)
    reply_into = [(a1, 60000, 10), (a1, 61000, 100)]
    qp.post_recv(RecvWR(wr_id=50, num_sge=2, sg=sges(reply_into)))
    say("posted")
    assert hear() == "go"
    out: dict[str, object] = {}
    s1 = [(a1, 0, 10), (a2, 0, 20), (a1, 50, 30)]
    out["s1"] = fill(s1, 1).hex()
    qp.post_send(send(1, e.IBV_WR_SEND, s1))
    w1 = [(a1, 100, 16), (a2, 100, 32)]
    out["w1"] = fill(w1, 4).hex()
    w = send(2, e.IBV_WR_RDMA_WRITE, w1)
    w.set_wr_rdma(peer["rkey"], peer["addr"] + 1000)
    qp.post_send(w)
    s2 = [(a1, 4096, 4000), (a1, 12000, 3000), (a1, 30000, 3000)]  # 10,000 bytes
    out["s2"] = fill(s2, 6).hex()
    qp.post_send(send(3, e.IBV_WR_SEND, s2))
    rd1 = [(a1, 40000, 10), (a2, 2000, 20), (a1, 41000, 70)]
    r = send(4, e.IBV_WR_RDMA_READ, rd1, flags=0)  # unsignaled: scattered all the same
    r.set_wr_rdma(peer["rkey"], peer["addr"] + 50000)
    qp.post_send(r)
    rd2 = [(a1, 42000, 50), (a1, 43000, 50)]
    r = send(5, e.IBV_WR_RDMA_READ, rd2)
    r.set_wr_rdma(peer["rkey"], peer["addr"] + 51000)
    qp.post_send(r)
    s3 = [(a1, 200, 12), (a2, 300, 12)]
    out["s3"] = fill(s3, 9).hex()
    qp.post_send(send(6, e.IBV_WR_SEND, s3, e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE))
    a1.write(bytes([GUARD]) * 12, 12, 200)  # inline: the data was taken at the post
    out["sent"] = completions(cq, 5)
    out["rd1"] = b"".join(m.read(n, off) for m, off, n in rd1).hex()
    out["rd2"] = b"".join(m.read(n, off) for m, off, n in rd2).hex()
    out["reply"] = completions(rcq, 1)
    out["reply_pieces"] = [m.read(n, off).hex() for m, off, n in reply_into]
    out["reply_guard"] = a1.read(1, 60010).hex() + a1.read(1, 61100).hex()

    # what the provider refuses, at the post
    five = [(a1, 100 * k, 10) for k in range(SGES + 1)]
    out["send_five"] = refused(lambda: qp.post_send(send(7, e.IBV_WR_SEND, five)))
    out["recv_five"] = refused(
        lambda: qp.post_recv(RecvWR(wr_id=8, num_sge=len(five), sg=sges(five))))
    out["max_sge"] = ctx.query_device().max_sge
    out["qp_past_max_sge"] = refused(lambda: QP(pd, QPInitAttr(
        qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap(out["max_sge"] + 1))))
    out["max_msg_sz"] = ctx.query_port(1).max_msg_sz
    too_long = [(a1, 0, 40000), (a1, 0, BIG - 40000 + 1)]  # one byte past the largest
    out["too_long"] = refused(lambda: qp.post_send(send(9, e.IBV_WR_SEND, too_long)))
    # among several SGEs, a key of the other NIC (sim1's region, of this very process):
    # the WR fails as one SGE of that key does
    other = Context(name="sim1")
    elsewhere = MR(PD(other), SMALL, ACCESS)
    bad = SendWR(wr_id=10, opcode=e.IBV_WR_SEND, num_sge=2,
                 sg=[SGE(a1.buf, 8, a1.lkey), SGE(elsewhere.buf, 8, elsewhere.lkey)],
                 send_flags=e.IBV_SEND_SIGNALED)
    qp.post_send(bad)
    out["bad_key"] = completions(cq, 1)
    say(out)


def host_b(cq: CQ, channel: CompChannel, qp: QP, b1: MR) -> None:
    b1.write(pattern(20, 100), 100, 50000)  # what A's READs bring back
    b1.write(pattern(21, 100), 100, 51000)
    r1 = [(b1, 0, 5), (b1, 100, 7), (b1, 200, 100), (b1, 400, 100)]  # 60 bytes land in 3
    r2 = [(b1, 8192, 6000), (b1, 20000, 6000)]                      # 10,000 in 2
    r3 = [(b1, 3000, 10), (b1, 3100, 100)]
    for wr_id, pieces in ((11, r1), (12, r2), (13, r3)):
        qp.post_recv(RecvWR(wr_id=wr_id, num_sge=len(pieces), sg=sges(pieces)))
    cq.req_notify()
    say("ready")
    received: list[dict[str, int]] = []
    events = 0
    while len(received) < 3:  # only through the channel: wait, acknowledge, re-arm, poll
        channel.get_cq_event(cq)
        events += 1
        cq.ack_events(1)
        cq.req_notify()
        got, wcs = cq.poll(3 - len(received))
        received += wc_dicts(wcs[:got])
    reply = [(b1, 40000, 5), (b1, 40100, 15), (b1, 40200, 10), (b1, 40300, 20)]
    sent = fill(reply, 30)
    qp.post_send(send(14, e.IBV_WR_SEND, reply))
    done: list[dict[str, int]] = []
    while not done:
        channel.get_cq_event(cq)
        events += 1
        cq.ack_events(1)
        cq.req_notify()
        got, wcs = cq.poll(1)
        done += wc_dicts(wcs[:got])
    assert hear() == "bye"
    say({"received": received, "sent": done, "events": events, "reply": sent.hex(),
         "r1": [b1.read(n, off).hex() for _, off, n in r1],
         "r1_guard": [b1.read(1, off + n).hex() for _, off, n in r1],
         "r2": b"".join(b1.read(n, off) for _, off, n in r2).hex(),
         "r3": [b1.read(n, off).hex() for _, off, n in r3],
         "w1": b1.read(48, 1000).hex(), "w1_guard": b1.read(1, 1048).hex()})


def main(host: str, device: str) -> None:
    ctx = Context(name=device)
    pd = PD(ctx)
    channel = CompChannel(ctx) if host == "B" else None
    cq = CQ(ctx, 32, None, channel)
    rcq = CQ(ctx, 32) if host == "A" else cq  # A: its sends and its receive apart
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=rcq, cap=cap(), sq_sig_all=0))
    region = MR(pd, BIG, ACCESS)
    guarded(region, BIG)
    say({"qpn": qp.qp_num, "lid": ctx.query_port(1).lid, "addr": region.buf,
         "rkey": region.rkey})
    peer = json.loads(hear())
    connect(ctx, qp, peer)
    if host == "A":
        host_a(ctx, pd, cq, rcq, qp, region, peer)
    else:
        host_b(cq, channel, qp, region)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
