"""The late penalty of the final score, hand grades included.

nbgrader's AssignLatePenalties fixes a notebook's late penalty once, at autograde, from the
score at that moment: before any hand grade (in a batch, from a scratch gradebook that has
none), so under `penalty_method = "zero"` a late student kept every hand-graded point, and a
regrade did not change that. `settle_late_penalties` asks the course's own plugin again
(`AssignLatePenalties.plugin_class`: by default nbgrader's LateSubmissionPlugin with its
`penalty_method`) with each late notebook's score now, bounds the answer as nbgrader does
(0 .. the score) and stores it. Every total we show or export settles first: the feedback page
(`feedback.GetGradesAndPending`), `nbgrader export` (`intake.SafeCsvExport`), `attn-grade
lms-grades` and the report; nbgrader's own readers of the stored penalty then agree.
"""

from __future__ import annotations

from collections.abc import Collection


def _penalty_plugin(config):
    """The course's late-penalty plugin, configured as nbgrader's autograde configures it."""
    from nbgrader.preprocessors import AssignLatePenalties

    assign = AssignLatePenalties(config=config)
    assign.init_plugin()
    return assign.plugin_inst


def describe(config) -> str:
    """The course's late-penalty rule in a few words, e.g. "LateSubmissionPlugin,
    penalty_method = zero"."""
    plugin = _penalty_plugin(config)
    method = getattr(plugin, "penalty_method", None)
    name = type(plugin).__name__
    return f"{name}, penalty_method = {method}" if isinstance(method, str) else name


def settle_late_penalties(
    gradebook, config, exercise: str, students: Collection[str] | None = None
) -> int:
    """Recompute and store the late penalty of each of the exercise's submitted notebooks
    (only `students`' when given) from its score now, hand grades included (module doc);
    the number of notebooks whose penalty changed."""
    plugin = None
    changed = 0
    for submission in gradebook.assignment_submissions(exercise):
        student = submission.student.id
        if students is not None and student not in students:
            continue
        late = submission.total_seconds_late
        for notebook in submission.notebooks:
            penalty = None
            if late > 0:
                plugin = plugin or _penalty_plugin(config)
                score = float(notebook.score or 0.0)
                asked = plugin.late_submission_penalty(student, score, late)
                if asked is not None:  # bounded as nbgrader's AssignLatePenalties bounds it
                    penalty = min(max(float(asked), 0.0), score)
            if notebook.late_submission_penalty != penalty:
                notebook.late_submission_penalty = penalty
                changed += 1
    if changed:
        gradebook.db.commit()
    return changed
