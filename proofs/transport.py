"""The RC transport of one path (spec/RCTransport.tla), parametric in the number of WRs.

The lemma every other proof leans on: RC executes a *prefix* of the send queue, each WR
once, and the requester's acknowledged prefix lies inside it. Stated over the PSNs of one
QP pair's epoch (a reconnect starts a new one), for any queue length n.

Encoding (an over-approximation of RCTransport.tla, so the lemma holds for the spec):
- the wire is a pair of sets of PSNs in flight (`req`, `ack`); a delivery may keep the
  packet (a duplicate still in flight), so every FIFO/multiset behaviour is included, and
  every reordering too;
- a delivery may discard any packet (Drop, a dead link, receiver-not-ready);
- a timeout either goes back to `una` or moves the requester's QP to the error state at
  any retry count; a fault may stop either end at any time;
- `hi` is the highest PSN ever transmitted (a history variable).
"""

from __future__ import annotations

from dataclasses import dataclass

import z3
from shift.proofs.core import ProofVerdict, Theorem, Weakening, conj, disj, solver

INT = z3.IntSort()
BOOL = z3.BoolSort()


@dataclass(frozen=True)
class Path:
    """One QP pair's variables: RCTransport.tla's per-path state, PSN-indexed."""

    n: z3.ArithRef       # Len(sq): WRs posted on this QP
    nxt: z3.ArithRef
    una: z3.ArithRef
    epsn: z3.ArithRef
    hi: z3.ArithRef       # history: highest PSN transmitted
    rtsA: z3.BoolRef      # qp["A"][p] = "RTS"
    rtsB: z3.BoolRef      # qp["B"][p] = "RTS" /\ nic["B"][p]
    req: z3.ArrayRef      # PSN -> a request with that PSN is in flight
    ack: z3.ArrayRef      # PSN -> an ACK with that PSN is in flight
    execs: z3.ArrayRef    # PSN -> times the responder applied it


def path(tag: str) -> Path:
    return Path(z3.Int(f"n{tag}"), z3.Int(f"nxt{tag}"), z3.Int(f"una{tag}"),
                z3.Int(f"epsn{tag}"), z3.Int(f"hi{tag}"), z3.Bool(f"rtsA{tag}"),
                z3.Bool(f"rtsB{tag}"), z3.Array(f"req{tag}", INT, BOOL),
                z3.Array(f"ack{tag}", INT, BOOL), z3.Array(f"execs{tag}", INT, INT))


def init(s: Path) -> z3.BoolRef:
    """Init of RCTransport for one path: nothing sent, nothing executed."""
    return conj([s.n == 0, s.nxt == 1, s.una == 1, s.epsn == 1, s.hi == 0, s.rtsA, s.rtsB,
                 s.req == z3.K(INT, z3.BoolVal(False)), s.ack == z3.K(INT, z3.BoolVal(False)),
                 s.execs == z3.K(INT, z3.IntVal(0))])


def _same(s: Path, t: Path, *changed: str) -> z3.BoolRef:
    return conj([getattr(s, f) == getattr(t, f) for f in Path.__dataclass_fields__
                 if f not in changed])


def next_(s: Path, t: Path, dedup: bool = True) -> z3.BoolRef:
    """One step of the path: post, transmit, deliver/drop a request or ACK, timeout, fault.
    `dedup`: a duplicate (PSN below the expected one) is re-ACKed and not re-executed;
    without it the responder applies the duplicate again."""
    p = z3.Int("p_step")
    keep = z3.Bool("keep_step")
    req_after = z3.If(keep, s.req, z3.Store(s.req, p, False))
    ack_after = z3.If(keep, s.ack, z3.Store(s.ack, p, False))
    post = z3.And(t.n == s.n + 1, _same(s, t, "n"))
    transmit = z3.And(s.rtsA, s.nxt <= s.n, t.req == z3.Store(s.req, s.nxt, True),
                      t.nxt == s.nxt + 1, t.hi == z3.If(s.nxt > s.hi, s.nxt, s.hi),
                      _same(s, t, "req", "nxt", "hi"))
    execute = z3.And(s.rtsB, p == s.epsn, t.execs == z3.Store(s.execs, p, s.execs[p] + 1),
                     t.epsn == s.epsn + 1, t.ack == z3.Store(ack_after, p, True),
                     t.req == req_after, _same(s, t, "execs", "epsn", "ack", "req"))
    again = s.execs if dedup else z3.Store(s.execs, p, s.execs[p] + 1)
    duplicate = z3.And(s.rtsB, p < s.epsn, t.ack == z3.Store(ack_after, p, True),
                       t.req == req_after, t.execs == again,
                       _same(s, t, "ack", "req", "execs"))
    discard = z3.And(t.req == z3.Store(s.req, p, False), _same(s, t, "req"))
    deliver_req = z3.And(s.req[p], z3.Or(execute, duplicate, discard))
    acknowledge = z3.And(s.ack[p], s.rtsA, p >= s.una, t.una == p + 1, t.ack == ack_after,
                         _same(s, t, "una", "ack"))
    drop_ack = z3.And(s.ack[p], t.ack == z3.Store(s.ack, p, False), _same(s, t, "ack"))
    go_back = z3.And(s.rtsA, s.una < s.nxt, t.nxt == s.una, _same(s, t, "nxt"))
    error = z3.And(s.rtsA, z3.Not(t.rtsA), _same(s, t, "rtsA"))
    fail_b = z3.And(s.rtsB, z3.Not(t.rtsB), _same(s, t, "rtsB"))
    steps = [post, transmit, deliver_req, acknowledge, drop_ack, go_back, error, fail_b]
    return z3.Exists([p, keep], disj(steps))


def invariant(s: Path) -> z3.BoolRef:
    """The prefix invariant: what is executed is exactly [1, epsn), once each."""
    q = z3.Int("q")
    return conj([
        s.una >= 1, s.una <= s.epsn, s.epsn <= s.hi + 1, s.hi <= s.n, s.nxt >= 1,
        s.nxt <= s.hi + 1,
        z3.ForAll([q], s.execs[q] == z3.If(z3.And(q >= 1, q < s.epsn), 1, 0),
                  patterns=[s.execs[q]]),
        z3.ForAll([q], z3.Implies(s.req[q], z3.And(q >= 1, q <= s.hi)), patterns=[s.req[q]]),
        z3.ForAll([q], z3.Implies(s.ack[q], z3.And(q >= 1, q < s.epsn)), patterns=[s.ack[q]]),
    ])


def lemma(s: Path) -> z3.BoolRef:
    """What the rest of the proofs use: a prefix executed once, the acked part within it."""
    q = z3.Int("q")
    return conj([s.una <= s.epsn, s.epsn <= s.n + 1,
                 z3.ForAll([q], s.execs[q] == z3.If(z3.And(q >= 1, q < s.epsn), 1, 0))])


def _short_violation(dedup: bool, depth: int = 4) -> ProofVerdict | None:
    """A trace from Init of at most `depth` steps to a state where the lemma fails (post,
    transmit, execute, deliver the still-in-flight copy is the shortest one, without
    `dedup`), as its witness; None if there is none."""
    states = [path("0")]
    sol = solver()
    sol.add(init(states[0]))
    for k in range(1, depth + 1):
        states.append(path(str(k)))
        sol.add(next_(states[-2], states[-1], dedup))
    sol.add(disj([z3.Not(lemma(st)) for st in states[1:]]))
    if sol.check() != z3.sat:
        return None
    m = sol.model()
    return ProofVerdict("refuted", f"the lemma fails on a trace from Init of <= {depth} steps",
                        [f"step {k}: n={m.eval(st.n)} epsn={m.eval(st.epsn)} "
                         f"execs[1]={m.eval(st.execs[1])}" for k, st in enumerate(states)])


def _check_inductive(dedup: bool = True) -> ProofVerdict:
    """No short counterexample from Init, then the invariant inductive and the lemma."""
    short = _short_violation(dedup)
    if short is not None:
        return short
    s, t = path(""), path("'")
    for name, claim in [("Init => Inv", z3.Implies(init(s), invariant(s))),
                        ("Inv /\\ Next => Inv'",
                         z3.Implies(z3.And(invariant(s), next_(s, t, dedup)), invariant(t))),
                        ("Inv => Lemma", z3.Implies(invariant(s), lemma(s)))]:
        sol = solver()
        sol.add(z3.Not(claim))
        r = sol.check()
        if r == z3.sat:
            return ProofVerdict("refuted", f"{name} fails", [str(sol.model())])
        if r != z3.unsat:
            return ProofVerdict("unknown", f"{name}: {sol.reason_unknown()}")
    return ProofVerdict("proved", "inductive for every queue length n")


THEOREMS = [
    Theorem(
        name="transport.rc_prefix",
        group="transport",
        statement="On one RC path, for any number of WRs, the responder has executed "
                  "exactly the WRs before its expected PSN, each once, and the requester's "
                  "acknowledged prefix lies within them.",
        formula="Init => Inv,  Inv /\\ Next => Inv',  Inv => una <= epsn <= n+1 /\\ "
                "forall q. execs[q] = (1 <= q < epsn ? 1 : 0)",
        check=_check_inductive,
        scope="one path, one QP epoch, every queue length n; the wire as sets of PSNs "
              "(any loss, duplication, reordering), any retry count, faults at any time",
        weakenings=(Weakening("the responder re-executes duplicates",
                              "a request below the expected PSN is applied again instead "
                              "of only re-ACKed",
                              lambda: _check_inductive(dedup=False)),),
    ),
]
