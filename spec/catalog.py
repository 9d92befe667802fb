"""The catalogue of designs, properties and bounds: `designs.toml` beside the modules.

Read by the model (`shift.model.config`: a design's module, a bound's constants) and by the
TLC harness (`shift.tlc`: what to check, and what to expect); it depends on neither.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from shift.errors import SpecError, UsageError
from shift.tlaplus.syntax import definitions, parse

HOLDS, VIOLATED = "holds", "violated"


@dataclass(frozen=True)
class Design:
    name: str
    module: str
    summary: str
    violates: dict[str, str]  # property -> why it is expected to fail
    # bound -> more properties expected to fail at that bound only (and why)
    violates_at: dict[str, dict[str, str]] = field(default_factory=dict)
    # A design with a property list of its own (its `invariants`, `temporal`) is not a
    # row of the trilemma table: it has its own state and properties, its own CONSTANTS
    # per bound (`constants`: bound -> name -> cfg literal), and is checked only when
    # named. `model`: whether the Python model (model/) covers it.
    invariants: list[str] | None = None
    temporal: list[str] | None = None
    constants: dict[str, dict[str, str]] = field(default_factory=dict)
    model: bool = True
    # A variant (`variant_of`) is another design with some of its constants switched
    # (an assumption off, a bound raised): its module, property lists and model flag are
    # the base's unless given; it exists at the bounds it lists, its `constants.BOUND`
    # being the base's at that bound with the variant's values put in. Its verdicts are
    # its own (nothing of the base's `violates` is inherited).
    variant_of: str | None = None
    # bound -> properties of `violates` that hold at that bound (and why: its workloads
    # lack the shape that breaks them)
    holds_at: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def own_properties(self) -> bool:
        return self.invariants is not None

    def expected(self, prop: str) -> str:
        return VIOLATED if prop in self.violates else HOLDS

    def at(self, bound: str) -> Design:
        """The design's declaration at one bound: its own violations plus the bound's,
        less those the bound declares held."""
        held = self.holds_at.get(bound, {})
        violates = {**self.violates, **self.violates_at.get(bound, {})}
        return replace(self, violates={p: why for p, why in violates.items() if p not in held})


ENGINES = ("tlc", "explorer")


@dataclass(frozen=True)
class Bound:
    name: str
    summary: str
    constants: dict[str, str]  # name -> TLC cfg literal
    # The engine `shift check` uses at this bound when none is asked for, where the Python
    # model covers the design and the spec is the packaged one (`shift.commands.check`):
    # "explorer" where it was measured faster than TLC (docs/performance.md).
    engine: str = "tlc"


@dataclass(frozen=True)
class Catalog:
    spec_dir: Path
    invariants: list[str]
    temporal: list[str]
    observations: dict[str, str]  # variable -> what an application saw
    bounds: dict[str, Bound]
    designs: dict[str, Design]

    # Designs with a property list of their own (not rows of the trilemma table;
    # `shift check` checks them only when named with --design).
    others: dict[str, Design] = field(default_factory=dict)

    @property
    def properties(self) -> list[str]:
        return self.invariants + self.temporal

    def invariants_of(self, design: Design) -> list[str]:
        return self.invariants if design.invariants is None else design.invariants

    def temporal_of(self, design: Design) -> list[str]:
        return self.temporal if design.temporal is None else design.temporal

    def properties_of(self, design: Design) -> list[str]:
        return self.invariants_of(design) + self.temporal_of(design)

    def constants_of(self, design: Design, bound: Bound) -> dict[str, str]:
        """The CONSTANTS a design runs with at a bound: the bound's, or the design's own."""
        if not design.own_properties:
            return bound.constants
        if bound.name not in design.constants:
            raise UsageError(f"design {design.name} declares no constants for bound "
                             f"{bound.name} (designs.toml: designs.{design.name}.constants."
                             f"{bound.name}); its bounds: {', '.join(design.constants)}")
        return design.constants[bound.name]

    def design(self, name: str) -> Design:
        if name in self.designs:
            return self.designs[name]
        if name in self.others:
            return self.others[name]
        raise UsageError(f"unknown design {name!r}; designs: "
                         f"{', '.join([*self.designs, *self.others])}")

    def bound(self, name: str) -> Bound:
        if name not in self.bounds:
            raise UsageError(f"unknown bound {name!r}; bounds: {', '.join(self.bounds)}")
        return self.bounds[name]

    def only(self, names: list[str]) -> Catalog:
        """The catalogue with only the named properties (`shift check --property`); a name
        no design has is a one-line error naming those there are."""
        every = dict.fromkeys([*self.properties, *(p for d in self.others.values()
                                                   for p in self.properties_of(d))])
        unknown = [n for n in names if n not in every]
        if unknown:
            raise UsageError(f"--property {unknown[0]}: unknown property; properties: "
                             f"{', '.join(every)}")
        keep = set(names)

        def pick(props: list[str] | None) -> list[str] | None:
            return None if props is None else [p for p in props if p in keep]
        others = {n: replace(d, invariants=pick(d.invariants), temporal=pick(d.temporal))
                  for n, d in self.others.items()}
        return replace(self, invariants=pick(self.invariants) or [],
                       temporal=pick(self.temporal) or [], others=others)

    def spec_hash(self) -> str:
        """SHA-256 of the spec folder's TLA+ modules and designs.toml (names and bytes, in
        name order): which specification a verdict is of."""
        return files_hash([*sorted(self.spec_dir.glob("*.tla")), self.spec_dir / "designs.toml"])

    def is_packaged(self) -> bool:
        """Are the TLA+ modules byte for byte those shipped with shift, the ones the Python
        model is tested equal to (tests/model/test_conformance.py)? designs.toml may
        differ: the model reads bounds and declarations from it."""
        mine = sorted(self.spec_dir.glob("*.tla"))
        return files_hash(mine) == files_hash(sorted(packaged_spec_dir().glob("*.tla")))


def files_hash(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def not_covered(name: str) -> str:
    """What every command that needs the Python model says of a design it does not cover."""
    return (f"design {name} is not covered by the Python model (designs.toml: model = false); "
            f"only TLC checks it: shift check --engine tlc --design {name}")


def packaged_spec_dir() -> Path:
    return Path(str(resources.files("shift.spec")))


def _cfg_literal(path: Path, key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | str):
        return str(value)
    raise SpecError(f"{path}: {key} = {value!r}: a constant is an integer, boolean or string")


def _strings(path: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{path}: {key} must be a list of property names, not {value!r}")
    return value


def _table(path: Path, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{path}: {key} must be a table, not {value!r}")
    return value


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file (a spec folder holds designs.toml)") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        where = f"{path}:{m.group(1)}:{m.group(2)}" if m else str(path)
        raise SpecError(f"{where}: {str(e).split(' (at line')[0]}") from None


def _defined_operators(spec_dir: Path) -> set[str]:
    names: set[str] = set()
    for tla in spec_dir.glob("*.tla"):
        names.update(definitions(parse(tla.read_bytes())))
    return names


def _violations(path: Path, key: str, raw: Any, props: list[str]) -> dict[str, str]:
    violates = _table(path, key, raw)
    for prop, why in violates.items():
        if prop not in props:
            raise SpecError(f"{path}: {key}.{prop}: unknown property "
                            f"(properties: {', '.join(props)})")
        if not isinstance(why, str):
            raise SpecError(f"{path}: {key}.{prop} must be a reason string")
    return dict(violates)


def _per_bound(path: Path, key: str, raw: Any, bounds: list[str],
               props: list[str]) -> dict[str, dict[str, str]]:
    """A table of property tables by bound (`violates_at`, `holds_at`): each bound known,
    each property one of props with its reason."""
    out = {}
    for bound, table in _table(path, key, raw).items():
        if bound not in bounds:
            raise SpecError(f"{path}: {key}.{bound}: unknown bound (bounds: {', '.join(bounds)})")
        out[bound] = _violations(path, f"{key}.{bound}", table, props)
    return out


def _design(path: Path, name: str, raw: Any, spec_dir: Path, props: list[str],
            bounds: list[str], defined: set[str]) -> Design:
    table = _table(path, f"designs.{name}", raw)
    base = table.get("variant_of")
    if base is not None:
        if not isinstance(base, str):
            raise SpecError(f"{path}: designs.{name}.variant_of must name a design, "
                            f"not {base!r}")
        for own in ("module", "model"):
            if own in table:
                raise SpecError(f"{path}: designs.{name}.{own}: a variant has its base's "
                                f"({base}'s)")
    module = table.get("module", "")
    if base is None and not isinstance(module, str):
        raise SpecError(f"{path}: designs.{name}.module must name a module of {spec_dir}")
    if base is None and not (spec_dir / f"{module}.tla").is_file():
        raise SpecError(
            f"{path}: designs.{name}.module = {module!r}: no {module}.tla in {spec_dir}")
    invariants = temporal = None
    constants: dict[str, dict[str, str]] = {}
    if "invariants" in table or "temporal" in table or base:
        if "invariants" in table or "temporal" in table:
            invariants = _strings(path, f"designs.{name}.invariants",
                                  table.get("invariants", []))
            temporal = _strings(path, f"designs.{name}.temporal", table.get("temporal", []))
            props = invariants + temporal
        else:  # a variant checking its base's lists: its violations are checked later
            props = sorted(defined)
        for prop in props:
            if prop not in defined:
                raise SpecError(f"{path}: designs.{name}: property {prop!r} is not defined in "
                                f"any module of {spec_dir}")
        ckey = f"designs.{name}.constants"
        for bound, given in _table(path, ckey, table.get("constants", {})).items():
            if bound not in bounds:
                raise SpecError(f"{path}: {ckey}.{bound}: unknown bound "
                                f"(bounds: {', '.join(bounds)})")
            constants[bound] = {k: _cfg_literal(path, f"{ckey}.{bound}.{k}", v)
                                for k, v in _table(path, f"{ckey}.{bound}", given).items()}
    elif "constants" in table:
        raise SpecError(f"{path}: designs.{name}.constants: only a design with its own "
                        f"`invariants` and `temporal` has constants of its own")
    model = table.get("model", True)
    if not isinstance(model, bool):
        raise SpecError(f"{path}: designs.{name}.model must be true or false, not {model!r}")
    violates = _violations(path, f"designs.{name}.violates", table.get("violates", {}), props)
    violates_at = _per_bound(path, f"designs.{name}.violates_at", table.get("violates_at", {}),
                             bounds, props)
    hkey = f"designs.{name}.holds_at"
    holds_at = _per_bound(path, hkey, table.get("holds_at", {}), bounds, props)
    for bound in holds_at:
        for prop in holds_at[bound]:
            if prop not in violates:
                raise SpecError(f"{path}: {hkey}.{bound}.{prop}: the design does not declare "
                                f"it violated (designs.{name}.violates), so it holds anyway")
    return Design(name, module, str(table.get("summary", "")), violates, violates_at,
                  invariants, temporal, constants, model, base, holds_at)


def _resolve_variant(path: Path, d: Design, every: dict[str, Design]) -> Design:
    """A variant with the base's module, lists and model flag where it gives none, and at
    each bound it lists the base's constants with its own values put in."""
    key = f"designs.{d.name}"
    base = every.get(d.variant_of or "")
    if base is None or base.variant_of is not None or not base.own_properties:
        raise SpecError(f"{path}: {key}.variant_of = {d.variant_of!r}: not a design with "
                        f"constants of its own that is not itself a variant")
    if not d.constants:
        raise SpecError(f"{path}: {key}.constants: a variant lists the bounds it exists at, "
                        f"each with the constants it switches")
    constants = {}
    for bound, switched in d.constants.items():
        if bound not in base.constants:
            raise SpecError(f"{path}: {key}.constants.{bound}: {base.name} has no constants "
                            f"at bound {bound} (its bounds: {', '.join(base.constants)})")
        for k, v in switched.items():
            if k not in base.constants[bound]:
                raise SpecError(f"{path}: {key}.constants.{bound}.{k}: not a constant of "
                                f"{base.name} ({', '.join(base.constants[bound])})")
            if base.constants[bound][k] == v:
                raise SpecError(f"{path}: {key}.constants.{bound}.{k} = {v}: the same as "
                                f"{base.name}'s; a variant names only what it switches")
        constants[bound] = {**base.constants[bound], **switched}
    invariants = base.invariants if d.invariants is None else d.invariants
    temporal = base.temporal if d.temporal is None else d.temporal
    props = [*(invariants or []), *(temporal or [])]
    for table, what in [(d.violates, "violates"),
                        *((more, f"violates_at.{b}") for b, more in d.violates_at.items())]:
        for prop in table:
            if prop not in props:
                raise SpecError(f"{path}: {key}.{what}.{prop}: not a property the variant "
                                f"checks ({', '.join(props)})")
    for bound in d.violates_at:
        if bound not in constants:
            raise SpecError(f"{path}: {key}.violates_at.{bound}: the variant has no constants "
                            f"at bound {bound}")
    return replace(d, module=base.module, invariants=invariants, temporal=temporal,
                   constants=constants, model=base.model)


def _constants(path: Path, key: str, raw: Any) -> dict[str, str]:
    return {k: _cfg_literal(path, f"{key}.{k}", v) for k, v in _table(path, key, raw).items()}


def _bound(path: Path, name: str, raw: Any, defaults: dict[str, str]) -> Bound:
    """A bound: its own constants over `defaults.constants` (what every bound has unless it
    says otherwise)."""
    b = _table(path, f"bounds.{name}", raw)
    engine = b.get("engine", "tlc")
    if engine not in ENGINES:
        raise SpecError(f"{path}: bounds.{name}.engine = {engine!r}: one of "
                        f"{', '.join(map(repr, ENGINES))}")
    own = _constants(path, f"bounds.{name}.constants", b.get("constants", {}))
    inherited = {k: v for k, v in defaults.items() if k not in own}
    return Bound(name, str(b.get("summary", "")), own | inherited, engine)


def load_catalog(spec_dir: Path | None = None) -> Catalog:
    """Read and check `designs.toml`; every error names the file, key and value."""
    spec_dir = spec_dir or packaged_spec_dir()
    if not spec_dir.is_dir():
        raise SpecError(f"{spec_dir}: not a folder")
    path = spec_dir / "designs.toml"
    raw = _read_toml(path)
    invariants = _strings(path, "invariants", raw.get("invariants", []))
    temporal = _strings(path, "temporal", raw.get("temporal", []))
    props = invariants + temporal
    defined = _defined_operators(spec_dir)
    for prop in props:
        if prop not in defined:
            raise SpecError(f"{path}: property {prop!r} is not defined in any module of {spec_dir}")
    defaults = _constants(path, "defaults.constants",
                          _table(path, "defaults", raw.get("defaults", {})).get("constants", {}))
    bounds = {name: _bound(path, name, b, defaults)
              for name, b in _table(path, "bounds", raw.get("bounds", {})).items()}
    every = [_design(path, name, d, spec_dir, props, list(bounds), defined)
             for name, d in _table(path, "designs", raw.get("designs", {})).items()]
    named = {d.name: d for d in every}
    every = [_resolve_variant(path, d, named) if d.variant_of else d for d in every]
    if not every:
        raise SpecError(f"{path}: no [designs.NAME] table")
    designs = {d.name: d for d in every if not d.own_properties}
    others = {d.name: d for d in every if d.own_properties}
    observations = {str(k): str(v) for k, v in
                    _table(path, "observations", raw.get("observations", {})).items()}
    return Catalog(spec_dir, invariants, temporal, observations, bounds, designs, others)
