"""Lemma 1 in its universal form: a WR lost before the responder and a WR executed whose
ACK was lost look the same to the requester's software, for every program and every
operation — and, with B's receive counter in the view (SHIFT's handshake), exactly when
what separates the two worlds is one-sided.

Stated in the setting of `decisions`: failure worlds (U, E) from `transport.rc_prefix`, A's
view is its program and its completions (the last signaled WR acknowledged), B's is its
count of completed receives. For two worlds with the same acknowledged prefix U and
executed prefixes E < E', the claim is checked for every program of 1..3 WRs (every op,
every signaled flag): A's views are equal, and the views with B's counter are equal if and
only if WRs E+1..E' are all one-sided.
"""

from __future__ import annotations

import z3
from shift.proofs import decisions as d
from shift.proofs.core import ProofVerdict, Theorem, Weakening, conj, valid

BOUND = 3
PLAIN = d.View(counter=False)  # nothing beyond the two hosts' software


def _same(a: list[z3.ExprRef], b: list[z3.ExprRef]) -> z3.BoolRef:
    return conj([x == y for x, y in zip(a, b, strict=True)])


def _pairs(n: int) -> list[tuple[d.World, d.World]]:
    return [(d.World(u, e), d.World(u, e2)) for u in range(n) for e in range(u, n + 1)
            for e2 in range(e + 1, n + 1)]


def _claim(p: d.ProgramShape, w1: d.World, w2: d.World, extra: d.View) -> z3.BoolRef:
    """A's views equal; with B's counter, equal iff E+1..E' are one-sided. `extra` adds
    what a weakened view sees on top (the expected PSN)."""
    a_only = d.View(counter=False, epsn=extra.epsn)
    both = d.View(counter=True, epsn=extra.epsn)
    one_sided = conj([d.one_sided(p.ops[w]) for w in range(w1.e + 1, w2.e + 1)])
    return z3.And(_same(d.view_args(p, w1, a_only), d.view_args(p, w2, a_only)),
                  _same(d.view_args(p, w1, both), d.view_args(p, w2, both)) == one_sided)


def _equal_views(extra: d.View = PLAIN) -> ProofVerdict:
    for n in range(1, BOUND + 1):
        p = d.program(n)
        v = valid(conj([_claim(p, a, b, extra) for a, b in _pairs(n)]),
                  assumptions=[p.wellformed()])
        if v.status != "proved":
            v.detail = f"{n} WRs: {v.detail}"
            return v
    return ProofVerdict("proved", f"every program of 1..{BOUND} WRs, every pair of worlds "
                        "with the same acknowledged prefix")


THEOREMS = [
    Theorem(
        name="lemma1.equal_sender_views",
        group="impossibility",
        statement="For every program of up to three WRs and every operation, two failure "
                  "worlds with the same acknowledged prefix give A's software the same view "
                  "however many WRs the responder executed, and with B's receive counter "
                  "too exactly when the WRs executed in one and not the other are one-sided.",
        formula="forall prog (<= 3 WRs), U <= E < E' <= n, U < n. viewA(U,E) = viewA(U,E') "
                "/\\ (viewAB(U,E) = viewAB(U,E') <=> forall w in (E, E']. one_sided(w))",
        check=_equal_views,
        scope="the failure worlds of transport.rc_prefix; every program of 1..3 WRs (every "
              "op, signaled flag); A's view is its program and completions, B's its receive "
              "counter",
        weakenings=(Weakening(
            "the view has the expected PSN",
            "software also reads the responder NIC's expected PSN (opacity dropped)",
            lambda: _equal_views(d.View(counter=False, epsn=True))),),
    ),
]
