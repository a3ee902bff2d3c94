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
    """Decorator for the checks of functions built on the notebook's `name` (a function or class the
    contract states exactly): while such a check runs, where `wrong(submission)` says the notebook's
    `name` raises or answers wrongly, it is swapped for the contract's own (`factory()`, a function
    of the exercise's hidden `contracts.py`, sent with the factories it calls to the child's
    `stand_in` probe as source at that moment) and put back afterwards. A fault of `name` is then
    charged to its own checks only; what is built on it is judged on a `name` that works. Code that
    does not call `name` is judged on its own, and a notebook without `name` is left as it is
    (nothing to swap, and nothing to put back)."""

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
            source = _source_of(factory)
            submission.module_setattr(name, submission.probe("stand_in", source, factory.__name__))
            try:
                return check_function(*args, **kwargs)
            finally:
                submission.module_setattr(name, original)

        swaps = (*getattr(check_function, "swaps", ()), (name, factory))
        judged.swaps = swaps  # type: ignore[attr-defined]  # what it swaps, outermost last
        return judged

    return decorate


def sent_with(factory: Callable[[], Any]) -> list[Callable[[], Any]]:
    """`factory` and the functions of its module that it calls (a stand-in's own upstream
    parts), which go to the child with it. Code that runs while the swap lasts can reach all of
    them (through the stand-in's globals), so none may be a working version of a function whose
    checks run later (`tests/unit/test_contracts.py` holds the checks to that order): a first
    version sent the whole module, and a kv_cache_mib found the contract's own beside the
    kv_cache_bytes swapped in for its check."""
    module = inspect.getmodule(factory)
    if module is None:
        raise TypeError(f"{factory!r} has no module to send")
    found: dict[str, Callable[[], Any]] = {}

    def visit(function: Callable[[], Any]) -> None:
        if function.__name__ in found:
            return
        found[function.__name__] = function
        for name in function.__code__.co_names:
            called = getattr(module, name, None)
            if inspect.isfunction(called) and inspect.getmodule(called) is module:
                visit(called)

    visit(factory)
    return list(found.values())


@functools.cache
def _source_of(factory: Callable[[], Any]) -> str:
    """The source of `sent_with(factory)` (all are defined before `factory` is called)."""
    return "\n\n".join(inspect.getsource(function) for function in sent_with(factory))
