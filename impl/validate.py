"""Argument checks: a wrong type or value from Python raises TypeError/ValueError, naming
the argument and the value, before any C call."""

from __future__ import annotations

from typing import Any

from .verbs import DIRECTIONS, HOSTS, DesignCode, Op

U64 = (1 << 64) - 1
U32 = (1 << 32) - 1


def int_arg(name: str, v: Any, lo: int = 0, hi: int = U64) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} = {v} out of range [{lo}, {hi}]")
    return v


def bool_arg(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, not {type(v).__name__}")
    return v


def _named(what: str, v: Any, numbers: dict[str, int]) -> int:
    n = numbers.get(v) if isinstance(v, str) else None
    if n is not None:  # the data path: one lookup, no message built
        return n
    expected = " or ".join(map(repr, numbers))
    if not isinstance(v, str):
        raise TypeError(f"{what} must be {expected}, not {type(v).__name__}")
    raise ValueError(f"unknown {what} {v!r} (expected {expected})")


def host_arg(h: Any) -> int:
    """A host's name as simnic's number."""
    return _named("host", h, HOSTS)


def path_arg(p: Any, name: str = "path") -> int:
    return int_arg(name, p, 1, 2)


def dir_arg(d: Any) -> int:
    """A direction's name as simnic's number."""
    return _named("direction", d, DIRECTIONS)


def op_arg(o: Any) -> Op:
    if isinstance(o, Op):
        return o
    if not isinstance(o, str):
        raise TypeError(f"op must be an Op or its name, not {type(o).__name__}")
    try:
        return Op(o)
    except ValueError:
        raise ValueError(f"unknown op {o!r} (expected one of {[x.value for x in Op]})") from None


def design_arg(d: Any) -> DesignCode:
    if isinstance(d, DesignCode):
        return d
    if not isinstance(d, str):
        raise TypeError(f"design must be a DesignCode or its name, not {type(d).__name__}")
    for x in DesignCode:
        if d in (x.value, x.name, x.name.lower()):
            return x
    raise ValueError(f"unknown design {d!r} "
                     f"(expected one of {[x.value for x in DesignCode]})")
