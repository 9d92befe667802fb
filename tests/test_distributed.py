"""`shift check --distributed` (issue 20, item 3): TLC's TLCServer and TLCWorker processes on
loopback decide the same cells over the same state spaces as one TLC process, say which
cells they cannot check, and leave no Java process behind however the run ends."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from test_cli_errors import one_line_error, shift

from shift.tlc.java import find_java

# At `small`: NoFailover, whose invariants all hold (the whole state space on both sides),
# and NaiveReplay's ExactlyOnceExecution, violated within a few thousand states (how the
# distributed run names a violation and keeps its counterexample). Invariants only, so
# that the single-process run spends no time on what distributed TLC cannot check.
HOLDING = ("NoFailover", ["ExactlyOnceExecution", "NotificationIntegrity", "DataAtNotification",
                          "CompletionIntegrity", "AtomicSafety", "Opacity", "ZeroCopy"])
VIOLATED = ("NaiveReplay", ["ExactlyOnceExecution"])


def flags(names: list[str], flag: str) -> list[str]:
    return [a for n in names for a in (flag, n)]


def check(tmp: Path, name: str, design: str, props: list[str], *extra: str,
          ) -> dict[tuple[str, str], dict[str, object]]:
    """The cells of one `shift check` at small, by (design, property), from its JSON."""
    out = tmp / f"{name}.json"
    proc = shift("check", "--bound", "small", "--design", design, *flags(props, "--property"),
                 "--jobs", "1", "--json", str(out), "--out", str(tmp / name), *extra, cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {(r["design"], r["property"]): r for r in json.loads(out.read_text())["results"]}


def design_states(cells: dict[tuple[str, str], dict[str, object]], design: str) -> int:
    """A design's explored state space: the count of the run that found no violation."""
    return max(int(str(r["states"])) for (d, _), r in cells.items() if d == design)


def java_processes(port: int) -> list[str]:
    """The command lines of live processes of the TLC server on `port` and its workers."""
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True)
    return [ln for ln in ps.stdout.splitlines()
            if f"tlc2.tool.distributed.TLCServer.port={port}" in ln]


def test_two_loopback_workers_decide_as_one_tlc_process(tmp_path: Path) -> None:
    design, props = HOLDING
    single = check(tmp_path, "single", design, props, "--engine", "tlc", "--workers", "1")
    dist = check(tmp_path, "dist", design, props, "--distributed", "--dist-workers", "2")
    assert single.keys() == dist.keys() and len(dist) == len(props)
    assert {k: r["verdict"] for k, r in dist.items()} == \
        {k: r["verdict"] for k, r in single.items()} == dict.fromkeys(dist, "holds")
    assert design_states(dist, design) == design_states(single, design) > 10_000
    for key, r in dist.items():  # every cell was decided over the whole space
        assert r["engine"] == "tlc-distributed" and r["states"] == single[key]["states"]


def test_a_violation_is_named_with_the_last_two_states(tmp_path: Path) -> None:
    design, props = VIOLATED
    single = check(tmp_path, "single", design, props, "--engine", "tlc", "--workers", "1")
    dist = check(tmp_path, "dist", design, props, "--distributed", "--dist-workers", "2")
    key = (design, props[0])
    assert single[key]["verdict"] == dist[key]["verdict"] == "violated"
    itf = json.loads(Path(str(dist[key]["counterexample"])).read_text())
    assert len(itf["states"]) == 2  # distributed TLC keeps the last two states only
    assert itf["states"][0]["#meta"]["action"].startswith("(earlier steps: not kept")


def test_temporal_cells_are_not_checked_and_say_why(tmp_path: Path) -> None:
    """Distributed TLC has no liveness checker: Liveness is neither holds nor an error, in
    the table, the JSON and the JUnit (skipped), and does not fail the exit status."""
    proc = shift("check", "--distributed", "--design", "NoFailover", "--property",
                 "Liveness", "--json", "r.json", "--junit", "r.xml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not checked" in proc.stdout
    assert "0 of 0 verdicts as declared; 1 not checked (TLC's distributed mode checks " \
           "safety only)" in proc.stdout
    [cell] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert cell["verdict"] == "not checked" and "safety only" in cell["message"]
    case = ET.parse(tmp_path / "r.xml").getroot().find(".//testcase")
    assert case is not None and case.find("skipped") is not None
    assert "TLC run" not in proc.stderr  # no TLC process was started for it


def test_bad_combinations_are_one_line_errors(tmp_path: Path) -> None:
    line = one_line_error(shift("check", "--distributed", "--engine", "explorer", cwd=tmp_path))
    assert "--distributed runs TLC" in line and "--engine explorer" in line
    line = one_line_error(shift("check", "--dist-workers", "3", cwd=tmp_path))
    assert "--dist-workers needs --distributed" in line
    line = one_line_error(shift("check", "--distributed", "--dist-workers", "-1",
                                cwd=tmp_path))
    assert "must be 0 or more" in line


def start(tmp: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "shift", "check", "--distributed", "--design", "NoFailover",
         "--property", "ZeroCopy", "--out", str(tmp / "out"), *extra],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(proc: subprocess.Popen[str], pattern: str) -> re.Match[str]:
    """Read stderr until a line matches."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if (m := re.search(pattern, line)) is not None:
            return m
    raise AssertionError(f"never printed {pattern!r}: {''.join(seen)}")


def test_ctrl_c_stops_the_server_and_every_worker(tmp_path: Path) -> None:
    # bound large: the run outlasts the workers' registration however slow the machine
    # (at small it can end before the signal, with exit status 0)
    proc = start(tmp_path, "--bound", "large")
    port = int(wait_for(proc, r"server ready on port (\d+); started 2 local").group(1))
    wait_for(proc, r"TLC worker 2 registered")
    assert len(java_processes(port)) == 3  # the server and two workers
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    assert java_processes(port) == []


def test_a_timeout_is_an_error_cell_and_stops_everything(tmp_path: Path) -> None:
    proc = start(tmp_path, "--dist-timeout", "3", "--json", "t.json")
    port = int(wait_for(proc, r"starting a TLC server on port (\d+)").group(1))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    [cell] = json.loads((tmp_path / "t.json").read_text())["results"]
    assert cell["verdict"] == "error" and "timed out after 3 s" in cell["message"]
    assert java_processes(port) == []


def test_a_remote_worker_joins_with_the_printed_command(tmp_path: Path) -> None:
    """With --dist-workers 0 the server waits; the command it prints, run as is (with this
    machine's address and Java), is a worker that finishes the check."""
    proc = start(tmp_path, "--dist-workers", "0", "--dist-timeout", "300")
    cmd = wait_for(proc, r"on each machine run  (java .*TLCWorker 127\.0\.0\.1)$").group(1)
    argv = [find_java() if a == "java" else a.replace("THIS_MACHINE_ADDRESS", "127.0.0.1")
            for a in cmd.split()]
    worker = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    try:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
        assert "1 of 1 verdicts as declared" in out
        assert "TLC worker 1 registered" in err
        assert re.search(r"NoFailover, TLC run 1: [\d,]+ distinct states so far", err)
        assert worker.wait(60) == 0  # the server told it to exit
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()


def test_workers_that_die_end_the_run_as_an_error_and_stop_the_server(tmp_path: Path) -> None:
    proc = start(tmp_path, "--json", "w.json")
    port = int(wait_for(proc, r"starting a TLC server on port (\d+)").group(1))
    wait_for(proc, r"TLC worker 2 registered")
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True,
                        check=True)
    workers = [int(ln.split()[0]) for ln in ps.stdout.splitlines()
               if f"TLCServer.port={port}" in ln and "TLCWorker" in ln]
    assert len(workers) == 2
    for pid in workers:  # the two workers this run started
        os.kill(pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    [cell] = json.loads((tmp_path / "w.json").read_text())["results"]
    assert cell["verdict"] == "error" and "every local TLC worker exited" in cell["message"]
    assert java_processes(port) == []
