"""The order the suite's tests are handed to pytest-xdist's workers: long ones first, spread.

`python -m pytest -n 4 --dist worksteal` gives each worker one contiguous share of the collection
and lets a worker that runs out steal the second half of the longest queue; a running test is
never moved. In file order the end-to-end runs (marked `slow`: nbgrader cycles, batches, pages,
the wheel) sit together, so one worker ran most of them and the others waited at the end. Here
the `slow` tests come first and the whole order is dealt out like cards, one pile per worker, so
every worker starts on its share of the long tests and the run ends on short ones. The order
depends only on the collection and the number of workers, so every worker computes the same one
(xdist requires that); without workers the file order is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import pytest

T = TypeVar("T")


def dealt(ordered: Sequence[T], piles: int) -> list[T]:
    """`ordered` dealt round-robin into `piles` piles, laid one after another: pile k holds
    items k, k + piles, k + 2 * piles, ... (each pile keeps the order it was dealt in)."""
    if piles <= 1:
        return list(ordered)
    return [item for k in range(piles) for item in ordered[k::piles]]


def long_first(items: Sequence[pytest.Item], workers: int) -> list[pytest.Item]:
    """`slow` tests first (each group in file order), dealt among `workers` piles."""
    if workers <= 1:
        return list(items)
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    rest = [item for item in items if item.get_closest_marker("slow") is None]
    return dealt(slow + rest, workers)
