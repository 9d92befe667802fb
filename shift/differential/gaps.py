"""Where the two sides differ on purpose or by an abstraction, each case named here and in
docs/differential.md (with a trace of tests/corpus/ that shows it):

- `normalise`: what the comparison would leave out of the projection (nothing now);
- `gap`: the events after which no step-by-step comparison is possible, where a run stops
  (reported, not a pass of the rest) and which the generator never picks;
- `IMPL_FIXES`: findings the C core fixes on purpose, where the implementation must keep
  what the model breaks;
- `kept_invariants`: the observable invariants the design declares it keeps at a bound
  (spec/designs.toml), the only ones demanded of the implementation's observation.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from shift.model.observable import OBSERVABLE
from shift.model.properties import INVARIANTS
from shift.model.state import DIR, HOST, State
from shift.spec.catalog import load_catalog
from shift.vocabulary import Event

# The invariants of spec/Properties.tla that are functions of an observation, checked on
# the implementation's (shift.model.observable). ExactlyOnceExecution and AtomicSafety
# count executions at the responder NIC, which no application observes (opacity); Opacity
# and ZeroCopy are structural for a design.
OBSERVABLE_INVARIANTS = tuple(OBSERVABLE)


def normalise(obs: dict[str, Any]) -> dict[str, Any]:
    """The projection as compared: equal to `obs` except where the two sides differ by
    an abstraction. There is none left in the failover layer's variables: the C core has
    both sides of every host and the spec's counter exchange (a host in Error keeps
    taking the peer's counters and its fence, as the spec's does)."""
    return dict(obs)


def gap(s: State, ev: Event, implicit_nak: bool = False) -> str | None:
    """Why event ev from model state s leaves the fragment where the two sides can be
    compared step by step, or None. A skipped notification's success ahead of a
    replayed signaled WR (F5, below), or -
    unless the bound has ImplicitNak - a cumulative ACK that covers a READ or an atomic
    whose own response was lost: without it the spec completes it (with the value 0);
    an RC NIC, simnic included, takes the ACK as an implicit NAK, goes back to the READ
    or atomic and spends a retry."""
    h = HOST[ev.args[0]] if ev.name == "PollCq" else 0
    if ev.name == "PollCq" and s.buffered[h] and s.buffered[h][0].recv == 0:  # a send CQE
        first = s.buffered[h][0]
        if first.status == "SUCCESS" and any(
                w < first.wr and s.program[h][w - 1].signaled for w in s.pending[h]):
            # docs/findings.md, F5: the spec's SHIFT gives a skipped notification's success
            # to the application before a replayed signaled WR in front of it completes;
            # the C core holds it until then (native/README.md).
            return ("a skipped notification's success ahead of a replayed signaled WR "
                    "(F5): the spec completes it, the core holds it")
    if ev.name != "Deliver" or implicit_nak:
        return None
    i, d = ev.args[0] - 1, DIR[ev.args[1]]
    r = 1 - d  # the requester an ACK on this channel goes to (AtoB: B's, BtoA: A's)
    ch = s.wire[i][d]
    una = s.una[r][i]
    if not ch or ch[0].kind != "ack" or s.qp[r][i] != "RTS" or ch[0].psn < una:
        return None
    covered = s.sq[r][i][una - 1:ch[0].psn - 1]  # every WR the ACK completes but its own
    if any(s.program[r][w - 1].op in ("READ", "FADD", "CAS") for w in covered):
        return "a cumulative ACK covers a READ/atomic whose response was lost (implicit NAK)"
    return None


# Findings the C core fixes on purpose (native/README.md): design -> invariants the model
# breaks (the design declares it at some bound) and the implementation keeps. A run stops
# at the step where the model first breaks one; there the implementation's observation
# must keep it, which is the check that replaces equality from then on.
IMPL_FIXES: dict[str, tuple[str, ...]] = {
    # F4: the C core holds a skipped notification's completion behind the replayed WRs
    # before it, and completes a replayed WR that preceded a received notification as the
    # success it was; the spec shows WR 2 SUCCESS then WR 1 WR_FLUSH_ERR.
    "Shift": ("CompletionIntegrity",),
    # ShiftPrefix needs none: what its replay skips is a prefix of the outstanding WRs, so
    # the spec completes it in post order and the core does the same.
}


def fixed_here(design: str, s: State) -> list[str]:
    """The invariants the model breaks in s that the implementation keeps on purpose."""
    return [p for p in IMPL_FIXES.get(design, ()) if not INVARIANTS[p](s)]


@functools.cache
def kept_invariants(design: str, bound: str, spec_dir: Path | None = None) -> tuple[str, ...]:
    """The observable invariants the design declares it keeps at the bound (designs.toml
    of spec_dir, else the packaged one: read once per process)."""
    d = load_catalog(spec_dir).design(design).at(bound)
    return tuple(p for p in OBSERVABLE_INVARIANTS if p not in d.violates)
