"""The order the suite hands its tests to pytest-xdist's workers: every worker starts on long ones.

`python -m pytest -n N --dist worksteal` gives worker k the k-th contiguous share of the
collection (shares of `remaining // workers_left` tests) and lets a worker that runs out steal
the second half of the longest queue; a running test, and the front of a queue, never move. So
a long test at the front of one share runs on that worker, after the long tests before it.
Measured on 2 cores with 4 workers:
- file order: the end-to-end runs (marked `slow`) sat in the middle and the run ended on them;
- slow modules first, in one block: one worker ran the nbgrader cycles one after another while
  the others had finished (15 min 58 s);
- single tests dealt out to every worker: each worker built every module's fixtures again
  (1961 CPU-s against 1756).
Here the collection is cut into units: a module whose tests share a module-scoped fixture (a
built and graded course, a measured level) stays whole, so that fixture is built once; tests
marked `xdist_group(name)` (xdist's own mark, which `--dist worksteal` ignores) form one unit
per name, so that what they share per worker (the corpus's grading process of one isolation
level) is started on one worker, not on each; any other test is a unit of its own. The units
holding `slow` tests come first, each to the share with the least `slow` weight so far (a slow
module weighs one, whatever its number of tests), then the rest, each to the share with the most
room left. Every share then starts with its part of the long tests and ends on short ones. The
order depends only on the collection and the number of workers, so every worker computes the
same one (xdist requires that); without workers the file order is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

SHARED = ("module", "class", "package")  # fixture scopes that tie a module's tests together


def _shares_a_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the item's fixtures
    if info is None:
        return False
    return any(defs[-1].scope in SHARED for defs in info.name2fixturedefs.values() if defs)


def _modules(items: Sequence[pytest.Item]) -> dict[object, list[pytest.Item]]:
    modules: dict[object, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    return modules


def _group(item: pytest.Item) -> str | None:
    """The name of the test's `xdist_group` mark (None without one)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def _units(modules: dict[object, list[pytest.Item]]) -> list[list[pytest.Item]]:
    units: list[list[pytest.Item]] = []
    for tests in modules.values():
        if any(_shares_a_fixture(test) for test in tests):
            units.append(tests)
            continue
        groups: dict[str, list[pytest.Item]] = {}
        for test in tests:
            name = _group(test)
            if name is None:
                units.append([test])
            elif name in groups:
                groups[name].append(test)
            else:
                groups[name] = [test]
                units.append(groups[name])  # filled on: the group sits where it starts
    return units


def _slow(unit: list[pytest.Item]) -> bool:
    return any(item.get_closest_marker("slow") is not None for item in unit)


def long_first(items: Sequence[pytest.Item], workers: int) -> list[pytest.Item]:
    """Slow units first, spread by weight; then the rest by room; shares laid end to end."""
    if workers <= 1:
        return list(items)
    modules = _modules(items)
    units = sorted(_units(modules), key=lambda unit: not _slow(unit))  # stable: file order
    sizes, left = [], len(items)
    for k in range(workers):  # as worksteal cuts them
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    # A slow module's tests share one unit of weight: 8 nbgrader cycles weigh as much as the 243
    # quick tests of the fake-stub matrix (measured: 580 s and 126 s), not 30 times less.
    module_size = {path: len(tests) for path, tests in modules.items()}
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    slow = [0.0] * workers
    for unit in units:
        room = [sizes[k] - len(shares[k]) for k in range(workers)]
        if _slow(unit):  # long tests: to the share with the least so far
            k = min(range(workers), key=lambda k: (slow[k], -room[k]))
            slow[k] += len(unit) / module_size[unit[0].path]
        else:
            k = max(range(workers), key=lambda k: room[k])
        shares[k].extend(unit)
    return [item for share in shares for item in share]
