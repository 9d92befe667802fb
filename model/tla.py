"""States as TLA+ values: what TLC prints for them, ITF JSON, and a canonical form.

`to_tla` gives the Python value `shift.tlc.values.parse_value` returns for TLC's print of
the same state (sequences and functions on 1..n as lists, records and functions on strings
as dicts, sets as `TlaSet`), so a model state and a TLC state can be compared, and the
TLC harness's ITF writer and trace printer work on model traces unchanged.

`canonical` maps such a value to one hashable normal form (lists to tuples, records to
sorted item tuples, sets to frozensets); `canonical_itf` does the same from ITF JSON.
"""

from __future__ import annotations

from typing import Any

from shift.model.events import Event
from shift.model.state import Cqe, Packet, State

from shift.tlc.values import ModelValue, TlaFunction, TlaSet


def _cqe(c: Cqe) -> dict[str, Any]:
    return {"wr": c.wr, "recv": c.recv, "status": c.status, "val": c.val}


def _packet(m: Packet) -> dict[str, Any]:
    return {"kind": m.kind, **{f: getattr(m, f) for f in m._fields if f != "kind"}}


def _hosts(pair: tuple[Any, Any], f: Any = lambda v: v) -> dict[str, Any]:
    return {"A": f(pair[0]), "B": f(pair[1])}


def _tset(members: Any) -> TlaSet:
    return TlaSet(tuple(sorted(members)))


def to_tla(s: State, event: Event | None = None) -> dict[str, Any]:
    """The state's variables as TLC prints them (with `event` when one is given)."""
    out: dict[str, Any] = {
        "program": [{"op": w.op, "region": w.region, "value": w.value,
                     "signaled": w.signaled, "note": w.note} for w in s.program],
        "posted": s.posted,
        "recvPosted": s.recvPosted,
        "sndSeen": [{"wr": e.wr, "status": e.status} for e in s.sndSeen],
        "rcvSeen": [{"wr": e.wr, "recv": e.recv, "status": e.status, "mem": list(e.mem)}
                    for e in s.rcvSeen],
        "sq": [list(q) for q in s.sq],
        "una": list(s.una), "nxt": list(s.nxt), "retry": list(s.retry), "epsn": list(s.epsn),
        "saved": [TlaSet(tuple([p, v] for p, v in sorted(x))) for x in s.saved],
        "rq": [list(q) for q in s.rq],
        "qp": _hosts(s.qp, list),
        "cq": _hosts(s.cq, lambda per: [[_cqe(c) for c in q] for q in per]),
        "wire": [{"AtoB": [_packet(m) for m in pw[0]], "BtoA": [_packet(m) for m in pw[1]]}
                 for pw in s.wire],
        "link": list(s.link),
        "nic": _hosts(s.nic, list),
        "faults": s.faults, "drops": s.drops,
        "mem": list(s.mem), "execs": list(s.execs),
        "copies": s.copies, "queried": s.queried,
        "layer": _hosts(s.layer),
        "pending": list(s.pending),
        "buffered": _hosts(s.buffered, lambda q: [_cqe(c) for c in q]),
        "rpend": list(s.rpend),
        "recvDone": s.recvDone,
        "sentCtr": _hosts(s.sentCtr), "peerCtr": _hosts(s.peerCtr),
        "replayed": _hosts(s.replayed),
        "fence": s.fence,
        "refused": _tset(s.refused),
    }
    if event is not None:
        out["event"] = event.to_tla()
    return out


def canonical(v: Any) -> Any:
    """One hashable normal form of a TLA+ value as parse_value or to_tla give it."""
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, list | tuple):
        return tuple(canonical(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, canonical(x)) for k, x in v.items()))
    if isinstance(v, TlaSet):
        return frozenset(canonical(x) for x in v.members)
    if isinstance(v, TlaFunction):
        # A function on 1..n is a sequence and on strings a record: TLC prints them so,
        # and to_tla never makes a TlaFunction; other domains stay pairs.
        return ("#fn", frozenset((canonical(k), canonical(x)) for k, x in v.pairs))
    if isinstance(v, ModelValue):
        return ("#mv", v.name)
    raise TypeError(f"no canonical form for {v!r}")


def canonical_state(values: dict[str, Any], variables: tuple[str, ...]) -> tuple[Any, ...]:
    """A state's canonical form over the given variables, in their order."""
    return tuple(canonical(values[k]) for k in variables)


def canonical_itf(v: Any) -> Any:
    """The canonical form of an ITF JSON value (the inverse of shift.tlc.itf's encoding)."""
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, list):
        return tuple(canonical_itf(x) for x in v)
    if isinstance(v, dict):
        if "#set" in v:
            return frozenset(canonical_itf(x) for x in v["#set"])
        if "#bigint" in v:
            return int(v["#bigint"])
        if "#map" in v:
            return ("#fn", frozenset((canonical_itf(k), canonical_itf(x)) for k, x in v["#map"]))
        if "#unserializable" in v:
            return ("#mv", v["#unserializable"])
        return tuple(sorted((k, canonical_itf(x)) for k, x in v.items()))
    raise TypeError(f"not an ITF value: {v!r}")
