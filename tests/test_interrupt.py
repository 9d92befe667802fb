"""A `shift check` stopped by SIGTERM (as a CI runner stops a job) or Ctrl-C says so in one
line, exits 130 and leaves no TLC process behind, with one TLC process or several."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def java_children(pid: int) -> list[int]:
    ps = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(pid)], capture_output=True,
                        text=True, check=False)
    return [int(line.split()[0]) for line in ps.stdout.splitlines() if "java" in line]


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan would be alive, reparented to init)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_check_leaves_no_tlc_behind(sig: signal.Signals, tmp_path: Path) -> None:
    # Two designs with --jobs 2: a TLC process in each of two threads.
    proc = subprocess.Popen(
        [sys.executable, "-m", "shift", "check", "--engine", "tlc", "--bound", "default",
         "--design", "Shift", "--design", "ShiftPrefix", "--jobs", "2", "--workers", "1",
         "--out", str(tmp_path / "out")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(tlc := java_children(proc.pid)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "TLC never started"
        time.sleep(0.2)
    proc.send_signal(sig)
    # (generous: on 2 loaded cores the JVMs' shutdown and the threads' exit took over 60 s)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert err.strip().endswith("shift check: interrupted") and "Traceback" not in err
    assert "running it once more" not in err  # a stopped TLC is not a failed one
    assert [pid for pid in tlc if running(pid)] == []
