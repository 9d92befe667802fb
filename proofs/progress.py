"""A bounded-progress lemma for SHIFT's relation (issue 21, item 3, first half).

Every step of the relation that is not a fault, not a lost counter and not the handshake
timer's resend (with its duplicate's delivery) strictly increases a progress measure that
the base invariant bounds: a run without those steps is finite. The resend is what the
measure cannot rank: it and the delivery of the duplicate cycle once a counter is lost.
What is still missing for liveness (Inv and not done => some ranked step is enabled) is
in docs/proofs.md.
"""

from __future__ import annotations

import z3
from shift.proofs import invariants as iv
from shift.proofs.abstract_state import DEFAULT, AbstractState, fresh
from shift.proofs.core import ProofVerdict, Theorem, Weakening, valid
from shift.proofs.programs import program
from shift.proofs.protocol import SHIFT, Actions, frame
from shift.proofs.safety import BASE, N

# The relation's faults have no group of their own in `Actions`: the default QP's error
# and the NIC failures (path1), the backup path's receiver-not-ready timeout (path2).
FAULTS = ("Timeout/NicFail", "NicFail(B", "after receiver-not-ready")
BOUND = 200  # above the measure's maximum at N = 4 (checked, not assumed)


def _count(xs: list[z3.BoolRef]) -> z3.ArithRef:
    return z3.Sum([z3.If(x, 1, 0) for x in xs[1:]])


def measure(s: AbstractState) -> z3.ArithRef:
    """What only grows between faults: counters and thresholds, executions, the backup
    queue, once-set flags; a layer leaving Default outweighs the buffered completions it
    drops (20 > N); a held or buffered WR counts as owed (posting one adds 2, holding it 1).
    `sndLast` is left out: it falls when A polls the backup CQ after a replay."""
    grows = [2 * s.posted, s.ex1, s.una1, s.pol1, s.c1, s.polB1, s.x2, s.a2, s.p2, s.pB2,
             s.rposted, s.recvDone, s.taken, s.sq1, s.bh, -s.bt,
             z3.Sum(s.execs[1:]), _count(s.sq2)]
    once = [s.sentA, s.sentB, s.replayed, s.peerA >= 0, s.peerB >= 0, z3.Not(s.qpA1),
            z3.Not(s.qpB1)]
    layers = [20 * z3.If(layer != DEFAULT, 1, 0) for layer in (s.layerA, s.layerB)]
    return z3.Sum(grows + [z3.If(f, 1, 0) for f in once] + layers
                  + [-_count(s.buf), -_count(s.pend)])


def ranked(rank_resends: bool = False) -> ProofVerdict:
    """Inv => 0 <= measure <= BOUND, and each ranked action grows the measure: all but
    the faults, the lost counters and (unless `rank_resends`) the handshake timer's resend
    with its duplicate's delivery (`Actions.lossy_control`'s three parts)."""
    p = program(N)
    s, t = fresh(p.n, "s"), fresh(p.n, "t")
    inv = [p.wellformed(), *[c for _, c in iv.invariant(p, SHIFT, s, BASE)]]
    bounded = valid(z3.And(measure(s) >= 0, measure(s) <= BOUND), assumptions=inv)
    if bounded.status != "proved":
        bounded.detail = f"the measure is not within 0..{BOUND}: {bounded.detail}"
        return bounded
    acts = Actions(p, SHIFT, s, t)
    unranked = acts.lose_counters()
    if not rank_resends:
        unranked += acts.handshake_timeouts() + acts.deliver_resends()
    skip = {name for name, _, _ in unranked}
    steps = 0
    for name, guard, upd in acts.all():
        if name in skip or any(part in name for part in FAULTS):
            continue
        grows = valid(measure(t) > measure(s), assumptions=[*inv, guard, frame(s, t, upd)])
        if grows.status != "proved":
            grows.detail = f"{name} does not grow the measure: {grows.detail}"
            return grows
        steps += 1
    return ProofVerdict("proved", f"{steps} actions ranked, measure within 0..{BOUND}")


THEOREMS = [
    Theorem(
        name="shift.bounded_progress",
        group="shift",
        statement="Every step of SHIFT's relation but a fault, a lost counter and the "
                  "handshake timer's resend (and its duplicate's delivery) strictly grows "
                  "a measure the invariant bounds: between faults and resends SHIFT "
                  "cannot run for ever.",
        formula=f"Inv => 0 <= M <= {BOUND},  Inv /\\ a => M' > M  for every ranked action a",
        check=ranked,
        scope=f"every program of {N} WRs, one failover, the base invariant (shape, rc, "
              "handshake, replay); faults, lost counters and resends not ranked",
        weakenings=(Weakening(
            "resends ranked too",
            "the handshake timer's resend and its duplicate's delivery must grow the "
            "measure as well: they cycle once a counter is lost",
            lambda: ranked(rank_resends=True)),),
    ),
]
