"""Hidden grading checks, one pytest module per exercise (never released to students).

A check is a pytest test decorated with `@check(points=..., grade_id=...)`: its points count
towards the nbgrader grade cell `grade_id`, and the points of an exercise's checks sum to 8.
Checks talk to the notebook only through the `submission` fixture, compute expected values
from `reference/` here in the parent, and fail through `autograder.authoring.expect`.
"""

import pytest


def check(
    *,
    points: float,
    grade_id: str,
    requires: tuple[str, ...] = (),
    upstream: tuple[str, ...] = (),
) -> pytest.MarkDecorator:
    """Mark a grading check with its points and the grade cell it counts towards.

    `requires` names the checks that prove the function does its job: this check's points are
    paid only when those pass too (a constraint such as "NumPy only" or "eval mode", or a
    property that a stub returning zeros would have, pays nothing on its own).

    `upstream` names the checks of the student functions this one is built on: where it passes
    only on the student's own upstream code (`authoring.upstream`), it is paid only when one of
    those fails, so that a fault is charged once and never forgiven where none is charged."""
    return pytest.mark.check(
        points=points, grade_id=grade_id, requires=tuple(requires), upstream=tuple(upstream)
    )
