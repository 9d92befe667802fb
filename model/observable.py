"""The properties an application can check on what it sees, written once.

spec/Properties.tla's NotificationIntegrity and DataAtNotification, and the post-order
part of CompletionIntegrity, read nothing but the two applications' views (`sndSeen`,
`rcvSeen`) and the program the sender runs. Here they are functions of an observation:
`shift.model.observe.Observation`, or `shift.impl`'s (the same fields `snd_seen` and
`rcv_seen`, whose entries have `wr`, `status` and, on B's side, `recv` and `mem`, the
regions as read right after the poll, region r at index r - 1). The dict form
(`as_dict()`) becomes an observation by `Observation.from_dict`.

Who checks them: the model's invariants (`shift.model.properties`, the same predicates on
the model's state), the differential runner and trace validation on the implementation's
observation (`shift.differential`, `shift.validation`), and the implementation's own
tests (tests/impl/test_impl_random.py). What no application observes — executions at the
responder NIC (ExactlyOnceExecution, AtomicSafety, CompletionIntegrity's "success only
for an executed WR") — is not here: opacity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from shift.model.state import REGIONS, SUCCESS, WR, note_wr, notes_before, value_after


def notes(obs: Any) -> list[Any]:
    """The notifications B's application took, in order (Failover.tla's NotesTaken)."""
    return [e for e in obs.rcv_seen if e.status == SUCCESS]


def notification_integrity(obs: Any, program: tuple[WR, ...], posted: int) -> bool:
    """The notifications B took are a prefix of those among the `posted` WRs A posted,
    the k-th in receive WR k: none lost in the middle, duplicated or reordered, and no
    queue sliding."""
    limit = notes_before(program, posted)
    for i, e in enumerate(notes(obs), 1):
        # Conjuncts in the spec's order: NoteWr is only evaluated (defined) for i <= limit.
        if i > limit or e.wr != note_wr(program, i) or e.recv != i:
            return False
    return True


def every_region(wr: int) -> Iterable[int]:
    """The spec's reader: every region, at every notification. Its flow control (CanPost)
    posts no write behind a notification B has not taken, so every region is settled."""
    return REGIONS


def data_at_notification(obs: Any, program: tuple[WR, ...],
                         reads: Callable[[int], Iterable[int]] = every_region) -> bool:
    """When B's application takes the notification of WR w, each region it reads
    (`reads(w)`) holds the value of the last write posted before w (ValueAfter). An
    application that pipelines rounds into several buffers (NCCL) reads only the buffer
    the notification announces."""
    return all(e.mem[r - 1] == value_after(program, r, e.wr - 1)
               for e in notes(obs) for r in reads(e.wr))


def completion_order(obs: Any) -> bool:
    """A's application sees each WR complete at most once, in post order (the part of
    CompletionIntegrity an application observes)."""
    wrs = [e.wr for e in obs.snd_seen]
    return all(a < b for a, b in zip(wrs, wrs[1:], strict=False))


# The invariants of spec/Properties.tla an application observes, by name, over
# (observation, program, WRs posted); CompletionIntegrity as far as it is observable.
OBSERVABLE: dict[str, Callable[[Any, tuple[WR, ...], int], bool]] = {
    "NotificationIntegrity": notification_integrity,
    "DataAtNotification": lambda obs, program, posted: data_at_notification(obs, program),
    "CompletionIntegrity": lambda obs, program, posted: completion_order(obs),
}


def broken(obs: Any, program: tuple[WR, ...], posted: int, names: Iterable[str]) -> list[str]:
    """Which of the named observable invariants the observation breaks, in OBSERVABLE's
    order."""
    names = set(names)
    return [n for n, holds in OBSERVABLE.items() if n in names and not holds(obs, program, posted)]
