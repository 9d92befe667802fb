"""The executable model's reproduction of a refutation Z3 found (docs/proofs.md).

A refutation of `shift.proofs.safety` is a trace of the Z3 relation, an abstraction of
the specification: a candidate until the model shows it too. A theorem's `Reproduction`
names the design, the workload and the property; `reproduce` runs the model's explorer on
that design at the smallest packaged bound whose workloads include that workload,
restricted to it, and takes the shortest trace that breaks the property (breadth first).
The trace is judged and told as `shift replay` tells it (`shift.narrate.tell_judged`), so a
proof's counterexample reads like every other counterexample. A model that finds no such
trace is a finding, said plainly, not an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from shift.errors import SpecError
from shift.model.config import Constants, bound_from_constants
from shift.model.config import design as load_design
from shift.model.explore import explore
from shift.model.next import Model
from shift.model.properties import INVARIANTS
from shift.model.replay import judge
from shift.narrate import tell_judged
from shift.proofs.core import Reproduction
from shift.spec.catalog import Catalog, load_catalog
from shift.spec.workloads import read_workloads
from shift.tlaplus.values import TlaSet, parse_value
from shift.vocabulary import Event


@dataclass
class Reproduced:
    """What the model made of a refutation: the shortest concrete trace breaking the
    property (no events: the model does not break it there), told step by step."""

    reproduction: Reproduction
    bound: str  # the packaged bound whose constants apply (restricted to the workload)
    distinct: int  # states the explorer visited
    seconds: float
    events: list[Event] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # the narration, as `shift replay`'s
    violates: list[str] = field(default_factory=list)  # "P (step k)", as `shift replay`'s

    @property
    def reproduced(self) -> bool:
        return bool(self.events)

    def where(self) -> str:
        r = self.reproduction
        return f"{r.design}, workload {r.workload}, bound {self.bound}"

    def summary(self) -> str:
        """One line: the model's reproduction of Z3's witness, or that there is none."""
        r = self.reproduction
        if self.reproduced:
            return (f"the model's reproduction of Z3's witness ({self.where()}): "
                    f"{r.property} violated at step {len(self.events)}, after "
                    f"{len(self.events) - 1} events from Init, the shortest such trace "
                    f"({self.distinct} states explored)")
        return (f"not reproduced by the model: no trace of {self.where()} violates "
                f"{r.property} ({self.distinct} states explored); Z3's witness is a trace "
                "of the abstraction only")

    def as_json(self) -> dict:
        r = self.reproduction
        return {"design": r.design, "workload": r.workload, "property": r.property,
                "bound": self.bound, "reproduced": self.reproduced,
                "states_explored": self.distinct, "seconds": round(self.seconds, 3),
                "violated_at_step": len(self.events) or None,
                "events": [e.to_json() for e in self.events],
                "violates": self.violates, "narration": self.lines}


def bound_for(workload: int, catalog: Catalog) -> Constants:
    """The first bound of designs.toml (the smallest) whose workloads include `workload`,
    with its Workloads narrowed to that one."""
    workloads = read_workloads(catalog.spec_dir)
    for name in catalog.bounds:
        b = catalog.bound(name)
        ks = parse_value(b.constants.get("Workloads", "{}"))
        if isinstance(ks, TlaSet) and workload in ks.members:
            return bound_from_constants(b.name, {**b.constants, "Workloads": f"{{{workload}}}"},
                                        workloads)
    raise SpecError(f"no bound of designs.toml has workload {workload}")


def reproduce(r: Reproduction, catalog: Catalog | None = None) -> Reproduced:
    """Search the model for the shortest trace of r.design on r.workload that breaks
    r.property, and tell it."""
    catalog = catalog or load_catalog()
    start = time.perf_counter()
    bound = bound_for(r.workload, catalog)
    model = Model(load_design(r.design, catalog), bound, catalog.spec_dir)
    ex = explore(model, [r.property], keep_edges=False, stop_when_all_violated=True)
    out = Reproduced(r, bound.name, ex.distinct, 0.0)
    cx = ex.violations.get(r.property)
    if cx is not None:
        invariants = [p for p in catalog.invariants if p in INVARIANTS]
        result = judge(model, cx.events, invariants, temporal="Liveness" in catalog.temporal)
        out.events = cx.events
        out.lines = tell_judged(result)
        out.violates = [f"{p} (step {k + 1})" for p, k in
                        sorted(result.first_violation.items(), key=lambda x: x[1])]
        if result.liveness is not None:
            out.violates.append(f"Liveness ({result.liveness})")
    out.seconds = time.perf_counter() - start
    return out
