"""`shift nic`, `shift link`, `shift drop`, `shift stats`: faults on programs running on
the simulated NICs (started with shift run), without touching them, and what they did.

    shift nic down sim0 --host A    host A's NIC 1 dies: its QPs fail, its programs get
                                    IBV_EVENT_DEVICE_FATAL
    shift nic up sim0 --host A      the NIC is back (its QPs stay in error)
    shift link down sim1            path 2's link, between both hosts' sim1
    shift drop sim0 --host B -n 3   the next 3 packets reaching host B's sim0 are lost
    shift stats --host B            host B's counters: packets sent, received, dropped,
                                    lost; RC's timeouts and duplicates

The fabric is $SHIFT_SIM_FABRIC or --fabric (default "shift", as shift run's). Prints
what changed; exit status 2 if no program runs there.
"""

from __future__ import annotations

import argparse

from shift.verbs import control


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for noun, what in (("nic", "a host's NIC"), ("link", "a path's link (both hosts)")):
        p = sub.add_parser(noun, help=f"take {what} down or bring it up, under running "
                           "programs", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("state", choices=("down", "up"))
        p.add_argument("device", help="sim0 or sim1")
        if noun == "nic":
            p.add_argument("--host", default="A", choices=("A", "B"))
        p.add_argument("--fabric", help="the fabric's name (default: $SHIFT_SIM_FABRIC "
                       "or shift)")
        p.set_defaults(run=run_nic if noun == "nic" else run_link)
    p = sub.add_parser("stats", help="a running host's packet and RC counters",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="A", choices=("A", "B"))
    p.add_argument("--fabric")
    p.set_defaults(run=run_stats)
    p = sub.add_parser("drop", help="lose the next packets reaching a host's NIC",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("device", help="sim0 or sim1")
    p.add_argument("--host", default="A", choices=("A", "B"))
    p.add_argument("-n", "--count", type=int, default=1, help="how many (default 1)")
    p.add_argument("--fabric")
    p.set_defaults(run=run_drop)


def said(changed: bool, what: str) -> None:
    print(what if changed else f"{what} already")


def run_nic(args: argparse.Namespace) -> int:
    fabric, nic = control.fabric_name(args.fabric), control.nic_of(args.device)
    changed = control.send(fabric, args.host, f"nic-{args.state} {nic}")
    said(changed, f"host {args.host}'s {args.device} {args.state}")
    return 0


def run_link(args: argparse.Namespace) -> int:
    fabric = control.fabric_name(args.fabric)
    for host, changed in control.link(fabric, args.device, args.state == "up").items():
        said(changed, f"{args.device}'s link {args.state} at host {host}")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    counts = control.stats(control.fabric_name(args.fabric), args.host)
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


def run_drop(args: argparse.Namespace) -> int:
    from shift.errors import UsageError

    if not 1 <= args.count <= 1_000_000:
        raise UsageError(f"--count {args.count}: between 1 and 1000000")
    fabric, nic = control.fabric_name(args.fabric), control.nic_of(args.device)
    control.send(fabric, args.host, f"drop {nic} {args.count}")
    print(f"the next {args.count} packets reaching host {args.host}'s {args.device} are lost")
    return 0
