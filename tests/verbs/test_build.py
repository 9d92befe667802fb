"""The rdma-core build's own steps, without building it: progress, a failing step, the
pinned digest, the Debian packages it names when they are missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from shift.verbs import rdma_core


def test_a_step_tells_its_progress_by_tenths(tmp_path: Path) -> None:
    said: list[str] = []
    steps = "for i in $(seq 1 20); do echo \"[$i/20] compiling\"; done"
    rdma_core.run_logged(["sh", "-c", steps], tmp_path, tmp_path / "log", said.append)
    assert said == [f"rdma-core: {p}% ({p // 5} of 20 steps)" for p in range(10, 101, 10)]
    assert (tmp_path / "log").read_text().count("compiling") == 20


def test_a_failing_step_gives_the_end_of_its_log(tmp_path: Path) -> None:
    with pytest.raises(rdma_core.BuildError) as e:
        rdma_core.run_logged(["sh", "-c", "echo first; echo the cause; exit 3"], tmp_path,
                             tmp_path / "log")
    assert "exit 3" in str(e.value) and str(e.value).endswith("first\nthe cause")


def test_an_archive_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    build = rdma_core.Build(tmp_path)
    archive = tmp_path / f"pyverbs-{rdma_core.VERSION}.tar.gz"
    archive.write_bytes(b"not rdma-core")
    with pytest.raises(rdma_core.BuildError, match="sha256 .* expected " + rdma_core.SDIST_SHA256):
        rdma_core.fetch(build, lambda _: None)
    assert not archive.exists()  # downloaded again next time, not trusted


def test_missing_debian_packages_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rdma_core, "DEBIAN_PACKAGES",
                        {"/no/such/header.h": "libnothing-dev", "sh": "dash"})
    assert rdma_core.missing_packages() == ["libnothing-dev"]
    with pytest.raises(rdma_core.BuildError, match="apt-get install libnothing-dev"):
        rdma_core.check_prerequisites()
