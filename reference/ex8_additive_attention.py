"""Reference solution of ex8_additive_attention: additive, multiplicative and dot-product
attention of a decoder state over encoder annotations, and a pointer task to train them on."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class AdditiveAttention(nn.Module):
    """Bahdanau: score_i = v^T tanh(W_h h_i + W_s s). `forward(annotations (B, S, enc_dim),
    state (B, dec_dim), mask=None)` returns (context (B, enc_dim), weights (B, S))."""

    def __init__(self, enc_dim: int, dec_dim: int, attn_dim: int):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        features = torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))
        scores = self.v(features).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


class MultiplicativeAttention(nn.Module):
    """Luong "general": score_i = s^T W_a h_i. Same forward as AdditiveAttention."""

    def __init__(self, enc_dim: int, dec_dim: int):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = (self.W_a(annotations) * state.unsqueeze(1)).sum(dim=-1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


class ScaledDotAttention(nn.Module):
    """score_i = s . h_i / sqrt(dim), no parameters. Same forward as AdditiveAttention."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, annotations, state, mask=None):
        scores = (annotations * state.unsqueeze(1)).sum(dim=-1) / math.sqrt(self.dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(dim=1), weights


def attention_parameter_counts(enc_dim: int, dec_dim: int, attn_dim: int) -> dict[str, int]:
    """Trainable parameters of each module built with these sizes ("dot" has none)."""
    return {
        "additive": enc_dim * attn_dim + (dec_dim * attn_dim + attn_dim) + attn_dim,
        "multiplicative": enc_dim * dec_dim,
        "dot": 0,
    }


def make_pointer_task(
    n_samples: int, seq_len: int = 8, dim: int = 16, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Annotations (n, seq_len, dim), states (n, dim) standard normal float32, and the target
    argmax_i annotations[j, i] . states[j] of each sample."""
    generator = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, seq_len, dim, generator=generator)
    states = torch.randn(n_samples, dim, generator=generator)
    targets = (annotations * states.unsqueeze(1)).sum(dim=-1).argmax(dim=-1)
    return annotations, states, targets


def train_pointer(
    module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0
) -> list[float]:
    """Adam on the negative log-likelihood of the target under the module's weights; the
    sample-weighted mean loss of each epoch."""
    torch.manual_seed(seed)
    order_generator = torch.Generator().manual_seed(seed)
    parameters = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=lr) if parameters else None
    module.train()
    history = []
    n = len(targets)
    for _ in range(epochs):
        order = torch.randperm(n, generator=order_generator)
        total = 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            _, weights = module(annotations[rows], states[rows])
            picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
            loss = -torch.log(picked.clamp_min(1e-12)).mean()
            if optimizer is not None:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            total += loss.item() * len(rows)
        history.append(total / n)
    return history


def pointer_accuracy(module, annotations, states, targets) -> float:
    """Fraction of samples whose largest weight is on the target; eval mode, no gradients."""
    was_training = module.training
    module.eval()
    with torch.no_grad():
        _, weights = module(annotations, states)
    module.train(was_training)
    return float((weights.argmax(dim=-1) == targets).float().mean())
