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

# Scaled embeddings, norm_first GELU layers, sum/len pooling behind a LayerNorm.
TRANSFORMER_NORM_FIRST = """
class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size=100, d_model=64, nhead=4, num_layers=2, num_classes=2,
                 dim_feedforward=128, dropout=0.0):
        super().__init__()
        self.scale = d_model**0.5
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = PositionalEncoding(d_model)
        block = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation="gelu", batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(block, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, num_classes)

    def forward(self, x):
        states = self.encoder(self.positions(self.tokens(x) * self.scale))
        return self.out(self.norm(states.sum(dim=1) / states.shape[1]))
"""

# NumPy's seeded permutation, the global torch seed set, a summed loss divided per batch.
TRAIN_NUMPY_ORDER = """
import numpy as np

def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    order_of = np.random.default_rng(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for _ in range(epochs):
        model.train()
        order = torch.from_numpy(order_of.permutation(len(X)))
        total = 0.0
        for start in range(0, len(X), batch_size):
            rows = order[start : start + batch_size]
            optimizer.zero_grad()
            summed = F.cross_entropy(model(X[rows]), y[rows], reduction="sum")
            (summed / len(rows)).backward()
            optimizer.step()
            total += summed.item()
        history.append(total / len(X))
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


# An independent student's correct styles that checks 10's first version failed: a ReZero
# model (residual gates initialised to 0), an output head initialised to zero, gradients
# accumulated over two micro-batches per step, and a training loss from a `scores` helper.
LM_REZERO = """
class Block(nn.Module):
    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        self.n_heads = n_heads
        self.Wq = nn.Linear(d_model, d_model, bias=False)
        self.Wk = nn.Linear(d_model, d_model, bias=False)
        self.Wv = nn.Linear(d_model, d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 2 * d_model), nn.ReLU(), nn.Linear(2 * d_model, d_model)
        )
        self.dropout = dropout
        self.alpha = nn.Parameter(torch.zeros(1))  # ReZero

    def forward(self, x):
        B, T, D = x.shape
        H = self.n_heads
        split = lambda t: t.reshape(B, T, H, D // H).permute(0, 2, 1, 3)
        a = F.scaled_dot_product_attention(
            split(self.Wq(x)),
            split(self.Wk(x)),
            split(self.Wv(x)),
            is_causal=True,
            dropout_p=self.dropout if self.training else 0.0,
        )
        x = x + self.alpha * self.Wo(a.permute(0, 2, 1, 3).reshape(B, T, D))
        return x + self.alpha * self.mlp(x)


class CausalTransformer(nn.Module):

    def __init__(
        self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0
    ):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        blocks = [Block(d_model, n_heads, dropout) for _ in range(n_layers)]
        self.layers = nn.Sequential(*blocks)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.size(1), device=x.device)
        h = self.token_embedding(x) + self.position_embedding(positions)
        return self.lm_head(self.layers(h))
"""
# The same blocks with their gates at 1, and the output head initialised to zero instead.
LM_ZERO_HEAD = LM_REZERO.replace("torch.zeros(1))  # ReZero", "torch.ones(1))").replace(
    "        self.lm_head = nn.Linear(d_model, vocab_size)\n",
    "        self.lm_head = nn.Linear(d_model, vocab_size)\n"
    "        nn.init.zeros_(self.lm_head.weight)\n"
    "        nn.init.zeros_(self.lm_head.bias)\n",
)
assert "ReZero" not in LM_ZERO_HEAD and "zeros_(self.lm_head.bias)" in LM_ZERO_HEAD
TRAIN_LM_MICRO_BATCHES = """
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    n = len(X)
    history = []
    for epoch in range(epochs):
        order = torch.randperm(n, generator=gen)
        running = 0.0
        for start in range(0, n, batch_size):
            batch = order[start:start + batch_size]
            opt.zero_grad()
            half = (len(batch) + 1) // 2
            for micro in (batch[:half], batch[half:]):
                if len(micro) == 0:
                    continue
                logits = model(X[micro])
                loss = F.cross_entropy(logits.flatten(0, 1), Y[micro].flatten())
                (loss * len(micro) / len(batch)).backward()
                running += loss.item() * len(micro)
            opt.step()
        history.append(running / n)
    return history
"""
MULTIPLICATIVE_WITH_SCORES = """
class MultiplicativeAttention(nn.Module):

    def __init__(self, enc_dim: int, dec_dim: int):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def scores(self, annotations, state):
        return torch.einsum("bsd,bd->bs", self.W_a(annotations), state)

    def forward(self, annotations, state, mask=None):
        s = self.scores(annotations, state)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1)
        return torch.einsum("bs,bsd->bd", w, annotations), w
"""
ADDITIVE_WITH_SCORES = """
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def scores(self, annotations, state):
        return self.v(torch.tanh(self.W_h(annotations) + self.W_s(state)[:, None]))[..., 0]

    def forward(self, annotations, state, mask=None):
        s = self.scores(annotations, state)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1)
        return torch.einsum("bs,bsd->bd", w, annotations), w
"""
TRAIN_POINTER_ON_SCORES = """
def train_pointer(
    module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0
):
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(seed)
    loader = DataLoader(
        TensorDataset(annotations, states, targets),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    out = []
    for _ in range(epochs):
        module.train()
        total, count = 0.0, 0
        for a, s, t in loader:
            logp = F.log_softmax(module.scores(a, s), dim=-1)
            loss = -logp.gather(1, t[:, None]).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(t)
            count += len(t)
        out.append(total / count)
    return out
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
        "ex3_transformer_classifier",
        {"TransformerClassifier": TRANSFORMER_NORM_FIRST},
        [
            "test_transformer_classifier_structure",
            "test_transformer_classifier_logits_per_sample",
            "test_transformer_classifier_mean_pools_encoder_output",
            "test_transformer_classifier_uses_positions",
            "test_transformer_classifier_runs_without_warnings",
            "test_train_classifier_learns_mean_task",
        ],
        id="ex3-norm-first-gelu-scaled-sum-pooling",
        marks=pytest.mark.ex3,
    ),
    pytest.param(
        "ex3_transformer_classifier",
        {"train_classifier": TRAIN_NUMPY_ORDER},
        [
            "test_train_classifier_returns_sample_weighted_epoch_losses",
            "test_train_classifier_seeded",
            "test_train_classifier_learns_mean_task",
        ],
        id="ex3-numpy-permutation-global-seed",
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
        {"CausalTransformer": LM_REZERO},
        ["test_causal_transformer_output_shape", "test_causal_transformer_is_causal"],
        id="ex5-rezero-gates-at-zero",
        marks=pytest.mark.ex5,
    ),
    pytest.param(
        "ex5_causal_mask",
        {"CausalTransformer": LM_ZERO_HEAD},
        ["test_causal_transformer_output_shape", "test_causal_transformer_is_causal"],
        id="ex5-output-head-at-zero",
        marks=pytest.mark.ex5,
    ),
    pytest.param(
        "ex5_causal_mask",
        {"train_lm": TRAIN_LM_MICRO_BATCHES},
        ["test_train_lm_reports_sample_weighted_loss", "test_train_lm_learns_the_sine"],
        id="ex5-micro-batches-accumulated",
        marks=pytest.mark.ex5,
    ),
    pytest.param(
        "ex8_additive_attention",
        {
            "MultiplicativeAttention": MULTIPLICATIVE_WITH_SCORES,
            "AdditiveAttention": ADDITIVE_WITH_SCORES,
            "train_pointer": TRAIN_POINTER_ON_SCORES,
        },
        [
            "test_train_pointer_learns_the_task_with_multiplicative",
            "test_train_pointer_learns_the_task_with_additive",
            "test_train_pointer_reports_the_sample_weighted_loss",
            "test_train_pointer_is_deterministic_for_a_seed",
        ],
        id="ex8-loss-from-a-scores-helper",
        marks=pytest.mark.ex8,
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
