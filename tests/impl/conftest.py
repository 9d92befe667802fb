"""Fixtures of the shift.impl tests (helpers live in impl_helpers.py)."""

from __future__ import annotations

import pytest
from shift.impl import Fabric


@pytest.fixture
def fabric():
    fab = Fabric(retries=1)
    yield fab
    fab.close()


@pytest.fixture
def conn(fabric):
    return fabric.connect("Shift", regions=8, record=True)
