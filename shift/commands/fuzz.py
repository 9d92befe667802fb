"""`shift fuzz`: a differential campaign, the model against the C implementation.

Random event traces from the model's enabled events (faults biased towards WRs in flight)
run through both side by side (shift.differential); after every step the observable
projections must agree and the design's kept invariants hold on the implementation's
observation. A divergence is shrunk, saved as JSON Lines under --out (DESIGN/BOUND/), and
makes the exit status 1. Several workers run in separate processes, one core each.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from shift.errors import UsageError
from shift.model.events import save_trace
from shift.spec.catalog import load_catalog, not_covered
from shift.vocabulary import LAYER_STATES, VOCABULARY, Event

BATCH = 20  # traces per unit of work handed to a worker


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("fuzz", help="differential campaign: model vs C implementation",
                       description=__doc__)
    p.add_argument("--examples", type=int, metavar="N",
                   help="traces per design (default 500 unless --seconds is given)")
    p.add_argument("--seconds", type=float, metavar="S",
                   help="run for S seconds (over all designs) instead of a number of traces")
    p.add_argument("--seed", type=int, default=0, help="seed of the campaign (default 0)")
    p.add_argument("--design", action="append", metavar="NAME",
                   help="a design both sides implement (repeatable; default all)")
    p.add_argument("--bound", default="large",
                   help="the bound whose faults, drops and retries apply (default large)")
    p.add_argument("--workers", type=int, default=1, metavar="K",
                   help="processes to run traces in (default 1)")
    p.add_argument("--max-events", type=int, default=60, metavar="N",
                   help="events per trace after Init (default 60)")
    p.add_argument("--out", type=Path, default=Path("fuzz-corpus"), metavar="DIR",
                   help="where divergent traces are saved (default ./fuzz-corpus)")
    p.add_argument("--spec-dir", type=Path, metavar="DIR",
                   help="use this copy of the specification (its workloads, bounds and "
                        "declarations) instead of the packaged one")
    p.add_argument("--side", choices=("core", "verbs"), default="core",
                   help="the C layer's backend: core (the simulator's table, default) or "
                        "verbs (libibverbs over the simulated provider, in lock-step; the "
                        "run enters the simulated devices' environment itself)")
    p.add_argument("--replay", type=Path, metavar="TRACE",
                   help="run one saved trace (an event trace, .jsonl, or an ITF counterexample "
                        "of `shift check`, .itf.json) through both sides instead, step by "
                        "step, and show where they part (one --design)")
    p.set_defaults(run=run)


@dataclass
class Batch:
    design: str
    traces: int = 0
    steps: int = 0
    gaps: int = 0
    events: set[str] = field(default_factory=set)
    states: set[str] = field(default_factory=set)
    divergent: list[list[Event]] = field(default_factory=list)


Job = tuple[str, str, int, int, int, Path | None, str]


def run_batch(job: Job) -> Batch:
    """Run `count` traces of one design; the seed fixes them."""
    from shift.differential import run_trace, trace_from_choices
    from shift.model.next import Model

    design, bound, seed, count, max_events, spec_dir, side = job
    model = Model.load(design, bound, spec_dir)
    rng = random.Random(seed)
    out = Batch(design)
    for _ in range(count):
        events = trace_from_choices(model, [rng.randrange(1 << 16)
                                            for _ in range(max_events + 1)])
        r = run_trace(model, events, side=side)
        out.traces += 1
        out.steps += len(r.events) - 1
        out.gaps += r.gap is not None
        out.events.update(ev.name for ev in r.events[1:])
        out.states.update(x for s in r.states for x in s.sendMode + s.recvMode)
        if r.divergence is not None:
            out.divergent.append(r.events)
    return out


def _jobs(designs: list[str], args: argparse.Namespace) -> Iterator[Job]:
    """Batches round-robin over the designs; endless under --seconds."""
    k = 0
    while True:
        for d in designs:
            if args.examples is not None:
                left = args.examples - k * BATCH
                if left <= 0:
                    return
                count = min(BATCH, left)
            else:
                count = BATCH
            yield (d, args.bound, args.seed * 1_000_003 + k * 7919 + designs.index(d),
                   count, args.max_events, args.spec_dir, args.side)
        k += 1


def run(args: argparse.Namespace) -> int:
    from shift.differential import DESIGNS, report, run_trace, shrink
    from shift.model.next import Model

    designs = args.design or list(DESIGNS)
    catalog = load_catalog(args.spec_dir.resolve() if args.spec_dir else None)
    for d in designs:
        if d in catalog.others and not catalog.others[d].model:
            raise UsageError(not_covered(d))
        if d not in DESIGNS:
            raise UsageError(f"unknown design {d!r} for fuzz (both sides implement "
                             f"{', '.join(DESIGNS)})")
    if args.spec_dir is not None:
        args.spec_dir = args.spec_dir.resolve()
    # UsageError for an unknown bound, SpecError for a workload the model cannot run
    Model.load(designs[0], args.bound, args.spec_dir)
    if args.examples is not None and args.examples < 1:
        raise UsageError("--examples must be at least 1")
    if args.seconds is not None and args.seconds <= 0:
        raise UsageError("--seconds must be positive")
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.max_events < 1:
        raise UsageError("--max-events must be at least 1")
    if args.examples is None and args.seconds is None:
        args.examples = 500
    if args.side == "verbs":
        from shift.verbs import lockstep

        if not lockstep.active():  # the simulated devices' environment, then this command
            return lockstep.run_inside([sys.executable, "-m", "shift", *sys.argv[1:]])
    if args.replay is not None:
        return replay(args, designs)

    total = {d: Batch(d) for d in designs}
    start = time.monotonic()
    tty = sys.stderr.isatty()
    last_line = 0.0

    def progress(final: bool = False) -> None:
        nonlocal last_line
        now = time.monotonic()
        if not final and now - last_line < (0.2 if tty else 5.0):
            return
        last_line = now
        t = sum(b.traces for b in total.values())
        s = sum(b.steps for b in total.values())
        ev = set().union(*(b.events for b in total.values()))
        st = set().union(*(b.states for b in total.values()))
        div = sum(len(b.divergent) for b in total.values())
        line = (f"[fuzz] {t} traces, {s} steps, {s / max(now - start, 1e-9):.0f} steps/s, "
                f"events {len(ev)}/{len(VOCABULARY) - 1}, states {len(st)}/{len(LAYER_STATES)}, "
                f"{div} divergent")
        print(("\r" + line) if tty else line, end="" if tty and not final else "\n",
              file=sys.stderr, flush=True)

    def done() -> bool:
        return args.seconds is not None and time.monotonic() - start >= args.seconds

    def absorb(b: Batch) -> None:
        t = total[b.design]
        t.traces += b.traces
        t.steps += b.steps
        t.gaps += b.gaps
        t.events |= b.events
        t.states |= b.states
        t.divergent += b.divergent
        progress()

    jobs = _jobs(designs, args)
    if args.workers == 1:
        for job in jobs:
            if done():
                break
            absorb(run_batch(job))
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.workers) as pool:
            pending = []
            for job in jobs:
                while len(pending) >= 2 * args.workers:
                    absorb(pending.pop(0).get())
                if done():
                    break
                pending.append(pool.apply_async(run_batch, (job,)))
            for p in pending:
                absorb(p.get())
    progress(final=True)
    elapsed = time.monotonic() - start

    print(f"shift fuzz: bound {args.bound}, seed {args.seed}, side {args.side}, "
          f"{args.workers} worker(s), "
          f"{elapsed:.1f} s")
    saved: list[Path] = []
    for d, b in total.items():
        print(f"  {d:<12} {b.traces:>6} traces {b.steps:>8} steps  "
              f"{len(b.divergent)} divergent  {b.gaps} stopped at a documented difference  "
              f"states: {', '.join(x for x in LAYER_STATES if x in b.states)}")
        missing = sorted(set(VOCABULARY) - {"Init"} - b.events)
        if missing:
            print(f"  {'':<12} events never generated: {', '.join(missing)}")
        if b.divergent:
            model = Model.load(d, args.bound, args.spec_dir)
            small = shrink(model, min(b.divergent, key=len), side=args.side)
            path = save_trace(args.out / d / args.bound / f"seed{args.seed}-{len(saved)}.jsonl",
                              small)
            saved.append(path)
            print(report(model, run_trace(model, small, side=args.side)))
            print(f"saved: {path}")
    if saved:
        print(f"divergence: {len(saved)} design(s); replay with "
              f"`shift replay --design DESIGN --bound {args.bound} TRACE` (the model side)")
        return 1
    print("no divergence")
    return 0


def replay(args: argparse.Namespace, designs: list[str]) -> int:
    """`--replay TRACE`: the trace through model and implementation; 1 if they part."""
    from shift.differential import report, run_trace
    from shift.model.next import Model, NotEnabled
    from shift.model.replay import load_any

    if len(designs) != 1:
        raise UsageError("--replay runs one trace on one design: give --design NAME")
    model = Model.load(designs[0], args.bound, args.spec_dir)
    events, _ = load_any(args.replay, model)  # an ITF trace gives its events
    try:
        run = run_trace(model, events, side=args.side)
    except NotEnabled as e:
        raise NotEnabled(f"{args.replay}: {e}") from None
    print(report(model, run))
    if run.gap:
        print(f"stopped early: {run.gap}")
    if run.divergence is not None:
        return 1
    print("model and implementation agree" + (" up to there" if run.gap else ""))
    return 0
