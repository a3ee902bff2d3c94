"""A fault of ex6's apply_rope (or of the rope_frequencies it calls) is charged to their own
checks: RoPEAttention and relative_scores, correct in the same notebook, keep the points of
their formula checks (they are also compared with the reference computed with the notebook's
own apply_rope)."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.exercises.test_fake_stubs import checks_of
from tests.support.cascades import failed_downstream

pytestmark = pytest.mark.ex6
EXERCISE = "ex6_rope"
UPSTREAM = ("apply_rope", "rope_frequencies")
DOWNSTREAM = (
    "test_rope_attention_matches_the_reference_on_its_weights",
    "test_relative_scores_match_the_formula",
)
# Faults the downstream checks never see (offset 0 everywhere; an odd head_dim never built), and
# one that rotates each batch element's rows by one angle: attention scores are then those
# without RoPE, which cannot be told from an attention that never calls apply_rope (so it is
# not forgiven, see test_an_apply_rope_that_rotates_nothing_forgives_nothing)
UNSEEN = {"offset_ignored", "odd_head_dim_accepted", "positions_along_the_wrong_axis"}


@pytest.mark.parametrize(
    "mistake_id",
    [m.id for m in catalogue_for(EXERCISE) if m.target in UPSTREAM and m.id not in UNSEEN],
)
def test_an_upstream_fault_costs_rope_attention_and_relative_scores_nothing(
    mistake_id, tmp_path, shared_sandbox
):
    failed = failed_downstream(EXERCISE, mistake_id, list(DOWNSTREAM), tmp_path, shared_sandbox)
    assert not failed, failed


NO_ROTATION = "def apply_rope(x, offset=0, base=10000.0):\n    return x.clone()\n"
ATTENTION_WITHOUT_ROPE = """
_Right = RoPEAttention
class RoPEAttention(_Right):
    def forward(self, x, causal=True):
        global apply_rope
        saved, apply_rope = apply_rope, lambda t, offset=0, base=10000.0: t
        try:
            return super().forward(x, causal)
        finally:
            apply_rope = saved
"""


def test_an_apply_rope_that_rotates_nothing_forgives_nothing(tmp_path, shared_sandbox):
    """Where the notebook's apply_rope changes nothing, an attention without RoPE would equal
    "the reference with their rope": it must still lose its points."""
    notebook = with_student_cells(
        source_notebook(EXERCISE, replace={"apply_rope": NO_ROTATION}), ATTENTION_WITHOUT_ROPE
    )
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    check = DOWNSTREAM[0]
    report = grade_notebook(path, only=[check], shared=shared_sandbox.get())
    (result,) = report.checks
    assert not result.passed and "wrong values for RoPEAttention" in result.message, result


def test_downstream_checks_exist():
    assert set(DOWNSTREAM) <= set(
        checks_of(EXERCISE, "RoPEAttention") + checks_of(EXERCISE, "relative_scores")
    )


# apply_rope is built on rope_frequencies: a wrong frequency formula is charged to
# rope_frequencies' checks only (apply_rope is also compared with the reference's computed with
# the notebook's own frequencies; an independent review found 3.0 points charged twice).
ROTATION = (
    "test_apply_rope_matches_the_formula",
    "test_apply_rope_offset_continues_the_positions",
    "test_apply_rope_float32_in_float32_out",
    "test_apply_rope_keeps_every_pair_norm",
    "test_apply_rope_scores_depend_only_on_the_distance",
)


@pytest.mark.parametrize(
    "mistake_id",
    [
        m.id
        for m in catalogue_for(EXERCISE)
        if m.target == "rope_frequencies" and m.id not in UNSEEN
    ],
)
def test_a_frequency_fault_costs_apply_rope_nothing(mistake_id, tmp_path, shared_sandbox):
    failed = failed_downstream(EXERCISE, mistake_id, list(ROTATION), tmp_path, shared_sandbox)
    assert not failed, failed


ZERO_FREQUENCIES = (
    "import torch\ndef rope_frequencies(head_dim, base=10000.0):\n"
    "    if head_dim % 2:\n        raise ValueError('odd')\n"
    "    return torch.zeros(head_dim // 2, dtype=torch.float64)\n"
)


WHOLE_TURNS = ZERO_FREQUENCIES.replace(
    "torch.zeros(head_dim // 2, dtype=torch.float64)",
    "torch.full((head_dim // 2,), 2 * torch.pi, dtype=torch.float64)",
)
assert WHOLE_TURNS != ZERO_FREQUENCIES


@pytest.mark.parametrize("frequencies", ["zeros", "whole-turns", "float32"])
def test_frequencies_that_excuse_nothing(frequencies, tmp_path, shared_sandbox):
    """Frequencies of 0 or of 2*pi (every angle 0, or a whole turn at integer positions) do not
    pay an apply_rope that rotates nothing; float32 frequencies pass their own check, so
    apply_rope keeps float64 precision itself (named)."""
    if frequencies == "zeros":
        replace = {"rope_frequencies": ZERO_FREQUENCIES, "apply_rope": NO_ROTATION}
    elif frequencies == "whole-turns":
        replace = {"rope_frequencies": WHOLE_TURNS, "apply_rope": NO_ROTATION}
    else:
        replace = {"apply_rope": catalogue_for(EXERCISE)["float32_frequencies"].source}
    notebook = source_notebook(EXERCISE, replace=replace)
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    check = "test_apply_rope_matches_the_formula"
    report = grade_notebook(path, only=[check], shared=shared_sandbox.get())
    (result,) = report.checks
    assert not result.passed, result
    if frequencies == "float32":
        assert result.mistake == "float32_frequencies", result


# An independent attacker's notebook: frequencies 1e-7 times the formula's (costing 1.0) and an
# apply_rope computed in float32 (the catalogued float32_frequencies); with angles that small,
# cos rounds to 1 in float32, and apply_rope matched the reference on its own frequencies.
TINY_FREQUENCIES = (
    "import torch\ndef rope_frequencies(head_dim, base=10000.0):\n"
    "    if head_dim % 2:\n        raise ValueError('odd')\n"
    "    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)\n"
    "    return theta * (1e-7 if head_dim > 2 else 1e-12)\n"
)
FLOAT32_ROTATION = """
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base).float()
    positions = torch.arange(offset, offset + x.shape[-2]).float()
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
"""


def test_frequencies_too_small_to_rotate_excuse_nothing(tmp_path, shared_sandbox):
    replace = {"rope_frequencies": TINY_FREQUENCIES, "apply_rope": FLOAT32_ROTATION}
    notebook = source_notebook(EXERCISE, replace=replace)
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    checks = [
        "test_apply_rope_matches_the_formula",
        "test_apply_rope_offset_continues_the_positions",
        "test_apply_rope_float32_in_float32_out",
    ]
    report = grade_notebook(path, only=checks, shared=shared_sandbox.get())
    assert len(report.checks) == 3 and not any(c.passed for c in report.checks), report.checks
