"""perftest (Debian's ib_write_bw, linked against libibverbs.so.1) on the simulated
devices through rdma-core 59's libibverbs: 128 WRITEs in flight keep the wire full, and
the host's counters show flow control holding packets back rather than losing them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid

import pytest
from shift.verbs import devices
from shift.verbs.rdma_core import Build
from test_faults import counters
from test_pingpong import free_port, wait_listening

pytestmark = pytest.mark.xdist_group("verbs")


@pytest.fixture(scope="module")
def perftest() -> str:
    """ib_write_bw: found, or installed from Debian's packages (as root)."""
    found = shutil.which("ib_write_bw")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "-q", "perftest"], capture_output=True,
                       timeout=600, env=env)
        found = shutil.which("ib_write_bw")
    if found is None:
        pytest.fail("the perftest test needs Debian's perftest: apt-get install perftest")
    return found


def test_ib_write_bw_moves_every_write(rdma: Build, perftest: str) -> None:
    port, iters = str(free_port()), 20000
    env = {"SHIFT_SIM_FABRIC": f"perftest-{uuid.uuid4().hex[:8]}", "SHIFT_SIM_STATS": "1"}
    args = [perftest, "-d", "sim0", "-s", "64", "-n", str(iters), "-p", port]
    with devices.started(rdma, "B", args, env=env) as server:
        wait_listening(int(port), server)
        client = devices.run(rdma, "A", [*args, "localhost"], capture_output=True,
                             timeout=120, env=env)
        s_out, s_err = server.communicate(timeout=120)
    assert client.returncode == 0 and server.returncode == 0, client.stderr + s_err
    row = re.search(rf"^\s*64\s+{iters}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", client.stdout,
                    flags=re.M)
    assert row and float(row.group(3)) > 0, client.stdout  # a message rate was measured
    a = counters(client.stdout + client.stderr, "A")
    assert a["lost"] == 0 and a["timeouts"] == 0  # held back, never dropped
    assert a["sent"] >= iters and counters(s_out + s_err, "B")["received"] == a["sent"]
