"""docs/extending.md, run: each section's changes applied to a fresh copy of the spec, its
commands run, their exit status and the output lines the page shows checked (issue 22).

The page is the test's input, so an example that stops working fails here instead of
misleading a reader."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from shift.spec.catalog import packaged_spec_dir

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "extending.md"
BLOCK = re.compile(r"```(\w[\w-]*)?([^\n]*)\n(.*?)\n```", re.S)


def sections() -> dict[str, str]:
    parts = re.split(r"^## ", PAGE.read_text(), flags=re.M)[1:]
    return {p.splitlines()[0]: p for p in parts}


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def run_commands(block: str, work: Path) -> None:
    """`$ command` lines, each followed by lines its output must contain and an optional
    `(exit N)` (default 0)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.strip():
            steps[-1][1].append(line.strip())
    for command, expected in steps:
        argv = shlex.split(command)
        assert argv[0] == "shift", command
        status = 0
        for e in expected:
            m = re.fullmatch(r"\(exit (\d+)\)", e)
            if m:
                status = int(m.group(1))
        proc = subprocess.run([sys.executable, "-m", "shift", *argv[1:]], cwd=work,
                              capture_output=True, text=True, timeout=900)
        said = squash(proc.stdout + proc.stderr)
        assert proc.returncode == status, f"{command}: exit {proc.returncode}\n{said[-3000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr
        for e in expected:
            if not e.startswith("(exit"):
                assert squash(e) in said, f"{command}: no {e!r} in\n{said[-3000:]}"


@pytest.mark.parametrize("title", list(sections()))
def test_the_worked_example_runs(title: str, tmp_path: Path) -> None:
    spec = tmp_path / "my-spec"
    shutil.copytree(packaged_spec_dir(), spec,
                    ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the page's trace paths
    ran = 0
    for kind, info, body in BLOCK.findall(sections()[title]):
        if kind == "tla" and "file=" in info:
            (spec / info.split("file=")[1].strip()).write_text(body + "\n")
        elif kind == "diff":
            proc = subprocess.run(["patch", "-p1", "-d", str(spec)], input=body + "\n",
                                  capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        elif kind == "sh":
            run_commands(body, tmp_path)
            ran += 1
    assert ran, f"section {title!r} runs no command"
