"""Faults injected into running programs on the simulated NICs: one datagram to the
control socket of a host's provider (verbs/provider/control.c), one answer back.

    nic-down N | nic-up N | link-down N | link-up N | drop N COUNT   (N: NIC 1 or 2)

A link joins the two hosts' NICs of one path, so a link command goes to both hosts;
a NIC or a drop to one."""

from __future__ import annotations

import os
import socket

from shift.errors import ShiftError, UsageError

from .devices import HOSTS, host_index

TIMEOUT = 2.0  # seconds to wait for a provider's answer


def fabric_name(name: str | None = None) -> str:
    """The fabric a command addresses: the name given, $SHIFT_SIM_FABRIC, or "shift"."""
    return name or os.environ.get("SHIFT_SIM_FABRIC") or "shift"


def nic_of(device: str) -> int:
    """sim0 -> NIC 1, sim1 -> NIC 2."""
    if device not in ("sim0", "sim1"):
        raise UsageError(f"device {device!r}: the simulated devices are sim0 and sim1")
    return int(device[-1]) + 1


def address(fabric: str, host: str) -> bytes:
    host_index(host)
    return b"\0" + f"shift-sim/{fabric}/{host}ctl".encode()


def ask(fabric: str, host: str, command: str) -> str:
    """A command's answer from a host's provider, after its "ok ". ShiftError if no
    program runs as that host or the provider refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(b"")  # an autobound abstract address: the provider answers to it
        s.settimeout(TIMEOUT)
        try:
            s.sendto(command.encode(), address(fabric, host))
            answer = s.recv(512).decode(errors="replace")
        except (ConnectionRefusedError, FileNotFoundError):
            raise ShiftError(f"no program on host {host} of fabric {fabric!r} has the "
                             "simulated devices open (start it with shift run)") from None
        except TimeoutError:
            raise ShiftError(f"host {host} of fabric {fabric!r} did not answer "
                             f"within {TIMEOUT} s") from None
    if not answer.startswith("ok "):
        raise ShiftError(f"host {host} refused {command!r}: {answer}")
    return answer[3:]


def send(fabric: str, host: str, command: str) -> bool:
    """Apply a fault on a host: True if it changed something, False if it was so."""
    return ask(fabric, host, command) == "1"


def stats(fabric: str, host: str) -> dict[str, int]:
    """The host's counters: packets sent, received, dropped, lost; RC's timeouts and
    duplicates; malformed packets refused."""
    words = ask(fabric, host, "stats").split()
    try:
        return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=True)}
    except ValueError:
        raise ShiftError(f"host {host} answered stats with {' '.join(words)!r}") from None


def link(fabric: str, device: str, up: bool) -> dict[str, bool]:
    """A link down or up: on each host that runs (at least one must)."""
    command = f"link-{'up' if up else 'down'} {nic_of(device)}"
    changed: dict[str, bool] = {}
    errors: list[str] = []
    for host in HOSTS:
        try:
            changed[host] = send(fabric, host, command)
        except ShiftError as e:
            errors.append(str(e))
    if not changed:
        raise ShiftError(errors[0])
    return changed
