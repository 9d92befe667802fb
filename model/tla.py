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


def _cqes(q: tuple[Cqe, ...]) -> list[dict[str, Any]]:
    return [_cqe(c) for c in q]


def _packet(m: Packet) -> dict[str, Any]:
    return {"kind": m.kind, **{f: getattr(m, f) for f in m._fields if f != "kind"}}


def _hosts(pair: tuple[Any, Any], f: Any = lambda v: v) -> dict[str, Any]:
    return {"A": f(pair[0]), "B": f(pair[1])}


def _tset(members: Any) -> TlaSet:
    return TlaSet(tuple(sorted(members)))


def _paths(pair: tuple[Any, Any], f: Any = lambda v: v) -> list[Any]:
    """A function over Paths (1..2): TLC prints it as a sequence."""
    return [f(pair[0]), f(pair[1])]


def _per_host(f: Any) -> Callable[[Any], dict[str, Any]]:
    """A function over Hosts whose values f converts."""
    return lambda v: _hosts(v, f)


def _per_path(f: Any) -> Callable[[Any], dict[str, Any]]:
    """A function over Hosts of functions over Paths whose values f converts."""
    return lambda v: _hosts(v, lambda per: _paths(per, f))


def _ident(v: Any) -> Any:
    return v


def _saved(pairs: frozenset[tuple[int, int]]) -> TlaSet:
    return TlaSet(tuple([p, x] for p, x in sorted(pairs)))


# One converter per variable: the state's field -> the value TLC prints. A function over
# Hosts prints as a record, over Paths (1..2), Regions (1..2) and ids (1..n) as a sequence.
FIELDS: dict[str, Callable[[Any], Any]] = {
    "program": _per_host(lambda prog: [w._asdict() for w in prog]),
    "posted": _hosts,
    "recvPosted": _hosts,
    "sndSeen": _per_host(lambda seen: [e._asdict() for e in seen]),
    "rcvSeen": _per_host(lambda seen: [{**e._asdict(), "mem": list(e.mem)} for e in seen]),
    "stores": _per_host(lambda stores: [x._asdict() for x in stores]),
    "stored": _hosts,
    "sq": _per_path(list),
    "una": _per_path(_ident), "nxt": _per_path(_ident), "retry": _per_path(_ident),
    "rnrLeft": _per_path(_ident),
    "epsn": _per_path(_ident),
    "saved": _per_path(_saved),
    "rq": _per_path(list),
    "qp": _per_path(_ident),
    "cq": _per_path(_cqes),
    "unwritten": _per_path(_cqes),
    "fatal": _per_path(_ident),
    "incarnation": _hosts,
    "wire": lambda v: [{"AtoB": [_packet(m) for m in pw[0]],
                        "BtoA": [_packet(m) for m in pw[1]]} for pw in v],
    "link": list,
    "nic": _per_path(_ident),
    "faults": int, "drops": int,
    "mem": _per_host(list), "bufs": _per_host(list), "execs": _per_host(list),
    "copies": int, "queried": bool,
    "sendMode": _hosts, "recvMode": _hosts,
    "pending": _per_host(list),
    "buffered": _per_host(_cqes),
    "rpend": _per_host(list),
    "recvDone": _hosts,
    "failbackAt": _hosts,
    "sentCtr": _hosts, "peerCtr": _hosts, "fresh": _hosts, "asked": _hosts,
    "replayed": _hosts,
    "fence": _hosts,
    "refused": _per_host(_tset),
    "ctrSeq": _hosts, "ctrVal": _hosts, "peerSeq": _hosts, "peerFailed": _hosts,
    "reconnecting": _hosts,
    "acked": _per_host(list), "resent": _per_host(_tset),
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
