"""TLA+ values, as TLC prints them or a module states them, read into Python values.

Sequences and tuples become lists, records dicts, sets `TlaSet` (a tuple of members, so
unhashable members are kept), functions `TlaFunction` (pairs, as TLC prints them:
`(k1 :> v1 @@ k2 :> v2)`), model values `ModelValue`; integers, strings and booleans are
Python's own.

The grammar does the parsing (`shift.tlaplus.syntax`); what is written by hand here, and why:
- a text is read as the body of a one-definition module (`_HEAD`), because the grammar's start
  symbol is a module and it has no entry point for a lone expression;
- the escapes inside a string literal are decoded here: the grammar marks the literal, not
  the characters it stands for.

Speed: the conformance test reads every node label of TLC's state graph, each distinct
value text once (`shift.tlc.conformance.parse_dot` remembers the rest). Shift's dump at bound
small (34,114 states, 80,956 edges, 61 MB) has 623 distinct value texts (102 kB): this reader
parses them in 56 ms, the hand-written tokenizer it replaced in 29 ms (median of 7 runs each).
`parse_dot` as a whole takes 1.0 s either way (median of 5, same results with either parser):
splitting and looking up 1.16 million `var = value` texts costs far more than parsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from shift.tlaplus.syntax import DEFINITIONS, first_error, parse, text, units


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


_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}
_BRACKETS = frozenset({"langle_bracket", "rangle_bracket", "comment", "block_comment"})


def _string(node: Node) -> str:
    return _ESCAPE.sub(lambda m: _ESCAPED.get(m.group(1), m.group(1)), text(node)[1:-1])


def _members(node: Node) -> list[Any]:
    return [value(c) for c in node.named_children if c.type not in _BRACKETS]


def _record(node: Node) -> dict[str, Any]:
    # [f1 |-> v1, f2 |-> v2]: named children alternate field name and value.
    parts = [c for c in node.named_children if c.type not in ("all_map_to", *_BRACKETS)]
    return {text(k): value(v) for k, v in zip(parts[::2], parts[1::2], strict=True)}


def _pairs(node: Node) -> list[tuple[Any, Any]]:
    symbol = node.child_by_field_name("symbol")
    lhs, rhs = node.child_by_field_name("lhs"), node.child_by_field_name("rhs")
    if node.type == "bound_infix_op" and symbol is not None and lhs and rhs:
        if symbol.type == "compose":  # f @@ g
            return _pairs(lhs) + _pairs(rhs)
        if symbol.type == "map_to":  # k :> v
            return [(value(lhs), value(rhs))]
    raise _not_a_value(node)


def _function(node: Node) -> TlaFunction:
    inner = [c for c in node.named_children if c.type not in _BRACKETS]
    if len(inner) != 1 or inner[0].type != "bound_infix_op":
        raise _not_a_value(node)
    return TlaFunction(tuple(_pairs(inner[0])))


def _negative(node: Node) -> int:
    symbol, rhs = node.child_by_field_name("symbol"), node.child_by_field_name("rhs")
    if symbol is not None and symbol.type == "negative" and rhs is not None \
            and rhs.type == "nat_number":
        return -int(text(rhs))
    raise _not_a_value(node)


_READERS: dict[str, Callable[[Node], Any]] = {
    "nat_number": lambda n: int(text(n)),
    "boolean": lambda n: text(n) == "TRUE",
    "string": _string,
    "tuple_literal": _members,
    "finite_set_literal": lambda n: TlaSet(tuple(_members(n))),
    "record_literal": _record,
    "parentheses": _function,
    "identifier_ref": lambda n: ModelValue(text(n)),
    "bound_prefix_op": _negative,
}


def _not_a_value(node: Node) -> TlaValueError:
    shown = text(node)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return TlaValueError(f"{shown!r} ({node.type.replace('_', ' ')}) is not a TLA+ value "
                         f"as TLC prints them")


def value(node: Node) -> Any:
    """The Python value of a constant expression of the tree (a module's definition body,
    say): literals of integers, strings, booleans, tuples, sets, records, functions in
    `:>`/`@@` form, and model values."""
    reader = _READERS.get(node.type)
    if reader is None:
        raise _not_a_value(node)
    return reader(node)


_HEAD = "---- MODULE V ----\nV ==\n"  # the text starts a line: conjuncts align on `/\\`
_HEAD_BYTES = len(_HEAD.encode())


def _expression(source: str) -> Node:
    """The expression `source` as the grammar reads it, or TlaValueError saying where not."""
    root = parse(f"{_HEAD}{source}\n====\n")
    bad = first_error(root)
    if bad is not None:
        at = max(bad.start_byte - _HEAD_BYTES, 0)
        rest = source.encode()[at:at + 20].decode(errors="replace")
        if bad.is_missing or not rest:
            raise TlaValueError(f"a TLA+ value ends too early: {source[:40]!r}")
        raise TlaValueError(f"unexpected {rest!r} in a TLA+ value")
    found = units(root)
    end = _HEAD_BYTES + len(source.rstrip().encode())
    if len(found) != 1 or found[0].type not in DEFINITIONS or found[0].end_byte < end:
        raise TlaValueError(f"text after the TLA+ value in {source[:40]!r}")
    node = found[0].child_by_field_name("definition")
    assert node is not None  # a definition without errors has a body
    return node


def parse_value(source: str) -> Any:
    """The Python value of one TLA+ value printed by TLC (or written as a cfg constant)."""
    return value(_expression(source))


def parse_state(source: str) -> dict[str, Any]:
    """A state as TLC prints it: `/\\ var = value` conjuncts (or a lone `var = value`)."""
    if not source.strip():
        return {}
    node = _expression(source)
    conjuncts = ([c.named_children[-1] for c in node.named_children if c.type == "conj_item"]
                 if node.type == "conj_list" else [node])
    state: dict[str, Any] = {}
    for c in conjuncts:
        lhs, symbol = c.child_by_field_name("lhs"), c.child_by_field_name("symbol")
        rhs = c.child_by_field_name("rhs")
        if c.type != "bound_infix_op" or symbol is None or symbol.type != "eq" \
                or lhs is None or lhs.type != "identifier_ref" or rhs is None:
            raise TlaValueError(f"not `variable = value`: {text(c)[:40]!r}")
        state[text(lhs)] = value(rhs)
    return state
