"""One fault, charged once (see CONTRIBUTING.md, "One fault, charged once").

A check of code built on a function or class that the contract states exactly runs, where the
notebook's own raises or answers wrongly, with the contract's version swapped in
(`on_the_contracts`; the stand-ins are in each exercise's hidden `contracts.py`): the fault is
charged to its own checks, and what is built on it is judged against the reference on parts
that work. The notebook's upstream code then plays no part in that judgement, so it cannot buy
a pass for wrong code built on it. (An earlier design judged the downstream function against
the reference computed with the notebook's own upstream code; independent attackers' upstream
code told the grader's calls from the notebook's, by their inputs, the call stack or argument
style, and answered them so that wrong code "matched".)

`set_aside` is the other way, for a check whose verdict another check settles (ex8's training,
paid only when its module's value check fails)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

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


def set_aside(verdict: CheckFailed) -> None:
    """Pass, for now, where the reference failed the answer with `verdict`: it is right for the
    student's own upstream code. Outside a grading run (nothing settles it later) it fails."""
    pending = CURRENT.get()
    if pending is None:
        raise verdict
    pending.verdicts.append(verdict)


def on_the_contracts(
    name: str, factory: Callable[[], Any], wrong: Callable[[Any], bool]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for the checks of functions built on the notebook's `name` (a function or
    class the contract states exactly): while such a check runs, where `wrong(submission)` says
    the notebook's `name` raises or answers wrongly, it is swapped for the contract's own
    (`factory()`, a function of the exercise's hidden `contracts.py`, whose module is sent to
    the child's `stand_in` probe as source at that moment) and put back afterwards. A fault of
    `name` is then charged to its own checks only; what is built on it is judged on a `name`
    that works. Code that does not call `name` is judged on its own, and a notebook without
    `name` is left as it is (nothing to swap, and nothing to put back)."""

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
            source = _module_source(factory)
            submission.module_setattr(name, submission.probe("stand_in", source, factory.__name__))
            try:
                return check_function(*args, **kwargs)
            finally:
                submission.module_setattr(name, original)

        return judged

    return decorate


@functools.cache
def _module_source(factory: Callable[[], Any]) -> str:
    """The source of the module that defines `factory` (sent whole: its factories may call one
    another)."""
    module = inspect.getmodule(factory)
    if module is None:
        raise TypeError(f"{factory!r} has no module to send")
    return inspect.getsource(module)
