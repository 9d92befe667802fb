"""Fixtures of the verbs tests: one rdma-core build per session (built on first use)."""

from __future__ import annotations

import pytest
from shift.verbs.rdma_core import Build
from verbs_helpers import build

# Each module is in the xdist group "verbs": one worker builds rdma-core and runs them.


@pytest.fixture(scope="session")
def rdma() -> Build:
    return build()
