"""perftest (Debian's ib_write_bw, linked against libibverbs.so.1) on the simulated
devices through rdma-core 59's libibverbs: 128 WRITEs in flight keep the wire full, and
the host's counters show flow control holding packets back rather than losing them."""

from __future__ import annotations

import re
import uuid

import pytest
from shift.verbs import devices
from shift.verbs.rdma_core import Build
from test_faults import counters
from test_pingpong import wait_listening
from verbs_helpers import debian_program

pytestmark = pytest.mark.xdist_group("verbs")


@pytest.fixture(scope="module")
def perftest() -> str:
    return debian_program("ib_write_bw", "perftest")


def test_ib_write_bw_moves_every_write(rdma: Build, perftest: str) -> None:
    port, iters = str(devices.free_port()), 20000
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
