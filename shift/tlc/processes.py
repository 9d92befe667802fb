"""Every Java process a `shift check` starts (single-process TLC, a distributed server and
its workers), so that Ctrl-C or SIGTERM on the main thread stops those of the runs in
other threads too: no TLC outlives the command. Once cancelled, no run starts another."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

_LIVE: set[subprocess.Popen[str]] = set()
_LOCK = threading.Lock()
_CANCELLED = threading.Event()


def start(cmd: list[str], cwd: Path, out: int | object) -> subprocess.Popen[str]:
    """Popen, registered; KeyboardInterrupt if the command was cancelled."""
    with _LOCK:
        if _CANCELLED.is_set():
            raise KeyboardInterrupt
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True)
        _LIVE.add(proc)
    return proc


def stop(proc: subprocess.Popen[str], grace: float = 5.0) -> None:
    """SIGTERM (the JVM runs its shutdown hooks), then SIGKILL; always reaped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with _LOCK:
        _LIVE.discard(proc)


def stop_all() -> None:
    """Stop every registered process, and start no more."""
    _CANCELLED.set()
    with _LOCK:
        live = list(_LIVE)
    for proc in live:
        stop(proc)


def cancelled() -> bool:
    """Has stop_all run (Ctrl-C, SIGTERM)? A run it stopped did not fail on its own."""
    return _CANCELLED.is_set()


def reset() -> None:
    """Allow runs again after stop_all (a process that runs `shift check` twice)."""
    _CANCELLED.clear()
