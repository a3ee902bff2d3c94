"""Correct implementations in styles other than the reference's pass the checks that changed
in checks 3 (4-D masks, reshuffling, the LM loss at lr=0, the LSTM's whole sequence), and two
that an independent student found failing in checks 10's first version (a forward that
reshapes after W_o; a title set on the left of the axes)."""

from __future__ import annotations

import pytest

from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

SDPA_EINSUM = """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = np.einsum("...ld,...sd->...ls", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    top = scores.max(axis=-1, keepdims=True)
    log_total = top + np.log(np.exp(scores - top).sum(axis=-1, keepdims=True))
    weights = np.exp(scores - log_total)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
    return np.einsum("...ls,...sd->...ld", weights, V), weights
"""

LSTM_BIDIRECTIONAL = """
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=48, hidden_dim=40, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(
            embed_dim, hidden_dim, num_layers=2, batch_first=True, bidirectional=True
        )
        self.head = nn.Linear(2 * hidden_dim, num_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(self.embedding(x))
        return self.head(torch.cat([h_n[-2], h_n[-1]], dim=-1))
"""

TRAIN_DATALOADER = """
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    from torch.utils.data import DataLoader, TensorDataset

    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(
        TensorDataset(X, y), batch_size=batch_size, shuffle=True, generator=generator
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        for _ in range(epochs):
            total, count = 0.0, 0
            for xb, yb in loader:
                optimizer.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(xb), yb, reduction="sum")
                (loss / len(xb)).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                total, count = total + loss.item(), count + len(xb)
            history.append(total / count)
    return history
"""

TRAIN_LM_SUM = """
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    from torch.utils.data import DataLoader, TensorDataset

    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(
        TensorDataset(X, Y), batch_size=batch_size, shuffle=True, generator=generator
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        for _ in range(epochs):
            total, windows = 0.0, 0
            for xb, yb in loader:
                logits = model(xb)
                summed = F.cross_entropy(
                    logits.flatten(0, 1), yb.flatten(), reduction="sum"
                )
                loss = summed / yb.numel()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(xb)
                windows += len(xb)
            history.append(total / windows)
    return history
"""

# A decorator instead of a with-block, a restored mode, batches: "in eval mode without gradients"
ACCURACY_DECORATED = """
@torch.inference_mode()
def next_token_accuracy(model, X, Y):
    was_training = model.training
    model.eval()
    hits = 0
    for start in range(0, len(X), 100):
        hits += int((model.forward(X[start:start + 100]).argmax(-1) == Y[start:start + 100]).sum())
    model.train(was_training)
    return hits / Y.numel()
"""

# Any leading batch dimensions, flattened in and restored after W_o (with d_model).
GQA_RESHAPES_AFTER_W_O = """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.kv, self.d, self.hd = n_heads, n_kv_heads, d_model, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.hd, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.hd, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        *batch, length, _ = x.shape
        x = x.reshape(-1, length, self.d)
        rows, g = x.shape[0], self.h // self.kv
        q = self.W_q(x).view(rows, length, self.h, self.hd).transpose(1, 2)
        k = self.W_k(x).view(rows, length, self.kv, self.hd).transpose(1, 2)
        v = self.W_v(x).view(rows, length, self.kv, self.hd).transpose(1, 2)
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(rows, length, self.d)
        return self.W_o(out).reshape(*batch, length, self.d)
"""
PLOT_TITLE_ON_THE_LEFT = """
def plot_attention(weights, tokens, title=None):
    figure = Figure(figsize=(6, 5), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(weights)
    axes.set_xticks(range(len(tokens)), labels=tokens, rotation=45, ha="right")
    axes.set_yticks(range(len(tokens)), labels=tokens)
    if title is not None:
        axes.set_title(title, loc="left")
    figure.colorbar(image, ax=axes)
    return figure
"""

CASES = [
    pytest.param(
        "ex1_numpy_attention",
        {"scaled_dot_product_attention": SDPA_EINSUM},
        ["test_sdpa_single_head_matches_reference", "test_sdpa_bool_mask_blocks_positions"],
        id="ex1-einsum-logsumexp-1e9",
        marks=pytest.mark.ex1,
    ),
    pytest.param(
        "ex3_transformer_classifier",
        {"LSTMClassifier": LSTM_BIDIRECTIONAL},
        ["test_lstm_classifier_reads_the_whole_sequence"],
        id="ex3-bidirectional-2-layer-lstm",
        marks=pytest.mark.ex3,
    ),
    pytest.param(
        "ex3_transformer_classifier",
        {"train_classifier": TRAIN_DATALOADER},
        [
            "test_train_classifier_returns_sample_weighted_epoch_losses",
            "test_train_classifier_seeded",
            "test_train_classifier_learns_mean_task",
        ],
        id="ex3-dataloader-adamw-clipping",
        marks=pytest.mark.ex3,
    ),
    pytest.param(
        "ex5_causal_mask",
        {"train_lm": TRAIN_LM_SUM},
        [
            "test_train_lm_reports_sample_weighted_loss",
            "test_train_lm_deterministic_for_a_seed",
            "test_train_lm_learns_the_sine",
        ],
        id="ex5-dataloader-sum-then-divide",
        marks=pytest.mark.ex5,
    ),
    pytest.param(
        "ex4_gqa_analysis",
        {"GroupedQueryAttention": GQA_RESHAPES_AFTER_W_O},
        ["test_gqa_report_output_shape_from_forward_pass"],
        id="ex4-forward-restores-the-batch-dims-after-W_o",
        marks=pytest.mark.ex4,
    ),
    pytest.param(
        "ex2_attention_heatmap",
        {"plot_attention": PLOT_TITLE_ON_THE_LEFT},
        ["test_plot_attention_has_colorbar_and_title"],
        id="ex2-title-on-the-left",
        marks=pytest.mark.ex2,
    ),
    pytest.param(
        "ex5_causal_mask",
        {"next_token_accuracy": ACCURACY_DECORATED},
        ["test_next_token_accuracy_matches_predictions"],
        id="ex5-accuracy-decorated-batched-mode-restored",
        marks=pytest.mark.ex5,
    ),
]


@pytest.mark.parametrize(("exercise", "cells", "checks"), CASES)
def test_alternative_passes(exercise, cells, checks, tmp_path, shared_sandbox):
    notebook = source_notebook(exercise, replace=cells)
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, only=checks, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert not failed and len(report.checks) == len(checks), failed
