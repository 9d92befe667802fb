"""The observable projection: what an application or an outside observer can see.

Defined once here for every layer that compares against the model (the differential
tester, trace validation, `shift replay`): the completions A's application polled (with
status), the completions B's application polled (notifications, with the receive WR each
consumed and the memory it read right after), each host's failover state, and the
counters of the handshake. Nothing of the NICs' transport state is observable: opacity.

`Observation.as_dict()` uses the specification's variable names, the same keys as
`shift.impl`'s projection, so the two compare with ==. The properties an application can
check on an observation are `shift.model.observable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shift.model.state import HOSTS, RcvSeen, SndSeen, State


@dataclass(frozen=True)
class Observation:
    snd_seen: tuple[SndSeen, ...]  # A's application: [wr, status, val] per completion
    rcv_seen: tuple[RcvSeen, ...]  # B's application: [wr, recv, status, mem, data] per poll
    layer: tuple[str, str]  # failover state of A, B
    recv_done: int  # B's counter of completed receives
    peer_ctr: tuple[int, int]  # the counter each host received from its peer (-1: none)
    sent_ctr: tuple[bool, bool]  # has each host sent its counter in this failover?
    replayed: bool  # has A replayed its outstanding sends?
    fence: int  # the WR A's fail-back waits for (0: none)

    def as_dict(self) -> dict[str, Any]:
        """The projection keyed by the specification's variable names."""
        return {
            "sndSeen": [s._asdict() for s in self.snd_seen],
            "rcvSeen": [{**r._asdict(), "mem": {i + 1: v for i, v in enumerate(r.mem)}}
                        for r in self.rcv_seen],
            "layer": dict(zip(HOSTS, self.layer, strict=True)),
            "recvDone": self.recv_done,
            "peerCtr": dict(zip(HOSTS, self.peer_ctr, strict=True)),
            "sentCtr": dict(zip(HOSTS, self.sent_ctr, strict=True)),
            "replayed": self.replayed,
            "fence": self.fence,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Observation:
        """The observation a projection in the dict form stands for (`as_dict`'s inverse;
        the form the implementation's observations are compared and recorded in)."""
        return cls(
            tuple(SndSeen(e["wr"], e["status"], e["val"]) for e in d["sndSeen"]),
            tuple(RcvSeen(e["wr"], e["recv"], e["status"],
                          tuple(e["mem"][r] for r in sorted(e["mem"])), e["data"])
                  for e in d["rcvSeen"]),
            tuple(d["layer"][h] for h in HOSTS), d["recvDone"],
            tuple(d["peerCtr"][h] for h in HOSTS), tuple(d["sentCtr"][h] for h in HOSTS),
            d["replayed"], d["fence"])


def observe(s: State) -> Observation:
    return Observation(s.sndSeen, s.rcvSeen, s.layer, s.recvDone, s.peerCtr, s.sentCtr,
                       s.replayed[0], s.fence)


def _mem(mem: tuple[int, ...]) -> str:
    return ", ".join(f"region {i} = {v}" for i, v in enumerate(mem, 1))


def changes(before: Observation, after: Observation) -> list[str]:
    """What an observer sees change in one step, one line per change."""
    out = [f"A's application polls WR {e.wr}: {e.status}"
           + (f", returned {e.val}" if e.val else "")
           for e in after.snd_seen[len(before.snd_seen):]]
    for e in after.rcv_seen[len(before.rcv_seen):]:
        what = f"WR {e.wr}" if e.wr else "a flushed receive"
        out.append(f"B's application polls {what} in receive WR {e.recv}: {e.status}; "
                   f"reads {_mem(e.mem)}" + (f", payload {e.data}" if e.data else ""))
    for h, old, new in zip(HOSTS, before.layer, after.layer, strict=True):
        if old != new:
            out.append(f"{h}'s layer: {old} -> {new}")
    if before.recv_done != after.recv_done:
        out.append(f"B's receive counter: {before.recv_done} -> {after.recv_done}")
    for h, old, new in zip(HOSTS, before.sent_ctr, after.sent_ctr, strict=True):
        if old != new:
            out.append(f"{h} {'sent' if new else 'clears'} its counter")
    for h, old, new in zip(HOSTS, before.peer_ctr, after.peer_ctr, strict=True):
        if old != new:
            out.append(f"{h} holds the peer's counter: {old} -> {new}")
    if before.replayed != after.replayed:
        out.append("A replayed its outstanding sends" if after.replayed else "A's replay done")
    if before.fence != after.fence:
        out.append(f"A's fail-back fence: WR {after.fence}" if after.fence
                   else "A's fail-back fence released")
    return out
