"""Assertion helpers for grading checks: every failure carries a message for the student and,
when the wrong answer matches a catalogued mistake, that mistake's name."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from autograder.authoring.catalogue import Catalogue, Mistake, Raised
from autograder.core.errors import CheckFailed
from autograder.core.student_text import shown
from autograder.grading.submission import Handle, StudentError, Submission


def fail(message: str, *, mistake: Mistake | None = None) -> NoReturn:
    raise CheckFailed(message, mistake)


def ensure(condition: bool, message: str, *, mistake: Mistake | None = None) -> None:
    if not condition:
        fail(message, mistake=mistake)


def _describe(value: Any) -> str:
    if isinstance(value, Handle):
        return value.type.rsplit(".", 1)[-1]
    return type(value).__name__


def is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def is_real(value: Any) -> bool:
    """A real number (Python or NumPy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    """An integer (Python or NumPy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def as_array(
    value: Any, what: str, *, allow: tuple[str, ...] = ("ndarray", "tensor")
) -> np.ndarray:
    """`value` as a NumPy array, if it is one of the allowed kinds; otherwise fail."""
    if "ndarray" in allow and isinstance(value, np.ndarray):
        return value
    if "tensor" in allow and is_tensor(value):
        try:
            return value.detach().numpy()
        except (TypeError, RuntimeError):  # bfloat16 and other dtypes NumPy cannot hold
            fail(f"{what} should be a tensor NumPy can read, got one of dtype {value.dtype}")
    kinds = " or ".join({"ndarray": "a NumPy array", "tensor": "a torch.Tensor"}[k] for k in allow)
    fail(f"{what} should be {kinds}, got {_describe(value)}")


def expect_tuple(value: Any, length: int, what: str) -> tuple:
    if not isinstance(value, tuple | list) or len(value) != length:
        fail(
            f"{what} should return a tuple of {length} values, got {_describe(value)}"
            + (f" of length {len(value)}" if isinstance(value, tuple | list) else "")
        )
    return tuple(value)


def expect_shape(
    array: np.ndarray, shape: tuple[int, ...], what: str, *, mistake: Mistake | None = None
) -> None:
    ensure(
        tuple(array.shape) == tuple(shape),
        f"{what} should have shape {tuple(shape)}, got {tuple(array.shape)}",
        mistake=mistake,
    )


def expect_rows_sum_to_one(
    weights: np.ndarray, what: str, *, mistake: Mistake | None = None
) -> None:
    """Every row (last axis) of `weights` is non-negative and sums to 1 (within 1e-5)."""
    sums = weights.sum(axis=-1)
    ensure(
        bool(np.all(weights >= 0)) and np.allclose(sums, 1.0, atol=1e-5),
        f"each row of {what} should be non-negative and sum to 1; the row sums range from "
        f"{sums.min():.4g} to {sums.max():.4g}",
        mistake=mistake,
    )


def close(
    a: Any, b: Any, *, atol: float, rtol: float, allow_inf: bool = False, same_nan: bool = False
) -> bool:
    """Same shape and within tolerance. NaN never equals anything, nor does infinity (unless
    `allow_inf`: then an infinity equals only the same infinity where the expected one is).
    With `same_nan` (naming a mistake, never paying), NaN in the same places of both counts
    as agreeing there, when some other entry agrees too."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    try:
        a, b = a.astype(float), b.astype(float)
    except (TypeError, ValueError):
        return False
    nan = np.isnan(a) | np.isnan(b)
    if nan.any():
        if not same_nan or not np.array_equal(np.isnan(a), np.isnan(b)) or nan.all():
            return False
        a, b = a[~nan], b[~nan]
    infinite = np.isinf(a) | np.isinf(b)
    if infinite.any():
        if not allow_inf or not np.array_equal(a[infinite], b[infinite]):
            return False
        a, b = a[~infinite], b[~infinite]
    return bool(np.allclose(a, b, atol=atol, rtol=rtol))


def within(value: Any, expected: Any, tolerance: float) -> bool:
    """|value - expected| <= tolerance for finite real numbers; False for NaN, inf or
    anything that is not a real number."""
    if not (is_real(value) and is_real(expected)):
        return False
    value, expected = float(value), float(expected)
    if not (np.isfinite(value) and np.isfinite(expected)):
        return False
    return abs(value - expected) <= tolerance


def matching_mistake(
    observed: Any,
    candidates: Iterable[tuple[Mistake, object]],
    pick: Callable = lambda value: value,
    *,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    allow_inf: bool = True,
) -> Mistake | None:
    """The first catalogued mistake whose output (after `pick`) matches `observed`. Naming pays
    nothing, so the same infinities, or NaN, in the same places count as a match (as long as
    some finite entry agrees too)."""
    for mistake, output in candidates:
        try:
            candidate = pick(output)
            if is_tensor(candidate):
                candidate = candidate.detach().numpy()
        except Exception:  # noqa: BLE001 - a candidate that does not fit is no match
            continue
        if close(observed, candidate, atol=atol, rtol=rtol, allow_inf=allow_inf, same_nan=True):
            return mistake
    return None


def equal_mistake(
    value: Any, candidates: Iterable[tuple[Mistake, object]], pick: Callable = lambda output: output
) -> Mistake | None:
    """The first catalogued mistake whose output (after `pick`) has `value`'s type and equals
    it: `matching_mistake` for plain data (strings, lists, dicts)."""
    for mistake, output in candidates:
        try:
            candidate = pick(output)
            if type(candidate) is type(value) and candidate == value:
                return mistake
        except Exception:  # noqa: BLE001 - an output that cannot be compared is no match
            continue
    return None


def expect_equal(
    value: Any,
    expected: Any,
    what: str,
    candidates: Iterable[tuple[Mistake, object]] = (),
    *,
    why: str = "",
) -> None:
    """Fail unless plain data `value == expected`, naming a mistake that returned the same."""
    if value != expected:
        because = f" ({why})" if why else ""
        fail(
            f"{what} should be {expected!r}{because}, got {shown(value)}",
            mistake=equal_mistake(value, candidates),
        )


def expect_close(
    observed: Any,
    expected: Any,
    what: str,
    *,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    mistakes: Iterable[tuple[Mistake, object]] = (),
    pick: Callable = lambda value: value,
    allow_inf: bool = False,
) -> None:
    """Fail unless arrays `observed` and `expected` have one shape and agree within tolerance.

    On failure, name the first of `mistakes` (pairs of mistake and its output, reduced by
    `pick` to the compared value) that `observed` does match."""
    observed = np.asarray(observed)
    expected = np.asarray(expected)
    if close(observed, expected, atol=atol, rtol=rtol, allow_inf=allow_inf):
        return
    mistake = matching_mistake(observed, mistakes, pick, atol=atol, rtol=rtol)
    if observed.shape != expected.shape:
        fail(f"{what} should have shape {expected.shape}, got {observed.shape}", mistake=mistake)
    if not np.issubdtype(observed.dtype, np.number) and observed.dtype != bool:
        fail(f"{what} should hold numbers, got dtype {observed.dtype}", mistake=mistake)
    got, want = observed.astype(float), expected.astype(float)
    with np.errstate(all="ignore"):
        difference = np.abs(got - want)
    same_infinity = allow_inf & np.isinf(want) & (got == want)
    difference = np.where(np.isnan(difference) & ~same_infinity, np.inf, difference)
    difference = np.where(same_infinity, 0.0, difference)
    index = np.unravel_index(int(np.argmax(difference)), difference.shape)
    where = f" at index {tuple(int(i) for i in index)}" if observed.ndim else ""
    shown_got, shown_want = distinguish(float(got[index]), float(want[index]))
    fail(
        f"wrong values for {what}: the largest |difference| from the expected values is "
        f"{float(difference[index]):.3g}{where} (got {shown_got}, expected {shown_want})",
        mistake=mistake,
    )


def distinguish(got: float, expected: float, digits: int = 6) -> tuple[str, str]:
    """Both numbers printed with enough significant digits to tell them apart (up to 17)."""
    for precision in range(digits, 18):
        a, b = f"{got:.{precision}g}", f"{expected:.{precision}g}"
        if a != b:
            return a, b
    return f"{got!r}", f"{expected!r}"


def expect_number(
    value: Any,
    expected: Any,
    what: str,
    candidates: Iterable[tuple[Mistake, object]] = (),
    *,
    integer: bool = True,
) -> None:
    """An exact int (or, with integer=False, a real number within 1e-9 relative of `expected`);
    a wrong value names the first of `candidates` that returned the same."""
    ensure(is_real(value), f"{what} should return a number, got {type(value).__name__}")
    rtol = 0 if integer else 1e-9
    ensure(
        abs(value - expected) <= rtol * abs(expected),
        f"{what} should be {expected!r}, got {shown(value)}",
        mistake=matching_mistake(value, candidates, atol=0, rtol=rtol),
    )
    ensure(
        not integer or is_int(value),
        f"{what} should return an int, got {type(value).__name__} {shown(value)}",
    )


@dataclass
class Answer:
    """A student function's return value and what the catalogued mistakes return instead
    (run when first looked at: `Catalogue.outputs_on_demand`)."""

    value: object
    candidates: Sequence[tuple[Mistake, object]]


def call_checked(
    submission: Submission,
    catalogue: Catalogue,
    target: str,
    *args: Any,
    timeout: float | None = None,
    **kwargs: Any,
) -> Answer:
    """Call the student's `target`; if it raises, fail, naming a catalogued mistake that raises
    the same exception on these inputs."""
    candidates = catalogue.outputs_on_demand(target, *args, **kwargs)
    try:
        value = submission.call(target, *args, timeout=timeout, **kwargs)
    except StudentError as error:
        mistake = next(
            (m for m, out in candidates if isinstance(out, Raised) and out.matches(error)),
            None,
        )
        raise CheckFailed(str(error), mistake) from None
    return Answer(value, candidates.returned())


def expect_raises(
    submission: Submission,
    catalogue: Catalogue,
    target: str,
    error_type: str,
    *args: Any,
    what: str | None = None,
    why: str = "",
    **kwargs: Any,
) -> None:
    """The student's `target(*args, **kwargs)` must raise `error_type` (a class name such as
    "ValueError"). Otherwise fail, naming the first catalogued mistake of `target` that does the
    same on these arguments: raises the same other exception, or returns. An unfilled stub (a
    bare NotImplementedError) fails as "not implemented yet"."""
    candidates = catalogue.outputs_on_demand(target, *args, **kwargs)
    if what is None:
        shown = [repr(arg) for arg in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
        what = f"{target}({', '.join(shown)})"
    expected = f"{what} should raise {error_type}" + (f" ({why})" if why else "")
    try:
        value = submission.call(target, *args, **kwargs)
    except StudentError as error:
        if error.type == error_type:
            return
        if error.type == "NotImplementedError" and not error.message:
            raise
        named = next(
            (m for m, out in candidates if isinstance(out, Raised) and out.matches(error)), None
        )
        fail(f"{expected}; instead {error}", mistake=named)
    named = next((m for m, out in candidates if not isinstance(out, Raised)), None)
    fail(f"{expected}, but it returned a {_describe(value)}", mistake=named)
