"""Every variable keeps its type: TLC checks TypeOK (spec/State.tla) at bound small.

TypeOK is not a property of the trilemma table: `designs.toml`'s `invariants` are the
table's columns, and `shift check` checks nothing else. So this test runs TLC itself, as
spec/README.md does by hand: a copy of the modules, the bound's constants and
`INVARIANT TypeOK` written by the harness's cfg writer, one run per design. A copy whose
TypeOK is wrong must fail, or the check proves nothing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from shift.spec.catalog import Catalog, load_catalog

from shift.tlc.java import find_jar, find_java
from shift.tlc.runner import write_cfg

CATALOG: Catalog = load_catalog()
BOUND = "small"
NO_ERROR = "Model checking completed. No error has been found."


def copy_spec(dest: Path) -> Path:
    dest.mkdir()
    for tla in CATALOG.spec_dir.glob("*.tla"):
        shutil.copyfile(tla, dest / tla.name)
    return dest


def run_tlc(spec: Path, module: str, invariant: str) -> subprocess.CompletedProcess[str]:
    """TLC on `module` of the folder `spec` at the bound, checking one invariant."""
    write_cfg(spec / "MC.cfg", CATALOG.bound(BOUND).constants, [invariant], [])
    cmd = [find_java(), "-XX:+UseParallelGC", "-Xmx1024m", "-cp", find_jar(), "tlc2.TLC",
           "-deadlock", "-workers", "1", "-metadir", str(spec / "states"),
           "-config", "MC.cfg", f"{module}.tla"]
    return subprocess.run(cmd, cwd=spec, capture_output=True, text=True, timeout=900,
                          check=False)


def distinct_states(out: str) -> int:
    m = re.search(r"([\d,]+) distinct states found", out)
    assert m is not None, out[-2000:]
    return int(m.group(1).replace(",", ""))


@pytest.mark.parametrize("design", list(CATALOG.designs))
def test_every_variable_keeps_its_type(design: str, tmp_path: Path) -> None:
    proc = run_tlc(copy_spec(tmp_path / "spec"), CATALOG.design(design).module, "TypeOK")
    tail = "\n".join(proc.stdout.splitlines()[-20:])
    assert proc.returncode == 0 and NO_ERROR in proc.stdout, tail
    # The whole graph was searched, not a fragment cut short.
    assert distinct_states(proc.stdout) > 1000, tail


def test_a_wrong_type_is_reported(tmp_path: Path) -> None:
    """With QP states narrowed to RTS, the first QP moved to ERR breaks TypeOK."""
    spec = copy_spec(tmp_path / "spec")
    state = spec / "State.tla"
    text = state.read_text()
    right = 'QpStates   == {"RTS", "ERR"}'
    assert text.count(right) == 1, "State.tla no longer defines QpStates this way"
    state.write_text(text.replace(right, 'QpStates   == {"RTS"}'))
    proc = run_tlc(spec, CATALOG.design("NoFailover").module, "TypeOK")
    assert "Invariant TypeOK is violated" in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode != 0
    assert '"ERR"' in proc.stdout  # the trace's last state has a QP in ERR
