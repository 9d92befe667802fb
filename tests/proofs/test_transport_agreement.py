"""The transport encoding of `shift.proofs.transport` against the model's wire (issue 21,
item 2): every step of the executable model, seen on one path and one direction, is at
most a few steps of `transport.next_` — the relation `transport.rc_prefix` is proved on.

The encoding is an over-approximation (wire as sets, a fault at any time), so one model
step may take several of its steps: a NIC failure that empties the wire is the error
step and one drop per packet; an execution whose ACK a dead link loses is the execution
and the ACK's drop. What is read off a model state, for requester h, responder r and
path p: the send queue's length, nxt and una, the responder's expected PSN, the
QPs' states (r's NIC included), the requests and ACKs in flight by PSN. Two fields are
history the encoding keeps and the test carries along the run: the highest PSN
transmitted, and how often r's responder applied each PSN of this path (read from the
model's executions per WR at the step that delivers the request). The runs: seeded
random walks of SHIFT, ShiftPrefix and NaiveReplay at `small` and `default` (a Timeout
resends), without recovery (a reconnect starts a new PSN epoch, which the lemma is not
about), every workload, each direction of the two-way ones, both paths. Staging's
responder is left out: it drops a duplicate by sequence number, above the transport.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import z3
from proofkit import before_fail_back, random_walks
from shift.model import transport as model_transport
from shift.model.next import Model
from shift.model.state import Ack, Req, State, set_in
from shift.proofs import transport as enc
from shift.vocabulary import DIRECTIONS, HOSTS, Event, make

PATHS = (1, 2)
MAX_STEPS = 6  # encoding steps one model step may take (an error and its drops)


@dataclass
class History:
    """The encoding's history fields for one path and direction, carried along a run."""

    hi: int = 0
    execs: Counter[int] = field(default_factory=Counter)


def in_flight(s: State, p: int, h: int, kind: type) -> set[int]:
    """The PSNs of the packets of a kind that host h sent on path p, in flight."""
    return {m.psn for m in s.wire[p - 1][h] if isinstance(m, kind)}


def view(s: State, h: int, p: int, hist: History) -> dict[str, Any]:
    """The encoding's Path fields of state s: requester h, path p."""
    r, i = 1 - h, p - 1
    return {"n": len(s.sq[h][i]), "nxt": s.nxt[h][i], "una": s.una[h][i],
            "epsn": s.epsn[r][i], "hi": hist.hi,
            "rtsA": s.qp[h][i] == "RTS", "rtsB": s.qp[r][i] == "RTS" and s.nic[r][i],
            "req": in_flight(s, p, h, Req), "ack": in_flight(s, p, r, Ack),
            "execs": dict(hist.execs)}


def advance(hist: History, before: State, after: State, ev: Event, h: int,
            p: int) -> History:
    """The history after the step: a transmission raises hi; the request the step
    delivers counts the executions it caused."""
    i = p - 1
    out = History(hist.hi, Counter(hist.execs))
    if ev.name == "Transmit" and ev.args == (HOSTS[h], p) and after.nxt[h][i] > before.nxt[h][i]:
        out.hi = max(out.hi, before.nxt[h][i])
    if ev.name == "Deliver" and ev.args == (p, DIRECTIONS[h]):
        head = before.wire[i][h][0]
        if isinstance(head, Req):
            out.execs[head.psn] += after.execs[h][head.wr - 1] - before.execs[h][head.wr - 1]
    return out


def as_path(fields: dict[str, Any], tag: str) -> tuple[enc.Path, list[z3.BoolRef]]:
    """A fresh encoding state and the constraints that pin it to the fields."""
    s = enc.path(tag)
    req = ack = z3.K(enc.INT, z3.BoolVal(False))
    for q in fields["req"]:
        req = z3.Store(req, q, True)
    for q in fields["ack"]:
        ack = z3.Store(ack, q, True)
    execs = z3.K(enc.INT, z3.IntVal(0))
    for q, k in fields["execs"].items():
        execs = z3.Store(execs, q, k)
    pins = [s.n == fields["n"], s.nxt == fields["nxt"], s.una == fields["una"],
            s.epsn == fields["epsn"], s.hi == fields["hi"], s.rtsA == fields["rtsA"],
            s.rtsB == fields["rtsB"], s.req == req, s.ack == ack, s.execs == execs]
    return s, pins


def encoding_steps(before: dict[str, Any], after: dict[str, Any]) -> int | None:
    """The fewest steps of transport.next_ from one view to the other (0: equal), or None
    if MAX_STEPS are not enough."""
    if before == after:
        return 0
    s, pins = as_path(before, "s")
    t, pins_t = as_path(after, "t")
    for k in range(1, MAX_STEPS + 1):
        chain = [s] + [enc.path(f"m{k}_{j}") for j in range(1, k)] + [t]
        solver = z3.Solver()
        solver.add(*pins, *pins_t)
        solver.add(*[enc.next_(a, b) for a, b in zip(chain, chain[1:], strict=False)])
        if solver.check() == z3.sat:
            return k
    return None


# A duplicate reaches the responder: a WRITE executed, its ACK lost, the timer resends it
# (`default`: one retransmission). Random walks seldom meet one; this run is added to
# theirs.
DUPLICATE_RUN = [make("Init", 1), make("PostSend", "A", 1), make("Transmit", "A", 1),
                 make("Deliver", 1, "AtoB"), make("Drop", 1, "BtoA"),
                 make("Timeout", "A", 1), make("Transmit", "A", 1),
                 make("Deliver", 1, "AtoB")]


def label(ev: Event, before: State, h: int, p: int) -> str:
    """The step's name for the counts: a delivered request says what the responder did."""
    if ev.name != "Deliver" or ev.args != (p, DIRECTIONS[h]):
        return ev.name
    head = before.wire[p - 1][h][0]
    if not isinstance(head, Req):
        return "Deliver"
    e = before.epsn[1 - h][p - 1]
    return ("Deliver a duplicate" if head.psn < e else
            "Deliver the expected request" if head.psn == e else "Deliver a request ahead")


def follow(m: Model, events: list[Event], kinds: Counter[str]) -> str | None:
    """Every step of the run on every path and direction; the first that the encoding
    cannot take, or None. `kinds` counts the steps that change the path's view, by
    kind."""
    states = m.run(events)
    senders = [h for h in (0, 1) if states[0].program[h]]
    for h in senders:
        for p in PATHS:
            hist = History()
            for k, (ev, before, after) in enumerate(
                    zip(events[1:], states[:-1], states[1:], strict=True), 1):
                new = advance(hist, before, after, ev, h, p)
                steps = encoding_steps(view(before, h, p, hist), view(after, h, p, new))
                if steps is None:
                    return (f"{HOSTS[h]}'s requests on path {p}, step {k}, {ev}: no "
                            f"{MAX_STEPS} steps of transport.next_ go from "
                            f"{view(before, h, p, hist)} to {view(after, h, p, new)}")
                if steps:
                    kinds[label(ev, before, h, p)] += 1
                hist = new
    return None


@pytest.mark.parametrize("design", ["Shift", "ShiftPrefix", "NaiveReplay"])
@pytest.mark.parametrize("bound", ["small", "default"])
def test_every_model_step_is_at_most_a_few_steps_of_the_transport_encoding(
        design: str, bound: str) -> None:
    """30 walks of up to 40 steps per design and bound: the model's posts, transmissions,
    executions, duplicates, ACKs, drops, timeouts (resends at `default`), NIC failures and
    the layer's QP moves (Progress) are each a short run of the encoding."""
    m = Model.load(design, bound)
    kinds: Counter[str] = Counter()
    extra = [DUPLICATE_RUN] if bound == "default" else []
    walks = random_walks(m, 30, 40, f"transport/{design}/{bound}",
                         before_fail_back)
    for events in [events for events, _ in walks] + extra:
        mismatch = follow(m, events, kinds)
        assert mismatch is None, f"{design} {bound}: {' '.join(map(str, events))}\n{mismatch}"
    print(f"{design} {bound}: {sorted(kinds.items())}")
    for kind in ("PostSend", "Transmit", "Deliver the expected request", "Deliver", "Drop",
                 "Timeout", "NicFail", "Progress"):
        assert kinds[kind] >= 3, (kind, kinds)
    if bound == "default":
        assert kinds["Deliver a duplicate"] >= 1, kinds


def test_a_responder_that_applies_a_duplicate_again_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Check the check: a model whose responder executes a duplicate request again (the
    weakening `transport.rc_prefix` refutes) is no run of the encoding."""
    original = model_transport._respond

    def reexecute(s: State, g: int, i: int, m: Req, d: Any, b: Any, rest: Any) -> State:
        out = original(s, g, i, m, d, b, rest)
        if m.psn < s.epsn[g][i] and s.nic[g][i] and s.qp[g][i] == "RTS":
            src = 1 - g
            return out._replace(execs=set_in(out.execs, src, m.wr - 1,
                                             out.execs[src][m.wr - 1] + 1))
        return out

    m = Model.load("Shift", "default")
    assert follow(m, DUPLICATE_RUN, Counter()) is None
    monkeypatch.setattr(model_transport, "_respond", reexecute)
    mismatch = follow(m, DUPLICATE_RUN, Counter())
    assert mismatch is not None and "step 7, Deliver" in mismatch, mismatch
