"""Faults from outside a running program (issue 18, item 2): `shift nic`, `shift link`
and `shift drop` on unmodified ibv_rc_pingpong, and the asynchronous event a program
sees. Without the SHIFT layer under it (issue 19), a dead NIC or link ends the run with
the error completions RC gives; lost packets are retransmitted and the run completes."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from shift.verbs import control, devices
from shift.verbs.rdma_core import Build
from test_pingpong import iterations, wait_listening

from shift.errors import ShiftError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_cli_errors import one_line_error, shift  # noqa: E402

pytestmark = pytest.mark.xdist_group("verbs")

EVENTS = str(Path(__file__).with_name("pyverbs_events.py"))


def fabric_env() -> dict[str, str]:
    """A fabric of the test's own; each host's counters on stderr when it closes."""
    return {"SHIFT_SIM_FABRIC": f"faults-{uuid.uuid4().hex[:8]}", "SHIFT_SIM_STATS": "1"}


def counters(out: str, host: str) -> dict[str, int]:
    m = re.search(rf"^shift-sim: host {host}: (.*)$", out, flags=re.M)
    assert m, out
    words = m.group(1).split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=True)}


def fault(env: dict[str, str], *args: str) -> str:
    proc = shift(*args, cwd=Path.cwd(), env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def wait_for_traffic(env: dict[str, str], client: subprocess.Popen[str],
                     packets: int = 200, seconds: float = 60) -> None:
    """Until host A has received `packets` (its device open, the exchange done, traffic
    flowing), asking its provider (shift stats)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert client.poll() is None, client.communicate()
        try:
            if control.stats(env["SHIFT_SIM_FABRIC"], "A")["received"] >= packets:
                return
        except ShiftError:
            pass  # not open yet
        time.sleep(0.02)
    pytest.fail(f"host A did not receive {packets} packets within {seconds} s")


HUNG = None  # a side still waiting when the other had ended (and a grace period passed)


def pingpong_with(rdma: Build, env: dict[str, str], iters: str,
                  before: tuple[tuple[str, ...], ...] = (),
                  during: tuple[tuple[str, ...], ...] = (),
                  ) -> tuple[tuple[int | None, str], tuple[int | None, str]]:
    """ibv_rc_pingpong on sim0 with -c: the faults `before` applied once the server has
    its device open, those `during` once both run; each side's exit status (HUNG if it
    still waited 5 s after the other ended, as a side with no send in flight does on
    hardware) and output."""
    port = str(devices.free_port())
    args = ["ibv_rc_pingpong", "-d", "sim0", "-c", "-n", iters, "-p", port]
    with devices.started(rdma, "B", args, env=env) as server:
        wait_listening(int(port), server)
        for f in before:
            fault(env, *f)
        with devices.started(rdma, "A", [*args, "localhost"], env=env) as client:
            if during:
                wait_for_traffic(env, client)
            for f in during:
                fault(env, *f)
            client_seen = ended(client, 120)
        server_seen = ended(server, 5 if client_seen[0] is not None else 120)
    return client_seen, server_seen


def ended(proc: subprocess.Popen[str], seconds: float) -> tuple[int | None, str]:
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return HUNG, out + err
    return proc.returncode, out + err


RETRY_EXCEEDED = "transport retry counter exceeded (12)"


def test_a_dead_nic_ends_the_run(rdma: Build) -> None:
    """Host A's NIC dies: A's QP is flushed; B fails its next send by its retry count,
    or, with none in flight, waits for ever (RC tells a responder nothing)."""
    env = fabric_env()
    (c_rc, client), (s_rc, server) = pingpong_with(
        rdma, env, "100000000", during=(("nic", "down", "sim0", "--host", "A"),))
    assert c_rc not in (0, HUNG) and "Work Request Flushed Error (5)" in client
    assert s_rc is HUNG or (s_rc != 0 and RETRY_EXCEEDED in server), server


def test_a_dead_link_ends_the_run(rdma: Build) -> None:
    """The link of path 1 dies under both hosts: a side with a send in flight fails it
    by its retry count; a side with none waits for ever."""
    env = fabric_env()
    (c_rc, client), (s_rc, server) = pingpong_with(rdma, env, "100000000",
                                                   during=(("link", "down", "sim0"),))
    outcomes = [(c_rc, client), (s_rc, server)]
    assert any(rc not in (0, HUNG) and RETRY_EXCEEDED in out for rc, out in outcomes)
    assert all(rc is HUNG or (rc != 0 and RETRY_EXCEEDED in out) for rc, out in outcomes)


def test_lost_packets_are_retransmitted(rdma: Build) -> None:
    """Packets reaching host B dropped (A's requests, or its ACKs of B's sends): RC's
    timer resends them and the run completes with its data checked."""
    env = fabric_env()
    (c_rc, client), (s_rc, server) = pingpong_with(
        rdma, env, "2000", before=(("drop", "sim0", "--host", "B", "-n", "3"),))
    assert c_rc == 0 and s_rc == 0, client + server
    assert iterations(client) == iterations(server) == 2000
    assert counters(server, "B")["dropped"] == 3
    assert counters(client, "A")["timeouts"] >= 1  # A's timer went back for them


def test_the_program_hears_the_device_die(rdma: Build) -> None:
    """pyverbs: the asynchronous event of a dead NIC, and its port down afterwards."""
    env = fabric_env()
    with devices.started(rdma, "A", [sys.executable, EVENTS, "sim1"], env=env) as prog:
        assert prog.stdout is not None
        assert prog.stdout.readline().strip() == "listening"
        fault(env, "nic", "down", "sim1", "--host", "A")
        out, err = prog.communicate(timeout=60)
    assert prog.returncode == 0, err
    assert out.split() == ["IBV_EVENT_DEVICE_FATAL", "port_down"]


def test_fault_errors(rdma: Build) -> None:
    env = fabric_env()
    assert "the simulated devices are sim0 and sim1" in one_line_error(
        shift("nic", "down", "sim7", cwd=Path.cwd(), env=env))
    assert "no program on host B" in one_line_error(
        shift("nic", "down", "sim0", "--host", "B", cwd=Path.cwd(), env=env))
    assert "no program on host A" in one_line_error(
        shift("link", "up", "sim1", cwd=Path.cwd(), env=env))
    assert "--count 0" in one_line_error(
        shift("drop", "sim0", "-n", "0", cwd=Path.cwd(), env=env))
    assert "no program on host A" in one_line_error(shift("stats", cwd=Path.cwd(), env=env))
