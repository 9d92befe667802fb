"""Unmodified rdma-core example programs between two processes, one per host, over the
simulated devices (issue 18's first "Must show"): ibv_rc_pingpong as server on host B
and client on host A, with its own data validation (-c), on either NIC, inline-sized
and full-sized messages. Resources (the build, a fabric of its own, a free TCP port) →
the two programs → what each reported."""

from __future__ import annotations

import re
import subprocess
import time
import uuid

import pytest
from shift.impl._native import lib
from shift.verbs import devices
from shift.verbs.rdma_core import Build

pytestmark = pytest.mark.xdist_group("verbs")


def wait_listening(port: int, server: subprocess.Popen[str], seconds: float = 30) -> None:
    """Until the server listens on port (devices.listening)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()
        if devices.listening(port):
            return
        time.sleep(0.05)
    pytest.fail(f"ibv_rc_pingpong did not listen on port {port} within {seconds} s")


def pingpong_pair(rdma: Build, *args: str, timeout: float = 120,
                  ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """ibv_rc_pingpong: the server as host B, then the client as host A; both finished."""
    port = str(devices.free_port())
    fabric = {"SHIFT_SIM_FABRIC": f"pingpong-{uuid.uuid4().hex[:8]}"}
    with devices.started(rdma, "B", ["ibv_rc_pingpong", "-p", port, *args],
                         env=fabric) as server:
        wait_listening(int(port), server)
        client = devices.run(rdma, "A", ["ibv_rc_pingpong", "-p", port, *args, "localhost"],
                             capture_output=True, timeout=timeout, env=fabric)
        out, err = server.communicate(timeout=timeout)
    return (subprocess.CompletedProcess(server.args, server.returncode, out, err), client)


def iterations(out: str) -> int:
    m = re.search(r"^(\d+) iters in", out, flags=re.M)
    assert m, out
    return int(m.group(1))


@pytest.mark.parametrize("device", ["sim0", "sim1"])
@pytest.mark.parametrize("size", ["32", "4096"])  # inline (<= 64 bytes) and a full message
def test_rc_pingpong_validates_its_data(rdma: Build, device: str, size: str) -> None:
    server, client = pingpong_pair(rdma, "-d", device, "-c", "-n", "2000", "-s", size)
    for side in (server, client):
        assert side.returncode == 0, side.stdout + side.stderr
        assert iterations(side.stdout) == 2000
        assert "mismatch" not in side.stdout + side.stderr.lower()
    # each side saw the other's address: host A's LID on B and host B's on A
    lid_a, lid_b = (16 * devices.HOSTS.index(h) + int(device[-1]) + 1 for h in "AB")
    assert f"remote address: LID 0x{lid_a:04x}" in server.stdout
    assert f"remote address: LID 0x{lid_b:04x}" in client.stdout


def test_rc_pingpong_over_gids(rdma: Build) -> None:
    """With -g the programs exchange GIDs (read from the sysfs tree by libibverbs)."""
    server, client = pingpong_pair(rdma, "-d", "sim0", "-g", "0", "-n", "200", "-c")
    assert server.returncode == 0 and client.returncode == 0, client.stderr + server.stderr
    assert "GID fe80::5348:4946:5400:100" in server.stdout.split("remote address:")[0]
    assert "remote address: LID 0x0011" in client.stdout
    # QP numbers name their host (simnic.h SN_QPN_HOST_B): A's below it, B's above
    qpn_of = {host: int(re.search(r"remote address:.*QPN (0x[0-9a-f]+)", peer.stdout)[1], 16)
              for host, peer in (("B", client), ("A", server))}
    assert qpn_of["B"] >= lib.SN_QPN_HOST_B > qpn_of["A"]


def test_the_client_without_a_server_fails(rdma: Build) -> None:
    """No server: the client's TCP exchange fails and so does the program (exit 1)."""
    port = str(devices.free_port())
    client = devices.run(rdma, "A", ["ibv_rc_pingpong", "-p", port, "localhost"],
                         capture_output=True, timeout=60,
                         env={"SHIFT_SIM_FABRIC": f"alone-{uuid.uuid4().hex[:8]}"})
    assert client.returncode != 0
    assert "Couldn't connect" in client.stderr
