"""The `shift` command. A user's mistake is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import importlib
import sys

from shift import __version__
from shift.errors import ShiftError

# One module per subcommand, each with register(subparsers).
COMMANDS = ["shift.commands.check", "shift.commands.replay", "shift.commands.prove",
            "shift.commands.fuzz", "shift.commands.config", "shift.commands.run",
            "shift.commands.fault"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shift", description="Cross-NIC RDMA failover, checked.")
    p.add_argument("--version", action="version", version=f"shift {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ShiftError as e:
        print(f"shift {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"shift {args.command}: interrupted", file=sys.stderr)
        return 130
