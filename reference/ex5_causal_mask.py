"""Reference solution for ex5_causal_mask: causal attention and a next-token model."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(seq_len: int) -> torch.Tensor:
    """Additive float mask of shape (seq_len, seq_len) for causal attention.

    0.0 where query i may attend to key j (j <= i), -inf where j > i.
    """
    return torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)


def masked_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention for Q (..., L, d), K (..., S, d), V (..., S, d_v).

    mask: additive float mask broadcastable to (..., L, S), 0.0 = may attend, -inf = blocked.
    Returns (output (..., L, d_v), weights (..., L, S)); blocked weights are exactly 0.
    """
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def discretize_sine(n_points: int, n_bins: int = 50, period: float = 50.0) -> torch.LongTensor:
    """Token ids (int64, length n_points) of sin(2*pi*t/period), t = 0..n_points-1, in n_bins bins.

    bin = floor((v + 1) / 2 * n_bins), clipped to n_bins - 1, computed in float64.
    """
    t = np.arange(n_points, dtype=np.float64)
    v = np.sin(2 * np.pi * t / period)
    bins = np.floor((v + 1) / 2 * n_bins)
    bins = np.minimum(bins, n_bins - 1)
    return torch.from_numpy(bins.astype(np.int64))


def make_windows(
    tokens: torch.Tensor, context_len: int
) -> tuple[torch.LongTensor, torch.LongTensor]:
    """All stride-1 windows: X[i] = tokens[i : i+context_len], Y[i] = tokens[i+1 : i+1+context_len].

    One window per start i = 0 .. len(tokens) - context_len - 1; both (N, context_len) int64.
    """
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    n_windows = max(len(tokens) - context_len, 0)
    starts = torch.arange(n_windows).unsqueeze(1)
    offsets = torch.arange(context_len).unsqueeze(0)
    idx = starts + offsets
    return tokens[idx], tokens[idx + 1]


def split_holdout(
    X: torch.Tensor, Y: torch.Tensor, holdout_frac: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split stride-1 windows into (X_train, Y_train, X_test, Y_test), order kept.

    Test = the last ceil(holdout_frac * N) windows; train = the earlier windows that share
    no token position (input or target) with any test window.
    """
    n = X.shape[0]
    n_test = math.ceil(holdout_frac * n)
    first_test = n - n_test
    # Window i covers token positions i .. i + context_len (inputs and targets together).
    n_train = max(first_test - X.shape[1], 0)
    return X[:n_train], Y[:n_train], X[first_test:], Y[first_test:]


class CausalTransformer(nn.Module):
    """Decoder-only Transformer language model: forward(x (B, T) long) -> logits (B, T, vocab_size).

    The logits at position t do not change when any token after t changes (T <= max_len).
    """

    def __init__(
        self,
        vocab_size: int = 50,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        max_len: int = 128,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model,
            n_heads,
            dim_feedforward=4 * d_model,
            dropout=dropout,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.shape[1]
        positions = torch.arange(seq_len, device=x.device)
        h = self.token_emb(x) + self.pos_emb(positions)
        mask = causal_mask(seq_len).to(device=h.device, dtype=h.dtype)
        h = self.encoder(h, mask=mask)
        return self.head(h)


def train_lm(
    model: nn.Module,
    X: torch.Tensor,
    Y: torch.Tensor,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train next-token prediction (cross-entropy at every position) with Adam at lr on shuffled
    mini-batches; returns the sample-weighted mean training loss of each epoch (len == epochs).
    The same seed gives the same history whatever the global RNG state.
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n = X.shape[0]
    history = []
    model.train()
    # Any randomness inside the model (dropout) is seeded too, without touching the caller's RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                logits = model(X[idx])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y[idx].reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
            history.append(total / n)
    return history


def next_token_accuracy(model: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> float:
    """Fraction of all positions of all windows where the argmax prediction equals the target.

    Puts the model in eval mode and computes without gradients; returns a Python float.
    """
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, X.shape[0], 256):
            logits = model(X[start : start + 256])
            correct += (logits.argmax(dim=-1) == Y[start : start + 256]).sum().item()
    return correct / Y.numel()
