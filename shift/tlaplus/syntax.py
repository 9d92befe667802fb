"""TLA+ source parsed by the tree-sitter-tlaplus grammar (PyPI `tree-sitter-tlaplus`).

`parse` gives the syntax tree of a module; `definitions` its top-level operators by name;
`assignments` the right-hand sides of `x = e` and `x' = e` for a variable x. The tree is
tree-sitter's (`tree_sitter.Node`): node types are the grammar's (`record_literal`,
`bound_infix_op`, ...), and a text the grammar does not accept still gives a tree, with
`ERROR` or missing nodes where it failed (`first_error`).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from functools import cache

import tree_sitter_tlaplus
from tree_sitter import Language, Node, Parser

from shift.errors import SpecError

# Top-level units that define a name: `Op(x) == e` and `f[x \in S] == e`.
DEFINITIONS = frozenset({"operator_definition", "function_definition"})


@cache
def _language() -> Language:
    # tree-sitter-tlaplus 1.5.0 hands its grammar over as an address (an int); tree-sitter
    # 0.22 and later deprecate that form for a capsule, which this grammar does not yet give.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return Language(tree_sitter_tlaplus.language())


_local = threading.local()  # a Parser is not to be shared between threads


def parse(source: str | bytes) -> Node:
    """The syntax tree of TLA+ source: its root, a `source_file` node."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_language())
    return parser.parse(source.encode() if isinstance(source, str) else source).root_node


def text(node: Node) -> str:
    return node.text.decode() if node.text is not None else ""


def line(node: Node) -> int:
    """The 1-based line the node starts on."""
    return node.start_point.row + 1


def first_error(node: Node) -> Node | None:
    """The first node, in source order, where the grammar failed (ERROR or missing): the
    innermost one, since an ERROR that wraps a whole module starts at its first line."""
    if not node.has_error:
        return None
    stack = [node]
    while stack:
        n = stack.pop()
        inner = [c for c in n.children if c.has_error or c.is_error or c.is_missing]
        if (n.is_error or n.is_missing) and not inner:
            return n
        stack.extend(reversed(inner))
    return node


def definition(path: object, root: Node, name: str, missing: str) -> Node:
    """The top-level definition `name` of the module parsed into `root`, well formed; else a
    SpecError with the file, and the line and column of the innermost syntax error: in the
    definition, or anywhere in the module when a broken text hides it from the grammar.
    `missing` says what is expected (e.g. "no `D == [...]` record (the design's choices)")."""
    d = definitions(root).get(name)
    bad = first_error(root if d is None else d)
    if bad is None:
        if d is None:
            raise SpecError(f"{path}: {missing}")
        return d
    where = f"{path}:{line(bad)}:{bad.start_point.column + 1}"
    if d is None:
        raise SpecError(f"{where}: not well-formed TLA+; {missing}")
    raise SpecError(f"{where}: {name}: not well-formed TLA+")


# Named children of a module that are not units: its `---- MODULE`, `----` and `====` lines.
_RULES = frozenset({"header_line", "single_line", "double_line"})


def units(root: Node) -> list[Node]:
    """The top-level units of the first module in the tree (none if there is no module):
    EXTENDS, declarations, definitions, ..., in source order."""
    module = next((c for c in root.children if c.type == "module"), None)
    if module is None:
        return []
    return [c for k, c in enumerate(module.children)
            if c.is_named and c.type not in _RULES and module.field_name_for_child(k) != "name"]


def definitions(root: Node) -> dict[str, Node]:
    """The module's top-level definitions by name (not those of LET or of instances)."""
    out = {}
    for unit in units(root):
        name = unit.child_by_field_name("name")
        if unit.type in DEFINITIONS and name is not None:
            out[text(name)] = unit
    return out


def body(definition: Node) -> Node:
    """The right-hand side of a definition."""
    node = definition.child_by_field_name("definition")
    if node is None:  # only in a tree with errors
        raise ValueError(f"line {line(definition)}: a definition without a body")
    return node


def _symbol(node: Node) -> str:
    symbol = node.child_by_field_name("symbol")
    return symbol.type if symbol is not None else ""


def assignments(node: Node, variable: str) -> Iterator[Node]:
    """The right-hand side of every `variable = e` and `variable' = e` below node, in
    source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "bound_infix_op" and _symbol(n) == "eq":
            lhs = n.child_by_field_name("lhs")
            if lhs is not None and lhs.type == "bound_postfix_op" and _symbol(lhs) == "prime":
                lhs = lhs.child_by_field_name("lhs")
            rhs = n.child_by_field_name("rhs")
            if lhs is not None and lhs.type == "identifier_ref" and text(lhs) == variable \
                    and rhs is not None:
                yield rhs
        stack.extend(reversed(n.children))
