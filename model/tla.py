"""States as TLA+ values: what TLC prints for them, ITF JSON, and a canonical form.

`to_tla` gives the Python value `shift.tlaplus.values.parse_value` returns for TLC's print of
the same state (sequences and functions on 1..n as lists, records and functions on strings
as dicts, sets as `TlaSet`), so a model state and a TLC state can be compared, and the
TLC harness's ITF writer and trace printer work on model traces unchanged.

`canonical` maps such a value to one hashable normal form (lists to tuples, records to
sorted item tuples, sets to frozensets); `canonical_itf` does the same from ITF JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shift.model.state import VARIABLES, Cqe, Packet, State
from shift.vocabulary import Event

from shift.tlaplus.values import ModelValue, TlaFunction, TlaSet


def _cqe(c: Cqe) -> dict[str, Any]:
    return {"wr": c.wr, "recv": c.recv, "status": c.status, "val": c.val}


def _packet(m: Packet) -> dict[str, Any]:
    return {"kind": m.kind, **{f: getattr(m, f) for f in m._fields if f != "kind"}}


def _hosts(pair: tuple[Any, Any], f: Any = lambda v: v) -> dict[str, Any]:
    return {"A": f(pair[0]), "B": f(pair[1])}


def _tset(members: Any) -> TlaSet:
    return TlaSet(tuple(sorted(members)))


# One converter per variable: the state's field -> the value TLC prints.
FIELDS: dict[str, Callable[[Any], Any]] = {
    "program": lambda prog: [w._asdict() for w in prog],
    "posted": int,
    "recvPosted": int,
    "sndSeen": lambda seen: [e._asdict() for e in seen],
    "rcvSeen": lambda seen: [{**e._asdict(), "mem": list(e.mem)} for e in seen],
    "stores": lambda stores: [x._asdict() for x in stores],
    "stored": int,
    "sq": lambda v: [list(q) for q in v],
    "una": list, "nxt": list, "retry": list, "epsn": list,
    "saved": lambda v: [TlaSet(tuple([p, x] for p, x in sorted(s))) for s in v],
    "rq": lambda v: [list(q) for q in v],
    "qp": lambda v: _hosts(v, list),
    "cq": lambda v: _hosts(v, lambda per: [[_cqe(c) for c in q] for q in per]),
    "wire": lambda v: [{"AtoB": [_packet(m) for m in pw[0]],
                        "BtoA": [_packet(m) for m in pw[1]]} for pw in v],
    "link": list,
    "nic": lambda v: _hosts(v, list),
    "faults": int, "drops": int,
    "mem": list, "bufs": list, "execs": list,
    "copies": int, "queried": bool,
    "layer": _hosts,
    "pending": list,
    "buffered": lambda v: _hosts(v, lambda q: [_cqe(c) for c in q]),
    "rpend": list,
    "recvDone": int,
    "sentCtr": _hosts, "peerCtr": _hosts, "replayed": _hosts,
    "fence": int,
    "refused": _tset,
}
assert tuple(FIELDS) == VARIABLES, "one converter per variable, in View order"


def to_tla(s: State, event: Event | None = None) -> dict[str, Any]:
    """The state's variables as TLC prints them (with `event` when one is given)."""
    out = {k: f(v) for (k, f), v in zip(FIELDS.items(), s, strict=True)}
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


class ViewCanon:
    """canonical(to_tla(state)) over the View, fast: each variable's value is converted once
    and remembered (values repeat across states far more than states do)."""

    def __init__(self) -> None:
        self._memo: list[dict[Any, Any]] = [{} for _ in VARIABLES]
        self._conv = list(FIELDS.values())

    def __call__(self, s: State) -> tuple[Any, ...]:
        out = []
        for memo, conv, v in zip(self._memo, self._conv, s, strict=True):
            c = memo.get(v)
            if c is None:
                c = memo[v] = canonical(conv(v))
            out.append(c)
        return tuple(out)
