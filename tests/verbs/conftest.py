"""Fixtures of the verbs tests: one rdma-core build per session (built on first use)."""

from __future__ import annotations

import pytest
from shift.verbs.rdma_core import Build
from verbs_helpers import build

# One worker builds rdma-core and runs the module (pytest-xdist, --dist loadgroup).
pytestmark = pytest.mark.xdist_group("verbs")


@pytest.fixture(scope="session")
def rdma() -> Build:
    return build()
