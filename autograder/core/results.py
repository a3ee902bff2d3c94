"""Results of grading one notebook, and their Gradescope-style JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from autograder.core.status import Status
from autograder.core.versions import CHECKS_VERSION, grader_version

# Every exercise: 8 points from the automatic checks, 2 for the hand-graded written answer.
AUTO_POINTS = 8.0
MANUAL_POINTS = 2.0
# The autograded notebook's metadata key that holds its GradeReport (to_dict), read back by
# reports, regrades and resumed batches. Written by the nbgrader preprocessor that grades it
# (GradeWithChecks) only: whatever a student put under this key is dropped first.
REPORT_KEY = "attn_grade_report"


@dataclass(frozen=True)
class CheckResult:
    name: str
    grade_id: str
    max_points: float
    passed: bool
    message: str = ""
    mistake: str | None = None  # id of the catalogued mistake the wrong answer matched
    seed: int | None = None

    @property
    def points(self) -> float:
        return self.max_points if self.passed else 0.0

    def feedback(self, passed: str = "passed", failed: str = "FAILED") -> str:
        """One line per check (the message's own lines indented below it); `passed` and
        `failed` are the status words, e.g. translated."""
        status = passed if self.passed else failed
        text = f"[{status}] {self.name} ({self.points:g}/{self.max_points:g})"
        return f"{text}: {hanging(self.message)}" if self.message else text


def hanging(message: str, indent: str = "    ") -> str:
    """`message` with every line after its first indented: the grader's own lines start at the
    margin, so a message (a student's exception text, say) cannot add one that looks like them."""
    first, *rest = message.split("\n")
    return "\n".join([first, *(indent + line for line in rest)])


@dataclass
class GradeReport:
    exercise: str | None
    status: str = Status.OK  # one of autograder.core.status.Status
    checks: list[CheckResult] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # notebook-level notes for the student
    isolation: str = ""
    seed: int | None = None
    execution_time: float = 0.0
    # grade id of each demo cell -> nbformat outputs (autograder.grading.displays), for hand grading
    displays: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return round(sum(check.points for check in self.checks), 6)

    @property
    def max_score(self) -> float:
        return AUTO_POINTS

    def points_by_grade_id(self) -> dict[str, tuple[float, float]]:
        """grade id -> (earned, possible)."""
        totals: dict[str, tuple[float, float]] = {}
        for check in self.checks:
            earned, possible = totals.get(check.grade_id, (0.0, 0.0))
            totals[check.grade_id] = (earned + check.points, possible + check.max_points)
        return totals

    def to_gradescope(self) -> dict:
        tests = [
            {
                "name": check.name,
                "score": check.points,
                "max_score": check.max_points,
                "status": "passed" if check.passed else "failed",
                "output": check.message,
                "visibility": "visible",
                "extra_data": {
                    "grade_id": check.grade_id,
                    "mistake": check.mistake,
                    "seed": check.seed,
                },
            }
            for check in self.checks
        ]
        return {
            "score": self.score,
            "max_score": self.max_score,
            "execution_time": round(self.execution_time, 3),
            "output": "\n".join(self.messages),
            "tests": tests,
            "extra_data": {
                "exercise": self.exercise,
                "status": self.status,
                "isolation": self.isolation,
                "seed": self.seed,
                "manual_points_pending": MANUAL_POINTS,
                "grader_version": grader_version(),
                "checks_version": CHECKS_VERSION,
            },
        }

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GradeReport:
        checks = [CheckResult(**check) for check in data.get("checks", [])]
        return cls(**{**data, "checks": checks})
