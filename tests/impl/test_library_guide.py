"""docs/library.md, the guide for a transport developer (issue 16, item 3): its Python
example runs as written, and the pages that send a reader there do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from impl_helpers import GUIDE, ROOT, guide_block


def test_the_guide_s_python_example_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "stream.py").write_text(guide_block("# stream.py"))
    r = subprocess.run([sys.executable, "stream.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[:6] == [f"B: round {k}: region {k % 4 + 1} holds {100 * k}"
                         for k in range(1, 7)]
    assert lines[6:8] == ["A: Default, failovers 1, replayed 2, fail-backs 1",
                          "B: Default, failovers 1, replayed 0, fail-backs 0"]
    # each host's events, in order: A saw its default path fail, B was woken by A's
    # counter; A failed back, and B's receive WRs followed
    assert lines[8:] == [
        "A: PATH_DOWN on path 1", "A: FAILOVER_STARTED on path 2",
        "A: FAILOVER_FINISHED on path 2", "A: FAIL_BACK on path 1",
        "B: FAILOVER_STARTED on path 2", "B: FAILOVER_FINISHED on path 2",
        "B: RECV_FAIL_BACK on path 1"]
    assert "\n".join(lines[6:]) in GUIDE.read_text()  # the output the guide shows


def test_the_readme_and_native_readme_lead_to_the_guide_and_the_link_line() -> None:
    assert "(docs/library.md)" in (ROOT / "README.md").read_text()
    native_readme = (ROOT / "native" / "README.md").read_text()
    assert "$(shift config --cflags) $(shift config --libs)" in native_readme
    assert "(../docs/library.md)" in native_readme
