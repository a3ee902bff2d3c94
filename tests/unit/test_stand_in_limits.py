"""The stand-ins' allocation budget (`grading/stand_in_limits.Allocations`) keeps what each
operation allocates per (operation, arguments' metadata and plain values), so an operation
repeated with the same shapes runs on the meta device once per process. What is kept must be
what a run on meta says for those arguments, and every call must still be charged for it."""

from __future__ import annotations

import pytest
import torch

from autograder.grading import stand_in_limits as limits
from autograder.grading.stand_in_limits import Allocations, CallbackRefused


@pytest.fixture
def meta_runs(monkeypatch):
    monkeypatch.setattr(limits, "_SIZES", {})
    runs: list[str] = []
    real = limits._allocated

    def counted(func, args, kwargs):
        runs.append(str(func))
        return real(func, args, kwargs)

    monkeypatch.setattr(limits, "_allocated", counted)
    return runs


def test_the_same_operation_on_the_same_shapes_runs_on_meta_once_and_is_charged_each_time(
    meta_runs,
):
    x, y = torch.ones(64, 64), torch.ones(64, 64)
    with Allocations() as mode:
        for _ in range(5):
            torch.mm(x, y)
    assert meta_runs.count("aten.mm.default") == 1
    assert limits.CALL_BYTES - mode.left == 5 * 64 * 64 * 4


PAIRS = {  # two calls of one operation that differ in one thing, and allocate differently
    "shape": (
        lambda: torch.mm(torch.ones(3, 4), torch.ones(4, 5)),
        lambda: torch.mm(torch.ones(30, 4), torch.ones(4, 5)),
    ),
    "dtype": (lambda: torch.ones(8) + 1, lambda: torch.ones(8, dtype=torch.float64) + 1),
    "value": (lambda: torch.arange(10), lambda: torch.arange(1000)),
    "float value": (lambda: torch.arange(0.5, 10.0), lambda: torch.arange(0.5, 100.0)),
    "keyword": (lambda: torch.ones(4, 4).sum(dim=0), lambda: torch.ones(4, 4).sum(dim=(0, 1))),
    "list length": (
        lambda: torch.ones(4, 4).repeat([2, 2]),
        lambda: torch.ones(4, 4).repeat([2, 2, 2]),
    ),
}


def _charged(calls, keep: bool, monkeypatch) -> int:
    monkeypatch.setattr(limits, "_SIZES", {})
    if not keep:
        monkeypatch.setattr(limits, "_signature", lambda *args: None)
    with Allocations() as mode:
        for call in calls:
            call()
    monkeypatch.undo()
    return limits.CALL_BYTES - mode.left


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS.keys())
def test_what_is_kept_is_what_meta_says_for_each_signature(pair, monkeypatch):
    a, b = pair
    for calls in ([a, b, a, b], [b, a, b, a]):
        assert _charged(calls, True, monkeypatch) == _charged(calls, False, monkeypatch)
    assert _charged([a], False, monkeypatch) != _charged([b], False, monkeypatch)


def test_an_operation_past_the_budget_is_refused_every_time(meta_runs):
    big = torch.ones(1024, 1024)
    for _ in range(3):
        with pytest.raises(CallbackRefused), Allocations(budget=4 << 20) as mode:
            torch.mm(big, big)
            torch.mm(big, big)
        assert mode.left >= 0
    assert meta_runs.count("aten.mm.default") == 1


def test_arguments_of_other_kinds_are_not_kept(meta_runs):
    class Tagged(torch.Tensor):
        pass

    x = torch.ones(4).as_subclass(Tagged)
    with Allocations():
        torch.ops.aten.add.Tensor(x, x)
        torch.ops.aten.add.Tensor(x, x)
    assert meta_runs.count("aten.add.Tensor") == 2
