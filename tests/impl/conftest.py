"""Fixtures of the shift.impl tests (helpers live in impl_helpers.py)."""

from __future__ import annotations

import pytest
from impl_helpers import IDEAL_RC
from shift.impl import Fabric


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ideal_rc: the `fabric` fixture is the idealised RC NIC (IDEAL_RC), not "
        "hardware's: the test's steps or assertions rely on it")


@pytest.fixture
def fabric(request: pytest.FixtureRequest):
    """RC as hardware runs it (Fabric's defaults), or the idealised NIC for a test marked
    ideal_rc."""
    ideal = request.node.get_closest_marker("ideal_rc") is not None
    fab = Fabric(retries=1, **(IDEAL_RC if ideal else {}))
    yield fab
    fab.close()


@pytest.fixture
def conn(fabric):
    return fabric.connect("Shift", regions=8, record=True)
