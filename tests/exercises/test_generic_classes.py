"""The two generic input classes held-out students found (validity round 4), in every exercise:

- an argument the code ignores in favour of a default: the failed check's message names the
  argument that made no difference (`grading/diagnoses.py`), whichever function it is;
- state that survives between calls: the message says that something was kept between calls
  (the check passes when every call starts from a fresh run of the notebook's cells).

An ignored argument is a catalogued breaker graded with itself left out of the catalogue (a
student who ignores it in a way the catalogue does not list); the kept states are catalogued
nowhere. What is tested is the generic diagnosis, not the catalogue's names."""

from __future__ import annotations

import contextlib

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.registry import short_name
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

IGNORED = [
    # (exercise, a catalogued breaker that ignores an argument, the argument)
    ("ex6_rope", "apply_rope_ignores_base", "base"),
    ("ex5_causal_mask", "period_ignored", "period"),
    ("ex4_gqa_analysis", "mib_ignores_bytes_per_element", "bytes_per_element"),
    ("ex4_gqa_analysis", "report_ignores_seq_len", "seq_len"),
    ("ex1_numpy_attention", "softmax_ignores_axis", "axis"),
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
    if x.shape[-1] not in _TABLES:  # the angles of the first call, kept by head_dim only
        theta = rope_frequencies(x.shape[-1], base)
        positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
        angles = positions[:, None] * theta[None, :]
        _TABLES[x.shape[-1]] = (torch.cos(angles), torch.sin(angles))
    cos, sin = (table.to(x.dtype) for table in _TABLES[x.shape[-1]])
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
""",
        "test_apply_rope_offset_continues_the_positions",
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
    (
        "ex4_gqa_analysis",
        "GroupedQueryAttention",
        """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if n_heads <= 0 or n_kv_heads <= 0 or d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)
        self.mask = None

    def forward(self, x, mask=None):
        if mask is not None:
            self.mask = mask  # remembered: a later call without a mask uses it
        batch, length, _ = x.shape
        q = self.W_q(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if self.mask is not None:
            scores = scores.masked_fill(~self.mask.bool(), float("-inf"))
        out = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, length, -1)
        return self.W_o(out)
""",
        "test_gqa_bool_mask_blocks_positions",
    ),
]


def grade(exercise, target, source, check, tmp_path, shared_sandbox):
    notebook = source_notebook(exercise, replace={target: source})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, only=[check], shared=shared_sandbox.get())
    result = next(c for c in report.checks if c.name == check)
    assert not result.passed, f"{check} passed"
    return result


@contextlib.contextmanager
def uncatalogued(exercise: str, mistake_id: str):
    """The catalogue without one mistake, while a test grades it: a student who ignores the
    argument in a way the catalogue does not list."""
    mistakes = catalogue_for(exercise)._mistakes
    mistake = mistakes.pop(mistake_id)
    try:
        yield mistake
    finally:
        mistakes[mistake_id] = mistake


@pytest.mark.parametrize(
    ("exercise", "mistake_id", "argument"),
    [pytest.param(*case, id=f"{short_name(case[0])}-{case[1]}") for case in IGNORED],
)
def test_an_ignored_argument_is_named(exercise, mistake_id, argument, tmp_path, shared_sandbox):
    with uncatalogued(exercise, mistake_id) as mistake:
        result = grade(
            exercise, mistake.target, mistake.source, mistake.check, tmp_path, shared_sandbox
        )
    assert result.mistake is None, result.message
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


def test_a_notebook_ending_its_process_when_asked_again_is_still_graded(tmp_path):
    """The diagnosis asks the notebook again with an argument at its default; a notebook whose
    process ends on that call is graded (the check fails as it did, with the status it had),
    not a grader error."""
    exercise = "ex1_numpy_attention"
    source = (
        "def make_qkv(seq_len=4, d_k=8, seed=0):\n"
        "    if seed == 0:\n"
        "        import os\n"
        "        os._exit(1)\n"
        "    rng = np.random.default_rng(seed)\n"
        "    shape = (seq_len, d_k)\n"
        "    return tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(3))\n"
    )
    path = write_notebook(
        source_notebook(exercise, replace={"make_qkv": source}), tmp_path / f"{exercise}.ipynb"
    )
    report = grade_notebook(path, seed=7, only=["test_make_qkv_shapes_and_dtype"])
    (result,) = report.checks
    assert not result.passed
    assert report.status == "ok", report.events
