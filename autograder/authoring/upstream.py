"""One fault, charged once: the reference's answer computed with the student's own upstream
functions in place of the reference's, for the checks of a function built on them (see
CONTRIBUTING.md, "One fault, charged once", and `expect_close_or_own` below).

The grader computes it before the student's downstream function is called and again after it
has answered, and trusts it only when both agree (`asked_before`: stateful upstream code cannot
answer the grader with values the downstream function left for it), and such a pass is paid
only when one of the check's `upstream` checks fails (`check(upstream=...)`, settled by the
grading plugin): the student's upstream code is trusted only where a fault in it is charged.
Reference modules are patched for the duration of one computation; gradings in one process
take turns, so no other check sees the patch."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any
from unittest import mock

import numpy as np

from autograder.authoring.catalogue import Mistake
from autograder.authoring.expect import close, expect_close
from autograder.core.errors import CheckFailed, StudentError
from autograder.grading.set_aside import CURRENT

# What a computation on a student's return values may raise: it then has no answer to give.
UNUSABLE: tuple[type[Exception], ...] = (
    StudentError,
    CheckFailed,
    TypeError,
    ValueError,
    RuntimeError,
    ArithmeticError,
    LookupError,
    AttributeError,
)


def student_function(submission: Any, name: str) -> Callable[..., Any]:
    """A parent-side callable that runs the notebook's `name` (in the child) and returns what it
    returned (plain data and tensors as they come back). The name is looked up at the call, so
    a notebook without it fails inside `answer_with` (no answer) and nowhere else."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return submission.module_getattr(name)(*args, **kwargs)

    return call


def answer_with(
    reference: ModuleType,
    replacements: Mapping[str, Callable[..., Any]],
    compute: Callable[[], Any],
) -> Any | None:
    """`compute()` with the reference module's functions named in `replacements` replaced;
    None when it fails on what the replacements returned."""
    try:
        with contextlib.ExitStack() as stack:
            for name, replacement in replacements.items():
                stack.enter_context(mock.patch.object(reference, name, replacement))
            return compute()
    except UNUSABLE:
        return None


def asked_before(compute: Callable[[], Any]) -> Callable[[], Any]:
    """The `own` of `expect_close_or_own`, made BEFORE the student's downstream function is
    called: `compute()` (the reference's answer with the student's own upstream code) is asked
    now, and again when `own` is asked (after the downstream function has answered); `own`
    gives it only when both agree exactly. Upstream code that keeps state could otherwise answer
    the grader's computation with values that the downstream function left for it (an
    independent attacker's apply_rope replayed what made a wrong attention "match", and a
    TinyLM replayed generate's own answer): before the downstream call there is nothing to
    replay yet, and a deterministic function answers the same twice."""
    before = compute()

    def own() -> Any:
        if before is None:
            return None
        after = compute()
        return after if _identical(before, after) else None

    return own


def _identical(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple | dict) or isinstance(b, list | tuple | dict):
        return bool(a == b)
    try:
        return bool(np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float)))
    except (TypeError, ValueError):
        return False


def set_aside(verdict: CheckFailed) -> None:
    """Pass, for now, where the reference failed the answer with `verdict`: it is right for the
    student's own upstream code. Outside a grading run (nothing settles it later) it fails."""
    pending = CURRENT.get()
    if pending is None:
        raise verdict
    pending.verdicts.append(verdict)


def expect_close_or_own(
    observed: Any,
    expected: Any,
    own: Callable[[], Any],
    what: str,
    *,
    atol: float,
    rtol: float,
    mistakes: Iterable[tuple[Mistake, object]] = (),
    pick: Callable = lambda value: value,
) -> None:
    """`expect_close` against the reference; where that fails but `observed` matches `own()`
    (the reference's answer computed with the student's own upstream code, None where there is
    none to trust; asked only then, after the student's function has answered), the verdict is
    set aside (`set_aside`)."""
    try:
        expect_close(observed, expected, what, atol=atol, rtol=rtol, mistakes=mistakes, pick=pick)
    except CheckFailed as failure:
        theirs = own()
        if theirs is None or not close(observed, theirs, atol=atol, rtol=rtol):
            raise
        set_aside(failure)


def on_the_contracts(
    name: str, probe: str, wrong: Callable[[Any], bool]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for the checks of functions built on the notebook's `name` (a function or
    class the contract states exactly): while such a check runs, where `wrong(submission)` says
    the notebook's `name` raises or answers wrongly, it is swapped for the contract's own (the
    child's `probe`, which returns it) and put back afterwards. A fault of `name` is then
    charged to its own checks only; what is built on it is judged on a `name` that works.
    Code that does not call `name` is judged on its own, and a notebook without `name` is left
    as it is (nothing to swap, and nothing to put back)."""

    def decorate(check_function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(check_function)
        def judged(*args: Any, **kwargs: Any) -> Any:
            submission = kwargs["submission"]
            try:
                original = submission.module_getattr(name)
            except StudentError:
                return check_function(*args, **kwargs)
            if not wrong(submission):
                return check_function(*args, **kwargs)
            submission.module_setattr(name, submission.probe(probe))
            try:
                return check_function(*args, **kwargs)
            finally:
                submission.module_setattr(name, original)

        return judged

    return decorate
