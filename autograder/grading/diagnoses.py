"""What a failed check adds to its message when no catalogued mistake explains the failure:
the notebook is asked again, in two ways that hold for every exercise.

- Something kept between calls (`kept_between_calls`): the check runs once more with every call
  made fresh (`grading/fresh_calls.py`); if it passes that way, the failure came from state an
  earlier call left behind (a module-level variable, a mutable default argument, a class
  attribute, a cache, an attribute a forward pass set on its module).
- An argument ignored in favour of its default (`ignored_argument`): a call of the check that
  passed an argument other than its default is made again with the default; if the notebook
  answers the same while the contract's answers differ, that argument made no difference.

Both only add words: the check has failed already, and its points do not change. Each is
bounded (`MAX_RERUNS` reruns per grading, and none once the grading has spent its budget but
`MIN_SECONDS_LEFT`)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from autograder.core.errors import GradedOutcome
from autograder.core.registry import reference_module
from autograder.grading.fresh_calls import Call, FreshCalls, handles_in
from autograder.grading.set_aside import CURRENT, SetAside
from autograder.grading.submission import Submission

MAX_RERUNS = 4  # failed checks run again, per grading
MIN_SECONDS_LEFT = 300.0
MAX_CALLS_ASKED = 8  # calls of a failed check whose arguments are tried at their defaults

KEPT = (
    "; it passes when every call starts from a fresh run of the notebook's cells, so something "
    "was kept between calls (a module-level variable, a mutable default argument, a class "
    "attribute, a cache, or an attribute an earlier call set on an object) and changed a later "
    "answer"
)


@dataclasses.dataclass
class Diagnoses:
    exercise: str
    submission: Submission
    reruns: int = 0

    def explain(self, rerun: Callable[[], object]) -> str:
        """Words to add to the message of a check that failed without a named mistake
        (`rerun` runs the check again, with fresh fixtures)."""
        calls = list(self.submission.calls)
        if self.kept_between_calls(rerun):
            return KEPT  # an answer kept from an earlier call ignores every argument alike
        with unchanged(self.submission):
            argument = self.ignored_argument(calls)
        return f"; {argument}" if argument else ""

    # -- something kept between calls -------------------------------------------------------
    def kept_between_calls(self, rerun: Callable[[], object]) -> bool:
        submission = self.submission
        if self.reruns >= MAX_RERUNS or submission.remaining() < MIN_SECONDS_LEFT:
            return False
        self.reruns += 1
        submission.fresh = FreshCalls(submission)
        token = CURRENT.set(SetAside())
        try:
            with unchanged(submission):
                rerun()
        except (Exception, *FAILING_AGAIN):  # noqa: BLE001 - failing again is the ordinary outcome
            return False
        finally:
            submission.fresh = None
            CURRENT.reset(token)
        return True

    # -- an argument ignored in favour of its default -----------------------------------------
    def ignored_argument(self, calls: list[Call]) -> str | None:
        reference = reference_module(self.exercise)
        asked = 0
        for call in reversed(calls):
            name = call.target.get("$global")
            function = getattr(reference, str(name), None) if name else None
            if not inspect.isfunction(function) or call.method is not None:
                continue
            if any(handles_in(list(call.args))) or any(handles_in(dict(call.kwargs))):
                continue
            if asked >= MAX_CALLS_ASKED:
                break
            asked += 1
            found = self._argument_of(function, str(name), call)
            if found:
                return found
        return None

    def _argument_of(self, function: Callable, name: str, call: Call) -> str | None:
        try:
            signature = inspect.signature(function)
            bound = signature.bind(*call.args, **call.kwargs)
        except (TypeError, ValueError):
            return None
        for parameter in signature.parameters.values():
            if parameter.default is inspect.Parameter.empty:
                continue
            if parameter.name not in bound.arguments:
                continue
            value = bound.arguments[parameter.name]
            if same(value, parameter.default):
                continue
            others = {k: v for k, v in bound.arguments.items() if k != parameter.name}
            if same(_quietly(function, bound.arguments), _quietly(function, others)):
                continue  # the contract's answer does not depend on it here
            try:
                answer = self.submission.call(name, **copy.deepcopy(others))
            except GradedOutcome:  # it raised, or its process died or cannot run: no answer
                continue
            if same(answer, call.value):
                return (
                    f"`{parameter.name}` made no difference: {name} answered with "
                    f"{parameter.name}={_shown(value)} what it answers with the default "
                    f"{parameter.name}={_shown(parameter.default)}, so it seems to ignore "
                    f"`{parameter.name}` in favour of its default"
                )
        return None


# what a check that fails again may raise besides an Exception: pytest.fail, skip and xfail
FAILING_AGAIN = (pytest.fail.Exception, pytest.skip.Exception, pytest.xfail.Exception)


@contextlib.contextmanager
def unchanged(submission: Submission) -> Iterator[None]:
    """A diagnosis only adds words: what it does to the submission's record (a status, events,
    restarts, cell failures, when a call it makes ends the child) is put back."""
    saved = (
        submission.status,
        dict(submission.stuck),
        list(submission.events),
        submission.restarts,
        dict(submission.cell_failures),
    )
    try:
        yield
    finally:
        (
            submission.status,
            submission.stuck,
            submission.events[:],
            submission.restarts,
            submission.cell_failures,
        ) = saved


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _NoAnswer:
    """What a reference call that raised returns: the same as nothing."""


def _quietly(function: Callable, arguments: dict) -> Any:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return function(**copy.deepcopy(arguments))
    except Exception:  # noqa: BLE001 - the contract's function has no answer for these
        return _NoAnswer()


def same(a: Any, b: Any) -> bool:
    """The same answer: equal plain data, or arrays and tensors of one shape and equal values
    (to 1e-12 relative); never for NaN or an answer the reference could not give."""
    if isinstance(a, _NoAnswer) or isinstance(b, _NoAnswer):
        return False
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    x, y = _array(a), _array(b)
    if x is not None and y is not None:
        if x.shape != y.shape:
            return False
        try:
            return bool(np.allclose(x, y, rtol=1e-12, atol=1e-300, equal_nan=False))
        except TypeError:
            return bool(np.array_equal(x, y))
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
        return False


def _array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if type(value).__name__ == "Tensor":
        try:
            return value.detach().double().numpy()
        except (TypeError, RuntimeError):
            return None
    if isinstance(value, float | int) and not isinstance(value, bool):
        return np.asarray(float(value))
    return None
