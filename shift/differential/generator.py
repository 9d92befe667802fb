"""Trace generation: a sequence of numbers picks a trace of the model's enabled events.

The numbers are the whole of a trace's randomness — Hypothesis draws them in the test
suite (and shrinks them), `shift fuzz` and the seeded-bug script draw them from a seeded
`random.Random` — so a trace is reproducible from its numbers. Faults are biased to land
while WRs are in flight; each trace slows some kinds of events down (swarm testing);
events that leave the comparable fragment (`gaps.gap`) are never picked.
"""

from __future__ import annotations

from collections.abc import Sequence

from shift.model.next import Model
from shift.model.state import DIR, RETURNS, State
from shift.vocabulary import Event

from .gaps import gap


def in_flight(s: State) -> bool:
    """Are WRs in flight: posted and not completed at A, packets on a wire, or receive
    completions a NIC made and has not yet written (AckBeforeCqe)?"""
    return (any(s.pending) or any(ch for path in s.wire for ch in path)
            or any(q for host in s.unwritten for q in host))


# The chance that a step is a fault (when one is enabled): while WRs are in flight, so
# that faults land where they hurt, and rarely at rest. Out of 1000.
FAULT_SHARE_BUSY = 150
FAULT_SHARE_REST = 100
LOSS_SHARE = 400  # a READ's or atomic's response lost before a later ACK (ImplicitNak)
# Recoveries (LinkUp, NicRecover) are ordinary events: a fail-back needs one, and the
# bound already limits them to what failed.
FAULT_NAMES = frozenset({"Drop", "LinkDown", "NicFail"})


def loses_a_response(s: State, ev: Event) -> bool:
    """Does Drop event ev lose the response of a READ or atomic whose requester has sent
    a later request already - the loss that RC's implicit NAK answers (ImplicitNak), once
    the later request's ACK arrives?"""
    if ev.name != "Drop":
        return False
    i, d = ev.args[0] - 1, DIR[ev.args[1]]
    ch = s.wire[i][d]
    if not ch or ch[0].kind != "ack":
        return False
    r = 1 - d  # the requester an ACK on this channel goes to (AtoB: B's, BtoA: A's)
    q, psn = s.sq[r][i], ch[0].psn
    return (0 < psn <= len(q) and s.program[r][q[psn - 1] - 1].op in RETURNS
            and s.nxt[r][i] > psn + 1)


def options(model: Model, s: State) -> tuple[list[Event], list[Event]]:
    """The enabled events as (faults, the others), without those that leave the
    comparable fragment (`gap`)."""
    faults: list[Event] = []
    others: list[Event] = []
    for ev in model.enabled(s):
        if gap(s, ev, model.bound.implicit_nak) is None:
            (faults if ev.name in FAULT_NAMES else others).append(ev)
    return faults, others


# Swarm testing: each trace slows some kinds of ordinary events down (the first number
# of a trace chooses which), so that orders a uniform choice rarely makes (an application
# that posts late, a host that polls late) come up often.
SWARM = ("PostSend", "PostRecv", "PollCq", "Transmit", "Deliver", "Progress", "Timeout",
         "WriteCqe")
SLOW_SHARE = 100  # out of 1000: how often a slowed event may be picked when others can


def pick(model: Model, s: State, c: int, slow: frozenset[str] = frozenset()) -> Event | None:
    """The event number c picks in state s (None when nothing is enabled): c % 1000 decides
    fault or not (a fault when it is among the top FAULT_SHARE_*), and for an ordinary
    event whether a slowed kind may be picked; c // 1000 picks which one. Zero picks the
    first ordinary event, so shrinking numbers removes faults first."""
    faults, others = options(model, s)
    share = FAULT_SHARE_BUSY if in_flight(s) else FAULT_SHARE_REST
    r, k = c % 1000, c // 1000
    # where the bound has implicit NAKs, the loss they answer is picked first, and often:
    # as one fault among all those enabled it was reached in 2 of 1,000 traces
    lost = [ev for ev in faults if loses_a_response(s, ev)] if model.bound.implicit_nak else []
    if lost and r >= 1000 - LOSS_SHARE:
        return lost[k % len(lost)]
    if faults and (not others or r >= 1000 - share):
        return faults[k % len(faults)]
    if not others:
        return None
    fast = [ev for ev in others if ev.name not in slow]
    if fast and r >= SLOW_SHARE:
        return fast[k % len(fast)]
    return others[k % len(others)]


def swarm(c: int) -> frozenset[str]:
    """The kinds of events a trace slows down, from its first number (none for 0)."""
    return frozenset(n for b, n in enumerate(SWARM) if (c >> (8 + b)) & 1)


def trace_from_choices(model: Model, choices: Sequence[int]) -> list[Event]:
    """The trace a list of numbers picks: the first picks the workload (its low bits) and
    the kinds of events slowed down (`swarm`), each next one an event (`pick`); it ends
    early when nothing is enabled."""
    inits = model.initial_states()
    if not choices:
        return [inits[0][0]]
    ev0, s = inits[(choices[0] & 0xFF) % len(inits)]
    slow = swarm(choices[0])
    events = [ev0]
    for c in choices[1:]:
        ev = pick(model, s, c, slow)
        if ev is None:
            break
        t = model.step(s, ev)
        assert t is not None
        events.append(ev)
        s = t
    return events
