"""The verbs tests' resources: the rdma-core build with the provider, and a program run
as one host of the simulated fabric."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from shift.verbs import devices, rdma_core


def apt_install(packages: list[str]) -> None:
    """Debian packages installed (as root; otherwise nothing happens)."""
    if packages and shutil.which("apt-get") and os.geteuid() == 0:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", *packages], capture_output=True,
                       timeout=1200, env=env)


def install_build_packages() -> None:
    """The Debian packages rdma-core's build needs, installed when missing."""
    apt_install(rdma_core.missing_packages())
    missing = rdma_core.missing_packages()
    if missing:
        pytest.fail(f"the verbs tests build rdma-core: apt-get install {' '.join(missing)}")


def debian_program(name: str, package: str) -> str:
    """A program on PATH, installed from its Debian package when missing."""
    if shutil.which(name) is None:
        apt_install([package])
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"the verbs tests need {name}: apt-get install {package}")
    return found


def build() -> rdma_core.Build:
    install_build_packages()
    return rdma_core.ensure_built(lambda line: print(line, file=sys.stderr))


def run_as(b: rdma_core.Build, host: str, *argv: str,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return devices.run(b, host, list(argv), capture_output=True, timeout=timeout)


# ---- a pyverbs program run as a host: its JSON lines out, lines in
def line(proc: subprocess.Popen[str]) -> object:
    assert proc.stdout is not None
    text = proc.stdout.readline()
    if not text:
        pytest.fail(f"{proc.args[-2:]} ended: {proc.communicate()}")
    return json.loads(text)


def tell(proc: subprocess.Popen[str], text: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(text + "\n")
    proc.stdin.flush()
