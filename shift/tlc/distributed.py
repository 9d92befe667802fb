"""One TLC run in TLC's distributed mode: a TLCServer and TLCWorker processes over RMI.

The server (tlc2.tool.distributed.TLCServer, in the same tla2tools.jar) parses the spec,
computes the initial states, keeps the state queue, the fingerprint set and the trace file,
and binds itself in an RMI registry on `tlc2.tool.distributed.TLCServer.port`; workers
(tlc2.tool.distributed.TLCWorker HOST) look it up there, fetch the modules over RMI and
compute successor states and invariants. The server prints the same `-tool` messages as
TLC (progress 2200, final counts 2199), plus 7000 (ready for workers), 7001 (a worker
registered) and 7003 (a worker's statistics), and exits when the queue is empty or a worker
reported a violation. What TLC 2.15's distributed mode does not do, and how this harness
makes up for it (docs/performance.md):

- it checks invariants only: no temporal property (TLCApp never builds a liveness
  checker), so those cells are reported as not checked;
- on a violation it prints no "Invariant X is violated" line, only the behaviour: the
  violated invariant is found by checking the violating state alone with TLC;
- that behaviour is the last two states only (its workers never set a state's level, so
  the predecessor passes for an initial state): the counterexample is that suffix.
"""

from __future__ import annotations

import contextlib
import queue
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shift.errors import SpecError
from shift.tlc import output, processes
from shift.tlc.java import find_jar, find_java
from shift.tlc.runner import ERROR, INVARIANT, OK, Progress, RunConfig, RunResult, write_cfg

SERVER = "tlc2.tool.distributed.TLCServer"
WORKER = "tlc2.tool.distributed.TLCWorker"
READY, REGISTERED = 7000, 7001
TRUNCATED = "(earlier steps: not kept by TLC's distributed mode)"
LIVENESS = "not checked: TLC's distributed mode checks safety only"

Say = Callable[[str], None]


@dataclass(frozen=True)
class DistConfig:
    """How to run one design's TLC runs distributed."""

    workers: int = 2  # local worker processes; 0: wait for workers started elsewhere
    host: str = "127.0.0.1"  # the server's address as workers reach it
    threads: int = 1  # threads of each local worker
    timeout: float | None = None  # wall-time limit of one run, seconds
    report_ms: int = 2000  # the server's progress interval


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _rmi(host: str, port: int) -> list[str]:
    return [f"-Djava.rmi.server.hostname={host}", f"-D{SERVER}.port={port}"]


def server_cmd(cfg: RunConfig, dist: DistConfig, port: int, work: Path) -> list[str]:
    return [find_java(), "-XX:+UseParallelGC", f"-Xmx{cfg.heap_mb}m", *_rmi(dist.host, port),
            f"-D{SERVER}.report={dist.report_ms}", "-cp", find_jar(), SERVER,
            "-tool", "-deadlock", "-metadir", str(work / "states"), "-config", "MC.cfg",
            f"{cfg.module}.tla"]


def worker_cmd(dist: DistConfig, port: int, work: Path | None = None,
               heap_mb: int = 1024) -> list[str]:
    """A worker of the server at dist.host:port: local ones keep their copies of the
    modules in the run's folder (java.io.tmpdir), and have one thread each by default."""
    local = [f"-Djava.io.tmpdir={work}", f"-D{WORKER}.threadCount={dist.threads}"] \
        if work is not None else []
    me = dist.host if work is not None else "THIS_MACHINE_ADDRESS"
    return [find_java(), f"-Xmx{heap_mb}m", *_rmi(me, port), *local, "-cp", find_jar(),
            WORKER, dist.host]


def remote_command(dist: DistConfig, port: int) -> str:
    """What a user runs on another machine (with the same tla2tools.jar) to join."""
    return " ".join(worker_cmd(dist, port)).replace(find_java(), "java", 1)


class _Server:
    """The server process, its output read by a thread into a queue (None at its end)."""

    def __init__(self, cmd: list[str], work: Path) -> None:
        self.proc = processes.start(cmd, work, subprocess.PIPE)
        self.lines: list[str] = []
        self.queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.queue.put(raw.rstrip("\n"))
        self.queue.put(None)

    def next_line(self, wait: float) -> str | None:
        """The next line, "" when none came within `wait` seconds, None at the end."""
        try:
            line = self.queue.get(timeout=wait)
        except queue.Empty:
            return ""
        if line is not None:
            self.lines.append(line)
        return line


_PROGRESS = re.compile(r"([\d,]+) distinct states found.*?([\d,]+) states left")


def _number(s: str) -> int:
    return int(s.replace(",", ""))


class _Run:
    """The server and its local workers, watched until the server ends."""

    def __init__(self, cfg: RunConfig, dist: DistConfig, work: Path, progress: Progress | None,
                 say: Say) -> None:
        self.cfg, self.dist, self.work = cfg, dist, work
        self.progress, self.say = progress, say
        self.port = free_port()
        say(f"starting a TLC server on port {self.port}")
        self.server = _Server(server_cmd(cfg, dist, self.port, work), work)
        self.workers: list[subprocess.Popen[str]] = []
        self.logs: list[Path] = []
        self.header = ""  # the line that opened the current tagged message
        self.registered = 0
        self.failure = ""

    def start_workers(self) -> None:
        if self.dist.workers == 0:
            if self.dist.host.startswith("127.") or self.dist.host == "localhost":
                self.say(f"the server is at {self.dist.host}: only workers on this machine "
                         "reach it (--dist-host ADDRESS for others)")
            self.say(f"TLC server ready on port {self.port}; waiting for workers: on each "
                     f"machine run  {remote_command(self.dist, self.port)}")
            return
        for i in range(self.dist.workers):
            log = self.work / f"worker-{i + 1}.log"
            with log.open("w") as out:
                self.workers.append(processes.start(worker_cmd(self.dist, self.port, self.work),
                                           self.work, out))
            self.logs.append(log)
        self.say(f"TLC server ready on port {self.port}; started {self.dist.workers} local "
                 f"worker process(es)")

    def on_line(self, line: str) -> None:
        code = self.header
        self.header = line if line.startswith("@!@!@STARTMSG") else ""
        if code.startswith(f"@!@!@STARTMSG {READY}:"):
            self.start_workers()
        elif code.startswith(f"@!@!@STARTMSG {REGISTERED}:"):
            self.registered += 1
            self.say(f"TLC worker {self.registered} registered with the server")
        elif self.progress is not None and (m := _PROGRESS.search(line)) is not None:
            self.progress(_number(m.group(1)), _number(m.group(2)))

    def workers_gone(self) -> str:
        """Why the run cannot go on: every local worker exited while the server waits."""
        if not self.workers or any(w.poll() is None for w in self.workers):
            return ""
        said = [ln for log in self.logs for ln in log.read_text().splitlines() if ln.strip()]
        return (f"every local TLC worker exited (status {self.workers[0].returncode})"
                + (f": {said[-1]}" if said else ""))

    def watch(self) -> None:
        """Read the server's output until it ends, the workers die or time runs out."""
        deadline = None if self.dist.timeout is None else time.monotonic() + self.dist.timeout
        gone_since: float | None = None
        while (line := self.server.next_line(0.5)) is not None:
            if line:
                self.on_line(line)
            if deadline is not None and time.monotonic() > deadline:
                self.failure = f"timed out after {self.dist.timeout:g} s"
                return
            if (why := self.workers_gone()) and gone_since is None:
                gone_since = time.monotonic()
            if why and gone_since is not None and time.monotonic() - gone_since > 10:
                self.failure = why  # the server gets 10 s to finish after its workers exit
                return

    def close(self) -> int:
        """Stop every process (the server first: it tells its workers to exit)."""
        if not self.failure:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.server.proc.wait(30)
        processes.stop(self.server.proc)
        for w in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.wait(15 if not self.failure else 0.1)
            processes.stop(w)
        return self.server.proc.returncode


def _state_text(messages: list[output.Message]) -> str:
    """The last state TLC printed, as its conjunction of `/\\ var = value` lines."""
    last = [m for m in messages if m.code == output.STATE][-1]
    return last.text.partition("\n")[2]


def violated_invariant(cfg: RunConfig, work: Path, invariants: list[str],
                       state: str) -> str | None:
    """The first invariant (in cfg order, as TLC checks them) that `state` violates: TLC
    checks a module whose only initial state is `state` and whose next step stutters."""
    names = [ln[3:].split(" = ", 1)[0] for ln in state.splitlines() if ln.startswith("/\\ ")]
    body = "\n".join("    " + ln for ln in state.splitlines())
    (work / "DistCheck.tla").write_text(
        f"---- MODULE DistCheck ----\nEXTENDS {cfg.module}, TLC\nDistInit ==\n{body}\n"
        f"DistNext == UNCHANGED <<{', '.join(names)}>>\n====\n")
    lines = ["CONSTANTS"] + [f"    {k} = {v}" for k, v in cfg.constants.items()]
    lines += ["INIT DistInit", "NEXT DistNext"] + [f"INVARIANT {i}" for i in invariants]
    (work / "DistCheck.cfg").write_text("\n".join(lines) + "\n")
    cmd = [find_java(), "-Xmx512m", "-cp", find_jar(), "tlc2.TLC", "-tool", "-deadlock",
           "-workers", "1", "-metadir", str(work / "check-states"), "-config", "DistCheck.cfg",
           "DistCheck.tla"]
    proc = processes.start(cmd, work, subprocess.PIPE)
    said, _ = proc.communicate()
    processes.stop(proc)
    m = re.search(r"Invariant (\w+) is violated by the initial state", said)
    return m.group(1) if m and m.group(1) in invariants else None


def _violation(cfg: RunConfig, work: Path, invariants: list[str], messages: list[output.Message],
               generated: int, distinct: int, seconds: float) -> RunResult:
    name = violated_invariant(cfg, work, invariants, _state_text(messages))
    if name is None:
        return RunResult(ERROR, None, None, generated, distinct, seconds,
                         "TLC's distributed mode printed a behaviour, but its last state "
                         "violates none of the invariants when checked alone", crashed=True)
    trace = output.parse_trace(messages)
    if len(trace.steps) == 2:  # the predecessor, labelled an initial state: it is not one
        trace.steps[0].action = TRUNCATED
    return RunResult(INVARIANT, name, trace, generated, distinct, seconds,
                     "TLC's distributed mode kept only the last two states of the behaviour")


def _interpret(cfg: RunConfig, work: Path, invariants: list[str], lines: list[str],
               returncode: int, seconds: float) -> RunResult:
    messages, loose = output.split_messages(lines)
    generated, distinct = output.counts(messages)
    located = output.spec_error(loose)
    if located is not None:
        module, line, col, reason = located
        raise SpecError(f"{cfg.spec_dir / f'{module or cfg.module}.tla'}:{line}:{col}: {reason}")
    if any(m.code == output.STATE for m in messages):
        return _violation(cfg, work, invariants, messages, generated, distinct, seconds)
    errors = [m.text for m in messages if m.level == output.ERROR_CLASS]
    if returncode != 0 or errors or not any(m.code == 2193 for m in messages):
        said = [ln for ln in loose if ln.strip()]
        reason = (errors[0].splitlines()[0] if errors else
                  f"TLC server exited with status {returncode}" + (f": {said[-1]}" if said
                                                                   else ""))
        return RunResult(ERROR, None, None, generated, distinct, seconds,
                         f"{reason} (after {distinct:,} distinct states)", crashed=True)
    return RunResult(OK, None, None, generated, distinct, seconds)


def run_distributed(cfg: RunConfig, dist: DistConfig, invariants: list[str],
                    progress: Progress | None = None, say: Say = lambda _: None) -> RunResult:
    """Model-check cfg.module's invariants with a TLCServer and its workers."""
    with tempfile.TemporaryDirectory(prefix="shift-tlcdist-") as tmp:
        work = Path(tmp)
        for tla in cfg.spec_dir.glob("*.tla"):
            shutil.copyfile(tla, work / tla.name)
        write_cfg(work / "MC.cfg", cfg.constants, invariants, [])
        started = time.monotonic()
        run = _Run(cfg, dist, work, progress, say)
        try:
            run.watch()
        finally:
            returncode = run.close()
        seconds = time.monotonic() - started
        if run.failure:
            _, distinct = output.counts(output.split_messages(run.server.lines)[0])
            return RunResult(ERROR, None, None, 0, distinct, seconds,
                             f"{run.failure} (after {distinct:,} distinct states)")
        return _interpret(cfg, work, invariants, run.server.lines, returncode, seconds)
