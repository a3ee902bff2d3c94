"""The order the suite hands its tests to xdist's workers (tests/support/ordering.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.support.ordering import dealt, long_first


@dataclass
class FakeItem:
    name: str
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None


def test_dealing_lays_the_piles_one_after_another():
    assert dealt(list(range(10)), 4) == [0, 4, 8, 1, 5, 9, 2, 6, 3, 7]
    assert dealt(list(range(5)), 1) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("workers", [2, 3, 4, 7])
def test_every_test_is_kept_and_each_share_starts_with_its_long_ones(workers):
    items = [FakeItem(f"t{k}", {"slow"} if k % 5 == 0 else set()) for k in range(103)]
    order = long_first(items, workers)  # type: ignore[arg-type]
    assert sorted(i.name for i in order) == sorted(i.name for i in items), "none lost or doubled"
    # xdist's worksteal hands out contiguous shares as it splits: remaining // workers left
    start, slow = 0, sum(1 for i in items if "slow" in i.marks)
    for k in range(workers):
        size = (len(order) - start) // (workers - k)
        marked = [("slow" in i.marks) for i in order[start : start + size]]
        start += size
        assert abs(sum(marked) - slow / workers) <= 2, "long tests are spread evenly"
        last_long = max((n for n, m in enumerate(marked) if m), default=-1)
        assert last_long < sum(marked) + 2, "and lead every share (a pile edge may shift it)"


def test_a_run_without_workers_keeps_the_file_order():
    items = [FakeItem("a"), FakeItem("b", {"slow"}), FakeItem("c")]
    assert long_first(items, 1) == items  # type: ignore[arg-type]
