"""The order the suite hands its tests to xdist's workers (tests/support/ordering.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.ordering import long_first


@dataclass
class FakeItem:
    path: Path
    name: str
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None


def collection() -> list[FakeItem]:
    """Six modules of seven tests; modules b and e hold one `slow` test each."""
    return [
        FakeItem(Path(f"test_{m}.py"), f"{m}{k}", {"slow"} if (m in "be" and k == 3) else set())
        for m in "abcdef"
        for k in range(7)
    ]


@pytest.mark.parametrize("workers", [2, 4])
def test_modules_with_long_tests_lead_and_stay_whole(workers):
    items = collection()
    order = long_first(items, workers)  # type: ignore[arg-type]
    assert sorted(i.name for i in order) == sorted(i.name for i in items), "none lost or doubled"
    modules = [i.path.stem[-1] for i in order]
    runs = [m for n, m in enumerate(modules) if n == 0 or modules[n - 1] != m]
    assert runs == list("beacdf"), "long modules first, each whole, otherwise file order"
    for module in "abcdef":
        names = [i.name for i in order if i.path.stem.endswith(module)]
        assert names == [f"{module}{k}" for k in range(7)], "file order inside a module"


def test_a_run_without_workers_keeps_the_file_order():
    items = collection()
    assert long_first(items, 1) == items  # type: ignore[arg-type]
