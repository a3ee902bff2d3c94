"""Item analysis of a batch: score distributions, per-check difficulty and discrimination,
named mistakes, and the submissions that did not grade normally.

Definitions (classical test theory, as in PrairieLearn's and most LMS item statistics):
- difficulty: the share of graded submissions that passed the check;
- corrected point-biserial: Pearson's r between passing the check (0/1) and the rest of the
  exercise's auto score (the score without this check's points), so that a check does not
  correlate with itself; undefined (None) when either side does not vary;
- upper-lower index: pass rate among the top 27% of submissions by exercise score minus the
  pass rate among the bottom 27% (at least one submission per group; ties broken by student
  id, so the groups are reproducible).
Submissions without check results (invalid notebooks, not graded) are left out of the check
statistics, as in item_analysis.csv.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from autograder.core.results import CheckResult
from autograder.core.status import Status
from autograder.report.data import Batch, Graded

UPPER_LOWER_SHARE = 0.27
FLAG_NEVER_FAILS = "never fails"
FLAG_ALWAYS_FAILS = "always fails"
FLAG_NEGATIVE = "negative discrimination"
CSV_FIELDS = (
    "exercise",
    "check",
    "grade_id",
    "points",
    "graded",
    "passed",
    "difficulty",
    "point_biserial",
    "upper_lower",
    "flags",
    "mistakes",
)


def spreadsheet_text(text: str) -> str:
    """Text that a spreadsheet will not read as a formula (it passed through a notebook)."""
    return "'" + text if text.startswith(("=", "+", "-", "@", "\t", "\r")) else text


@dataclass(frozen=True)
class ExerciseSummary:
    exercise: str
    submissions: int
    scores: tuple[float, ...]
    max_score: float
    mean: float | None
    median: float | None
    manual_pending: int  # submissions still waiting for a hand grade


@dataclass(frozen=True)
class CheckStats:
    exercise: str
    check: str
    grade_id: str
    points: float
    graded: int
    passed: int
    point_biserial: float | None
    upper_lower: float | None
    mistakes: tuple[tuple[str, int], ...] = ()
    flags: tuple[str, ...] = field(default=())

    @property
    def difficulty(self) -> float:
        return self.passed / self.graded if self.graded else math.nan

    def csv_row(self) -> dict:
        def number(value: float | None) -> str:
            return "" if value is None else f"{value:.3f}"

        return {
            "exercise": self.exercise,
            "check": spreadsheet_text(self.check),
            "grade_id": spreadsheet_text(self.grade_id),
            "points": f"{self.points:g}",
            "graded": self.graded,
            "passed": self.passed,
            "difficulty": number(self.difficulty),
            "point_biserial": number(self.point_biserial),
            "upper_lower": number(self.upper_lower),
            "flags": "; ".join(self.flags),
            "mistakes": spreadsheet_text("; ".join(f"{m} x{n}" for m, n in self.mistakes)),
        }


@dataclass(frozen=True)
class MistakeCount:
    exercise: str
    check: str
    mistake: str
    description: str
    students: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.students)


def summarise(batch: Batch, exercise: str) -> ExerciseSummary:
    subs = [s for s in batch.submissions if s.exercise == exercise]
    scores = tuple(s.score for s in subs)
    return ExerciseSummary(
        exercise=exercise,
        submissions=len(subs),
        scores=scores,
        max_score=max((s.max_score for s in subs), default=0.0),
        mean=statistics.fmean(scores) if scores else None,
        median=statistics.median(scores) if scores else None,
        manual_pending=sum(s.manual_pending for s in subs),
    )


def pearson(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r; None when fewer than two pairs or either side is constant."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sxy / math.sqrt(sxx * syy)


def upper_lower(passed: dict[str, bool], totals: dict[str, float]) -> float | None:
    """Pass rate of the top 27% by total minus that of the bottom 27% (None below 2)."""
    if len(passed) < 2:
        return None
    ranked = sorted(passed, key=lambda student: (totals[student], student))
    size = max(1, round(UPPER_LOWER_SHARE * len(ranked)))
    lower, upper = ranked[:size], ranked[-size:]
    return sum(passed[s] for s in upper) / size - sum(passed[s] for s in lower) / size


def _graded(batch: Batch, exercise: str) -> list[Graded]:
    return [s for s in batch.submissions if s.exercise == exercise and s.checks]


def check_stats(batch: Batch, exercise: str) -> list[CheckStats]:
    """One row per check of the exercise, in the order the checks ran."""
    subs = _graded(batch, exercise)
    totals = {s.student: sum(c.points for c in s.checks) for s in subs}
    results: dict[str, dict[str, CheckResult]] = defaultdict(dict)  # check -> student -> result
    for sub in subs:
        for check in sub.checks:
            results[check.name][sub.student] = check
    rows = []
    for name, by_student in results.items():
        first = next(iter(by_student.values()))
        passed = {student: check.passed for student, check in by_student.items()}
        rest = [totals[student] - check.points for student, check in by_student.items()]
        r = pearson([float(p) for p in passed.values()], rest)
        counts: dict[str, int] = defaultdict(int)
        for check in by_student.values():
            if check.mistake:
                counts[check.mistake] += 1
        n_passed = sum(passed.values())
        flags = []
        if n_passed == len(passed):
            flags.append(FLAG_NEVER_FAILS)
        if n_passed == 0:
            flags.append(FLAG_ALWAYS_FAILS)
        if r is not None and r < 0:
            flags.append(FLAG_NEGATIVE)
        rows.append(
            CheckStats(
                exercise=exercise,
                check=name,
                grade_id=first.grade_id,
                points=first.max_points,
                graded=len(passed),
                passed=n_passed,
                point_biserial=r,
                upper_lower=upper_lower(passed, totals),
                mistakes=tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0]))),
                flags=tuple(flags),
            )
        )
    return rows


def mistake_counts(batch: Batch, exercise: str) -> list[MistakeCount]:
    """Each named mistake seen in the exercise, most frequent first, with who made it."""
    seen: dict[tuple[str, str], list[str]] = defaultdict(list)
    for sub in _graded(batch, exercise):
        for check in sub.checks:
            if check.mistake:
                seen[(check.name, check.mistake)].append(sub.student)
    rows = [
        MistakeCount(
            exercise=exercise,
            check=check,
            mistake=mistake,
            description=batch.mistake_words.get((exercise, mistake), ""),
            students=tuple(sorted(students)),
        )
        for (check, mistake), students in seen.items()
    ]
    return sorted(rows, key=lambda row: (-row.count, row.check, row.mistake))


def problems(batch: Batch) -> list[Graded]:
    """Submissions that did not grade normally (timeouts, crashes, invalid notebooks, ...)
    except integrity flags, which `integrity` lists."""
    return [s for s in batch.submissions if s.status not in (Status.OK, Status.TAMPERED)]


def integrity(batch: Batch) -> list[Graded]:
    """Submissions that patched or replaced the grader's runtime (status `tampered`)."""
    return [s for s in batch.submissions if s.status == Status.TAMPERED]


def histogram(scores: tuple[float, ...], max_score: float) -> list[tuple[float, int]]:
    """(score, count) for every whole score from 0 to max_score (half points round down)."""
    top = max(math.ceil(max_score), int(max(scores, default=0)))
    counts = [0] * (top + 1)
    for score in scores:
        counts[min(max(math.floor(score), 0), top)] += 1
    return list(zip(range(top + 1), counts, strict=True))
