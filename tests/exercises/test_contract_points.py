"""The contract's clarified points (../shared/EXERCISES.md): for each, two correct students who
would have disagreed before the clarification get full marks on the checks concerned; where
the clarification decided against a reading, that reading is a catalogued mistake of those
checks (test_mistakes proves it is caught and named).

The eleven points, in the contract's words:
 1. heads split contiguously (ex2 MultiHeadAttention)
 2. evaluate_accuracy: eval mode during the forward pass, the previous mode restorable (ex3)
 3. float masks added in the scores' dtype, checks use only 0.0 and -inf (ex5 masked_attention)
 4. causal_mask is torch.float32 (ex5)
 5. v = 1 is always the top bin (ex5 discretize_sine)
 6. discretize_sine is computed in float64 (ex5)
 7. a one-head model is named "MHA" (ex4 gqa_report)
 8. a token that occurs twice has two ticks (ex2 plot_attention)
 9. strongest_attention: the first maximum of the word's own row, the diagonal included (ex2)
10. seeded functions may set the global seeds; results must not depend on the RNG state (ex1)
11. softmax: finite and no RuntimeWarning for logits of magnitude 1e4 (ex1)
"""

from __future__ import annotations

import pytest

from autograder.core.registry import mistakes_module
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

EX1, EX2, EX3, EX4, EX5 = (
    "ex1_numpy_attention",
    "ex2_attention_heatmap",
    "ex3_transformer_classifier",
    "ex4_gqa_analysis",
    "ex5_causal_mask",
)

MHA_HEADS_BY_SPLIT = """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.h, self.d = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        def heads(t):  # (B, L, d_model) -> (B, h, L, d): head k = features k*d .. (k+1)*d - 1
            return torch.stack(t.split(self.d, dim=-1), dim=1)

        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        scores = torch.einsum("bhld,bhsd->bhls", q, k) / self.d ** 0.5
        if mask is not None:
            scores = torch.where(mask.bool(), scores, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        out = self.W_o(torch.cat((weights @ v).unbind(dim=1), dim=-1))
        return (out, weights) if return_attention else out
"""

ACCURACY_RESTORES_MODE = """
def evaluate_accuracy(model, X, y):
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            hits = (model(X).argmax(dim=-1) == y).sum().item()
    finally:
        model.train(was_training)
    return hits / len(y)
"""

MASKED_ATTENTION_MASKED_FILL = """
def masked_attention(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-1, -2)) * Q.shape[-1] ** -0.5
    if mask is not None:
        blocked = torch.broadcast_to(torch.isneginf(mask), scores.shape)
        scores = scores.masked_fill(blocked, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, V), weights
"""

CAUSAL_MASK_WHERE = """
def causal_mask(seq_len):
    i = torch.arange(seq_len)
    blocked = i[None, :] > i[:, None]
    return torch.where(blocked, float("-inf"), 0.0).to(torch.float32)
"""

DISCRETIZE_TORCH_FLOAT64_WHERE = """
def discretize_sine(n_points, n_bins=50, period=50.0):
    t = torch.arange(n_points, dtype=torch.float64)
    v = torch.sin(2 * torch.pi * t / period)
    bins = torch.floor((v + 1) / 2 * n_bins).long()
    return torch.where(bins >= n_bins, n_bins - 1, bins)
"""

DISCRETIZE_NUMPY_FLOAT32 = """
def discretize_sine(n_points, n_bins=50, period=50.0):
    t = np.arange(n_points, dtype=np.float32)
    v = np.sin(np.float32(2 * np.pi) * t / np.float32(period))
    bins = np.clip(np.floor((v + 1) / 2 * n_bins), 0, n_bins - 1)
    return torch.from_numpy(bins.astype(np.int64))
"""

GQA_REPORT_TABLE = """
def gqa_report(d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048,
               batch_shape=(2, 32)):
    def name(n_kv):
        return {1: "MQA", n_heads: "MHA"}.get(n_kv, f"GQA-{n_kv}")  # the later key wins at 1

    rows = []
    for n_kv in kv_head_options:
        module = GroupedQueryAttention(d_model, n_heads, n_kv)
        with torch.no_grad():
            shape = tuple(module(torch.zeros(*batch_shape, d_model)).shape)
        rows.append({
            "name": name(n_kv), "n_kv_heads": n_kv,
            "kv_params": kv_projection_params(d_model, n_heads, n_kv),
            "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
            "output_shape": shape,
        })
    return rows
"""

PLOT_PCOLORMESH_PER_TOKEN = """
def plot_attention(weights, tokens, title=None):
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots()
    mesh = axes.pcolormesh(np.asarray(weights)[::-1], cmap="magma")
    centres = np.arange(len(tokens)) + 0.5
    axes.set_xticks(centres)
    axes.set_xticklabels(list(tokens), rotation=90)
    axes.set_yticks(centres)
    axes.set_yticklabels(list(tokens)[::-1])
    if title is not None:
        axes.set_title(title)
    figure.colorbar(mesh)
    plt.close(figure)
    return figure
"""

STRONGEST_PURE_PYTHON = """
def strongest_attention(weights, tokens, word):
    for query, token in enumerate(tokens):
        if token == word:
            row = [float(w) for w in weights[query]]
            best = 0
            for key in range(1, len(row)):
                if row[key] > row[best]:
                    best = key
            return tokens[best]
    raise ValueError(f"{word} is not a token")
"""

MAKE_QKV_GLOBAL_SEED = """
def make_qkv(seq_len=4, d_k=8, seed=0):
    np.random.seed(seed)
    return tuple(np.random.randn(seq_len, d_k) for _ in range(3))
"""

SOFTMAX_LOGSUMEXP = """
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    top = np.max(x, axis=axis, keepdims=True)
    return np.exp(x - (top + np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))))
"""

# (point, exercise, the second student's cells (the reference is the first), the checks,
#  the mistake that the other reading of the point is, where the contract decided against it)
POINTS = [
    (
        "heads-contiguous",
        EX2,
        {"MultiHeadAttention": MHA_HEADS_BY_SPLIT},
        ["test_mha_matches_reference_with_its_own_weights", "test_mha_bool_mask_blocks_positions"],
        "heads_interleaved",
    ),
    (
        "eval-mode-restorable",
        EX3,
        {"evaluate_accuracy": ACCURACY_RESTORES_MODE},
        [
            "test_evaluate_accuracy_matches_logits",
            "test_evaluate_accuracy_eval_mode_without_gradients",
        ],
        "accuracy_without_eval",
    ),
    (
        "float-mask-in-scores-dtype",
        EX5,
        {"masked_attention": MASKED_ATTENTION_MASKED_FILL},
        [
            "test_masked_attention_matches_reference",
            "test_masked_attention_float_mask_blocks_positions",
        ],
        None,
    ),
    (
        "causal-mask-float32",
        EX5,
        {"causal_mask": CAUSAL_MASK_WHERE},
        ["test_causal_mask_values", "test_causal_mask_shape_and_dtype"],
        "causal_mask_float64",
    ),
    (
        "v-equals-1-top-bin",
        EX5,
        {"discretize_sine": DISCRETIZE_TORCH_FLOAT64_WHERE},
        ["test_discretize_sine_bins"],
        "bins_not_clipped",
    ),
    (
        "one-head-named-mha",
        EX4,
        {"gqa_report": GQA_REPORT_TABLE},
        ["test_gqa_report_names", "test_gqa_report_values"],
        "report_one_head_named_mqa",
    ),
    (
        "one-tick-per-token",
        EX2,
        {"plot_attention": PLOT_PCOLORMESH_PER_TOKEN},
        [
            "test_plot_attention_cells_show_the_weights",
            "test_plot_attention_ticks_label_cell_centres",
            "test_plot_attention_has_colorbar_and_title",
        ],
        "ticks_from_vocabulary",
    ),
    (
        "strongest-includes-the-diagonal",
        EX2,
        {"strongest_attention": STRONGEST_PURE_PYTHON},
        [
            "test_strongest_attention_reads_the_query_row",
            "test_strongest_attention_ties_and_missing_words",
        ],
        "strongest_skips_the_word_itself",
    ),
    (
        "seeded-by-the-global-seed",
        EX1,
        {"make_qkv": MAKE_QKV_GLOBAL_SEED},
        ["test_make_qkv_seeded_standard_normal", "test_make_qkv_shapes_and_dtype"],
        None,
    ),
    (
        "softmax-stable-by-logsumexp",
        EX1,
        {"softmax": SOFTMAX_LOGSUMEXP},
        ["test_softmax_matches_reference", "test_softmax_stable_for_large_logits"],
        None,
    ),
]

MARKS = {EX1: pytest.mark.ex1, EX2: pytest.mark.ex2, EX3: pytest.mark.ex3, EX4: pytest.mark.ex4}


def params():
    # The reference is the first student of every point; test_grading_reference grades it whole.
    for point, exercise, cells, checks, _ in POINTS:
        mark = MARKS.get(exercise, pytest.mark.ex5)
        yield pytest.param(exercise, cells, checks, id=f"{point}-other-style", marks=mark)
    # Point 6 (float64): the second correct student is the torch float64 one above (point 5).
    yield pytest.param(
        EX5,
        {"discretize_sine": DISCRETIZE_TORCH_FLOAT64_WHERE},
        ["test_discretize_sine_bins"],
        id="discretize-float64-torch",
        marks=pytest.mark.ex5,
    )


@pytest.mark.parametrize(("exercise", "cells", "checks"), list(params()))
def test_both_readings_get_full_marks(exercise, cells, checks, tmp_path, shared_sandbox):
    notebook = source_notebook(exercise, replace=cells)
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, only=checks, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert not failed and len(report.checks) == len(checks), failed


@pytest.mark.parametrize(
    ("point", "exercise", "checks", "mistake"),
    [(p, e, c, m) for p, e, _, c, m in POINTS if m is not None],
)
def test_the_reading_decided_against_is_a_named_mistake(point, exercise, checks, mistake):
    catalogue = mistakes_module(exercise).CATALOGUE
    assert catalogue[mistake].check in checks, point


@pytest.mark.ex5
def test_float32_outside_the_catalogue_is_named(tmp_path):
    """Point 6 the other way: NumPy in float32 (not the catalogued torch recipe) loses the
    points and is named by where it is wrong (only within float32 rounding of a bin edge)."""
    notebook = source_notebook(EX5, replace={"discretize_sine": DISCRETIZE_NUMPY_FLOAT32})
    path = write_notebook(notebook, tmp_path / f"{EX5}.ipynb")
    (result,) = grade_notebook(path, only=["test_discretize_sine_bins"]).checks
    assert not result.passed and result.mistake == "discretize_in_float32", result.message
