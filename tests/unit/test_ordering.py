"""The order the suite hands its tests to xdist's workers (tests/support/ordering.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.ordering import long_first


@dataclass
class FakeItem:
    path: Path
    name: str
    marks: set[str] = field(default_factory=set)
    scope: str = "function"  # of the one fixture it uses
    group: str | None = None  # its xdist_group mark

    def get_closest_marker(self, name: str):
        if name == "xdist_group":
            return None if self.group is None else SimpleNamespace(args=(self.group,), kwargs={})
        return name if name in self.marks else None

    @property
    def _fixtureinfo(self):
        return SimpleNamespace(name2fixturedefs={"f": [SimpleNamespace(scope=self.scope)]})


def collection() -> list[FakeItem]:
    """Modules a-f of seven tests sharing a module fixture (b and e hold a `slow` test), a
    module g of 29 slow tests and a module h of 37 quick ones, neither with a shared fixture."""
    small = [
        FakeItem(
            Path(f"test_{m}.py"), f"{m}{k}", {"slow"} if m in "be" and k == 3 else set(), "module"
        )
        for m in "abcdef"
        for k in range(7)
    ]
    slow = [FakeItem(Path("test_g.py"), f"g{k}", {"slow"}) for k in range(29)]
    quick = [FakeItem(Path("test_h.py"), f"h{k}") for k in range(37)]
    return small[:21] + slow + small[21:] + quick


def shares(order: list, workers: int) -> list[list]:
    """The contiguous shares xdist's worksteal hands out: remaining // workers left."""
    cut, start = [], 0
    for k in range(workers):
        size = (len(order) - start) // (workers - k)
        cut.append(order[start : start + size])
        start += size
    return cut


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_every_share_starts_with_its_part_of_the_long_tests(workers):
    items = collection()
    order = long_first(items, workers)  # type: ignore[arg-type]
    assert sorted(i.name for i in order) == sorted(i.name for i in items), "none lost or doubled"
    weights = []
    for share in shares(order, workers):
        slow = [n for n, i in enumerate(share) if i.marks]
        # a slow module weighs one: b and e whole, g's 29 tests 1/29 each
        weights.append(sum(1 if i.path.stem[-1] in "be" else 1 / 29 for i in share if i.marks))
        # slow tests lead: only the quick module-mates of b's and e's slow test come between
        assert not slow or max(slow) < len(slow) + 2 * 6
    assert max(weights) - min(weights) <= 1 + 1e-9, "the long tests are spread by weight"
    assert all(w > 0 for w in weights[:3]), "three slow modules reach up to three workers"


@pytest.mark.parametrize("workers", [2, 4])
def test_a_module_sharing_a_fixture_stays_whole_and_in_file_order(workers):
    order = long_first(collection(), workers)  # type: ignore[arg-type]
    for module in "abcdef":
        at = [n for n, i in enumerate(order) if i.path.stem.endswith(module)]
        assert at == list(range(at[0], at[0] + 7)), f"module {module} whole"
        assert [order[n].name for n in at] == [f"{module}{k}" for k in range(7)]


def test_a_run_without_workers_keeps_the_file_order():
    items = collection()
    assert long_first(items, 1) == items  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [2, 4])
def test_tests_of_one_xdist_group_stay_together_in_file_order(workers):
    """The corpus's entries of one isolation level share that level's grading process per
    worker: interleaved in the file, they are handed out as one run per level."""
    levels = ("jail", "uid", "docker")
    grouped = [
        FakeItem(Path("test_k.py"), f"{level}-{n}", group=level)
        for n in range(12)
        for level in levels
    ]
    order = long_first(collection() + grouped, workers)  # type: ignore[arg-type]
    for level in levels:
        at = [n for n, i in enumerate(order) if i.name.startswith(level)]
        assert at == list(range(at[0], at[0] + 12)), f"{level} together"
        assert [order[n].name for n in at] == [f"{level}-{n}" for n in range(12)]
    ungrouped = long_first(collection() + [FakeItem(i.path, i.name) for i in grouped], workers)  # type: ignore[arg-type]
    jail = [n for n, i in enumerate(ungrouped) if i.name.startswith("jail")]
    assert jail != list(range(jail[0], jail[0] + 12)), "without the mark they are spread"
