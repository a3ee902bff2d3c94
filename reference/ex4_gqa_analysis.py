"""Reference solution of ex4_gqa_analysis: grouped-query attention, KV parameters and cache."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupedQueryAttention(nn.Module):
    """Self-attention with n_heads query heads sharing n_kv_heads K/V heads.

    K/V head j serves query heads j*g .. j*g+g-1, g = n_heads // n_kv_heads.
    `forward(x (B, L, d_model), mask=None)` returns (B, L, d_model); mask is bool, True = attend.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int):
        super().__init__()
        if n_heads <= 0 or n_kv_heads <= 0 or d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError(
                f"need d_model % n_heads == 0 and n_heads % n_kv_heads == 0, got "
                f"d_model={d_model}, n_heads={n_heads}, n_kv_heads={n_kv_heads}"
            )
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = d_model // n_heads
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        batch, length, _ = x.shape
        q = self.W_q(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        group = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(batch, length, self.n_heads * self.head_dim)
        return self.W_o(out)


def kv_projection_params(d_model: int, n_heads: int, n_kv_heads: int) -> int:
    """Number of weights in the K and V projections together (no bias)."""
    head_dim = d_model // n_heads
    return 2 * d_model * n_kv_heads * head_dim


def kv_cache_bytes(
    seq_len: int,
    n_kv_heads: int,
    head_dim: int,
    n_layers: int = 1,
    batch_size: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes needed to cache both K and V for `seq_len` positions of each of `batch_size`
    sequences in each of `n_layers` layers, at `bytes_per_element` bytes per number."""
    return 2 * n_layers * batch_size * seq_len * n_kv_heads * head_dim * bytes_per_element


def kv_cache_mib(
    seq_len: int,
    n_kv_heads: int,
    head_dim: int,
    n_layers: int = 1,
    batch_size: int = 1,
    bytes_per_element: int = 2,
) -> float:
    """The KV cache of kv_cache_bytes, in MiB (2**20 bytes)."""
    return (
        kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size, bytes_per_element)
        / 2**20
    )


def gqa_report(
    d_model: int = 512,
    n_heads: int = 8,
    kv_head_options: tuple[int, ...] = (8, 4, 1),
    seq_len: int = 2048,
    batch_shape: tuple[int, ...] = (2, 32),
) -> list[dict]:
    """One row per n_kv_heads option: name, n_kv_heads, kv_params, kv_cache_mib (1 layer,
    batch 1, fp16) and output_shape of a forward pass on a random (*batch_shape, d_model) input.
    """
    rows = []
    head_dim = d_model // n_heads
    for n_kv_heads in kv_head_options:
        if n_kv_heads == n_heads:
            name = "MHA"
        elif n_kv_heads == 1:
            name = "MQA"
        else:
            name = f"GQA-{n_kv_heads}"
        module = GroupedQueryAttention(d_model, n_heads, n_kv_heads)
        with torch.no_grad():
            out = module(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv_heads,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv_heads),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv_heads, head_dim),
                "output_shape": tuple(out.shape),
            }
        )
    return rows
