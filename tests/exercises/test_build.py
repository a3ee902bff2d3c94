"""Built notebooks: valid for nbformat and nbgrader, identical structure in en and ko, and a
release that carries no reference code."""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

from autograder.core.registry import reference_module
from autograder.core.results import AUTO_POINTS, MANUAL_POINTS
from autograder.notebooks import solutions
from autograder.notebooks.cells import TemplateError, parse_cells
from autograder.notebooks.render import render_cells
from tests.conftest import exercise_params, source_notebook

HANGUL = re.compile(r"[\uac00-\ud7a3]")


def structure(cells):
    return [(c.role, c.grade_id, c.points, c.source if c.is_code else None) for c in cells]


@pytest.mark.parametrize("exercise", exercise_params())
def test_source_notebook_is_valid_for_nbformat_and_nbgrader(exercise):
    notebook = source_notebook(exercise)
    nbformat.validate(notebook)
    MetadataValidatorV3().validate_nb(notebook)
    assert notebook.metadata["attn_grade"]["exercise"] == exercise


@pytest.mark.parametrize("exercise", exercise_params())
def test_points_are_8_auto_and_2_manual(exercise):
    cells = render_cells(exercise)
    assert sum(c.points for c in cells if c.role == "check") == AUTO_POINTS
    assert [c.points for c in cells if c.role == "answer"] == [MANUAL_POINTS]


@pytest.mark.parametrize("exercise", exercise_params())
def test_one_solution_cell_per_contract_name(exercise):
    names = solutions.public_names(reference_module(exercise))
    cells = [c.grade_id for c in render_cells(exercise) if c.role == "solution"]
    assert sorted(cells) == sorted(names)


@pytest.mark.parametrize("exercise", exercise_params())
def test_en_and_ko_have_identical_cells_except_prose(exercise):
    english, korean = render_cells(exercise, "en"), render_cells(exercise, "ko")
    assert structure(english) == structure(korean)
    prose = [c.source for c in korean if not c.is_code]
    assert all(HANGUL.search(text) for text in prose), "every Korean prose cell has Hangul"
    assert not any(HANGUL.search(c.source) for c in english)


@pytest.mark.parametrize("exercise", exercise_params())
def test_release_holds_no_reference_code(exercise, release_of):
    release = json.loads(release_of(exercise).read_text())
    text = "\n".join(
        "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for cell in release["cells"]
    )
    lines = {line.strip() for line in text.splitlines()}
    leaked = solutions.hidden_body_lines(reference_module(exercise)) & lines
    assert not leaked, leaked
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN", "MARK SCHEME"):
        assert marker not in text
    model_answer = next(c.source for c in render_cells(exercise) if c.role == "answer")
    assert model_answer.splitlines()[0] not in text
    stubs = [c for c in release["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
    code_stubs = [c for c in stubs if c["cell_type"] == "code"]
    assert code_stubs and all(
        "raise NotImplementedError()" in "".join(c["source"]) for c in code_stubs
    )


def test_template_format_errors_are_reported():
    with pytest.raises(TemplateError, match="duplicate grade ids"):
        parse_cells("#%% solution f\nx\n#%% solution f\ny\n")
    with pytest.raises(TemplateError, match="points belong"):
        parse_cells("#%% solution f points=2\nx\n")
    with pytest.raises(TemplateError, match="malformed"):
        parse_cells("#%% solution f g h\n")
    with pytest.raises(TemplateError, match="needs a grade id"):
        parse_cells("#%% check\nx\n")


@pytest.mark.parametrize("exercise", exercise_params())
def test_committed_source_notebooks_are_current(exercise):
    """assignments/source holds the built English notebooks; rebuild after changing a template
    or a reference (`attn-grade build`)."""
    from autograder.core.registry import PROJECT_ROOT
    from autograder.course.build import source_notebook_path

    committed = source_notebook_path(PROJECT_ROOT / "assignments", exercise)
    assert committed.exists(), "run `attn-grade build` and commit assignments/source"
    assert nbformat.read(committed, as_version=4) == source_notebook(exercise)


@pytest.mark.parametrize("exercise", exercise_params())
def test_cell_roles_without_code_match_the_full_render(exercise):
    """Grading reads the cell roles from a render without reference code (no torch import)."""
    from autograder.notebooks.render import cell_roles

    full = {c.grade_id: c.role for c in render_cells(exercise) if c.grade_id}
    assert cell_roles(exercise) == full


@pytest.mark.parametrize("exercise", exercise_params())
def test_rendering_reads_the_reference_without_running_it(exercise, monkeypatch):
    """`attn-grade build` renders from the reference's source (about 2 s of torch import
    saved): the notebook equals one rendered from the imported module, `GIVEN` included, and
    no reference module (nor torch) is imported by rendering."""
    import subprocess
    import sys

    from autograder.notebooks.render import render_text

    probe = (
        "import sys\nfrom autograder.notebooks.render import render_text\n"
        f"render_text({exercise!r}, 'ko')\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.endswith('.reference')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    from_source = render_text(exercise, "ko")
    monkeypatch.setattr("autograder.notebooks.render.reference_source", reference_module)
    assert render_text(exercise, "ko") == from_source
