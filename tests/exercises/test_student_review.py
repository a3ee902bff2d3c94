"""Wrong solutions an independent student wrote against the contract (issue 18 review) that
earned full marks: each now loses the points of the check that tests the broken clause, for
every student (every seed)."""

from __future__ import annotations

import pytest

from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.support.student_cells import tinylm

EX5, EX6, EX7, EX8 = "ex5_causal_mask", "ex6_rope", "ex7_kv_cache", "ex8_additive_attention"
STUDENTS = ("ada", "grace", "alan")  # hidden inputs are seeded from the student id

# "Returns a new tensor of x's shape and dtype; x is not modified."
ROPE_IN_PLACE = """
_rope = apply_rope
def apply_rope(x, offset=0, base=10000.0):
    x.copy_(_rope(x, offset, base))
    return x
"""
# Angles in x's dtype: float32 angles at positions in the thousands miss the contract's 1e-5.
ROPE_FLOAT32_ANGLES = """
def apply_rope(x, offset=0, base=10000.0):
    h = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base).to(x.dtype)
    angles = torch.arange(offset, offset + x.shape[-2], dtype=x.dtype)[:, None] * theta
    cos, sin = torch.cos(angles), torch.sin(angles)
    a, b = x[..., :h], x[..., h:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
"""
# The modules take a base and never pass it on to the rotation.
ROPE_ATTENTION_DEFAULT_BASE = """
_Right = RoPEAttention
class RoPEAttention(_Right):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__(d_model, num_heads)
"""
CACHED_ATTENTION_DEFAULT_BASE = """
_Right = CachedSelfAttention
class CachedSelfAttention(_Right):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__(d_model, n_heads, n_kv_heads)
"""

# TinyLM's forward never hands its cache to attn (generate, correct, then decodes this model
# "right": the fault is TinyLM's, and only a TinyLM check fed through a cache sees it).
TINYLM_DROPS_THE_CACHE = tinylm("""
x = self.embed(tokens)
return self.head(x + self.attn(x))
""")
# "in eval mode without gradients", evaded by measuring on a private copy of the model
ACCURACY_ON_A_COPY = """
import copy
def next_token_accuracy(model, X, Y):
    model = copy.deepcopy(model).eval()
    return (model(X).argmax(dim=-1) == Y).float().mean().item()
"""
POINTER_ACCURACY_ON_A_COPY = """
import copy
def pointer_accuracy(module, annotations, states, targets):
    module = copy.deepcopy(module)
    _, weights = module(annotations, states)
    return float((weights.argmax(dim=-1) == targets).float().mean())
"""


@pytest.mark.parametrize(
    ("exercise", "cell", "check", "words"),
    [
        pytest.param(
            EX6,
            ROPE_IN_PLACE,
            "test_apply_rope_float32_in_float32_out",
            "changed x",
            marks=pytest.mark.ex6,
            id="apply_rope-modifies-x",
        ),
        pytest.param(
            EX6,
            ROPE_FLOAT32_ANGLES,
            "test_apply_rope_float32_in_float32_out",
            "for float32 x",
            marks=pytest.mark.ex6,
            id="apply_rope-float32-angles",
        ),
        pytest.param(
            EX6,
            ROPE_ATTENTION_DEFAULT_BASE,
            "test_rope_attention_matches_the_reference_on_its_weights",
            "RoPEAttention",
            marks=pytest.mark.ex6,
            id="RoPEAttention-ignores-base",
        ),
        pytest.param(
            EX7,
            CACHED_ATTENTION_DEFAULT_BASE,
            "test_cached_attention_matches_the_reference_without_a_cache",
            "CachedSelfAttention",
            marks=pytest.mark.ex7,
            id="CachedSelfAttention-ignores-base",
        ),
        pytest.param(
            EX7,
            TINYLM_DROPS_THE_CACHE,
            "test_tinylm_matches_the_reference_on_its_weights",
            "with one KVCache",
            marks=pytest.mark.ex7,
            id="TinyLM-drops-the-cache",
        ),
        pytest.param(
            EX5,
            ACCURACY_ON_A_COPY,
            "test_next_token_accuracy_matches_predictions",
            "with gradients on",
            marks=pytest.mark.ex5,
            id="next_token_accuracy-copy-with-gradients",
        ),
        pytest.param(
            EX8,
            POINTER_ACCURACY_ON_A_COPY,
            "test_pointer_accuracy_of_a_pointing_module",
            "training mode",
            marks=pytest.mark.ex8,
            id="pointer_accuracy-copy-in-training-mode",
        ),
    ],
)
def test_the_broken_clause_costs_its_check_for_every_student(
    exercise, cell, check, words, tmp_path, shared_sandbox
):
    notebook = with_student_cells(source_notebook(exercise), cell)
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    for student in STUDENTS:
        report = grade_notebook(path, student=student, only=[check], shared=shared_sandbox.get())
        (result,) = report.checks
        assert not result.passed, (student, result)
        assert words in result.message, (student, result.message)


# The hook that sees "eval mode, without gradients" switched off while the function runs: it
# sees no call at all, which is no evidence of the constraint (an independent attacker's find).
HOOKS_CLEARED = """
from torch.nn.modules import module as _module
_real_accuracy = next_token_accuracy
def next_token_accuracy(model, X, Y):
    saved = dict(_module._global_forward_pre_hooks)
    _module._global_forward_pre_hooks.clear()
    try:
        model.eval()
        return (model(X).argmax(dim=-1) == Y).float().mean().item()
    finally:
        _module._global_forward_pre_hooks.update(saved)
"""


@pytest.mark.ex5
def test_switching_the_hook_off_is_no_evidence(tmp_path, shared_sandbox):
    notebook = with_student_cells(source_notebook(EX5), HOOKS_CLEARED)
    path = write_notebook(notebook, tmp_path / f"{EX5}.ipynb")
    check = "test_next_token_accuracy_matches_predictions"
    report = grade_notebook(path, only=[check], shared=shared_sandbox.get())
    (result,) = report.checks
    assert not result.passed and "never called the model" in result.message, result
