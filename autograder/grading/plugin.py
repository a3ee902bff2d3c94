"""One grading's side of running an exercise's check module on one submission.

The pytest session (grading/check_session.py) gives checks their fixtures from the grading in
progress: `submission` (the sandboxed notebook), `seed` / `rng` (per-check seeds, derived from
the submission's base seed and the check's name), `mistakes` (the exercise's catalogue). Each
check's outcome becomes a CheckResult with a student-facing message; check code and tracebacks
never reach that message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import traceback
from collections.abc import Iterator

import numpy as np
import pytest

from autograder.core.errors import CheckFailed
from autograder.core.registry import mistakes_module
from autograder.core.results import CheckResult
from autograder.grading.causes import explain_undefined
from autograder.grading.diagnoses import Diagnoses
from autograder.grading.set_aside import CURRENT, SetAside
from autograder.grading.submission import StudentError, Submission, Unavailable
from autograder.sandbox.process import SandboxDied


def derive_seed(*parts: object) -> int:
    """A 32-bit seed from the parts, stable across runs and machines."""
    digest = hashlib.sha256("|".join(str(part) for part in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big")


def student_message(error: BaseException) -> tuple[str, str | None]:
    """(message, mistake id) for a check that ended with `error`."""
    if isinstance(error, CheckFailed):
        if error.mistake is not None:
            return f"{error.message}. Looks like a {error.mistake.label()}", error.mistake.id
        return error.message, None
    if isinstance(error, StudentError):
        return str(error), None
    if isinstance(error, SandboxDied):
        return f"the notebook's process stopped ({error.status}): {error.detail}", None
    if isinstance(error, Unavailable):
        return str(error), None
    return (
        f"the check could not use the submission's answer ({type(error).__name__}: {error})",
        None,
    )


def _requirements(item: pytest.Item, kind: str = "requires") -> tuple[str, ...]:
    marker = item.get_closest_marker("check")
    return tuple(marker.kwargs.get(kind, ())) if marker is not None else ()


class GradingPlugin:
    def __init__(
        self,
        exercise: str,
        submission: Submission,
        base_seed: int,
        only: list[str] | None = None,
    ):
        self.exercise = exercise
        self._submission = submission
        self.base_seed = base_seed
        self.only = list(only) if only else None
        self.results: list[CheckResult] = []
        self.internal_errors: list[str] = []
        self._requires: dict[str, tuple[str, ...]] = {}
        self._upstream: dict[str, tuple[str, ...]] = {}
        self._set_aside: dict[str, SetAside] = {}
        self._diagnoses = Diagnoses(exercise, submission)

    def select(self, items: list[pytest.Item]) -> list[pytest.Item]:
        """The checks to run, in the module's order: all of them, or with `only` those and the
        checks they require (which decide whether they are paid)."""
        self._requires = {item.name: _requirements(item) for item in items}
        self._upstream = {item.name: _requirements(item, "upstream") for item in items}
        if self.only is None:
            return list(items)
        wanted, queue = set(), list(self.only)
        while queue:
            name = queue.pop()
            if name not in wanted:
                wanted.add(name)
                queue += self._requires.get(name, ()) + self._upstream.get(name, ())
        return [item for item in items if item.name in wanted]

    def gated_results(self) -> list[CheckResult]:
        """Results after the requirements: a check whose required checks did not all pass is
        paid nothing, and says which; a check that passed only on the student's own upstream
        code is paid only when one of its upstream checks fails (else the reference's verdict
        stands). Settled until nothing changes (a revoked check can be another's upstream or
        requirement). With `only`, just those checks."""
        current = {result.name: result for result in self.results}
        changed = True
        while changed:
            changed = False
            passed = {name for name, result in current.items() if result.passed}
            for name, result in current.items():
                settled = self._settle(result, passed) if result.passed else result
                if settled is not result:
                    current[name], changed = settled, True
        return [r for r in current.values() if self.only is None or r.name in self.only]

    def _settle(self, result: CheckResult, passed: set[str]) -> CheckResult:
        missing = [name for name in self._requires.get(result.name, ()) if name not in passed]
        if missing:
            return dataclasses.replace(
                result,
                passed=False,
                message=(
                    "this property holds, but it is paid only together with "
                    f"{', '.join(missing)}, which did not pass"
                ),
            )
        pending = self._set_aside.get(result.name)
        upstream = self._upstream.get(result.name, ())
        if pending and pending.verdicts and all(name in passed for name in upstream):
            message, mistake = student_message(pending.verdicts[0])
            return dataclasses.replace(
                result,
                passed=False,
                mistake=mistake,
                message=message
                + " (it is what your own code it builds on gives, but that code passes its "
                "own checks, so the difference is this function's)",
            )
        return result

    def _rerun(self, item: pytest.Item) -> None:
        """Run a check again, with fixtures as fresh as the first time (grading/diagnoses.py)."""
        funcargs = getattr(item, "funcargs", None) or {}
        seed = funcargs.get("seed", derive_seed(self.base_seed, item.name))
        names = item._fixtureinfo.argnames  # type: ignore[attr-defined]
        kwargs = {n: np.random.default_rng(seed) if n == "rng" else funcargs[n] for n in names}
        self._submission.seed(seed)
        item.obj(**kwargs)  # type: ignore[attr-defined]

    # -- what the session's fixtures (grading/check_session.py) give this grading's checks ----
    def submission(self) -> Submission:
        return self._submission

    def seed_of(self, check: str) -> int:
        return derive_seed(self.base_seed, check)

    @contextlib.contextmanager
    def verdicts_set_aside(self, check: str) -> Iterator[None]:
        """Where this check passes on the student's own upstream code (`authoring.upstream`),
        the reference's verdicts it set aside, for `gated_results` to settle."""
        pending = SetAside()
        self._set_aside[check] = pending
        token = CURRENT.set(pending)
        try:
            yield
        finally:
            CURRENT.reset(token)

    def seed_child(self, seed: int) -> None:
        """Seed the child's global RNGs before every check, so that objects the student's code
        creates with unseeded initialisation are the same on every regrade."""
        self._submission.calls.clear()
        try:
            self._submission.seed(seed)
        except (Unavailable, SandboxDied, StudentError):
            pass  # the check itself reports an unusable submission

    def mistakes(self):
        return mistakes_module(self.exercise).CATALOGUE

    # -- hooks, called by the session for the grading in progress -----------------------------
    def record(self, item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
        """A check's report (its setup's, if that failed) as this grading's CheckResult."""
        if not (report.when == "call" or (report.when == "setup" and report.failed)):
            return
        marker = item.get_closest_marker("check")
        if marker is None:
            self.internal_errors.append(f"{item.name} has no @check marker")
            return
        message, mistake = "", None
        if call.excinfo is not None:
            error = call.excinfo.value
            message, mistake = student_message(error)
            message = explain_undefined(message, list(self._submission.cell_failures.values()))
            if (
                mistake is None
                and report.when == "call"
                and isinstance(error, CheckFailed | StudentError)
            ):
                message += self._diagnoses.explain(lambda: self._rerun(item))
            if not isinstance(error, CheckFailed | StudentError | SandboxDied | Unavailable):
                self.internal_errors.append(
                    f"{item.name}: " + "".join(traceback.format_exception(error))
                )
        seed = (getattr(item, "funcargs", None) or {}).get("seed")
        self.results.append(
            CheckResult(
                name=item.name,
                grade_id=marker.kwargs["grade_id"],
                max_points=float(marker.kwargs["points"]),
                passed=report.passed,
                message=message,
                mistake=mistake,
                seed=seed,
            )
        )
