"""The two generic input classes held-out students found (validity round 4), in every exercise:

- an argument the code ignores in favour of a default: the failed check's message names the
  argument that made no difference (`grading/diagnoses.py`), whichever function it is;
- state that survives between calls: the message says that something was kept between calls
  (the check passes when every call starts from a fresh run of the notebook's cells).

Each variant is no catalogued mistake (those are named by the catalogue, whose breakers ignore
every argument one at a time: tests/exercises/test_mistakes.py), so that what is tested is the
generic diagnosis: some are wrong in a second way too."""

from __future__ import annotations

import pytest

from autograder.exercises import short_name
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

ROPE_REVERSED_DEFAULT_BASE = """
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1])
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = -positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
"""

IGNORED = [
    # (exercise, function, its source, the check that fails, the argument it ignores)
    (
        "ex6_rope",
        "apply_rope",
        ROPE_REVERSED_DEFAULT_BASE,
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
    return torch.clamp(torch.round((v + 1) / 2 * n_bins), max=n_bins - 1).long()
""",
        "test_discretize_sine_bins",
        "period",
    ),
    (
        "ex4_gqa_analysis",
        "kv_cache_mib",
        """
def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size) / 1e6
""",
        "test_kv_cache_mib",
        "bytes_per_element",
    ),
    (
        "ex4_gqa_analysis",
        "gqa_report",
        """
def gqa_report(d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2,)):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            out = GroupedQueryAttention(d_model, n_heads, n_kv)(torch.randn(*batch_shape, d_model))
        rows.append({
            "name": name,
            "n_kv_heads": n_kv,
            "kv_params": kv_projection_params(d_model, n_heads, n_kv),
            "kv_cache_mib": kv_cache_mib(2048, n_kv, d_model),
            "output_shape": tuple(out.shape),
        })
    return rows
""",
        "test_gqa_report_values",
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
