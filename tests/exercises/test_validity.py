"""Grading validity: the exercise comes from the trusted side, hidden inputs follow the code,
a hang costs only the checks that need the function, tampering with the runtime is never paid,
NaN never equals anything, and a constraint pays nothing alone."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from autograder.authoring.expect import close, distinguish, within
from autograder.core.registry import reference_module
from autograder.core.status import Status
from autograder.grading.budget import Budget
from autograder.grading.notebook import ProgramCell
from autograder.grading.runner import (
    UnknownExercise,
    choose_exercise,
    grade_notebook,
    submission_seed,
)
from tests.conftest import source_notebook, with_student_cells, write_notebook

EX1 = "ex1_numpy_attention"


# -- NaN and infinity ----------------------------------------------------------------------------
def test_nan_and_inf_never_compare_equal():
    assert not close([np.nan], [np.nan], atol=1e-6, rtol=1e-5)
    assert not close([np.inf], [np.inf], atol=1e-6, rtol=1e-5)
    assert not close([1.0, np.nan], [1.0, 2.0], atol=1e-6, rtol=1e-5)
    # naming (never paying) may see NaN in the same places as agreeing, beside a finite match
    assert close([1.0, np.nan], [1.0, np.nan], atol=1e-6, rtol=1e-5, same_nan=True)
    assert not close([np.nan, np.nan], [np.nan, np.nan], atol=1e-6, rtol=1e-5, same_nan=True)
    assert not close([1.0, np.nan], [np.nan, 1.0], atol=1e-6, rtol=1e-5, same_nan=True)
    assert not close([1.0, np.nan], [1.0, np.nan], atol=1e-6, rtol=1e-5)
    assert close([0.0, -np.inf], [0.0, -np.inf], atol=0, rtol=0, allow_inf=True)
    assert not close([0.0, np.inf], [0.0, -np.inf], atol=0, rtol=0, allow_inf=True)
    assert not within(float("nan"), float("nan"), 1e-9)
    assert not within(float("inf"), float("inf"), 1e-9)
    assert within(1.0, 1.0 + 1e-12, 1e-9)


def test_messages_show_enough_digits_to_differ():
    got, expected = distinguish(3.391541, 3.391542)
    assert got != expected and "3.391541" == got


# -- the exercise --------------------------------------------------------------------------------
def test_file_name_decides_never_the_metadata_alone(tmp_path):
    notebook = json.loads(json.dumps(source_notebook("ex4_gqa_analysis")))
    with pytest.raises(UnknownExercise):
        choose_exercise(tmp_path / "notebook.ipynb", notebook, None)
    assert choose_exercise(tmp_path / "ex1_numpy_attention.ipynb", notebook, None) == EX1
    assert choose_exercise(tmp_path / "notebook.ipynb", notebook, "ex2") == "ex2_attention_heatmap"


@pytest.mark.ex1
def test_finished_ex4_saved_as_ex1_is_graded_as_ex1(tmp_path):
    path = write_notebook(source_notebook("ex4_gqa_analysis"), tmp_path / f"{EX1}.ipynb")
    report = grade_notebook(path, only=["test_softmax_matches_reference"])
    assert report.exercise == EX1 and report.score == 0
    assert any("metadata says this notebook is for ex4_gqa_analysis" in m for m in report.messages)


@pytest.mark.ex1
def test_metadata_claiming_another_exercise_is_graded_as_the_trusted_one(tmp_path):
    notebook = source_notebook(EX1)
    notebook.metadata["attn_grade"]["exercise"] = "ex4_gqa_analysis"
    path = write_notebook(notebook, tmp_path / "mine.ipynb")
    report = grade_notebook(path, exercise="ex1", only=["test_softmax_matches_reference"])
    assert report.status == Status.OK and report.score == 0.5
    assert any("graded as ex1_numpy_attention" in m for m in report.messages)


# -- hidden inputs -------------------------------------------------------------------------------
def test_hidden_inputs_follow_exercise_student_and_code():
    program = [ProgramCell("cell 1", "x = 1\n")]
    changed = [ProgramCell("cell 1", "x = 1  # resubmitted\n")]
    seed = submission_seed(EX1, "ada", program)
    assert seed == submission_seed(EX1, "ada", list(program))
    assert seed != submission_seed(EX1, "ada", changed)
    assert seed != submission_seed(EX1, "bob", program)
    assert seed != submission_seed("ex4_gqa_analysis", "ada", program)


@pytest.mark.ex1
def test_regrade_identical_and_changed_code_gets_new_inputs(tmp_path):
    only = ["test_sdpa_single_head_matches_reference"]
    wrong = (
        "def softmax(x, axis=-1):\n    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)\n"
    )
    notebook = source_notebook(EX1, replace={"softmax": wrong})
    path = write_notebook(notebook, tmp_path / "a" / f"{EX1}.ipynb")
    first = grade_notebook(path, student="ada", only=only)
    again = grade_notebook(path, student="ada", only=only)
    assert first.seed == again.seed
    assert [c.message for c in first.checks] == [c.message for c in again.checks]
    resubmitted = with_student_cells(notebook, "# the same answers, resubmitted")
    other = grade_notebook(
        write_notebook(resubmitted, tmp_path / "b" / f"{EX1}.ipynb"), student="ada", only=only
    )
    assert other.seed != first.seed and other.checks[0].seed != first.checks[0].seed
    regrade = grade_notebook(path, student="someone", seed=first.seed, only=only)
    assert regrade.seed == first.seed
    assert [c.message for c in regrade.checks] == [c.message for c in first.checks]


# -- a hang --------------------------------------------------------------------------------------
@pytest.mark.ex1
def test_hang_in_softmax_costs_only_the_checks_that_need_it(tmp_path):
    endless = "def softmax(x, axis=-1):\n    while True:\n        pass\n"
    notebook = source_notebook(EX1, replace={"softmax": endless})
    path = write_notebook(notebook, tmp_path / f"{EX1}.ipynb")
    report = grade_notebook(path, budget=Budget(call_timeout=3.0, cell_timeout=10.0))
    passed = {c.name for c in report.checks if c.passed}
    # max_abs_diff_vs_torch is checked with a stub in place of the student's attention (so
    # without the stuck softmax): its half point is earned
    assert passed == {
        "test_make_qkv_shapes_and_dtype",
        "test_make_qkv_seeded_standard_normal",
        "test_max_abs_diff_compares_with_torch",
        "test_score_variance_close_to_d_k_and_one",
        "test_score_variance_uses_its_arguments",
    }
    assert report.score == 3.0


# -- tampering -----------------------------------------------------------------------------------
FORGED_PROBE = """
import probes
probes.PROBES["figure_summary"] = lambda figure: {"axes": []}
"""
PATCHED_PROBE = """
import sys
sys.modules["module_probes"].module_summary.__code__ = (lambda module: {}).__code__
"""


@pytest.mark.ex2
@pytest.mark.parametrize("forgery", [FORGED_PROBE, PATCHED_PROBE], ids=["replaced", "patched"])
def test_tampering_with_the_runtime_is_detected_and_never_paid(forgery, tmp_path):
    exercise = "ex2_attention_heatmap"
    notebook = with_student_cells(source_notebook(exercise), forgery)
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, only=["test_tokenize_lowercases_and_removes_punctuation"])
    assert report.status == Status.TAMPERED
    assert report.score == 0
    assert all("replaced or patched the grader's runtime" in c.message for c in report.checks)
    assert any("replaced or patched the grader's runtime" in m for m in report.messages)
    assert report.to_gradescope()["extra_data"]["status"] == "tampered"


# -- one mistake, one deduction ------------------------------------------------------------------
@pytest.mark.ex2
def test_wrong_vocabulary_costs_only_the_vocabulary_check(tmp_path):
    exercise = "ex2_attention_heatmap"
    off_by_one = (
        "def build_vocab(tokens):\n"
        "    return {t: i + 1 for i, t in enumerate(dict.fromkeys(tokens))}\n"
    )
    notebook = source_notebook(exercise, replace={"build_vocab": off_by_one})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    only = [
        "test_build_vocab_first_appearance_order",
        "test_sentence_attention_shapes_and_rows",
        "test_sentence_attention_is_seeded",
        "test_sentence_attention_same_word_same_weights",
    ]
    report = grade_notebook(path, only=only)
    passed = {c.name: c.passed for c in report.checks}
    assert passed == {name: name != only[0] for name in only}, report.checks


@pytest.mark.ex3
def test_tensor_losses_are_deducted_once(tmp_path):
    """A history of 0-d tensors fails the check of the history's form, not the learning check."""
    exercise = "ex3_transformer_classifier"
    source = inspect.getsource(reference_module(exercise).train_classifier)
    tensors = source.replace("history.append(total / n)", "history.append(torch.tensor(total / n))")
    assert tensors != source
    notebook = source_notebook(exercise, replace={"train_classifier": tensors})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    only = [
        "test_train_classifier_returns_sample_weighted_epoch_losses",
        "test_train_classifier_learns_mean_task",
    ]
    report = grade_notebook(path, only=only)
    passed = {c.name: c.passed for c in report.checks}
    assert passed == {only[0]: False, only[1]: True}, report.checks


@pytest.mark.ex4
def test_report_that_raises_under_the_stub_is_not_paid(tmp_path):
    exercise = "ex4_gqa_analysis"
    source = inspect.getsource(reference_module(exercise).gqa_report)
    marker = "    rows = []\n"
    assert marker in source
    asserting = source.replace(
        marker,
        marker + "    probe = GroupedQueryAttention(d_model, n_heads, n_heads)\n"
        "    assert probe(torch.zeros(1, 1, d_model)).shape[-1] == d_model\n",
    )
    notebook = source_notebook(exercise, replace={"gqa_report": asserting})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, only=["test_gqa_report_output_shape_from_forward_pass"])
    assert not report.checks[0].passed and "it raised instead" in report.checks[0].message
