# nbgrader configuration of this course, written by `attn-grade build`; rebuilt on every build.
# Edit autograder/build/nbgrader_config.py.j2 instead.
c = get_config()  # noqa: F821

c.CourseDirectory.course_id = "attention-transformers"
c.ClearSolutions.code_stub = {"python": "raise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Deleted grade cells are put back (graded zero) instead of silently missing from the grades.
c.OverwriteCells.add_missing_cells = True

# Autograding runs our sandboxed checks instead of executing the notebook in a kernel.
# RepairSubmission comes first so that a notebook with broken nbgrader metadata is repaired
# (and told so) instead of aborting the whole batch; GradeWithChecks replaces nbgrader's Execute
# and writes each grade cell's messages and points (partial credit) for SaveAutoGrades.
c.Autograde.sanitize_preprocessors = [
    "autograder.nbgrader_bridge.preprocessors.RepairSubmission",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.Autograde.autograde_preprocessors = [
    "autograder.nbgrader_bridge.preprocessors.GradeWithChecks",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
