"""The shared check helpers: heatmaps read from `figure_summary`, expect_raises, and catalogued
wrong classes run on given weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from autograder._reference import ex4_gqa_analysis as ref4
from autograder.authoring import figures
from autograder.authoring.catalogue import Raised, catalogue_for
from autograder.authoring.expect import CheckFailed, expect_raises
from autograder.authoring.modules import module_output, module_outputs, without_raised
from autograder.grading.submission import StudentError
from autograder.sandbox.inside.probes import figure_summary

WEIGHTS = np.random.default_rng(0).dirichlet(np.ones(4), size=4)
TOKENS = ["w", "x", "y", "z"]


def main_axes(figure: Figure) -> tuple[dict, dict]:
    return figures.heatmap_of(figure_summary(figure))


def test_ticks_pair_locations_with_the_labels_shown():
    figure = Figure()
    axes = figure.add_subplot()
    image = axes.matshow(WEIGHTS)  # labels on top only (label2)
    axes.set_xticks(range(4), TOKENS)
    axes.set_yticks(range(4), TOKENS)
    figure.colorbar(image)
    for tick in axes.yaxis.get_major_ticks()[::2]:  # mixed sides on one axis
        tick.label1.set_visible(False)
        tick.label2.set_visible(True)
    summary, mappable = main_axes(figure)
    assert figures.ticks_of(summary, "x") == list(zip([0.0, 1.0, 2.0, 3.0], TOKENS, strict=True))
    assert [label for _, label in figures.ticks_of(summary, "y")] == TOKENS
    assert figures.has_colorbar(figure_summary(figure), mappable)


def test_ticks_outside_the_limits_are_dropped_and_hidden_labels_are_empty():
    figure = Figure()
    axes = figure.add_subplot()
    axes.imshow(WEIGHTS)
    axes.set_xticks([-3, 0, 1, 2, 3, 9], ["out", *TOKENS, "far"])
    axes.set_xlim(-0.5, 3.5)
    axes.tick_params(labelleft=False)
    summary, _ = main_axes(figure)
    assert [label for _, label in figures.ticks_of(summary, "x")] == TOKENS
    assert {label for _, label in figures.ticks_of(summary, "y")} == {""}


@pytest.mark.parametrize("kind", ["imshow_lower", "pcolormesh", "imshow_extent"])
def test_cell_grid_shows_the_matrix_as_on_screen(kind):
    figure = Figure()
    axes = figure.add_subplot()
    if kind == "imshow_lower":
        axes.imshow(WEIGHTS, origin="lower")
    elif kind == "pcolormesh":
        axes.pcolormesh(WEIGHTS)
    else:
        axes.imshow(WEIGHTS[::-1], extent=(-1.0, 7.0, 0.0, 12.0))
    _, mappable = main_axes(figure)
    grid, xs, ys = figures.cell_grid(mappable, 4)
    assert figures.orientation(grid, WEIGHTS) == (False, False)  # row 0 has the smallest y
    assert figures.orientation(grid, WEIGHTS.T) is None
    centres = np.arange(4.0) + (0.0 if kind == "imshow_lower" else 0.5)
    if kind == "imshow_extent":
        centres_x, centres_y = 2 * centres - 1, 3 * centres
    else:
        centres_x, centres_y = centres, centres
    # centres are found up to 1e-6 of the axis span (cells are told apart by rounding)
    np.testing.assert_allclose(xs, centres_x, atol=1e-5 * np.ptp(centres_x) + 1e-12)
    np.testing.assert_allclose(ys, centres_y, atol=1e-5 * np.ptp(centres_y) + 1e-12)
    width = centres_x[1] - centres_x[0]
    assert figures.tick_placement([(c, "") for c in centres_x], xs) == "centres"
    assert figures.tick_placement([(c + width / 2, "") for c in centres_x], xs) == "edges"
    assert figures.tick_placement([(c, "") for c in centres_x[:-1]], xs) is None


def test_heatmap_of_wants_exactly_one_heatmap():
    figure = Figure()
    axes = figure.add_subplot()
    axes.imshow(WEIGHTS)
    axes.imshow(WEIGHTS)
    with pytest.raises(CheckFailed, match="plot_attention's figure should hold one heatmap"):
        figures.heatmap_of(figure_summary(figure), "plot_attention's figure")


class FakeSubmission:
    """Calls the given implementation; its exceptions come back as StudentErrors."""

    def __init__(self, implementation):
        self.implementation = implementation

    def call(self, name, *args, **kwargs):
        try:
            return self.implementation(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - the student's error, as the sandbox reports it
            raise StudentError(
                name, {"type": type(error).__name__, "message": str(error)}
            ) from None


def fails_with(implementation, catalogue, target, *args) -> CheckFailed:
    with pytest.raises(CheckFailed) as caught:
        expect_raises(FakeSubmission(implementation), catalogue, target, "ValueError", *args)
    return caught.value


def test_expect_raises_names_the_mistake_that_behaves_the_same():
    gqa = catalogue_for("ex4_gqa_analysis")
    right = FakeSubmission(ref4.GroupedQueryAttention)
    expect_raises(right, gqa, "GroupedQueryAttention", "ValueError", 37, 6, 1)
    wrong = gqa["assert_not_value_error"].bound("ex4_gqa_analysis")
    failure = fails_with(wrong, gqa, "GroupedQueryAttention", 37, 6, 1)
    assert failure.mistake.id == "assert_not_value_error"
    assert "GroupedQueryAttention(37, 6, 1) should raise ValueError; instead" in failure.message
    mha = catalogue_for("ex2_attention_heatmap")
    failure = fails_with(lambda *args: object(), mha, "MultiHeadAttention", 13, 3)
    assert failure.mistake.id == "no_divisibility_check"  # the one mistake that returns
    assert failure.message.endswith("but it returned a object")

    def other(*args):
        raise RuntimeError("no")

    assert fails_with(other, gqa, "GroupedQueryAttention", 37, 6, 1).mistake is None


def test_expect_raises_lets_an_unfilled_stub_say_so():
    def stub(*args):
        raise NotImplementedError()

    gqa = catalogue_for("ex4_gqa_analysis")
    with pytest.raises(StudentError, match="not implemented yet"):
        expect_raises(FakeSubmission(stub), gqa, "GroupedQueryAttention", "ValueError", 37, 6, 1)


def test_module_outputs_run_every_class_mistake_on_the_given_weights():
    sizes = (12, 6, 2)
    module = ref4.GroupedQueryAttention(*sizes)
    weights = {key: value.detach().clone() for key, value in module.state_dict().items()}
    x = torch.randn(2, 5, 12)

    def run(module):
        return module(x.double()).numpy()

    expected = module_output(ref4.GroupedQueryAttention, sizes, weights, run)
    np.testing.assert_allclose(expected, module(x).detach().numpy(), atol=1e-5)
    catalogue = catalogue_for("ex4_gqa_analysis")
    pairs = module_outputs(catalogue, "GroupedQueryAttention", sizes, weights, run)
    outcomes = {mistake.id: output for mistake, output in pairs}
    # without a mask, and with sizes that divide, these give the reference's answer: they
    # explain no wrong answer here and are left out
    same = {
        "mask_polarity_reversed",
        "mask_ignored",
        "assert_not_value_error",
        "mask_heads_in_kv_order",
    }
    ids = [m.id for m in catalogue.for_target("GroupedQueryAttention")]
    assert same <= set(ids) and list(outcomes) == [i for i in ids if i not in same]
    # its W_k has query-head width: the student's weights do not fit
    raised = outcomes["kv_projections_use_query_heads"]
    assert isinstance(raised, Raised) and raised.type == "RuntimeError"
    assert "size mismatch" in raised.message
    scaled = outcomes["no_head_dim_scaling"]
    assert scaled.shape == expected.shape and not np.allclose(scaled, expected)
    ran = [mistake.id for mistake, _ in without_raised(pairs)]
    assert ran == [key for key, output in outcomes.items() if not isinstance(output, Raised)]
    assert "kv_projections_use_query_heads" not in ran


def test_a_mistake_giving_the_references_answer_is_no_candidate():
    """ex7's `default_is_one_kv_head` is the reference whenever n_kv_heads is given: it was
    named for a wrong answer that happened to equal the reference's (an independent student's
    view without a transpose)."""
    import torch

    from autograder._reference import ex7_kv_cache as reference
    from autograder.authoring.catalogue import catalogue_for
    from autograder.authoring.modules import module_outputs

    sizes = (12, 6, 2)
    state = reference.CachedSelfAttention(*sizes).state_dict()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    catalogue = catalogue_for("ex7_kv_cache")
    found = module_outputs(catalogue, "CachedSelfAttention", sizes, state, lambda m: m(x).numpy())
    names = {mistake.id for mistake, _ in found}
    assert "default_is_one_kv_head" not in names
    assert "rope_on_values" in names  # a real difference stays a candidate


def test_a_tensor_numpy_cannot_hold_fails_the_check_instead_of_the_grader():
    """A bfloat16 answer reached the instructor's internal-error log (an attacker's find)."""
    import pytest
    import torch

    from autograder.authoring.expect import as_array
    from autograder.core.errors import CheckFailed

    with pytest.raises(CheckFailed, match="bfloat16"):
        as_array(torch.zeros(3, dtype=torch.bfloat16), "f()", allow=("tensor",))


def test_a_raised_outcome_matches_an_error_of_the_same_class_and_message_only():
    from autograder.core.errors import StudentError

    outcome = Raised("ValueError", "operands could not be broadcast together")
    same = StudentError("f()", {"type": "ValueError", "message": outcome.message})
    other = StudentError("f()", {"type": "ValueError", "message": "matmul: mismatch"})
    renamed = StudentError("f()", {"type": "TypeError", "message": outcome.message})
    assert outcome.matches(same)
    assert not outcome.matches(other) and not outcome.matches(renamed)
