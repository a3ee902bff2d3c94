"""One fault, charged once (see CONTRIBUTING.md, "One fault, charged once").

A check of code built on a function or class that the contract states exactly runs, where the
notebook's own raises or answers wrongly, with the contract's version swapped in
(`on_the_contracts`; the stand-ins are the exercise's reference, run by the grader): the fault is
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
from collections.abc import Callable
from typing import Any

from autograder.core.errors import CheckFailed, StudentError
from autograder.grading.set_aside import CURRENT
from autograder.grading.stand_ins import kind_of

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
    name: str, stand_in: Any, wrong: Callable[[Any], bool]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for the checks of functions built on the notebook's `name` (a function or class the
    contract states exactly): while such a check runs, where `wrong(submission)` says the notebook's
    `name` raises or answers wrongly, it is swapped for the contract's own, `stand_in` (the
    exercise's reference function or class), and put back afterwards. The stand-in runs in the
    grader: the child holds a proxy whose calls cross the pipe as plain data
    (`grading/stand_ins.py`, bounded by `grading/stand_in_limits.py`), so no code of the grader
    enters the notebook's process. A fault of `name` is then charged to its own checks only; what
    is built on it is judged on a `name` that works. Code that does not call `name` is judged on
    its own, and a notebook without `name` is left as it is (nothing to swap, and nothing to put
    back)."""
    kind = kind_of(stand_in)

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
            number = submission.stand_ins.swap_in(name, stand_in)
            generation = submission.generation
            try:
                submission.module_setattr(name, submission.probe("stand_in", kind, name, number))
                try:
                    return check_function(*args, **kwargs)
                finally:
                    # a process restarted meanwhile ran the program again: its own is back
                    if submission.generation == generation:
                        submission.module_setattr(name, original)
            finally:
                submission.stand_ins.swap_out(number)

        swaps = (*getattr(check_function, "swaps", ()), (name, stand_in))
        judged.swaps = swaps  # type: ignore[attr-defined]  # what it swaps, outermost last
        return judged

    return decorate
