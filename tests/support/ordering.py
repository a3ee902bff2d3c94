"""The order the suite hands its tests to pytest-xdist's workers: modules with long tests first.

`python -m pytest -n 4 --dist worksteal` gives each worker one contiguous share of the collection
and lets a worker that runs out steal the second half of the longest queue; a running test is
never moved. In file order the end-to-end runs (marked `slow`: nbgrader cycles, batches, pages,
the wheel) sit in the middle and were stolen last, so the run ended on them with cores idle.
Here every module that holds a `slow` test comes first. Modules stay whole and in file order:
their module- and session-scoped fixtures (built courses, measured levels, drivers, the shared
sandbox) are built once per worker that runs them, so dealing single tests out to every worker
built them up to four times (measured: 1961 CPU-s against 1756 for the same tests). The order
depends only on the collection, so every worker computes the same one (xdist requires that);
without workers the file order is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest


def long_first(items: Sequence[pytest.Item], workers: int) -> list[pytest.Item]:
    """Modules holding a `slow` test first, then the rest; each module whole, in file order."""
    if workers <= 1:
        return list(items)
    long_modules = {item.path for item in items if item.get_closest_marker("slow") is not None}
    return sorted(items, key=lambda item: item.path not in long_modules)  # stable
