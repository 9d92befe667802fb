"""The simulated devices as libibverbs finds them, and a program run beside them.

libibverbs lists devices from sysfs (``class/infiniband_verbs/uverbsN``, whose ``ibdev``
names the device) and opens ``/dev/infiniband/uverbsN``. Without kernel RDMA neither
exists, so each run gets its own: a tree under a temporary directory that ``SYSFS_PATH``
points libibverbs at, and, in a private mount namespace (``unshare --mount``, as root),
a tmpfs on ``/dev/infiniband`` whose ``uverbsN`` stand in for the character devices
(``/dev/full``: the provider issues no kernel command, and one that libibverbs issues
itself - a completion channel - fails with ENOSPC instead of reading zeros). The tree's
``class/infiniband`` also appears in ``/sys/class`` there (a read-only overlay on the real
one), for programs that read sysfs themselves. The host sees at most an empty
``/dev/infiniband`` directory, the mount point.

One process is one host: ``SHIFT_SIM_HOST`` (A or B) tells the provider which, and the
GUIDs, GIDs and LIDs differ between hosts, as a program that exchanges them expects. Or,
in lock-step mode (host ``LOCKSTEP``, "AB"), one process is both: ``SHIFT_SIM_LOCKSTEP=1``
and four devices, sim0 and sim1 host A's NICs, sim2 and sim3 host B's, each with the
GUID, GID and LID it has in its own host's process; the program attaches a fabric it
steps itself (verbs/provider/shiftsim_lockstep.h).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shift.errors import ShiftError, UsageError

from .rdma_core import Build

HOSTS = ("A", "B")
LOCKSTEP = "AB"  # the host value of a process that is both hosts (lock-step mode)
DEVICES = 2  # sim0 and sim1: the host's NIC 1 (default path) and NIC 2 (backup path)
CDEV = "1:7"  # the stand-in character device, /dev/full: a kernel command fails (ENOSPC)
USER_VERBS_ABI = 6  # class/infiniband_verbs/abi_version: what libibverbs 59 accepts
PROVIDER_ABI = 1  # uverbsN/abi_version: what the provider matches


def host_index(host: str) -> int:
    if host not in HOSTS:
        raise UsageError(f"host {host!r}: the simulated hosts are A and B")
    return HOSTS.index(host)


def hosts_of(host: str) -> tuple[str, ...]:
    """The hosts a process plays: one, or both in lock-step mode."""
    if host == LOCKSTEP:
        return HOSTS
    host_index(host)
    return (host,)


def node_guid(host: str, device: int) -> str:
    """The device's GUID as sysfs prints it; the provider computes the same."""
    return f"5348:4946:5400:{host_index(host) << 8 | device:04x}"


def device_name(device: int) -> str:
    return f"sim{device}"


def write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def write_device(sysfs: Path, host: str, device: int, index: int | None = None) -> None:
    """Device ``device`` of ``host`` (its NIC ``device + 1``) as sim``index`` (by default
    sim``device``: lock-step mode numbers host B's after host A's)."""
    index = device if index is None else index
    name = device_name(index)
    uverbs = sysfs / "class" / "infiniband_verbs" / f"uverbs{index}"
    write_file(uverbs / "ibdev", name)
    write_file(uverbs / "dev", CDEV)
    write_file(uverbs / "abi_version", str(PROVIDER_ABI))
    ibdev = sysfs / "class" / "infiniband" / name
    write_file(ibdev / "node_type", "1: CA")
    write_file(ibdev / "node_guid", node_guid(host, device))
    write_file(ibdev / "board_id", "SHIFT_SIMNIC")
    gid = "fe80:0000:0000:0000:" + node_guid(host, device)  # link-local prefix + GUID
    write_file(ibdev / "ports" / "1" / "gids" / "0", gid)
    write_file(ibdev / "ports" / "1" / "pkeys" / "0", "0xffff")  # the default partition


def write_sysfs(sysfs: Path, host: str, devices: int = DEVICES) -> Path:
    """The sysfs tree of one host's simulated devices under ``sysfs`` (both hosts', A's
    first, for ``LOCKSTEP``)."""
    write_file(sysfs / "class" / "infiniband_verbs" / "abi_version", str(USER_VERBS_ABI))
    for i, h in enumerate(hosts_of(host)):
        for device in range(devices):
            write_device(sysfs, h, device, i * devices + device)
    return sysfs


def write_rdma_tool(bin_dir: Path, devices: int) -> Path:
    """An ``rdma`` (iproute2) that answers ``rdma link show -j`` for the simulated
    devices, as the kernel's netlink would for real ones (rdma-core's tests ask it which
    links exist); anything else it refuses."""
    links = json.dumps([{"ifindex": d, "ifname": device_name(d), "port": 1,
                         "state": "ACTIVE", "physical_state": "LINK_UP"}
                        for d in range(devices)])
    tool = bin_dir / "rdma"
    write_file(tool, f"""#!/bin/sh
if [ "$*" = "link show -j" ]; then echo '{links}'; exit 0; fi
echo "rdma (shift run): only 'rdma link show -j' is answered for the simulated devices" >&2
exit 1""")
    tool.chmod(0o755)
    return bin_dir


def environment(build: Build, host: str, sysfs: Path) -> dict[str, str]:
    """The environment of a program on the simulated devices: this build's libibverbs
    (before Debian's, for programs linked against it), programs and pyverbs."""
    env = dict(os.environ)

    def prepend(var: str, path: Path) -> None:
        env[var] = os.pathsep.join(p for p in (str(path), env.get(var, "")) if p)

    prepend("PATH", build.bin)
    prepend("LD_LIBRARY_PATH", build.lib)
    prepend("PYTHONPATH", build.python)
    prepend("LD_PRELOAD", build.channel_library)  # completion channels (channel.c)
    env["SYSFS_PATH"] = str(sysfs)
    env.pop("SHIFT_SIM_LOCKSTEP", None)  # (an outer lock-step run's: not this one's)
    if host == LOCKSTEP:
        env.pop("SHIFT_SIM_HOST", None)
        env["SHIFT_SIM_LOCKSTEP"] = "1"
    else:
        env["SHIFT_SIM_HOST"] = host
    return env


# Run in the new mount namespace: the device nodes; the tree's class/infiniband over the
# real /sys/class (a read-only overlay: programs that read sysfs themselves rather than
# through SYSFS_PATH, as rdma-core's tests read a P_Key, find the devices there too, and
# every real class stays as it was); then the program in place of sh.
NAMESPACE_SCRIPT = """set -e
mkdir -p /dev/infiniband
mount -t tmpfs shift-sim /dev/infiniband
i=0
while [ "$i" -lt "$SHIFT_SIM_DEVICES" ]; do
    ln -s /dev/full "/dev/infiniband/uverbs$i"; i=$((i+1))
done
mount -t overlay -o "lowerdir=$SYSFS_PATH/class:/sys/class" shift-sysfs /sys/class ||
    echo "shift run: no overlay file system: /sys/class/infiniband is not there" \
         "(SYSFS_PATH is)" >&2
exec "$@"
"""


def check_can_run(argv: list[str], env: dict[str, str]) -> None:
    if not argv:
        raise UsageError("no program to run: shift run [--host A|B] -- PROGRAM [ARGS ...]")
    if shutil.which(argv[0], path=env["PATH"]) is None:
        raise ShiftError(f"{argv[0]}: no such program (looked in the rdma-core build's "
                         "bin/ and on PATH)")
    if shutil.which("unshare") is None:
        raise ShiftError("the simulated devices need unshare(1): apt-get install util-linux")
    if os.geteuid() != 0:
        raise ShiftError("the simulated devices need a private mount namespace: run as root")


@contextmanager
def prepared(build: Build, host: str, argv: list[str], devices: int = DEVICES,
             env: dict[str, str] | None = None) -> Iterator[tuple[list[str], dict[str, str]]]:
    """The command line and environment that run ``argv`` as host ``host`` (A, B, or
    ``LOCKSTEP``: both); the sysfs tree lives until the context ends."""
    total = devices * len(hosts_of(host))
    with tempfile.TemporaryDirectory(prefix=f"shift-sysfs-{host}-") as tmp:
        full = environment(build, host, write_sysfs(Path(tmp) / "sys", host, devices))
        full["PATH"] = os.pathsep.join((str(write_rdma_tool(Path(tmp) / "bin", total)),
                                        full["PATH"]))
        full.update(env or {})
        full["SHIFT_SIM_DEVICES"] = str(total)
        check_can_run(argv, full)
        yield ["unshare", "--mount", "--propagation", "private",
               "sh", "-c", NAMESPACE_SCRIPT, "shift-run", *argv], full


def run(build: Build, host: str, argv: list[str], devices: int = DEVICES,
        env: dict[str, str] | None = None, **popen: Any) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as host ``host`` of the simulated fabric to its end; ``env`` adds to
    the environment, ``popen`` goes to subprocess.run (capture_output, timeout, ...)."""
    with prepared(build, host, argv, devices, env) as (cmd, full):
        return subprocess.run(cmd, env=full, text=True, check=False, **popen)


@contextmanager
def started(build: Build, host: str, argv: list[str], devices: int = DEVICES,
            env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    """``argv`` running as host ``host`` (its standard streams piped), killed if still running
    when the context ends."""
    with prepared(build, host, argv, devices, env) as (cmd, full), subprocess.Popen(
            cmd, env=full, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE) as proc:
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


# ---- the out-of-band exchange a verbs program does over TCP (ibv_rc_pingpong, perftest)

def free_port() -> int:
    """A TCP port nothing listens on now, for a server program's -p."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    """Does something listen on the TCP port? Read from /proc: a probe connection would
    be the one connection a server like ibv_rc_pingpong accepts."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            rows = [line.split() for line in f.readlines()[1:]]
        if any(r[1].endswith(f":{port:04X}") and r[3] == "0A" for r in rows):
            return True
    return False
