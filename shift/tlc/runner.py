"""One TLC run: a temporary folder holding copies of the modules and a generated cfg.

TLC writes its state files under `-metadir` in that folder, so a run never litters the
user's working tree, and the folder is removed afterwards.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shift.errors import SpecError
from shift.tlc import output, processes
from shift.tlc.java import find_jar, find_java

OK, INVARIANT, TEMPORAL, ERROR = "ok", "invariant", "temporal", "error"

Progress = Callable[[int, int], None]  # (distinct states, states left on queue)


@dataclass
class RunResult:
    outcome: str  # OK | INVARIANT | TEMPORAL | ERROR
    violated: str | None
    trace: output.Trace | None
    generated: int
    distinct: int
    seconds: float
    message: str = ""
    crashed: bool = False  # TLC itself failed (an exception, a non-zero exit), not a signal


@dataclass(frozen=True)
class RunConfig:
    spec_dir: Path
    module: str
    constants: dict[str, str]
    workers: int = 1
    heap_mb: int = 2048
    spec: str = "Spec"  # the module's behaviour formula (an NCCL design's Unfair, say)


def write_cfg(path: Path, constants: dict[str, str], invariants: list[str],
              temporal: list[str], spec: str = "Spec") -> None:
    lines = ["CONSTANTS"] + [f"    {k} = {v}" for k, v in constants.items()]
    lines += [f"SPECIFICATION {spec}", "VIEW View"]
    lines += [f"INVARIANT {name}" for name in invariants]
    lines += [f"PROPERTY {name}" for name in temporal]
    path.write_text("\n".join(lines) + "\n")


def _interpret(cfg: RunConfig, lines: list[str], returncode: int, seconds: float) -> RunResult:
    messages, loose = output.split_messages(lines)
    generated, distinct = output.counts(messages)
    for msg in messages:
        if msg.code in output.INVARIANT_VIOLATED:
            m = re.search(r"Invariant (\w+) is violated", msg.text)
            return RunResult(INVARIANT, m.group(1) if m else None, output.parse_trace(messages),
                             generated, distinct, seconds)
        if msg.code in output.TEMPORAL_VIOLATED:
            return RunResult(TEMPORAL, None, output.parse_trace(messages), generated, distinct,
                             seconds)
    located = output.spec_error(loose)
    if located is not None:
        module, line, col, reason = located
        where = cfg.spec_dir / f"{module or cfg.module}.tla"
        raise SpecError(f"{where}:{line}:{col}: {reason}")
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return RunResult(ERROR, None, None, generated, distinct, seconds,
                         f"TLC was killed by {name} after {distinct:,} distinct states")
    errors = [m.text for m in messages if m.level == output.ERROR_CLASS]
    if returncode != 0 or errors:
        said = [line for line in loose if line.strip()]
        reason = (errors[0].splitlines()[0] if errors else
                  f"TLC exited with status {returncode}" + (f": {said[-1]}" if said else ""))
        return RunResult(ERROR, None, None, generated, distinct, seconds,
                         f"{reason} (after {distinct:,} distinct states)", crashed=True)
    return RunResult(OK, None, None, generated, distinct, seconds)


def run_tlc(cfg: RunConfig, invariants: list[str], temporal: list[str],
            progress: Progress | None = None) -> RunResult:
    """Model-check cfg.module with the given properties; never raises for a violation."""
    java, jar = find_java(), find_jar()
    with tempfile.TemporaryDirectory(prefix="shift-tlc-") as tmp:
        work = Path(tmp)
        for tla in cfg.spec_dir.glob("*.tla"):
            shutil.copyfile(tla, work / tla.name)
        write_cfg(work / "MC.cfg", cfg.constants, invariants, temporal, cfg.spec)
        cmd = [java, "-XX:+UseParallelGC", f"-Xmx{cfg.heap_mb}m", "-cp", jar, "tlc2.TLC",
               "-tool", "-deadlock", "-workers", str(cfg.workers),
               "-metadir", str(work / "states"), "-config", "MC.cfg", f"{cfg.module}.tla"]
        started = time.monotonic()
        lines: list[str] = []
        proc = processes.start(cmd, work, subprocess.PIPE)
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                lines.append(line)
                if progress is not None and line.startswith("Progress("):
                    d = re.search(r"([\d,]+) distinct states found.*?([\d,]+) states left", line)
                    if d:
                        progress(int(d.group(1).replace(",", "")), int(d.group(2).replace(",", "")))
            returncode = proc.wait()
        finally:
            processes.stop(proc)  # an interrupted run leaves no TLC behind
            assert proc.stdout is not None
            proc.stdout.close()
        return _interpret(cfg, lines, returncode, time.monotonic() - started)
