"""The catalogue of designs, properties and bounds: `designs.toml` beside the modules.

Read by the model (`shift.model.config`: a design's module, a bound's constants) and by the
TLC harness (`shift.tlc`: what to check, and what to expect); it depends on neither.
"""

from __future__ import annotations

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

    def expected(self, prop: str) -> str:
        return VIOLATED if prop in self.violates else HOLDS

    def at(self, bound: str) -> Design:
        """The design's declaration at one bound: its own violations plus the bound's."""
        return replace(self, violates={**self.violates, **self.violates_at.get(bound, {})})


@dataclass(frozen=True)
class Bound:
    name: str
    summary: str
    constants: dict[str, str]  # name -> TLC cfg literal


@dataclass(frozen=True)
class Catalog:
    spec_dir: Path
    invariants: list[str]
    temporal: list[str]
    observations: dict[str, str]  # variable -> what an application saw
    bounds: dict[str, Bound]
    designs: dict[str, Design]

    @property
    def properties(self) -> list[str]:
        return self.invariants + self.temporal

    def design(self, name: str) -> Design:
        if name not in self.designs:
            raise UsageError(f"unknown design {name!r}; designs: {', '.join(self.designs)}")
        return self.designs[name]

    def bound(self, name: str) -> Bound:
        if name not in self.bounds:
            raise UsageError(f"unknown bound {name!r}; bounds: {', '.join(self.bounds)}")
        return self.bounds[name]


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


def _design(path: Path, name: str, raw: Any, spec_dir: Path, props: list[str],
            bounds: list[str]) -> Design:
    table = _table(path, f"designs.{name}", raw)
    module = table.get("module")
    if not isinstance(module, str):
        raise SpecError(f"{path}: designs.{name}.module must name a module of {spec_dir}")
    if not (spec_dir / f"{module}.tla").is_file():
        raise SpecError(
            f"{path}: designs.{name}.module = {module!r}: no {module}.tla in {spec_dir}")
    violates = _violations(path, f"designs.{name}.violates", table.get("violates", {}), props)
    key = f"designs.{name}.violates_at"
    violates_at = {}
    for bound, more in _table(path, key, table.get("violates_at", {})).items():
        if bound not in bounds:
            raise SpecError(f"{path}: {key}.{bound}: unknown bound (bounds: {', '.join(bounds)})")
        violates_at[bound] = _violations(path, f"{key}.{bound}", more, props)
    return Design(name, module, str(table.get("summary", "")), violates, violates_at)


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
    bounds = {
        name: Bound(name, str(b.get("summary", "")),
                    {k: _cfg_literal(path, f"bounds.{name}.constants.{k}", v)
                     for k, v in _table(path, f"bounds.{name}.constants",
                                        b.get("constants", {})).items()})
        for name, b in _table(path, "bounds", raw.get("bounds", {})).items()
        if _table(path, f"bounds.{name}", b) is not None
    }
    designs = {name: _design(path, name, d, spec_dir, props, list(bounds))
               for name, d in _table(path, "designs", raw.get("designs", {})).items()}
    if not designs:
        raise SpecError(f"{path}: no [designs.NAME] table")
    observations = {str(k): str(v) for k, v in
                    _table(path, "observations", raw.get("observations", {})).items()}
    return Catalog(spec_dir, invariants, temporal, observations, bounds, designs)
