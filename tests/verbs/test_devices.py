"""The simulated devices through the real libibverbs (issue 18): rdma-core 59's own
programs and pyverbs list, open and query them, one host per process.

Resources (the rdma-core build, a host's devices) → the program → what it printed."""

from __future__ import annotations

import errno
import json
import re
import sys
import uuid
from pathlib import Path

import pytest
from shift.verbs import devices
from shift.verbs.rdma_core import Build
from verbs_helpers import run_as

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_cli_errors import one_line_error, shift  # noqa: E402

pytestmark = pytest.mark.xdist_group("verbs")

PYVERBS_QUERY = Path(__file__).with_name("pyverbs_query.py")


def hca_blocks(devinfo: str) -> dict[str, str]:
    """ibv_devinfo's output, one block per device, by hca_id."""
    blocks = re.split(r"^hca_id:\s*", devinfo, flags=re.M)[1:]
    return {b.split()[0]: b for b in blocks}


def field(block: str, name: str) -> str:
    m = re.search(rf"^\s*{name}:\s*(.+)$", block, flags=re.M)
    assert m, f"no {name} in {block}"
    return m.group(1).strip()


@pytest.mark.parametrize("host", devices.HOSTS)
def test_ibv_devinfo_lists_the_hosts_two_nics(rdma: Build, host: str) -> None:
    proc = run_as(rdma, host, "ibv_devinfo")
    assert proc.returncode == 0, proc.stderr
    blocks = hca_blocks(proc.stdout)
    assert sorted(blocks) == ["sim0", "sim1"]
    for device, name in enumerate(sorted(blocks)):
        b = blocks[name]
        assert field(b, "transport") == "InfiniBand (0)"
        assert field(b, "node_guid") == devices.node_guid(host, device)
        assert field(b, "state") == "PORT_ACTIVE (4)"
        assert field(b, "link_layer") == "InfiniBand"
        # LIDs differ between hosts: a program exchanges them to connect
        assert int(field(b, "port_lid")) == 16 * devices.HOSTS.index(host) + device + 1


def test_the_devinfo_it_runs_is_rdma_core_59(rdma: Build) -> None:
    """`shift run` puts the build's programs first on PATH (not Debian's ibverbs-utils),
    and the provider was loaded from the build: ibv_devinfo -v shows its limits."""
    proc = run_as(rdma, "A", "sh", "-c", "command -v ibv_devinfo; ibv_devinfo -v -d sim1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == str(rdma.program("ibv_devinfo"))
    assert field(proc.stdout, "fw_ver") == "shift-simnic 1"
    assert field(proc.stdout, "max_sge") == "8"  # gathered and scattered (sge.c)
    assert field(proc.stdout, "max_msg_sz") == "0x10000"
    assert field(proc.stdout, "atomic_cap") == "ATOMIC_HCA (1)"


def test_the_devices_are_in_sys_class_too(rdma: Build) -> None:
    """Inside `shift run` the tree's class/infiniband is laid over /sys/class, for programs
    that read sysfs themselves (rdma-core's test_get_pkey_index); every real class stays."""
    script = ("cat /sys/class/infiniband/sim1/ports/1/pkeys/0 /sys/class/infiniband/sim0/node_guid;"
              " test -d /sys/class/net && echo net")
    proc = run_as(rdma, "B", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0xffff", devices.node_guid("B", 0), "net"]
    assert not Path("/sys/class/infiniband/sim0").exists()  # the host's is untouched


def test_pyverbs_opens_and_queries_each_device(rdma: Build) -> None:
    proc = run_as(rdma, "B", sys.executable, str(PYVERBS_QUERY))
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert [d["name"] for d in seen] == ["sim0", "sim1"]
    for device, d in enumerate(seen):
        assert d["node_guid"] == devices.node_guid("B", device)
        assert d["phys_port_cnt"] == 1 and d["port_active"] is True
        assert d["lid"] == 16 + device + 1
        assert d["gid"] == "fe80:0000:0000:0000:" + devices.node_guid("B", device)


def test_without_the_namespace_libibverbs_finds_no_device(rdma: Build, tmp_path: Path) -> None:
    """The devices exist only inside `shift run`: the same build run plainly lists none
    (the check that the test above is not seeing some other device)."""
    import subprocess

    env = devices.environment(rdma, "A", tmp_path / "empty-sysfs")
    proc = subprocess.run([str(rdma.program("ibv_devices"))], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "sim0" not in proc.stdout


def test_shift_run_without_a_program(tmp_path: Path) -> None:
    line = one_line_error(shift("run", cwd=tmp_path))
    assert "no program to run" in line


def test_shift_run_an_unknown_program(rdma: Build, tmp_path: Path) -> None:
    line = one_line_error(shift("run", "--", "ibv_no_such_program", cwd=tmp_path,
                                env={"SHIFT_VERBS_DIR": str(rdma.root)}))
    assert "ibv_no_such_program: no such program" in line


def test_shift_run_passes_the_exit_status(rdma: Build, tmp_path: Path) -> None:
    check = 'test "$SHIFT_SIM_HOST" = B && test "$SHIFT_SIM_FABRIC" = mine && exit 7'
    proc = shift("run", "--host", "B", "--fabric", "mine", "--", "sh", "-c", check,
                 cwd=tmp_path, env={"SHIFT_VERBS_DIR": str(rdma.root)})
    assert proc.returncode == 7, proc.stderr


def test_shift_run_lockstep_is_both_hosts(rdma: Build, tmp_path: Path) -> None:
    """--lockstep: SHIFT_SIM_LOCKSTEP=1, no SHIFT_SIM_HOST, four device nodes; not with
    --host."""
    check = ('test "$SHIFT_SIM_LOCKSTEP" = 1 && test -z "$SHIFT_SIM_HOST" && '
             'test -e /dev/infiniband/uverbs3 && exit 7')
    env = {"SHIFT_VERBS_DIR": str(rdma.root), "SHIFT_SIM_HOST": "B"}
    proc = shift("run", "--lockstep", "--", "sh", "-c", check, cwd=tmp_path, env=env)
    assert proc.returncode == 7, proc.stderr
    both = shift("run", "--lockstep", "--host", "B", "--", "true", cwd=tmp_path, env=env)
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_one_process_per_host(rdma: Build) -> None:
    """A second program as the same host of the same fabric cannot open the devices, and
    says why; under another fabric name it can."""
    env = {"SHIFT_SIM_FABRIC": f"twice-{uuid.uuid4().hex[:8]}"}
    holder = [sys.executable, str(Path(__file__).with_name("pyverbs_events.py")), "sim0"]
    with devices.started(rdma, "A", holder, env=env) as first:
        assert first.stdout is not None and first.stdout.readline().strip() == "listening"
        second = devices.run(rdma, "A", ["ibv_devinfo"], capture_output=True, timeout=60,
                             env=env)
        other = devices.run(rdma, "A", ["ibv_devinfo"], capture_output=True, timeout=60,
                            env={"SHIFT_SIM_FABRIC": f"other-{uuid.uuid4().hex[:8]}"})
    assert second.returncode != 0
    assert "host A of fabric" in second.stderr and "runs in another process" in second.stderr
    assert other.returncode == 0 and "sim0" in other.stdout


def test_what_the_provider_cannot_do_is_refused(rdma: Build) -> None:
    """At most 8 SGEs (and what the QP asked for), RC and UD only, one completion
    vector: anything else gets the errno verbs gives, never a crash, and the device
    stays usable."""
    proc = run_as(rdma, "A", sys.executable, str(Path(__file__).with_name("pyverbs_refusals.py")))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "cq_of_no_entries": errno.EINVAL, "cq_on_vector_1": errno.EINVAL,
        "qp_of_nine_sges": errno.EINVAL, "uc_qp": errno.EOPNOTSUPP,
        "send_of_two_sges": errno.EINVAL, "send_before_rts": errno.EINVAL,
        "still_usable": 0}
