"""`shift replay`: run a trace through the executable model, step by step.

The trace is an event trace (JSON Lines, as the explorer writes next to its
counterexamples) or an ITF JSON state trace (as `shift check` writes for either engine;
each state is then checked against the model's). Each step prints the event and what an
observer sees change; a step that breaks an invariant is marked; the end says which
properties the trace violates, Liveness included. With `--expect`, the exit status says
whether that is what the trace was written to show (1 when not), for CI.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from shift.chart import build, render_svg, render_text
from shift.errors import UsageError
from shift.model.config import bound as load_bound
from shift.model.config import design as load_design
from shift.model.next import Model, NotEnabled
from shift.model.properties import INVARIANTS, TEMPORAL
from shift.model.replay import judge, load_any, validate
from shift.model.tla import to_tla
from shift.narrate import breaks_of, tell_judged
from shift.report import diff
from shift.spec.catalog import load_catalog


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("replay", help="run an event trace through the model",
                       description=__doc__)
    p.add_argument("trace", type=Path, metavar="TRACE",
                   help="an event trace (.jsonl) or an ITF JSON trace (.itf.json)")
    p.add_argument("--design", required=True, metavar="NAME", help="the design to run it on")
    p.add_argument("--bound", default="small",
                   help="the bound whose constants apply (retries, drops, faults; default small)")
    p.add_argument("--spec-dir", type=Path, metavar="DIR",
                   help="use this copy of the specification instead of the packaged one")
    p.add_argument("--expect", action="append", metavar="PROPERTY|nothing",
                   help="the properties the trace must violate (repeatable), or `nothing`; "
                        "exit 1 when the trace violates any other set")
    p.add_argument("--svg", type=Path, metavar="FILE",
                   help="also write the trace's message sequence chart as SVG")
    p.add_argument("--verbose", action="store_true",
                   help="print every variable that changes, not only what an observer sees")
    p.add_argument("--impl", action="store_true",
                   help="run it through the C implementation too and show where the two part "
                        "(as `shift fuzz --replay`; event traces, designs the core implements)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.spec_dir.resolve() if args.spec_dir else None)
    catalog.design(args.design)  # unknown design: one line naming every design
    if args.design not in catalog.designs:  # a design the model does not cover says so
        load_design(args.design, catalog)
    if args.impl:
        return both_sides(args)
    expected = expectation(args.expect, catalog.properties)
    model = Model(load_design(args.design, catalog), load_bound(args.bound, catalog),
                  catalog.spec_dir)
    events, itf_states = load_any(args.trace, model)
    invariants = [p for p in catalog.invariants if p in INVARIANTS]
    unjudged = [p for p in catalog.properties if p not in INVARIANTS and p not in TEMPORAL]
    try:
        result = judge(model, events, invariants, temporal="Liveness" in catalog.temporal)
    except NotEnabled as e:
        raise NotEnabled(f"{args.trace}: {e}") from None
    if itf_states is not None:
        validate(result.states, itf_states, str(args.trace))
    print(f"{args.trace}: {len(events) - 1} events on {args.design} at bound {args.bound}")

    def raw(a: dict, b: dict) -> list[str]:
        return [line for var in b if var != "event" for line in diff(var, a.get(var), b[var])]
    for line in tell_judged(result, raw if args.verbose else None):
        print(line)
    states = [to_tla(s, ev) for s, ev in zip(result.states, events, strict=True)]
    chart = build(states, breaks_of(result))
    print("\nMessage sequence chart:")
    print("\n".join(render_text(chart)))
    if args.svg:
        args.svg.parent.mkdir(parents=True, exist_ok=True)
        args.svg.write_text(render_svg(chart, f"{args.trace.name} on {args.design}"))
    violated = [f"{p} (step {k + 1})" for p, k in sorted(result.first_violation.items(),
                                                         key=lambda x: x[1])]
    if result.liveness is not None:
        violated.append(f"Liveness ({result.liveness})")
    print(f"violates: {', '.join(violated) if violated else 'nothing'}")
    for p in unjudged:
        print(f"not judged: {p} (the Python model has no predicate for it: add one to "
              "INVARIANTS in model/properties.py, beside Properties.tla's operator)")
    if expected is None:
        return 0
    found = set(result.first_violation) | ({"Liveness"} if result.liveness else set())
    if found == expected:
        return 0
    said = ", ".join(sorted(expected)) or "nothing"
    missing, extra = sorted(expected - found), sorted(found - expected)
    print(f"expected to violate {said}: "
          + "; ".join([*(f"{p} holds" for p in missing), *(f"{p} violated too" for p in extra)]))
    return 1


def expectation(given: list[str] | None, properties: list[str]) -> set[str] | None:
    """`--expect`'s set of properties (`nothing`: the empty set); an unknown name is a
    one-line error naming the properties there are."""
    if not given:
        return None
    names = {n.strip() for g in given for n in g.split(",") if n.strip()}
    if names == {"nothing"}:
        return set()
    for n in sorted(names):
        if n not in properties:
            raise UsageError(f"--expect {n}: not a property (properties: "
                             f"{', '.join(properties)}; or nothing)")
    return names


def both_sides(args: argparse.Namespace) -> int:
    from shift.commands.fuzz import replay
    from shift.differential import DESIGNS

    if args.design not in DESIGNS:
        raise UsageError(f"--impl: the C core implements {', '.join(DESIGNS)}, "
                         f"not {args.design}")
    return replay(argparse.Namespace(replay=args.trace, bound=args.bound,
                                     spec_dir=args.spec_dir, side="core"), [args.design])
