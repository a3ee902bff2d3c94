"""The two generic input classes held-out students found (validity round 4), in every exercise:

- an argument the code ignores in favour of a default: the failed check's message names the
  argument that made no difference (`grading/diagnoses.py`), whichever function it is;
- state that survives between calls: the message says that something was kept between calls
  (the check passes when every call starts from a fresh run of the notebook's cells).

Each variant is wrong only in that way, and is not a catalogued mistake (those are named by the
catalogue, tests/exercises/test_mistakes.py): what is tested is the generic diagnosis."""

from __future__ import annotations

import pytest

from autograder.exercises import short_name
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

ROPE = """
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1]{base})
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
"""

IGNORED = [
    # (exercise, function, its source, the check that fails, the argument it ignores)
    (
        "ex6_rope",
        "apply_rope",
        ROPE.format(base=""),
        "test_apply_rope_matches_the_formula",
        "base",
    ),
    (
        "ex5_causal_mask",
        "discretize_sine",
        """
def discretize_sine(n_points, n_bins=50, period=50.0):
    t = torch.arange(n_points, dtype=torch.float64)
    v = torch.sin(2 * math.pi * t / 50.0)
    return torch.clamp(torch.floor((v + 1) / 2 * n_bins), max=n_bins - 1).long()
""",
        "test_discretize_sine_bins",
        "period",
    ),
    (
        "ex4_gqa_analysis",
        "kv_cache_mib",
        """
def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size) / 2**20
""",
        "test_kv_cache_mib",
        "bytes_per_element",
    ),
    (
        "ex8_additive_attention",
        "make_pointer_task",
        """
def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, 8, dim, generator=generator)
    states = torch.randn(n_samples, dim, generator=generator)
    targets = torch.einsum("nsd,nd->ns", annotations, states).argmax(dim=1)
    return annotations, states, targets
""",
        "test_pointer_task_data",
        "seq_len",
    ),
]

KEPT = [
    # (exercise, function or class, its source, the check that fails)
    (
        "ex2_attention_heatmap",
        "build_vocab",
        """
def build_vocab(tokens, vocab={}):
    for token in tokens:
        if token not in vocab:
            vocab[token] = len(vocab)
    return dict(vocab)
""",
        "test_build_vocab_first_appearance_order",
    ),
    (
        "ex6_rope",
        "apply_rope",
        """
_TABLES = {}

def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    if x.shape[-2] not in _TABLES:  # the angles of the first call, kept by length only
        theta = rope_frequencies(x.shape[-1], base)
        positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
        angles = positions[:, None] * theta[None, :]
        _TABLES[x.shape[-2]] = (torch.cos(angles), torch.sin(angles))
    cos, sin = (table.to(x.dtype) for table in _TABLES[x.shape[-2]])
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
""",
        "test_apply_rope_matches_the_formula",
    ),
    (
        "ex3_transformer_classifier",
        "count_parameters",
        """
_COUNTED = [0]

def count_parameters(model):
    for parameter in model.parameters():
        if parameter.requires_grad:
            _COUNTED[0] += parameter.numel()
    return _COUNTED[0]
""",
        "test_count_parameters_counts_trainable_only",
    ),
]


def grade(exercise, target, source, check, tmp_path, shared_sandbox):
    notebook = source_notebook(exercise, replace={target: source})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, only=[check], shared=shared_sandbox.get())
    result = next(c for c in report.checks if c.name == check)
    assert not result.passed, f"{check} passed"
    return result


@pytest.mark.parametrize(
    ("exercise", "target", "source", "check", "argument"),
    [pytest.param(*case, id=f"{short_name(case[0])}-{case[1]}-{case[4]}") for case in IGNORED],
)
def test_an_ignored_argument_is_named(
    exercise, target, source, check, argument, tmp_path, shared_sandbox
):
    result = grade(exercise, target, source, check, tmp_path, shared_sandbox)
    assert f"`{argument}` made no difference" in result.message, result.message


@pytest.mark.parametrize(
    ("exercise", "target", "source", "check"),
    [pytest.param(*case, id=f"{short_name(case[0])}-{case[1]}") for case in KEPT],
)
def test_state_kept_between_calls_is_named(
    exercise, target, source, check, tmp_path, shared_sandbox
):
    result = grade(exercise, target, source, check, tmp_path, shared_sandbox)
    assert "something was kept between calls" in result.message, result.message
