"""The mapping: a model event as a call of the C implementation (docs/differential.md).

- WR w of host h's program (Workloads.tla's ProgramOf(k, h): A's, and B's in the two-way
  workloads) is `Wr(id=w, op, region, value, signaled)` posted by h (the spec's SEND as
  SEND_IMM); notifications carry their WR id as immediate data, so the receiver's
  completion names the sender's WR as `rcvSeen` does; inline payloads, so a replay
  carries the value posted (the model's WRs are values);
- region r is the r-th 8-byte slot of each host's registered memory (the model's
  `mem[h]`: the peer's WRITEs land there, its application reads it); receive WR r has its
  own buffer at its host (`bufs[h][r]`: a SEND's payload lands there), a READ/atomic WR w
  its own landing slot at its poster;
- a WR with a bad key (Workloads.tla's BadKey, an application error) is posted as a raw
  verbs WR reading its payload from its poster's region slot (not inline: the NIC checks
  the lkey only when it reads a buffer), with the lkey 0xBAD ("LKEY") or the rkey 0xBAD0
  ("RKEY") in place of the registered one;
- `PostRecv(h, r)` posts h's receive WR id r; a receive completion names it (`recv`);
- the fabric runs with the bound's `MaxRetries`, the connection with `probe="instant"`
  (the spec's reconnect is its probe), `ctl_retries=255`, and without fail-back at a bound
  without recovery (the spec's Reconnect needs `Recover`); every other event is the
  implementation's event of the same name and arguments (`HandshakeTimeout(h)` is
  `shift_timer` on the backup path, `CompletionTimeout(h)` on the default path).

`ctl_retries` is the C core's budget of handshake retransmissions, after which it gives
up (the endpoint dies with the error to the application): the spec's HandshakeTimeout has
no budget (the wire's losses are bounded instead), so the bridge opens connections with the
largest one, 255, which no trace of a bound reaches; giving up stays outside the
comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shift.impl import Connection, DesignCode, Fabric, RawSendWr, Wr
from shift.impl._native import ffi, lib
from shift.impl.errors import check_errno
from shift.impl.verbs import OP_CODES, Op
from shift.model.config import Constants
from shift.model.state import REGIONS
from shift.vocabulary import Event

# The designs both sides implement: the C core's (enum shift_design), under their names in
# spec/designs.toml; the model has every design.
DESIGNS = tuple(d.value for d in DesignCode)
# The C side's backends: the simulator's table, or libibverbs over the simulated provider.
SIDES = ("core", "verbs")


SLOT = 8  # bytes per region
BAD_LKEY, BAD_RKEY = 0xBAD, 0xBAD0  # keys no memory region of the fabric has


def wr_of(program: Sequence[Any], w: int) -> Wr:
    """Program WR w (1-based) as the implementation's work request (its poster's). The
    spec's SEND names its WR to the receiver: the library's SEND_IMM (verbs'
    SEND_WITH_IMM), whose immediate data carries the id."""
    x = program[w - 1]
    op = "SEND_IMM" if x.op == "SEND" else x.op
    return Wr(id=w, op=op, region=x.region, value=x.value, signaled=x.signaled)


def bad_wr_of(conn: Connection, host: str, program: Sequence[Any], w: int) -> RawSendWr:
    """Program WR w with a bad key (an application error), as host posts it: a raw WR
    whose lkey or rkey names no memory region."""
    x = program[w - 1]
    h = "AB".index(host)
    local, remote = conn._mr[h], conn._mr[1 - h]
    off = (x.region - 1) * SLOT if x.region else 0
    op = Op(x.op)
    two_sided = op in (Op.WRITE_IMM, Op.SEND)
    return RawSendWr(
        wr_id=w, opcode=OP_CODES[op], send_flags=lib.SHIFT_SEND_SIGNALED if x.signaled else 0,
        addr=local.addr + off, length=SLOT,
        lkey=BAD_LKEY if x.key == "LKEY" else local.lkey,
        remote_addr=remote.addr + off, rkey=BAD_RKEY if x.key == "RKEY" else remote.rkey,
        imm_data=w if two_sided else 0, num_sge=1)


class Bridge:
    """The implementation side of a trace: a fabric and a connection for one design."""

    def __init__(self, design: str, bound: Constants, program: Sequence[Any],
                 peer_program: Sequence[Any] = (), copy_posts: bool = False,
                 fail_back: bool | None = None, side: str = "core"):
        """The fabric takes the bound's transport (MaxRetries, AckBeforeCqe, RnrNak,
        RnrRetry, DeviceFatal); the connection fails back where the bound recovers, unless
        fail_back says otherwise. side: the layer's backend - "core" (the simulator's
        table) or "verbs" (libibverbs over the simulated provider in lock-step, which the
        process's environment must be: `shift.verbs.lockstep`)."""
        if side not in SIDES:
            raise ValueError(f"unknown side {side!r} (expected one of {', '.join(SIDES)})")
        self.side = side
        self.program = tuple(program)  # A's
        self.programs = (self.program, tuple(peer_program))  # per host: A's, B's
        self.fabric = Fabric(retries=bound.max_retries, ack_before_cqe=bound.ack_before_cqe,
                             rnr_nak=bound.rnr_nak, rnr_retry=bound.rnr_retry,
                             device_fatal=bound.device_fatal)
        kw = dict(regions=len(REGIONS), max_wr=16, probe="instant", ctl_retries=255,
                  copy_posts=copy_posts, record=True,
                  fail_back=bound.recover if fail_back is None else fail_back)
        if side == "verbs":
            from shift.verbs.layer import VerbsConnection

            self.conn: Connection = VerbsConnection(self.fabric, DesignCode(design), **kw)
        else:
            self.conn = self.fabric.connect(design, **kw)  # type: ignore[arg-type]

    def close(self) -> None:
        self.fabric.close()

    def apply(self, ev: Event) -> object:
        """Apply one model event (not Init) to the implementation; what the call returned."""
        if ev.name == "PostSend":
            h = ev.args[0]
            program = self.programs[0 if h == "A" else 1]
            if program[ev.args[1] - 1].key != "OK":
                return self.conn.post_send(h, bad_wr_of(self.conn, h, program, ev.args[1]))
            return self.conn.post_send(h, wr_of(program, ev.args[1]))
        return self.conn.apply(ev)

    def observation(self) -> dict[str, Any]:
        """The implementation's observable projection, in the dict form (`as_dict`)."""
        return self.conn.observe().as_dict()

    def memory(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Each host's regions (A's, B's), as its application would read them now."""
        return (tuple(self.conn.memory("A")), tuple(self.conn.memory("B")))

    def qp_ready(self, host: str, path: int) -> bool:
        """Is host's QP of path ready to send (RTS), as simnic has it?"""
        if self.side == "verbs":
            return self.conn.qp_state(host, path) == lib.SHIFT_QPS_RTS  # type: ignore[attr-defined]
        qp = ffi.new("sn_qp *")
        check_errno(lib.shift_sim_qp(self.conn.handle, "AB".index(host), path, qp),
                    "shift_sim_qp")
        attr = ffi.new("struct sn_qp_attr *")
        check_errno(lib.sn_query_qp(qp[0], attr), "sn_query_qp")
        return bool(attr.qp_state == lib.SHIFT_QPS_RTS)

    def wire_len(self, path: int, direction: str) -> int:
        return self.fabric.wire(path, direction)

    def acts(self, ev: Event) -> bool:
        """Apply ev and say whether the implementation did anything: for an event the
        model does not enable, it must not (PollCq: no completion and no failover state
        change; Progress: no step; Transmit: no packet)."""
        c = self.conn
        if ev.name == "PollCq":
            h = ev.args[0]
            before = c.host_state(h)
            return c.poll_step(h)[0] or c.host_state(h) != before
        if ev.name == "Progress":
            return c.progress(ev.args[0]) != "none"
        if ev.name == "Transmit":
            return c.transmit(*ev.args)
        raise ValueError(f"no enabledness probe for {ev.name}")
