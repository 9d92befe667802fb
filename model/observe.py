"""The observable projection: what an application or an outside observer can see.

Defined once here for every layer that compares against the model (the differential
tester, trace validation, `shift replay`): per host, the send completions its application
polled (with status and value), the receive completions it polled (notifications, with
the receive WR each consumed and the memory it read right after), its send side's and
receive side's failover states, and the counters of the handshake. Nothing of the NICs'
transport state is observable: opacity.

`Observation.as_dict()` uses the specification's variable names, each a record over the
hosts (`{"A": ..., "B": ...}`), the same keys as `shift.impl`'s projection, so the two
compare with ==. The properties an application can check concern one direction, a host's
WRs to its peer (`Observation.direction(h)`); they are `shift.model.observable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from shift.model.state import HOSTS, RcvSeen, SndSeen, State

Pair = tuple  # one value per host, A's then B's


class Direction(NamedTuple):
    """One direction of traffic as its two applications saw it: the sender's send
    completions and the receiver's receive completions (what `shift.model.observable`
    reads)."""

    snd_seen: tuple[SndSeen, ...]
    rcv_seen: tuple[RcvSeen, ...]


def _mem_dict(mem: tuple[int, ...]) -> dict[int, int]:
    return {i + 1: v for i, v in enumerate(mem)}


@dataclass(frozen=True)
class Observation:
    snd_seen: Pair  # per host: [wr, status, val] per send completion its application polled
    rcv_seen: Pair  # per host: [wr, recv, status, mem, data] per receive completion
    send_mode: Pair  # per host: its send side (Default, Fallback, ..., Error)
    recv_mode: Pair  # per host: its receive side (Default, Moving, Fallback)
    recv_done: Pair  # per host: its counter of completed receives
    peer_ctr: Pair  # per host: the counter it received from its peer (-1: none)
    sent_ctr: Pair  # per host: has it sent its counter since it last entered Fallback?
    fresh: Pair  # per host: has the peer's counter arrived since it last used it?
    asked: Pair  # per host: did it send its counter first, awaiting the answer?
    replayed: Pair  # per host: has it replayed its outstanding sends?
    fence: Pair  # per host: the WR its fail-back waits for (0: none)
    ctr_seq: Pair  # per host: the number of its latest counter (0: none sent)
    peer_seq: Pair  # per host: the number of the last counter of the peer it took (0: none)

    def direction(self, h: int) -> Direction:
        """Host h's WRs to its peer: h's send completions, the peer's receive ones."""
        return Direction(self.snd_seen[h], self.rcv_seen[1 - h])

    def as_dict(self) -> dict[str, Any]:
        """The projection keyed by the specification's variable names."""
        def hosts(pair: Pair, f: Any = lambda v: v) -> dict[str, Any]:
            return {h: f(v) for h, v in zip(HOSTS, pair, strict=True)}
        return {
            "sndSeen": hosts(self.snd_seen, lambda seen: [e._asdict() for e in seen]),
            "rcvSeen": hosts(self.rcv_seen, lambda seen: [
                {**e._asdict(), "mem": _mem_dict(e.mem)} for e in seen]),
            "sendMode": hosts(self.send_mode),
            "recvMode": hosts(self.recv_mode),
            "recvDone": hosts(self.recv_done),
            "peerCtr": hosts(self.peer_ctr),
            "sentCtr": hosts(self.sent_ctr),
            "fresh": hosts(self.fresh),
            "asked": hosts(self.asked),
            "replayed": hosts(self.replayed),
            "fence": hosts(self.fence),
            "ctrSeq": hosts(self.ctr_seq),
            "peerSeq": hosts(self.peer_seq),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Observation:
        """The observation a projection in the dict form stands for (`as_dict`'s inverse;
        the form the implementation's observations are compared and recorded in)."""
        def pair(name: str, f: Any = lambda v: v) -> Pair:
            return tuple(f(d[name][h]) for h in HOSTS)
        return cls(
            pair("sndSeen", lambda seen: tuple(SndSeen(e["wr"], e["status"], e["val"])
                                               for e in seen)),
            pair("rcvSeen", lambda seen: tuple(
                RcvSeen(e["wr"], e["recv"], e["status"],
                        tuple(e["mem"][r] for r in sorted(e["mem"])), e["data"])
                for e in seen)),
            pair("sendMode"), pair("recvMode"), pair("recvDone"), pair("peerCtr"),
            pair("sentCtr"), pair("fresh"), pair("asked"), pair("replayed"), pair("fence"),
            pair("ctrSeq"), pair("peerSeq"))


def observe(s: State) -> Observation:
    return Observation(s.sndSeen, s.rcvSeen, s.sendMode, s.recvMode, s.recvDone, s.peerCtr,
                       s.sentCtr, s.fresh, s.asked, s.replayed, s.fence, s.ctrSeq, s.peerSeq)

