"""The constants a run of the model needs: a design's record D and a bound's CONSTANTS.

Both are read from the specification itself, so the model cannot drift from it: a design
is the `D == [...]` record of its module (spec/Shift.tla and the others), a bound is a
`[bounds.NAME]` table of spec/designs.toml read by the TLC harness's loader
(`shift.tlc.designs`) and parsed with its TLA+ value parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from shift.errors import SpecError
from shift.tlc.designs import Catalog, load_catalog
from shift.tlc.values import TlaSet, TlaValueError, parse_value

SKIPS = ("none", "counter", "prefix", "psn", "flag")


@dataclass(frozen=True)
class Design:
    """Failover.tla's record D, under the design's name."""

    name: str
    failover: bool
    skip: str
    refuseAtomics: bool
    failBack: bool
    readsResponder: bool
    staged: bool


@dataclass(frozen=True)
class Bound:
    """The CONSTANTS of State.tla."""

    name: str
    workloads: tuple[int, ...]
    max_retries: int
    max_drops: int
    max_faults: int
    fault_paths: frozenset[int]
    recover: bool


_D = re.compile(r"^D\s*==\s*(\[.*?\])\s*$", re.M | re.S)


def _design_from_module(name: str, path: Path) -> Design:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such module for design {name}") from None
    m = _D.search(text)
    if m is None:
        raise SpecError(f"{path}: no `D == [...]` record (the design's choices)")
    try:
        rec = parse_value(m.group(1))
    except TlaValueError as e:
        raise SpecError(f"{path}: D: {e}") from None
    fields = ("failover", "skip", "refuseAtomics", "failBack", "readsResponder", "staged")
    if not isinstance(rec, dict) or set(rec) != set(fields):
        raise SpecError(f"{path}: D must be a record with fields {', '.join(fields)}")
    if rec["skip"] not in SKIPS:
        raise SpecError(f"{path}: D.skip = {rec['skip']!r}: the model knows {', '.join(SKIPS)}")
    return Design(name, **{f: rec[f] for f in fields})


def _ints(name: str, value: object) -> tuple[int, ...]:
    if isinstance(value, TlaSet) and all(isinstance(v, int) for v in value.members):
        return tuple(sorted(value.members))
    raise SpecError(f"bound constant {name} = {value!r}: expected a set of integers")


def _int(name: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise SpecError(f"bound constant {name} = {value!r}: expected an integer")


def bound_from_constants(name: str, constants: dict[str, str]) -> Bound:
    """A Bound from the cfg literals of designs.toml (as `Catalog.bounds[...]` holds them)."""
    need = ("Workloads", "MaxRetries", "MaxDrops", "MaxFaults", "FaultPaths", "Recover")
    missing = [k for k in need if k not in constants]
    if missing:
        raise SpecError(f"bound {name}: constants {', '.join(missing)} missing")
    try:
        v = {k: parse_value(constants[k]) for k in need}
    except TlaValueError as e:
        raise SpecError(f"bound {name}: {e}") from None
    if not isinstance(v["Recover"], bool):
        raise SpecError(f"bound {name}: Recover = {v['Recover']!r}: expected TRUE or FALSE")
    return Bound(name, _ints("Workloads", v["Workloads"]), _int("MaxRetries", v["MaxRetries"]),
                 _int("MaxDrops", v["MaxDrops"]), _int("MaxFaults", v["MaxFaults"]),
                 frozenset(_ints("FaultPaths", v["FaultPaths"])), v["Recover"])


def design(name: str, catalog: Catalog | None = None) -> Design:
    """The design `name` of designs.toml, with D read from its module."""
    catalog = catalog or load_catalog()
    d = catalog.design(name)
    return _design_from_module(d.name, catalog.spec_dir / f"{d.module}.tla")


def bound(name: str, catalog: Catalog | None = None) -> Bound:
    catalog = catalog or load_catalog()
    b = catalog.bound(name)
    return bound_from_constants(b.name, b.constants)
