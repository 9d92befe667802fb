"""`shift run`: run a verbs program on the simulated NICs.

The program sees one host's devices, sim0 and sim1 (NIC 1 and NIC 2), through the real
libibverbs (rdma-core 59, built on first use) and the project's provider. Two programs
started as --host A and --host B are the two hosts of the fabric:

    shift run -- ibv_devinfo
    shift run --host B -- ibv_rc_pingpong -d sim0 -g 0 &
    shift run --host A -- ibv_rc_pingpong -d sim0 -g 0 localhost

With --lockstep one program is both hosts (sim0 and sim1 A's NICs, sim2 and sim3 B's)
on a fabric it makes and steps itself (docs/verbs.md, "Lock-step mode").

The first run builds rdma-core and the provider into a cache directory (a few minutes;
$SHIFT_VERBS_DIR chooses another). The exit status is the program's.
"""

from __future__ import annotations

import argparse
import sys

from shift.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", help="run a verbs program on the simulated NICs",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    who = p.add_mutually_exclusive_group()
    who.add_argument("--host", default="A", choices=("A", "B"),
                     help="the host the program plays (default A)")
    who.add_argument("--lockstep", action="store_true",
                     help="the program plays both hosts and steps the wire itself "
                     "(SHIFT_SIM_LOCKSTEP=1, four devices)")
    p.add_argument("--fabric", help="the fabric's name: programs of one fabric are its two "
                   "hosts (default: $SHIFT_SIM_FABRIC or shift)")
    p.add_argument("program", nargs=argparse.REMAINDER,
                   help="the program and its arguments, after --")
    p.set_defaults(run=run_program)


def run_program(args: argparse.Namespace) -> int:
    from shift.verbs import devices, rdma_core

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not argv:
        raise UsageError("no program to run: shift run [--host A|B] -- PROGRAM [ARGS ...]")
    build = rdma_core.ensure_built(lambda line: print(f"shift run: {line}", file=sys.stderr))
    env = {"SHIFT_SIM_FABRIC": args.fabric} if args.fabric else None
    host = devices.LOCKSTEP if args.lockstep else args.host
    proc = devices.run(build, host, argv, env=env)
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
