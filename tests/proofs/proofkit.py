"""What the proofs' agreement tests share: seeded random walks of the model."""

from __future__ import annotations

import random
from collections.abc import Callable

from shift.model.next import Model, Transition
from shift.model.state import State
from shift.vocabulary import Event

# Recovery events: a reconnect (fail-back, a new PSN epoch) is outside the encodings'
# bound.
RECOVERY = ("LinkUp", "NicRecover")


def before_fail_back(t: Transition) -> bool:
    """Not a recovery event, and no reconnect: a host sees its own NIC, not the link nor
    the peer's, so it may start a fail-back (reset its own default QP into a new
    incarnation, ask the peer to) without a recovery event; that, too, is outside the
    encodings' bound."""
    return t.event.name not in RECOVERY and t.target.incarnation == (0, 0)


def random_walks(m: Model, count: int, length: int, seed: str,
                 allowed: Callable[[Transition], bool] = lambda t: True,
                 ) -> list[tuple[list[Event], list[State]]]:
    """`count` walks of up to `length` steps from a random initial state, each step a
    random allowed successor; each walk as its events (Init first) and the states after
    each of them."""
    rng = random.Random(seed)
    inits = m.initial_states()
    out = []
    for _ in range(count):
        ev0, s = rng.choice(inits)
        events, states = [ev0], [s]
        for _ in range(length):
            succ = [t for t in m.successors(s) if allowed(t)]
            if not succ:
                break
            t = rng.choice(succ)
            events.append(t.event)
            states.append(t.target)
            s = t.target
        out.append((events, states))
    return out
