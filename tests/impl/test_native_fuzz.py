"""The C API under a coverage-guided fuzzer (native/fuzz/, libFuzzer + ASan + UBSan).

Builds the fuzz target with clang, replays the committed corpus and every regression
input (each a defect the fuzzer once found), fuzzes for a bounded time, and measures the
line coverage the corpus gives of the core. Any crash, sanitizer report or failed
consistency check fails the test. A longer run: `make -C native fuzz-run
FUZZ_SECONDS=1800 FUZZ_JOBS=2` (docs/fuzzing.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
CORPUS = NATIVE / "fuzz" / "corpus"
REGRESSIONS = NATIVE / "fuzz" / "regressions"
FUZZ_SECONDS = int(os.environ.get("SHIFT_FUZZ_SECONDS", "60"))
COVERAGE_FLOOR = 95.0  # percent of the layer's lines, and of simnic's, from the corpus
LAYER = ("endpoint.c", "pending.c", "datapath.c", "failover.c", "silent.c", "kept.c", "cq.c",
         "layer.h")
SIMNIC = ("simnic_fabric.c", "simnic_qp.c", "simnic_rc.c", "simnic_wire.c", "simnic_ud.c",
          "simnic_internal.h")
APT_PACKAGES = ["clang-14", "libclang-rt-14-dev", "llvm-14", "make"]


def _have_toolchain() -> bool:
    fuzzer_rt = list(Path("/usr/lib").glob("llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a"))
    return bool((shutil.which("clang-14") or shutil.which("clang")) and fuzzer_rt
                and (shutil.which("llvm-cov-14") or shutil.which("llvm-cov")))


def _toolchain() -> None:
    """clang with libFuzzer and llvm-cov: found, or installed from Debian's packages."""
    if _have_toolchain():
        return
    if shutil.which("apt-get") and os.geteuid() == 0:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", *APT_PACKAGES],
                       capture_output=True, timeout=900, env=env)
    if not _have_toolchain():
        pytest.fail("the fuzz target needs clang with libFuzzer and llvm-cov: "
                    f"apt-get install {' '.join(APT_PACKAGES)}")


# One worker builds the module's fixture once (pytest-xdist, --dist loadgroup).
pytestmark = pytest.mark.xdist_group("fuzz-build")


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    _toolchain()
    out = tmp_path_factory.mktemp("fuzz-build")
    r = subprocess.run(["make", "-C", str(NATIVE), f"BUILD={out}", "fuzz"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stderr[-3000:]
    return out / "fuzz"


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1")
    # run beside the binary: a crash or OOM artefact lands there, not in the checkout
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=Path(args[0]).parent)


def _clean(r: subprocess.CompletedProcess[str]) -> None:
    out = r.stdout + r.stderr
    for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error",
                "fuzz check failed", "deadly signal", "ERROR: libFuzzer"):
        assert bad not in out, out[-6000:]
    assert r.returncode == 0, out[-6000:]


# libFuzzer's default RSS limit (2 GiB) is below what an ASan build reaches while it loads
# the whole corpus (shadow memory and the quarantine, not the inputs: 2.7 MB); leaks are
# LeakSanitizer's to find (detect_leaks=1)
RSS_LIMIT = "-rss_limit_mb=4096"


def test_committed_corpus_replays_clean(build):
    inputs = list(CORPUS.iterdir())
    assert len(inputs) >= 100  # a corpus, not a token
    _clean(_run([str(build / "fuzz_api"), "-runs=0", RSS_LIMIT, str(CORPUS)], 900))


def test_every_regression_input_now_passes(build):
    inputs = sorted(str(p) for p in REGRESSIONS.iterdir())
    assert inputs, "each defect the fuzzer found is kept as an input"
    r = _run([str(build / "fuzz_api"), *inputs], 600)
    _clean(r)
    assert r.stderr.count("Executed ") == len(inputs), r.stderr[-3000:]


def test_fuzzing_for_a_bounded_time_finds_nothing(build, tmp_path):
    work, artifacts = tmp_path / "work", tmp_path / "artifacts"
    work.mkdir()
    artifacts.mkdir()
    r = _run([str(build / "fuzz_api"), f"-max_total_time={FUZZ_SECONDS}", "-timeout=10", RSS_LIMIT,
              "-print_final_stats=1", f"-artifact_prefix={artifacts}/", str(work), str(CORPUS)],
             FUZZ_SECONDS + 600)
    _clean(r)
    assert not list(artifacts.iterdir()), sorted(p.name for p in artifacts.iterdir())
    runs = int(re.search(r"stat::number_of_executed_units:\s*(\d+)", r.stderr).group(1))
    assert runs > 1000, r.stderr[-2000:]


def _line_counts(report: str) -> dict[str, tuple[int, int]]:
    """Lines and missed lines by file from `llvm-cov report` (columns are set apart by 2+
    spaces)."""
    header = next(line for line in report.splitlines() if line.startswith("Filename"))
    at = re.split(r"\s{2,}", header.strip()).index("Lines")
    counts = {}
    for line in report.splitlines():
        parts = line.split()
        if parts and parts[0].endswith((".c", ".h")):
            counts[Path(parts[0]).name] = (int(parts[at]), int(parts[at + 1]))
    return counts


def _line_coverage(counts: dict[str, tuple[int, int]], names: tuple[str, ...]) -> float:
    """Percent of the lines of the files named that the corpus runs (their union)."""
    lines = sum(counts[name][0] for name in names)
    missed = sum(counts[name][1] for name in names)
    return 100.0 * (lines - missed) / lines


def test_the_coverage_report_is_read_by_its_header():
    report = ("Filename   Regions    Missed Regions     Cover   Functions  Missed Functions  "
              "Executed       Lines      Missed Lines     Cover\n"
              "---\n"
              "failover.c    1099   81   92.63%   64   3   95.31%   1133   120   89.41%\n"
              "layer.h         40    0  100.00%    9   0  100.00%     27     0  100.00%\n")
    counts = _line_counts(report)
    assert counts == {"failover.c": (1133, 120), "layer.h": (27, 0)}
    assert _line_coverage(counts, ("failover.c", "layer.h")) == 100.0 * 1040 / 1160


def test_corpus_covers_the_core(build):
    r = subprocess.run(["make", "-s", "-C", str(NATIVE), f"BUILD={build.parent}", "fuzz-cov"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    counts = _line_counts(r.stdout)
    for part in (LAYER, SIMNIC):
        assert set(part) <= set(counts), (part, sorted(counts))
        assert _line_coverage(counts, part) >= COVERAGE_FLOOR, (part, counts, r.stdout)
