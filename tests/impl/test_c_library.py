"""The C library as a C program gets it (issue 16, item 4): the installed package carries
the public headers and libshift.so, `shift config` says where, and the C example of
docs/library.md compiles, links and runs against an installation outside the source
tree: the wheel built from this tree's files, as a fresh clone has them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from impl_helpers import ROOT, c_compiler, guide_block

from shift import native
from shift.cli import main

# one worker builds the wheel once (pytest-xdist, --dist loadgroup)
pytestmark = pytest.mark.xdist_group("c-library-wheel")

NOT_NEEDED = ("native/fuzz/corpus/",)  # 4,600 fuzz inputs: not part of a build


def _tree_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return [f for f in out if f and not f.startswith(NOT_NEEDED) and (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This tree's files copied (what a fresh clone has, with the working tree's edits),
    built into a wheel, and the wheel installed into a directory of its own."""
    work = tmp_path_factory.mktemp("installed")
    src = work / "src"
    for f in _tree_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(src))
    wheels = [str(w) for w in (work / "dist").glob("shift_rdma-*.whl")]
    assert len(wheels) == 1, wheels
    _pip("install", "--no-deps", "--target", str(work / "site"), *wheels)
    return work / "site"


def _pip(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check",
                        *args], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, CC=c_compiler()))
    assert r.returncode == 0, r.stdout + r.stderr


def shift_config(site: Path | None, *options: str) -> subprocess.CompletedProcess[str]:
    """`shift config` of the installation in site (None: this environment's)."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "shift", "config", *options],
                          capture_output=True, text=True, timeout=120, env=env, cwd=site)


def test_the_wheel_carries_the_headers_and_libshift(installed: Path) -> None:
    pkg = installed / "shift" / "native"
    assert sorted(p.name for p in (pkg / "include").iterdir()) == sorted(native.HEADERS)
    assert (pkg / "lib" / "libshift.so").is_file()
    assert not (pkg / "src").exists()  # the C sources are the build's, not data
    r = shift_config(installed, "--include-dir", "--lib-dir")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(pkg / "include"), str(pkg / "lib")]


def test_the_guide_s_c_example_runs_against_the_installed_package(
        installed: Path, tmp_path: Path) -> None:
    (tmp_path / "stream.c").write_text(guide_block("/* stream.c"))
    r = shift_config(installed, "--cflags", "--libs")
    assert r.returncode == 0, r.stderr
    flags = r.stdout.split()
    assert all(str(installed) in f for f in flags if f.startswith(("-I", "-L")))
    cc = subprocess.run([c_compiler(), "-std=c11", "-Wall", "-Wextra", "-Wpedantic",
                         "-Werror", "stream.c", *flags, "-o", "stream"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert cc.returncode == 0 and not cc.stderr, cc.stderr
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}  # the rpath finds it
    run = subprocess.run(["./stream"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[:6] == [f"B: notification {k}, slot {k} = {100 * k}" for k in range(1, 7)]
    assert lines[6] == "A: Default, failovers 1, replayed 2, failbacks 1"
    assert lines[7:] == [
        "A: PATH_DOWN on path 1", "A: FAILOVER_STARTED on path 2",
        "A: FAILOVER_FINISHED on path 2", "A: FAIL_BACK on path 1",
        "B: FAILOVER_STARTED on path 2", "B: FAILOVER_FINISHED on path 2",
        "B: RECV_FAIL_BACK on path 1"]


def test_shift_config_of_this_installation() -> None:
    r = shift_config(None, "--cflags", "--include-dir", "--libs")
    assert r.returncode == 0, r.stderr
    cflags, inc, libs = r.stdout.splitlines()
    assert cflags == f"-I{inc}" and (Path(inc) / "shift.h").is_file()
    lib = native.lib_dir()
    assert libs == f"-L{lib} -Wl,-rpath,{lib} -lshift" and (lib / "libshift.so").is_file()


def test_shift_config_without_an_option_is_one_line_and_exit_2() -> None:
    r = shift_config(None)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "shift config: say what to print: --include-dir, --lib-dir, --cflags or --libs"]


def test_an_installation_without_libshift_says_so_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "include").mkdir()
    for h in native.HEADERS:
        (tmp_path / "include" / h).write_text("")
    monkeypatch.setattr(native, "HERE", tmp_path)
    assert main(["config", "--libs"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert f"lacks {tmp_path / 'lib' / 'libshift.so'}" in err


def test_the_guide_s_two_phase_example_runs_against_the_installed_package(
        installed: Path, tmp_path: Path) -> None:
    """docs/library.md's pingpong.c: the default path set up by the application alone,
    the backup path in-band, then a failover with the backup rkey learnt so."""
    (tmp_path / "pingpong.c").write_text(guide_block("/* pingpong.c"))
    flags = shift_config(installed, "--cflags", "--libs").stdout.split()
    cc = subprocess.run([c_compiler(), "-std=c11", "-Wall", "-Wextra", "-Wpedantic",
                         "-Werror", "pingpong.c", *flags, "-o", "pingpong"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert cc.returncode == 0 and not cc.stderr, cc.stderr
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    run = subprocess.run(["./pingpong"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "A: backup ready 1, peer's keys 1",
        "A: 4 WRITEs done, failovers 1, B's memory holds them"]
