"""The batch's report reaches nbgrader's GradeWithChecks through the app instance the batch
builds, never through a process-global channel (issue 42): a preprocessor built by another
app, or by plain `nbgrader autograde`, cannot take it, and cannot write over another's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from autograder.batch.recorder import _autograde_app
from autograder.core.results import GradeReport
from autograder.nbgrader_plugins import preprocessors
from autograder.nbgrader_plugins.preprocessors import GradeWithChecks, Handoff

PATH = "autograder.nbgrader_plugins.preprocessors.GradeWithChecks"


def _graders(app) -> list[GradeWithChecks]:
    """The GradeWithChecks instances the app's autograde pass registers (as nbgrader does)."""
    app._sanitizing = False
    app.exporter = app.exporter_class(parent=app, config=app.config)  # as convert_notebooks
    app._init_preprocessors()
    return [pp for pp in app.exporter._preprocessors if isinstance(pp, GradeWithChecks)]


def _app(tmp_path, handoff: Handoff | None, dotted: str = PATH):
    config = Config()
    config.Autograde.autograde_preprocessors = [dotted]
    app = _autograde_app()(coursedir=CourseDirectory(root=str(tmp_path)), config=config)
    app.handoff = handoff
    return app


def test_no_process_global_channel():
    assert not [name for name, value in vars(preprocessors).items() if isinstance(value, Handoff)]


@pytest.mark.parametrize(
    "dotted", [PATH, "autograder.nbgrader_bridge.preprocessors.GradeWithChecks"]
)
def test_each_app_gives_its_own_handoff_to_its_own_preprocessors(tmp_path, dotted):
    first, second = Handoff("k1", {"exercise": "a"}), Handoff("k2", {"exercise": "b"})
    one, two, plain = (
        _app(tmp_path, first, dotted),
        _app(tmp_path, second, dotted),
        _app(tmp_path, None, dotted),
    )
    assert [pp.handoff for pp in _graders(one)] == [first]
    assert [pp.handoff for pp in _graders(two)] == [second]
    assert [pp.handoff for pp in _graders(plain)] == [None]
    # a second pass (nbgrader builds the preprocessors again per pass) gets it again
    assert [pp.handoff for pp in _graders(one)] == [first]


def test_the_report_is_taken_only_by_its_key_and_only_once(monkeypatch):
    graded = GradeReport("ex1_numpy_attention", messages=["graded here"])
    monkeypatch.setattr(preprocessors, "grade_loaded", lambda *a, **k: graded)
    monkeypatch.setattr(preprocessors, "program_of", lambda nb, exercise: SimpleNamespace())
    monkeypatch.setattr(preprocessors, "report_key", lambda exercise, student, loaded: "key")
    offered = GradeReport("ex1_numpy_attention", messages=["offered"]).to_dict()
    grader = GradeWithChecks()
    assert grader._report({}, "ex1_numpy_attention", "s") is graded  # no handoff: grades
    grader.handoff = Handoff("other key", offered)
    assert grader._report({}, "ex1_numpy_attention", "s") is graded  # a mismatch: grades
    grader.handoff = Handoff("key", offered)
    assert grader._report({}, "ex1_numpy_attention", "s").messages == ["offered"]
    assert grader._report({}, "ex1_numpy_attention", "s") is graded  # taken once
