"""Reference solution of ex6_rope: rotary position embeddings (split-halves style)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_frequencies(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """The rotation speeds theta_i = base ** (-2i / head_dim), i = 0 .. head_dim/2 - 1, float64.

    ValueError for an odd head_dim.
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return base ** (-exponents)


def apply_rope(x: torch.Tensor, offset: int = 0, base: float = 10000.0) -> torch.Tensor:
    """x (..., T, head_dim) with row t at position offset + t, each pair (x_i, x_{i+h}) rotated
    by the angle position * theta_i (h = head_dim / 2). A new tensor of x's shape and dtype."""
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


class RoPEAttention(nn.Module):
    """Multi-head self-attention with RoPE on every head of Q and K (V is not rotated).

    `forward(x (B, L, d_model), causal=True)` returns (B, L, d_model).
    """

    def __init__(self, d_model: int, num_heads: int, base: float = 10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError(
                f"need d_model divisible by num_heads and an even head_dim, got "
                f"d_model={d_model}, num_heads={num_heads}"
            )
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.base = base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        batch, length, d_model = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


def relative_scores(
    q: torch.Tensor, k: torch.Tensor, positions: int, base: float = 10000.0
) -> torch.Tensor:
    """S[m, n] = rope(q at position m) . rope(k at position n) for m, n < positions."""
    rotated_q = apply_rope(q.expand(positions, q.shape[-1]), base=base)
    rotated_k = apply_rope(k.expand(positions, k.shape[-1]), base=base)
    return rotated_q @ rotated_k.T
