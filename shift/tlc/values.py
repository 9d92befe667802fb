"""TLA+ values as TLC prints them, parsed into Python values.

Sequences and tuples become lists, records dicts, sets frozensets (as `TlaSet`, which keeps
unhashable members), functions `TlaFunction` (pairs), model values `ModelValue`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)'
    r"|(?P<sym><<|>>|\|->|:>|@@|[\[\]{}(),])|(?P<id>[A-Za-z_][A-Za-z0-9_]*))"
)


class TlaValueError(ValueError):
    """Text that is not a TLA+ value as TLC prints them."""


@dataclass(frozen=True)
class ModelValue:
    name: str


@dataclass(frozen=True)
class TlaSet:
    members: tuple[Any, ...]


@dataclass(frozen=True)
class TlaFunction:
    pairs: tuple[tuple[Any, Any], ...]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            raise TlaValueError(f"unexpected {text[pos:pos + 20]!r} in a TLA+ value")
        out.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str:
        return self.toks[self.i][1] if self.i < len(self.toks) else ""

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise TlaValueError("a TLA+ value ends too early")
        tok = self.toks[self.i]
        if expected is not None and tok[1] != expected:
            raise TlaValueError(f"expected {expected!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def items(self, close: str) -> list[Any]:
        out: list[Any] = []
        while self.peek() != close:
            out.append(self.value())
            if self.peek() == ",":
                self.take(",")
        self.take(close)
        return out

    def value(self) -> Any:
        kind, tok = self.take()
        if kind == "num":
            return int(tok)
        if kind == "str":
            return tok[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        if tok == "<<":
            return self.items(">>")
        if tok == "{":
            return TlaSet(tuple(self.items("}")))
        if tok == "[":
            return self.record()
        if tok == "(":
            return self.function()
        if kind == "id":
            return {"TRUE": True, "FALSE": False}.get(tok, ModelValue(tok))
        raise TlaValueError(f"unexpected {tok!r} in a TLA+ value")

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while self.peek() != "]":
            key = self.take()[1]
            self.take("|->")
            out[key] = self.value()
            if self.peek() == ",":
                self.take(",")
        self.take("]")
        return out

    def function(self) -> TlaFunction:
        pairs: list[tuple[Any, Any]] = []
        while True:
            key = self.value()
            self.take(":>")
            pairs.append((key, self.value()))
            if self.peek() != "@@":
                break
            self.take("@@")
        self.take(")")
        return TlaFunction(tuple(pairs))


def parse_value(text: str) -> Any:
    """The Python value of one TLA+ value printed by TLC."""
    parser = _Parser(text)
    value = parser.value()
    if parser.i != len(parser.toks):
        raise TlaValueError(f"unexpected {parser.peek()!r} after a TLA+ value")
    return value


_ASSIGN = re.compile(r"^(?:/\\ )?([A-Za-z_][A-Za-z0-9_]*) = ", re.M)


def parse_state(text: str) -> dict[str, Any]:
    """A state as TLC prints it: `/\\ var = value` conjuncts (or a lone `var = value`)."""
    marks = list(_ASSIGN.finditer(text))
    state: dict[str, Any] = {}
    for k, m in enumerate(marks):
        stop = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        state[m.group(1)] = parse_value(text[m.end():stop])
    return state
