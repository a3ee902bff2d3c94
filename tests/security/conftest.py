"""Fixtures of the security tests."""

from __future__ import annotations

import pytest

from tests.support.levels import started_drivers


@pytest.fixture(scope="session")
def drivers():
    """level -> a grading driver, started on first use (one per test worker)."""
    yield from started_drivers()
