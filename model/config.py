"""The constants a run of the model needs: a design's record D and a bound's CONSTANTS.

All are read from the specification itself, so the model cannot drift from it: a design
is the `D == [...]` record of its module (spec/Shift.tla and the others), read with the
TLA+ grammar (`shift.tlaplus`); a bound is a `[bounds.NAME]` table of spec/designs.toml
(`shift.spec.catalog`), its cfg literals read as TLA+ values, with `Program(k)`,
`BProgram(k)` and `StoresOf(k)` of Workloads.tla for each of its `Workloads`
(`shift.spec.workloads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shift.model.state import ONE_SIDED, REGIONS, RNR_FOREVER, TWO_SIDED, num_notes
from shift.spec.catalog import Catalog, load_catalog, not_covered
from shift.spec.workloads import WR, Store, Workloads, read_workloads

from shift.errors import SpecError, UsageError
from shift.tlaplus.syntax import body, definition, line, parse
from shift.tlaplus.values import TlaSet, TlaValueError, parse_value, value

SKIPS = ("none", "counter", "prefix", "psn", "flag")


@dataclass(frozen=True)
class DesignRecord:
    """A design's record D (the argument of Failover.tla's actions), under its name."""

    name: str
    failover: bool
    skip: str
    refuseAtomics: bool
    failBack: bool
    readsResponder: bool
    staged: bool
    keepNotes: bool = False  # keep ACKed notifications until a counter covers them (F7)


@dataclass(frozen=True)
class Constants:
    """The CONSTANTS of State.tla, and each host's program and stores for each k of
    `Workloads`."""

    name: str
    workloads: tuple[int, ...]
    max_retries: int
    max_drops: int
    max_faults: int
    fault_paths: frozenset[int]
    recover: bool
    ctl_loss: bool  # CtlLoss: the wire may lose the layer's control messages, on any path
    ack_before_cqe: bool  # AckBeforeCqe: a receive completion is written after its ACK leaves
    rnr_nak: bool  # RnrNak: a notification that finds no receive WR is RNR-NAKed, not discarded
    rnr_retry: int  # RnrRetry: RNR NAKs retried before RNR_RETRY_EXC_ERR; 7 is for ever
    device_fatal: bool  # DeviceFatal: a dead NIC completes nothing; its layer reads an event
    implicit_nak: bool  # ImplicitNak: an ACK past a READ/atomic sends the requester back to it
    programs: tuple[tuple[WR, ...], ...]  # Program(k) (A's) for each k of workloads, in order
    stores: tuple[tuple[Store, ...], ...]  # StoresOf(k) (B's), likewise
    bprograms: tuple[tuple[WR, ...], ...] = ()  # BProgram(k) (B's), likewise; () all empty

    def program(self, k: int) -> tuple[WR, ...]:
        """Program(k): A's WRs to B."""
        return self.programs[self._index(k)]

    def stores_of(self, k: int) -> tuple[Store, ...]:
        """StoresOf(k): B's stores."""
        return self.stores[self._index(k)]

    def bprogram(self, k: int) -> tuple[WR, ...]:
        """BProgram(k): B's WRs to A."""
        i = self._index(k)
        return self.bprograms[i] if self.bprograms else ()

    def programs_of(self, k: int) -> tuple[tuple[WR, ...], tuple[WR, ...]]:
        """ProgramOf(k, h) for h = A, B."""
        return self.program(k), self.bprogram(k)

    def stores_at(self, k: int) -> tuple[tuple[Store, ...], tuple[Store, ...]]:
        """StoresAt(k, h) for h = A, B."""
        return (), self.stores_of(k)

    def one_way(self, k: int) -> bool:
        """B posts no WR in workload k: the traffic the C core and the proofs have."""
        return not self.bprogram(k)

    def _index(self, k: int) -> int:
        if k not in self.workloads:
            raise ValueError(f"workload {k} is not in bound {self.name}")
        return self.workloads.index(k)


def _record_from_module(name: str, path: Path) -> DesignRecord:
    try:
        source = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such module for design {name}") from None
    d = definition(path, parse(source), "D", "no `D == [...]` record (the design's choices)")
    where = f"{path}:{line(d)}"
    try:
        rec = value(body(d))
    except TlaValueError as e:
        raise SpecError(f"{where}: D: {e}") from None
    fields = ("failover", "skip", "refuseAtomics", "failBack", "readsResponder", "staged")
    optional = ("keepNotes",)  # FALSE when absent (Failover.tla's KeepsNotes)
    if not isinstance(rec, dict) or not set(fields) <= set(rec) <= set(fields + optional):
        raise SpecError(f"{where}: D must be a record with fields {', '.join(fields)} "
                        f"(and optionally {', '.join(optional)})")
    if rec["skip"] not in SKIPS:
        raise SpecError(f"{where}: D.skip = {rec['skip']!r}: the model knows {', '.join(SKIPS)}")
    return DesignRecord(name, **{f: rec[f] for f in fields + optional if f in rec})


def _ints(name: str, given: object) -> tuple[int, ...]:
    if isinstance(given, TlaSet) and all(isinstance(v, int) for v in given.members):
        return tuple(sorted(given.members))
    raise SpecError(f"bound constant {name} = {given!r}: expected a set of integers")


def _int(name: str, given: object) -> int:
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    raise SpecError(f"bound constant {name} = {given!r}: expected an integer")


def _program(bound: str, workloads: Workloads, k: int, host: str = "A") -> tuple[WR, ...]:
    """ProgramOf(k, host), if the model can run it: the operations, regions and
    notifications it knows (Workloads.tla's OneSided, TwoSided and Regions, restated in
    model/state.py)."""
    prog = workloads.program_of(k, host, bound)
    op = "Program" if host == "A" else "BProgram"
    lines = workloads.lines if host == "A" else workloads.blines
    notes = 0
    for w, x in enumerate(prog, 1):
        where = f"{workloads.path}:{lines[k][w - 1]}: {op}({k}), WR {w}"
        if x.op not in ONE_SIDED | TWO_SIDED:
            raise SpecError(f"{where}: op {x.op!r}: the model knows "
                            f"{', '.join(sorted(ONE_SIDED | TWO_SIDED))}")
        if x.region not in (0, *REGIONS):
            raise SpecError(f"{where}: region {x.region}: the model has regions "
                            f"{', '.join(map(str, REGIONS))} (0: none)")
        notes += x.op in TWO_SIDED
        note = notes if x.op in TWO_SIDED else 0
        if x.note != note:
            raise SpecError(f"{where}: note {x.note}: a {x.op} here is note {note} (a "
                            f"notification's number in post order, 1, 2, ...; 0 if one-sided)")
    return prog


def _stores(workloads: Workloads, k: int, prog: tuple[WR, ...]) -> tuple[Store, ...]:
    """StoresOf(k), if the model can run it: regions it has, each store after the
    notifications of A's program (DataAtNotification expects A's writes alone)."""
    stores = workloads.stores_of(k)
    for i, x in enumerate(stores, 1):
        where = f"{workloads.path}: StoresOf({k}), store {i}"
        if x.region not in REGIONS:
            raise SpecError(f"{where}: region {x.region}: the model has regions "
                            f"{', '.join(map(str, REGIONS))}")
        if x.after < num_notes(prog):
            raise SpecError(f"{where}: after {x.after}: a store comes after the workload's "
                            f"{num_notes(prog)} notification(s)")
    return stores


def bound_from_constants(name: str, constants: dict[str, str],
                         workloads: Workloads) -> Constants:
    """A bound's constants, from the cfg literals of designs.toml (`Catalog.bounds[...]`),
    with the programs of its workloads."""
    need = ("Workloads", "MaxRetries", "MaxDrops", "MaxFaults", "FaultPaths", "Recover",
            "CtlLoss", "AckBeforeCqe", "RnrNak", "RnrRetry", "DeviceFatal", "ImplicitNak")
    missing = [k for k in need if k not in constants]
    if missing:
        raise SpecError(f"bound {name}: constants {', '.join(missing)} missing")
    try:
        v = {k: parse_value(constants[k]) for k in need}
    except TlaValueError as e:
        raise SpecError(f"bound {name}: {e}") from None
    for flag in ("Recover", "CtlLoss", "AckBeforeCqe", "RnrNak", "DeviceFatal", "ImplicitNak"):
        if not isinstance(v[flag], bool):
            raise SpecError(f"bound {name}: {flag} = {v[flag]!r}: expected TRUE or FALSE")
    ks = _ints("Workloads", v["Workloads"])
    programs = tuple(_program(name, workloads, k) for k in ks)
    stores = tuple(_stores(workloads, k, prog) for k, prog in zip(ks, programs, strict=True))
    bprograms = tuple(_program(name, workloads, k, "B") for k in ks)
    return Constants(name, ks, _int("MaxRetries", v["MaxRetries"]),
                     _int("MaxDrops", v["MaxDrops"]), _int("MaxFaults", v["MaxFaults"]),
                     frozenset(_ints("FaultPaths", v["FaultPaths"])), v["Recover"],
                     v["CtlLoss"], v["AckBeforeCqe"], v["RnrNak"], _rnr_retry(name, v["RnrRetry"]),
                     v["DeviceFatal"], v["ImplicitNak"],
                     programs, stores, bprograms)


def _rnr_retry(bound: str, value: object) -> int:
    """RnrRetry, which verbs encodes in 3 bits (7: for ever)."""
    n = _int("RnrRetry", value)
    if not 0 <= n <= RNR_FOREVER:
        raise SpecError(f"bound {bound}: RnrRetry = {n}: expected 0..{RNR_FOREVER} "
                        f"({RNR_FOREVER}: retry for ever)")
    return n


def design(name: str, catalog: Catalog | None = None) -> DesignRecord:
    """The design `name` of designs.toml, with D read from its module."""
    catalog = catalog or load_catalog()
    d = catalog.design(name)
    if not d.model:
        raise UsageError(not_covered(name))
    return _record_from_module(d.name, catalog.spec_dir / f"{d.module}.tla")


def bound(name: str, catalog: Catalog | None = None) -> Constants:
    """The bound `name` of designs.toml, with its programs read from Workloads.tla."""
    catalog = catalog or load_catalog()
    b = catalog.bound(name)
    return bound_from_constants(b.name, b.constants, read_workloads(catalog.spec_dir))
