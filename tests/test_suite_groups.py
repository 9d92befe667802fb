"""The suite's own scheduling: a costly fixture is built once per xdist group.

pyproject.toml runs the suite with `--dist loadgroup`, and the TLC graphs, native builds
and `shift check` runs that modules share rest on it. pytest-xdist keeps a group on one
worker only if it can tag each grouped test's id; pytest 9.2 broke that silently and every
worker built every fixture (CI time grew by a third). This runs a two-worker session on a
tiny module and counts the fixture's set-ups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULE = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("costly")


@pytest.fixture(scope="module")
def costly():
    with open("setups", "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.mark.parametrize("n", range(8))
def test_uses_it(costly, n):
    pass


@pytest.mark.parametrize("n", range(8))
def test_alone(n):
    pass
'''


def test_a_group_s_module_fixture_is_built_once_on_two_workers(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(MODULE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "-n", "2", "--dist", "loadgroup", "test_grouped.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "16 passed" in proc.stdout, proc.stdout
    setups = (tmp_path / "setups").read_text().split()
    assert len(setups) == 1, f"the group ran on {setups}: pytest and pytest-xdist disagree"
