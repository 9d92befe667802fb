"""Bounded model checking of the abstract protocol: the shortest reachable violation.

Used where a theorem *expects* a violation (SHIFT's finding F3, the ablations): a trace
from Init is a real counterexample of the encoding, unlike a failed induction step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import z3
from shift.proofs.abstract_state import AbstractState, fresh
from shift.proofs.core import solver
from shift.proofs.decisions import OP_NAMES
from shift.proofs.programs import Program
from shift.proofs.properties import Property
from shift.proofs.protocol import ReplayPolicy, action_names, init, next_


def find_violation(p: Program, d: ReplayPolicy, prop: Property, depth: int,
                   assume: z3.BoolRef | None = None, step: int = 4,
                   hint: Callable[[AbstractState], z3.BoolRef] | None = None,
                   timeout_ms: int = 30_000, without: Sequence[int] = (),
                   backup_fails: bool = False) -> tuple[z3.CheckSatResult, list[str]]:
    """Search for a trace of at most `depth` steps from Init to a state violating prop,
    taking none of the actions `without` (indices in `action_names`): a constraint that
    removes traces and never adds one, so a trace found is a trace of the relation.
    `backup_fails`: the relation in which A's backup QP may fail too."""
    names = action_names(p, d, backup_fails)
    s = _Isolated(timeout_ms)
    s.add(p.wellformed())
    if assume is not None:
        s.add(assume)
    states = [fresh(p.n, "0")]
    acts: list[z3.ArithRef] = []
    s.add(init(p, states[0]))
    for k in range(1, depth + 1):
        nxt = fresh(p.n, str(k))
        act = z3.Int(f"act_{k}")
        s.add(next_(p, d, states[-1], nxt, act, stutter=True, without=without,
                    backup_fails=backup_fails))
        if hint is not None:  # a proved invariant: true of every reachable state
            s.add(hint(nxt))
        if acts:  # stutter only at the end: one representative per trace length
            stut = len(names)
            s.add(z3.Implies(acts[-1] == stut, act == stut))
        states.append(nxt)
        acts.append(act)
        if k % step and k != depth:
            continue  # with stuttering, a check at k covers every shorter trace too
        r = s.check(z3.Not(prop(p, nxt)))
        if r == z3.sat:
            return r, _render(s.model(), p, states, acts, names)
        if r != z3.unsat:
            return r, []
    return z3.unsat, []


class _Isolated:
    """A solver in a Z3 context of its own: each formula added is translated into it.
    The search's time then depends on its formula alone, not on the terms earlier
    theorems left in the shared context (which made it vary from 8 s to 37 s)."""

    def __init__(self, timeout_ms: int) -> None:
        self.ctx = z3.Context()
        self.solver = solver(timeout_ms, ctx=self.ctx)

    def add(self, *fs: z3.BoolRef) -> None:
        self.solver.add(*[f.translate(self.ctx) for f in fs])

    def check(self, *fs: z3.BoolRef) -> z3.CheckSatResult:
        return self.solver.check(*[f.translate(self.ctx) for f in fs])

    def model(self) -> z3.ModelRef:
        return self.solver.model().translate(z3.main_ctx())


def _render(m: z3.ModelRef, p: Program, states: list[AbstractState], acts: list[z3.ArithRef],
            names: list[str]) -> list[str]:
    def val(x: z3.ExprRef) -> str:
        return str(m.eval(x, model_completion=True))
    prog = []
    for w in range(1, p.n + 1):
        op = OP_NAMES.get(m.eval(p.op[w], model_completion=True).as_long(), "?")
        cmp = f"{val(p.compare[w])}->" if op == "CAS" else ""
        prog.append(f"{w}:{op}(r{val(p.region[w])}:={cmp}{val(p.value[w])}"
                    f"{', signaled' if val(p.sig[w]) == 'True' else ''})")
    lines = ["program " + " ".join(prog)]
    k = 0
    for a, st in zip(acts, states[1:], strict=True):
        i = m.eval(a).as_long()
        if i >= len(names):
            continue  # a stuttering step
        k += 1
        lines.append(f"{k:2}. {names[i]}  [mem={val(st.mem)} "
                     f"execs={[val(x) for x in st.execs[1:]]} taken={val(st.taken)}]")
    return lines
