"""`shift prove`: decide every theorem of shift.proofs with Z3 and print the table.

Each theorem is expected to be proved, or refuted where the theorem is a counterexample
(SHIFT losing exactly-once, say). A refutation that is a trace of SHIFT's relation is then
reproduced on the executable model: its explorer finds the shortest concrete trace that
breaks the property, told step by step as `shift replay` tells it (under --verbose, with
Z3's abstract witness); a refutation the model does not reproduce is said plainly. Every
theorem is listed with its scope (bounds, abstraction). `--weakened` runs the kill table
instead: each theorem's checks with one hypothesis dropped, each of which must come to the
opposite status. Exit status: 0 when every status is the expected one (with --weakened:
every weakening kills its theorem), 1 when one is not (or Z3 answers unknown), 2 on bad
input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from shift.errors import UsageError
from shift.proofs.core import OPPOSITE, Result, Theorem, killed, run
from shift.proofs.registry import THEOREMS, by_name
from shift.reproduce import Reproduced, reproduce


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("prove", help="prove the trilemma and SHIFT's invariants with Z3",
                       description=__doc__)
    p.add_argument("--theorem", action="append", metavar="NAME",
                   help="run only this theorem (repeatable; default: all)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    p.add_argument("--list", action="store_true", help="list the theorems and exit")
    p.add_argument("--verbose", action="store_true",
                   help="print each theorem's statement, formula and witness (for a "
                        "refutation: the model's trace, narrated, and Z3's abstract one)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--weakened", action="store_true",
                   help="the kill table: run each theorem with each of its hypotheses "
                        "dropped; each must come to the opposite status")
    p.set_defaults(run=run_prove)


def _select(names: list[str] | None) -> list[Theorem]:
    if not names:
        return list(THEOREMS)
    chosen = []
    for name in names:
        t = by_name(name)
        if t is None:
            raise UsageError(f"unknown theorem {name!r}; `shift prove --list` lists them")
        chosen.append(t)
    return chosen


def _table(results: list[Result]) -> str:
    rows = [("theorem", "status", "expected", "seconds")]
    rows += [(r.theorem.name, r.verdict.status if r.as_expected
              else r.verdict.status.upper(), r.theorem.expected, f"{r.seconds:.2f}")
             for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _as_json(r: Result, model: Reproduced | None) -> dict:
    return {"theorem": r.theorem.name, "group": r.theorem.group,
            "statement": r.theorem.statement, "formula": r.theorem.formula,
            "scope": r.theorem.scope,
            "weakenings": [w.name for w in r.theorem.weakenings],
            "status": r.verdict.status, "expected": r.theorem.expected,
            "as_expected": r.as_expected, "seconds": round(r.seconds, 3),
            "detail": r.verdict.detail, "witness": r.verdict.witness,
            "model": model.as_json() if model is not None else None}


def _details(r: Result, model: Reproduced | None) -> list[str]:
    """A theorem told in full: statement, formula, verdict; for a refutation the model
    reproduced, its concrete trace (the lines `shift replay` prints for it), then Z3's
    abstract witness."""
    t = r.theorem
    out = [f"{t.name}: {t.statement}", f"  formula: {t.formula}", f"  scope: {t.scope}",
           f"  {r.verdict.status}: {r.verdict.detail}"]
    if model is not None:
        out.append(f"  {model.summary()}")
        out += model.lines
        if model.violates:
            out.append(f"  violates: {', '.join(model.violates)}")
        if r.verdict.witness:
            out.append("  abstract witness (Z3's steps of the relation, proofs/bmc.py):")
    out += [f"    {line}" for line in r.verdict.witness]
    return out


def _scopes(theorems: list[Theorem]) -> list[str]:
    return [f"  {t.name}: {t.scope or '(no scope given)'}" for t in theorems]


def _kill_row(t: Theorem, quiet: bool) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for w in t.weakenings:
        r = run(Theorem(t.name, t.group, w.hypothesis, "", w.check, OPPOSITE[t.expected]))
        rows.append((t.name, w.name, r.verdict.status,
                     "killed" if killed(t, r.verdict) else "SURVIVED", f"{r.seconds:.2f}"))
        if not quiet:
            print(f"[prove] {t.name} / {w.name}: {r.verdict.status} in {r.seconds:.1f} s; "
                  f"{r.verdict.detail}", file=sys.stderr, flush=True)
    if not rows:
        rows.append((t.name, "(none)", "-", "SURVIVED", "0.00"))
    return rows


def run_weakened(theorems: list[Theorem], quiet: bool) -> int:
    """The proofs' kill table: every theorem must fail under each weakened hypothesis."""
    rows = [("theorem", "weakened hypothesis", "status", "verdict", "seconds")]
    for t in theorems:
        rows += _kill_row(t, quiet)
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for k, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    survived = [f"{r[0]} / {r[1]}" for r in rows[1:] if r[3] != "killed"]
    n = len(rows) - 1
    print(f"\nkilled {n - len(survived)}/{n}"
          + (f"; survived: {', '.join(survived)}" if survived else ""))
    return 1 if survived else 0


def run_prove(args: argparse.Namespace) -> int:
    theorems = _select(args.theorem)
    if args.list:
        for t in theorems:
            print(f"{t.name}: {t.statement}\n  scope: {t.scope}")
        return 0
    if args.weakened:
        return run_weakened(theorems, args.quiet)
    results = []
    models: dict[str, Reproduced] = {}
    for k, t in enumerate(theorems, 1):
        if not args.quiet:
            print(f"[prove] {k}/{len(theorems)} {t.name} ...", file=sys.stderr, flush=True)
        r = run(t)
        results.append(r)
        if not args.quiet:
            print(f"[prove] {t.name}: {r.verdict.status} in {r.seconds:.1f} s"
                  f"{'; ' + r.verdict.detail if r.verdict.detail else ''}",
                  file=sys.stderr, flush=True)
        if t.reproduce is not None and r.verdict.status == "refuted":
            m = models[t.name] = reproduce(t.reproduce)
            if not args.quiet:
                print(f"[prove] {t.name}: {m.summary()} ({m.seconds:.1f} s)",
                      file=sys.stderr, flush=True)
        if args.verbose or not r.as_expected:
            print("\n".join(_details(r, models.get(t.name))) + "\n")
    print(_table(results))
    bad = [r for r in results if not r.as_expected]
    total = sum(r.seconds for r in results)
    print(f"\n{len(results) - len(bad)} of {len(results)} theorems as expected "
          f"in {total:.1f} s" + (f"; not as expected: {', '.join(r.theorem.name for r in bad)}"
                                  if bad else ""))
    if models and not args.verbose:
        print("\nRefutations on the model (--verbose tells each step):")
        for name, m in models.items():
            print(f"  {name}: {m.summary()}")
    print("\nScopes (bounds, abstraction):")
    print("\n".join(_scopes([r.theorem for r in results])))
    if args.json:
        args.json.write_text(json.dumps(
            {"results": [_as_json(r, models.get(r.theorem.name)) for r in results]},
            indent=2) + "\n")
    return 1 if bad else 0
