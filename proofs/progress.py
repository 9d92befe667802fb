"""Liveness of SHIFT's relation (issue 21, item 3), in three lemmas.

- `shift.bounded_progress`: every step but a lost counter, the handshake timer's resend
  and the delivery of a duplicate strictly grows a measure the base invariant bounds.
- `shift.control_plane_quiesces`: those last two (the neutral steps) come at most three
  in a row: a resend is answered or taken, or it needs a lost counter to fire again.
- `shift.no_deadlock`: in a state that is not done, a step other than a lost counter or
  a fault is enabled (the handshake timer's resend among them).

Together (docs/proofs.md, "Liveness"): with weak fairness on the steps and finitely many
faults and lost counters, every run of the relation ends done — after the last fault and
lost counter, each step grows the measure or is one of at most three neutral ones before
the next that does, so the run stops; where it stops nothing is enabled, so it is done.
"""

from __future__ import annotations

import z3
from shift.proofs import invariants as iv
from shift.proofs.abstract_state import DEFAULT, ERROR, AbstractState, Derived, fresh
from shift.proofs.core import ProofVerdict, Theorem, Weakening, conj, valid
from shift.proofs.programs import Program, program
from shift.proofs.protocol import SHIFT, Actions, Updates, frame
from shift.proofs.safety import BASE, N

# The relation's faults have no group of their own in `Actions`: the default QP's error
# and the NIC failures (path1), the backup path's receiver-not-ready timeout (path2).
FAULTS = ("Timeout/NicFail", "NicFail(B", "after receiver-not-ready")
BOUND = 200  # above the measure's maximum at N = 4 (checked, not assumed)
NEUTRAL_RUN = 3  # the longest run of neutral steps (checked: 4 in a row is unsat)

Action = tuple[str, z3.BoolRef, Updates]


def _count(xs: list[z3.BoolRef]) -> z3.ArithRef:
    return z3.Sum([z3.If(x, 1, 0) for x in xs[1:]])


def _base(p: Program, s: AbstractState, groups: tuple[str, ...] = BASE) -> list[z3.BoolRef]:
    return [p.wellformed(), *[c for _, c in iv.invariant(p, SHIFT, s, groups)]]


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


def neutral(acts: Actions) -> list[Action]:
    """The steps no measure of the relation's state can rank: the timer's resend and the
    delivery of a copy the receiver took already (a lost counter re-enables them)."""
    return acts.handshake_timeouts() + acts.deliver_resends()


def ranked(rank_resends: bool = False) -> ProofVerdict:
    """Inv => 0 <= measure <= BOUND, and every action grows the measure but the lost
    counters and (unless `rank_resends`) the neutral steps. Faults are ranked too: each
    QP fails at most once (a once-set flag)."""
    p = program(N)
    s, t = fresh(p.n, "s"), fresh(p.n, "t")
    inv = _base(p, s)
    bounded = valid(z3.And(measure(s) >= 0, measure(s) <= BOUND), assumptions=inv)
    if bounded.status != "proved":
        bounded.detail = f"the measure is not within 0..{BOUND}: {bounded.detail}"
        return bounded
    acts = Actions(p, SHIFT, s, t)
    unranked = acts.lose_counters() + ([] if rank_resends else neutral(acts))
    skip = {name for name, _, _ in unranked}
    steps = 0
    for name, guard, upd in acts.all():
        if name in skip:
            continue
        grows = valid(measure(t) > measure(s), assumptions=[*inv, guard, frame(s, t, upd)])
        if grows.status != "proved":
            grows.detail = f"{name} does not grow the measure: {grows.detail}"
            return grows
        steps += 1
    return ProofVerdict("proved", f"{steps} actions ranked, measure within 0..{BOUND}")


# --------------------------------------------------------------------------------------
# Neutral steps come in short runs
# --------------------------------------------------------------------------------------

def neutral_run(length: int, quiet_wire: bool = True) -> ProofVerdict:
    """No state of the base invariant starts `length` neutral steps in a row: refuted
    with the run if one does. `quiet_wire=False`: the timer may fire with a counter in
    flight (`Actions.handshake_timeouts`)."""
    p = program(N)
    states = [fresh(p.n, f"r{k}") for k in range(length + 1)]
    cs = _base(p, states[0])
    for s, t in zip(states, states[1:], strict=False):
        acts = Actions(p, SHIFT, s, t)
        steps = acts.handshake_timeouts(quiet_wire) + acts.deliver_resends()
        cs.append(z3.Or(*[z3.And(g, frame(s, t, u)) for _, g, u in steps]))
    verdict = valid(z3.BoolVal(False), assumptions=cs)
    verdict.detail = (f"no run of {length} neutral steps" if verdict.status == "proved"
                      else f"a run of {length} neutral steps exists: {verdict.detail}")
    return verdict


# --------------------------------------------------------------------------------------
# No deadlock short of done
# --------------------------------------------------------------------------------------

def done(p: Program, s: AbstractState, refusal_ends: bool = True) -> z3.BoolRef:
    """Properties.tla's Done, for this direction: nothing left for A's application (no
    completion in a CQ or buffered, no signaled WR held), and every WR posted, every
    receive posted and every notification taken by B — unless A's layer is in Error
    (`refusal_ends`): it refused an atomic and told the application, which then posts no
    more (a writer behind the refused WR would wait for ever for B's notification)."""
    q, ws = Derived(p, s), range(1, p.n + 1)
    owed = [s.buf[w] for w in ws] + [q.cq1_ok(w) for w in ws] + [q.cq1_err()]
    owed += [q.cq2_any(w) for w in ws] + [z3.And(p.sig[w], s.pend[w]) for w in ws]
    finished = conj([s.posted == p.n, s.rposted == p.num_notes(),
                     s.taken == p.num_notes()])
    if refusal_ends:
        finished = z3.Or(s.layerA == ERROR, finished)
    return z3.And(z3.Not(z3.Or(*owed)), finished)


def enabled(p: Program, guard: z3.BoolRef, t: AbstractState) -> z3.BoolRef:
    """The guard with its choice of successor made: the two ACKs pick how far they
    acknowledge (t.una1, t.a2), the only fields of t a guard reads."""
    opts = [guard]
    for f in ("una1", "a2"):
        opts = [z3.substitute(o, (getattr(t, f), z3.IntVal(v)))
                for o in opts for v in range(p.n + 1)]
    return z3.Or(*opts)


def no_deadlock(refusal_ends: bool = True, timer: bool = True) -> ProofVerdict:
    """Inv => Done or some step is enabled that is not a lost counter or a fault. The
    host-wide triggers (`Actions.host`, two-way traffic's) are not counted: one direction
    must end on its own. Counted instead of A's QP error (a fault in the relation) is its
    one fair case: RC's retry timer, which must fire when B's QP is dead under A's
    unacknowledged WRs. Inv is the base invariant with `polled`, itself proved
    inductive here."""
    p = program(N)
    groups = BASE + ("polled",)
    inductive = iv.check_inductive(p, SHIFT, lambda _p, _s: z3.BoolVal(True),
                                   p.wellformed(), groups)
    if inductive.status != "proved":
        return inductive
    s, t = fresh(p.n, "s"), fresh(p.n, "t")
    acts = Actions(p, SHIFT, s, t)
    left_out = acts.lose_counters() + acts.host() + ([] if timer else acts.handshake_timeouts())
    skip = {name for name, _, _ in left_out}
    steps = [enabled(p, g, t) for name, g, _ in acts.all()
             if name not in skip and not any(part in name for part in FAULTS)]
    retry_timer = z3.And(s.qpA1, z3.Not(s.qpB1), s.una1 < s.sq1)
    verdict = valid(z3.Or(done(p, s, refusal_ends), retry_timer, *steps),
                    assumptions=_base(p, s, groups))
    if verdict.status == "proved":
        verdict.detail = f"{len(steps) + 1} steps; {inductive.detail}"
    else:
        verdict.detail = f"a state that is not done and has no step: {verdict.detail}"
    return verdict


SCOPE = (f"every program of {N} WRs, one failover, the base invariant (shape, rc, handshake, "
         "healthy, replay)")

THEOREMS = [
    Theorem(
        name="shift.bounded_progress",
        group="shift",
        statement="Every step of SHIFT's relation but a lost counter, the handshake timer's "
                  "resend and a duplicate's delivery strictly grows a measure the invariant "
                  "bounds.",
        formula=f"Inv => 0 <= M <= {BOUND},  Inv /\\ a => M' > M  for every ranked action a",
        check=ranked,
        scope=f"{SCOPE}; faults ranked (each QP fails once), lost counters and the two "
              "neutral steps not",
        weakenings=(Weakening(
            "resends ranked too",
            "the handshake timer's resend and its duplicate's delivery must grow the "
            "measure as well: they cycle once a counter is lost",
            lambda: ranked(rank_resends=True)),),
    ),
    Theorem(
        name="shift.control_plane_quiesces",
        group="shift",
        statement=f"The neutral steps (the timer's resend, a duplicate's delivery) come at "
                  f"most {NEUTRAL_RUN} in a row: without a lost counter the control plane "
                  "settles.",
        formula=f"Inv(s0) => ~(s0 ->n s1 ->n ... ->n s{NEUTRAL_RUN + 1})  (->n: a neutral step)",
        check=lambda: neutral_run(NEUTRAL_RUN + 1),
        scope=f"{SCOPE}; runs of {NEUTRAL_RUN + 1} steps from any state of the invariant",
        weakenings=(Weakening(
            "the timer fires with a counter in flight",
            "the handshake timer's assumption that it outlasts a round trip (path 2 quiet "
            "when it fires): without it the timer resends for ever",
            lambda: neutral_run(NEUTRAL_RUN + 1, quiet_wire=False)),),
    ),
    Theorem(
        name="shift.no_deadlock",
        group="shift",
        statement="In every state of the invariant that is not done, a step other than a "
                  "lost counter or a fault is enabled.",
        formula="Inv /\\ polled => Done \\/ ENABLED (a) for some a not a loss or a fault",
        check=no_deadlock,
        scope=f"{SCOPE} and `polled`; one direction (the host-wide triggers of two-way "
              "traffic not counted); A's QP error counted only as RC's retry timeout under "
              "a dead peer QP",
        weakenings=(
            Weakening("done without the refusal",
                      "Done that asks every WR posted and every notification taken even "
                      "after the layer refused an atomic: NCCL's flow control then waits "
                      "for ever",
                      lambda: no_deadlock(refusal_ends=False)),
            Weakening("no handshake timer",
                      "the timer's resend left out: a lost counter then leaves the asking "
                      "host waiting for ever",
                      lambda: no_deadlock(timer=False))),
    ),
]
