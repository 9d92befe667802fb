"""The applications' programs: `Program(k)` of Workloads.tla, read without evaluating TLA+.

Workloads.tla is the one place a workload is written. The model (`shift.model.config`: the
programs of a bound's `Workloads`) and the proofs (`shift.proofs.programs`) read it here,
from the spec folder in use, through the TLA+ grammar (`shift.tlaplus`). The reader takes
the form the module has, and nothing more general:

    Program(k) ==
        CASE k = 1 -> << WR("WRITE", 1, 1, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>
          [] k = 2 -> << ... >>

one arm `k = N` per workload (no OTHER), each a tuple of `WR(op, region, value, signaled,
note)`, `CAS(region, compare, swap, signaled)`, `Reply(w, after)` or `BadKey(w, key)` (an
application error: key "LKEY" or "RKEY") of either, with literal arguments, where `WR` is
the record of exactly those five parameters, `compare |-> 0`, `after |-> 0` and
`key |-> "OK"`, and `CAS` takes exactly those four. B's program to A, `BProgram(k)`, has the
same form with an `OTHER -> << >>` arm (a one-way workload: B posts no WR), and so do B's
stores, `StoresOf(k) == CASE k = 6 -> << Store(region, value, after), ... >> [] OTHER ->
<< >>` (OTHER: no stores; a workload without an arm has none). `ProgramOf(k, h)` and
`StoresAt(k, h)` must give A Program(k) and no stores, B BProgram(k) and StoresOf(k).
Anything else is a `SpecError` naming the file and line: TLC may accept more, but the
programs must be readable here for every command that is not TLC.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from tree_sitter import Node

from shift.errors import SpecError
from shift.tlaplus.syntax import body, definition, line, parse, text
from shift.tlaplus.values import TlaValueError, value

MODULE = "Workloads.tla"
FIELDS = ("op", "region", "value", "signaled", "note")
CAS_FIELDS = ("region", "compare", "swap", "signaled")
STORE_FIELDS = ("region", "value", "after")
_COMMENTS = frozenset({"comment", "block_comment"})


class WR(NamedTuple):
    """Workloads.tla's WR(op, region, value, signaled, note), with CAS's compare value
    (CAS(region, compare, swap, signaled) is WR("CAS", region, swap, signaled, 0, compare))
    and a reply's `after` (Reply(w, after): posted once its host took `after`
    notifications)."""

    op: str
    region: int
    value: int
    signaled: bool
    note: int
    compare: int = 0
    after: int = 0
    key: str = "OK"  # "OK", or an application error: "LKEY", "RKEY" (BadKey(w, key))


class Store(NamedTuple):
    """Workloads.tla's Store(region, value, after): B's application writes value into
    its region once it took `after` notifications."""

    region: int
    value: int
    after: int


@dataclass(frozen=True)
class Workloads:
    """The programs of one Workloads.tla by workload number, and where each WR is written."""

    path: Path
    programs: dict[int, tuple[WR, ...]]
    lines: dict[int, tuple[int, ...]]  # workload -> the line of each of its WRs
    line: int  # the line of `Program(k) ==`
    stores: dict[int, tuple[Store, ...]]  # StoresOf(k) for the workloads with an arm
    bprograms: dict[int, tuple[WR, ...]]  # BProgram(k) for the workloads with an arm
    blines: dict[int, tuple[int, ...]]  # workload -> the line of each of B's WRs

    def stores_of(self, k: int) -> tuple[Store, ...]:
        """StoresOf(k): B's stores in workload k (none without an arm: its OTHER)."""
        return self.stores.get(k, ())

    def bprogram(self, k: int) -> tuple[WR, ...]:
        """BProgram(k): B's WRs to A in workload k (none without an arm: its OTHER)."""
        return self.bprograms.get(k, ())

    def program_of(self, k: int, host: str, bound: str = "") -> tuple[WR, ...]:
        """ProgramOf(k, h): A's Program(k), B's BProgram(k)."""
        return self.program(k, bound) if host == "A" else self.bprogram(k)

    def stores_at(self, k: int, host: str) -> tuple[Store, ...]:
        """StoresAt(k, h): B's StoresOf(k); A makes no stores."""
        return self.stores_of(k) if host == "B" else ()

    def one_way(self) -> dict[int, tuple[WR, ...]]:
        """Program(k) of the workloads where B posts no WR (what the proofs take)."""
        return {k: p for k, p in self.programs.items() if not self.bprogram(k)}

    def program(self, k: int, bound: str = "") -> tuple[WR, ...]:
        """Program(k); a SpecError saying which workloads there are when k is not one (and
        which bound names it)."""
        if k not in self.programs:
            named = f", which bound {bound} names in its Workloads" if bound else ""
            have = ", ".join(map(str, self.programs)) or "none"
            raise SpecError(f"{self.path}:{self.line}: no workload {k}{named}: Program(k) "
                            f"has an arm for k = {have} only")
        return self.programs[k]

    def where(self, k: int, w: int) -> str:
        """file:line of WR w (1-based) of workload k."""
        return f"{self.path}:{self.lines[k][w - 1]}"


def _named(node: Node) -> list[Node]:
    return [c for c in node.named_children if c.type not in _COMMENTS]


def _missing(form: str) -> str:
    return f"no `{form}` definition (the applications' programs)"


def _fields(node: Node, name: str) -> list[Node]:
    """The named nodes of a field (the grammar puts the brackets and commas there too)."""
    return [c for c in node.children_by_field_name(name)
            if c.is_named and c.type not in _COMMENTS]


def _parameters(d: Node) -> list[str]:
    return [text(c) for c in _fields(d, "parameter")]


def _check_wr(path: Path, d: Node) -> None:
    """WR must be the record of its five parameters and `compare |-> 0`, so that an
    argument's position is its field."""
    record = body(d)
    parts = _named(record) if record.type == "record_literal" else []  # f |-> v, ...
    fields = [(text(f), text(v)) for f, v in zip(parts[0::3], parts[2::3], strict=False)
              if v.type in ("identifier_ref", "nat_number")]
    fields += [(text(f), text(v)) for f, v in zip(parts[0::3], parts[2::3], strict=False)
               if v.type == "string"]
    want = [(f, f) for f in FIELDS] + [("compare", "0"), ("after", "0"), ("key", '"OK"')]
    if tuple(_parameters(d)) != FIELDS or len(parts) != 3 * len(want) \
            or sorted(fields) != sorted(want):
        raise SpecError(f"{path}:{line(d)}: WR must be WR({', '.join(FIELDS)}) == "
                        f"[{', '.join(f'{f} |-> {v}' for f, v in want)}] (the reader "
                        f"takes Program(k)'s WRs by position)")


def _check_cas(path: Path, d: Node) -> None:
    """CAS must take its four parameters in the order the reader maps them."""
    if tuple(_parameters(d)) != CAS_FIELDS:
        raise SpecError(f"{path}:{line(d)}: CAS must be CAS({', '.join(CAS_FIELDS)}) == "
                        f"... (the reader takes Program(k)'s CASes by position)")


def _natural(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# Each field's type, as WRs of Workloads.tla has it (the op and region sets are the model's
# to judge: shift.model.config).
_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "op": ("a string", lambda v: isinstance(v, str)),
    "region": ("a natural number", _natural),
    "value": ("a natural number", _natural),
    "signaled": ("TRUE or FALSE", lambda v: isinstance(v, bool)),
    "note": ("a natural number", _natural),
    "compare": ("a natural number", _natural),
    "swap": ("a natural number", _natural),
    "after": ("a natural number", _natural),
    "key": ('"OK", "LKEY" or "RKEY"', lambda v: v in ("OK", "LKEY", "RKEY")),
}


def _arg(where: str, field: str, node: Node) -> Any:
    try:
        v = value(node)
    except TlaValueError as e:
        raise SpecError(f"{where}: {field}: {e}") from None
    kind, ok = _TYPES[field]
    if not ok(v):
        raise SpecError(f"{where}: {field} = {text(node)}: expected {kind}")
    return v


def _wr(path: Path, k: int, w: int, node: Node, op_name: str = "Program") -> WR:
    where = f"{path}:{line(node)}: {op_name}({k}), WR {w}"
    name = node.child_by_field_name("name")
    op = text(name) if node.type == "bound_op" and name is not None else ""
    if op == "Reply":
        args = _fields(node, "parameter")
        if len(args) != 2:
            raise SpecError(f"{where}: Reply takes 2 arguments (w, after), not {len(args)}")
        return _wr(path, k, w, args[0], op_name)._replace(after=_arg(where, "after", args[1]))
    if op == "BadKey":
        args = _fields(node, "parameter")
        if len(args) != 2:
            raise SpecError(f"{where}: BadKey takes 2 arguments (w, key), not {len(args)}")
        return _wr(path, k, w, args[0], op_name)._replace(key=_arg(where, "key", args[1]))
    if op not in ("WR", "CAS"):
        raise SpecError(f"{where}: expected WR({', '.join(FIELDS)}) or "
                        f"CAS({', '.join(CAS_FIELDS)}) with literal arguments, "
                        f"not {text(node)[:40]!r}")
    fields = FIELDS if op == "WR" else CAS_FIELDS
    args = _fields(node, "parameter")
    if len(args) != len(fields):
        raise SpecError(f"{where}: {op} takes {len(fields)} arguments ({', '.join(fields)}), "
                        f"not {len(args)}")
    v = {f: _arg(where, f, a) for f, a in zip(fields, args, strict=True)}
    if op == "CAS":
        return WR("CAS", v["region"], v["swap"], v["signaled"], 0, v["compare"])
    return WR(**v)


def _guard(path: Path, op: str, k: str, node: Node) -> int:
    lhs, rhs = node.child_by_field_name("lhs"), node.child_by_field_name("rhs")
    symbol = node.child_by_field_name("symbol")
    if node.type != "bound_infix_op" or symbol is None or symbol.type != "eq" or lhs is None \
            or text(lhs) != k or rhs is None or rhs.type != "nat_number":
        raise SpecError(f"{path}:{line(node)}: {op}: a CASE arm's guard must be "
                        f"`{k} = N` for a workload number N, not {text(node)[:40]!r}")
    return int(text(rhs))


def read_workloads(spec_dir: Path) -> Workloads:
    """Program(k) of `spec_dir`/Workloads.tla for every arm; SpecError (file and line) for a
    form the reader does not take."""
    path = spec_dir / MODULE
    try:
        source = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such module (it defines Program(k), the workloads)") \
            from None
    root = parse(source)
    wr_form = "WR(" + ", ".join(FIELDS) + ") == [...]"
    _check_wr(path, definition(path, root, "WR", _missing(wr_form)))
    cas_form = "CAS(" + ", ".join(CAS_FIELDS) + ") == ..."
    _check_cas(path, definition(path, root, "CAS", _missing(cas_form)))
    d = definition(path, root, "Program", _missing("Program(k) == CASE ..."))
    param, case = _case(path, d, "Program", "<< WR(...), ... >> [] k = 2 -> ...")
    programs, lines = _programs(path, "Program", param, case, other=False)
    b = definition(path, root, "BProgram", _missing("BProgram(k) == CASE ..."))
    bparam, bcase = _case(path, b, "BProgram", "<< WR(...), ... >> [] OTHER -> << >>")
    bprograms, blines = _programs(path, "BProgram", bparam, bcase, other=True)
    _check_form(path, root, "ProgramOf", 'IF h = "A" THEN Program(k) ELSE BProgram(k)')
    _check_form(path, root, "StoresAt", 'IF h = "B" THEN StoresOf(k) ELSE << >>')
    return Workloads(path, programs, lines, line(d), _stores(path, root), bprograms, blines)


def _programs(path: Path, op: str, param: str, case: Node, other: bool,
              ) -> tuple[dict[int, tuple[WR, ...]], dict[int, tuple[int, ...]]]:
    """The WRs of each arm of op's CASE, and the line of each."""
    programs: dict[int, tuple[WR, ...]] = {}
    lines: dict[int, tuple[int, ...]] = {}
    for k, wrs in _arms(path, op, param, case, other=other):
        programs[k] = tuple(_wr(path, k, w, n, op) for w, n in enumerate(wrs, 1))
        lines[k] = tuple(line(n) for n in wrs)
    return programs, lines


def _check_form(path: Path, root: Node, op: str, form: str) -> None:
    """op(k, h) must be exactly `form` (the reader evaluates it by hand)."""
    d = definition(path, root, op, _missing(f"{op}(k, h) == {form}"))
    if tuple(_parameters(d)) != ("k", "h") or " ".join(text(body(d)).split()) != form:
        raise SpecError(f"{path}:{line(d)}: {op} must be {op}(k, h) == {form} (the reader "
                        f"evaluates it by hand)")


def _arms(path: Path, op: str, k: str, case: Node, other: bool,
          ) -> list[tuple[int, list[Node]]]:
    """The arms `k = N -> << e, ... >>` of op's CASE: (N, the elements); an OTHER arm
    only where `other` allows it, and then only `OTHER -> << >>`."""
    out: list[tuple[int, list[Node]]] = []
    for arm in _named(case):
        if arm.type == "case_box":
            continue
        parts = [c for c in _named(arm) if c.type != "case_arrow"]
        if other and arm.type == "other_arm" and parts and parts[-1].type == "tuple_literal" \
                and not _elements(parts[-1]):
            continue
        if arm.type != "case_arm" or len(parts) != 2:
            allowed = " and `OTHER -> << >>`" if other else " (no OTHER)"
            raise SpecError(f"{path}:{line(arm)}: {op}: only arms `{k} = N -> << ... >>`"
                            f"{allowed}")
        guard, seq = parts
        n = _guard(path, op, k, guard)
        if n in (m for m, _ in out):
            raise SpecError(f"{path}:{line(arm)}: {op}: a second arm for workload {n}")
        if seq.type != "tuple_literal":
            raise SpecError(f"{path}:{line(seq)}: {op}({n}): expected a tuple << ... >>, "
                            f"not {text(seq)[:40]!r}")
        out.append((n, _elements(seq)))
    return out


def _elements(seq: Node) -> list[Node]:
    return [c for c in _named(seq) if c.type not in ("langle_bracket", "rangle_bracket")]


def _store(path: Path, k: int, i: int, node: Node) -> Store:
    where = f"{path}:{line(node)}: StoresOf({k}), store {i}"
    name = node.child_by_field_name("name")
    args = _fields(node, "parameter")
    if node.type != "bound_op" or name is None or text(name) != "Store" \
            or len(args) != len(STORE_FIELDS):
        raise SpecError(f"{where}: expected Store({', '.join(STORE_FIELDS)}) with literal "
                        f"arguments, not {text(node)[:40]!r}")
    return Store(*(_arg(where, f, a) for f, a in zip(STORE_FIELDS, args, strict=True)))


def _stores(path: Path, root: Node) -> dict[int, tuple[Store, ...]]:
    """StoresOf(k) for every arm (Store must take its three parameters in order)."""
    s = definition(path, root, "Store", _missing("Store(" + ", ".join(STORE_FIELDS) +
                                                 ") == [...]"))
    if tuple(_parameters(s)) != STORE_FIELDS:
        raise SpecError(f"{path}:{line(s)}: Store must be Store({', '.join(STORE_FIELDS)}) "
                        f"== ... (the reader takes StoresOf(k)'s stores by position)")
    d = definition(path, root, "StoresOf", _missing("StoresOf(k) == CASE ..."))
    param, case = _case(path, d, "StoresOf", "<< Store(...), ... >> [] OTHER -> << >>")
    return {k: tuple(_store(path, k, i, n) for i, n in enumerate(ns, 1))
            for k, ns in _arms(path, "StoresOf", param, case, other=True)}


def _case(path: Path, d: Node, op: str, arms: str) -> tuple[str, Node]:
    """op(k) == CASE ...: its parameter and its CASE (else a SpecError showing the form)."""
    params = _parameters(d)
    case = body(d)
    if len(params) != 1 or case.type != "case":
        raise SpecError(f"{path}:{line(d)}: {op} must be {op}(k) == CASE k = 1 -> {arms}")
    return params[0], case
