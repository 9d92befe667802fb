"""The C core under AddressSanitizer + UndefinedBehaviorSanitizer: builds the C test
driver (every public entry point, NULL/freed/forged handles, bad inputs, failure
scenarios, a fake backend) with `make -C native asan` and runs it; any sanitizer report
fails the test. Also checks the plain build is warning-free (-Werror)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NATIVE = os.path.join(ROOT, "native")


def _compiler() -> str:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    # a fresh Debian machine without a compiler: install one rather than skip
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "gcc", "make"], check=False,
                       capture_output=True, timeout=600)
        if shutil.which("gcc"):
            return "gcc"
    pytest.fail("no C compiler found (cc/gcc/clang) and none could be installed")


# One worker builds the module's fixture once (pytest-xdist, --dist loadgroup).
pytestmark = pytest.mark.xdist_group("native-build")


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    if not shutil.which("make"):
        _compiler()
    return str(tmp_path_factory.mktemp("native-build"))


def _make(build_dir: str, target: str) -> None:
    cc = _compiler()
    r = subprocess.run(["make", "-C", NATIVE, f"BUILD={build_dir}", f"CC={cc}", target],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stderr


def _run(exe: str) -> str:
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=600, env=env)
    out = r.stdout + r.stderr
    assert "AddressSanitizer" not in out and "LeakSanitizer" not in out, out[-4000:]
    assert "runtime error" not in out, out[-4000:]
    assert r.returncode == 0, out[-4000:]
    assert ", 0 failed" in r.stdout
    return r.stdout


def test_c_driver_plain_build_is_warning_free_and_passes(build_dir):
    _make(build_dir, "all")
    out = _run(os.path.join(build_dir, "test_driver"))
    assert int(out.split()[0]) > 1000  # checks run


@pytest.mark.skipif(sys.platform != "linux", reason="sanitizer runtime: Linux toolchains")
def test_c_driver_under_asan_and_ubsan(build_dir):
    _make(build_dir, "asan")
    _run(os.path.join(build_dir, "test_driver_asan"))
