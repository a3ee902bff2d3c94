"""The cause, not the symptom (issue 20): when a solution cell fails to compile or raises, every
check of what it should have defined says why, naming the cell as the pages number it."""

from __future__ import annotations

import re

import pytest

from autograder.grading.budget import Budget
from autograder.grading.causes import cell_failure, explain_undefined
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook

EX2 = "ex2_attention_heatmap"
MHA_CHECKS = [
    "test_mha_matches_reference_with_its_own_weights",
    "test_mha_bool_mask_blocks_positions",
    "test_mha_output_and_weight_shapes",
]


def reference_source(exercise: str, grade_id: str) -> str:
    (cell,) = [
        c
        for c in source_notebook(exercise).cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    ]
    return cell.source


def cell_number(notebook, grade_id: str) -> int:
    """The 1-based position of the cell among all cells (as the pages and messages count)."""
    for index, cell in enumerate(notebook.cells, start=1):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return index
    raise AssertionError(grade_id)


def broken(source: str, line: int) -> str:
    """`source` with the colon at the end of line `line` (a `def`/`class` line) removed."""
    lines = source.splitlines()
    assert lines[line - 1].rstrip().endswith(":"), lines[line - 1]
    lines[line - 1] = lines[line - 1].rstrip()[:-1]
    return "\n".join(lines)


@pytest.mark.ex2
def test_a_syntax_error_is_the_cause_in_every_check(tmp_path):
    source = reference_source(EX2, "MultiHeadAttention")
    line = next(
        i
        for i, text in enumerate(source.splitlines(), start=1)
        if text.strip().startswith("if mask is not None")
    )
    notebook = source_notebook(EX2, replace={"MultiHeadAttention": broken(source, line)})
    number = cell_number(notebook, "MultiHeadAttention")
    lines = len(source.splitlines())
    report = grade_notebook(write_notebook(notebook, tmp_path / f"{EX2}.ipynb"), only=MHA_CHECKS)
    expected = re.compile(
        rf"`MultiHeadAttention` is not defined because its cell \(cell {number}, "
        rf"lines 1-{lines}\) has a SyntaxError at line {line}: "
    )
    assert len(report.checks) == len(MHA_CHECKS)
    for check in report.checks:
        assert not check.passed
        assert expected.match(check.message), check.message
    notes = [m for m in report.messages if "SyntaxError" in m]
    assert notes == [notes[0]] and notes[0].startswith(f"cell {number} (MultiHeadAttention) has")
    assert "cell cell" not in " ".join(report.messages)


@pytest.mark.ex2
def test_an_exception_is_the_cause_too(tmp_path):
    """A cell that raises before its definition: the line where it raised is given."""
    source = "import nonexistent_module_of_the_student\n" + reference_source(
        EX2, "MultiHeadAttention"
    )
    notebook = source_notebook(EX2, replace={"MultiHeadAttention": source})
    number = cell_number(notebook, "MultiHeadAttention")
    report = grade_notebook(
        write_notebook(notebook, tmp_path / f"{EX2}.ipynb"), only=MHA_CHECKS[:1]
    )
    (check,) = report.checks
    assert check.message.startswith(
        f"`MultiHeadAttention` is not defined because its cell (cell {number}, lines 1-"
    ), check.message
    assert "raised a ModuleNotFoundError at line 1" in check.message


def test_only_names_the_failed_cell_defines_are_explained():
    failure = cell_failure(
        "cell 4 (f)",
        "x: int = 1\ndef f(a)\n    return a\nclass G:\n    pass\n",
        {"type": "SyntaxError", "message": "expected ':'", "line": 2},
    )
    assert failure.defines == {"x", "f", "G"}
    assert explain_undefined("f raised NameError: name 'f' is not defined", [failure]) == (
        "`f` is not defined because its cell (cell 4, lines 1-6) has a SyntaxError at line 2: "
        "expected ':'"
    )
    other = "g raised NameError: name 'g' is not defined"
    assert explain_undefined(other, [failure]) == other


@pytest.mark.parametrize("line", [0, -3, 99, "2", True, None, 2.0])
def test_an_untrusted_line_is_dropped(line):
    failure = cell_failure("cell 1", "a = 1\nb = 2\n", {"type": "ValueError", "line": line})
    assert failure.line is None


EX1 = "ex1_numpy_attention"
HANGING_SOFTMAX = "def softmax(x, axis=-1):\n    while True:\n        pass\n"
SHORT = Budget(cell_timeout=4.0, call_timeout=4.0, total_seconds=120.0)
# Only the student's endless cell may run out of time: ex1's own cells and the checks' calls get
# room for a loaded CI machine (a 4 s call limit failed one check there once, 1 run in 7).
PAST_ITS_TIME = Budget(cell_timeout=8.0, total_seconds=120.0)


@pytest.mark.ex1
def test_one_hang_one_budget(tmp_path):
    """A softmax that never returns hangs once: the functions that call it then fail at once
    (the reason in their message), and a demo cell that calls it is skipped with a note."""
    notebook = source_notebook(EX1, replace={"softmax": HANGING_SOFTMAX})
    path = write_notebook(notebook, tmp_path / f"{EX1}.ipynb")
    report = grade_notebook(path, budget=SHORT, demos=True)
    hangs = [m for m in report.messages if "no answer within" in m]
    assert len(hangs) == 1 and "softmax()" in hangs[0], report.messages
    by_name = {check.name: check for check in report.checks}
    sdpa = by_name["test_sdpa_single_head_matches_reference"]
    assert not sdpa.passed
    assert "softmax() was not run again: it stopped the notebook's process" in sdpa.message
    assert by_name["test_score_variance_close_to_d_k_and_one"].passed
    texts = [str(output) for outputs in report.displays.values() for output in outputs]
    assert any("not run: it calls softmax()" in text for text in texts), texts
    assert not any("no answer within" in text for text in texts), texts


@pytest.mark.ex1
def test_a_student_cell_past_its_time_is_a_note_not_the_status(tmp_path):
    notebook = with_student_cells(source_notebook(EX1), "while True:\n    pass\n")
    number = len(notebook.cells)
    path = write_notebook(notebook, tmp_path / f"{EX1}.ipynb")
    report = grade_notebook(path, budget=PAST_ITS_TIME)
    assert report.status == "ok" and all(check.passed for check in report.checks)
    notes = [m for m in report.messages if f"cell {number}" in m]
    assert len(notes) == 1 and "stopped the notebook's process (timeout" in notes[0], notes
    assert all(not check.message for check in report.checks)
