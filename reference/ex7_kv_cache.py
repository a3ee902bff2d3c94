"""Reference solution of ex7_kv_cache: cached autoregressive decoding with RoPE and GQA."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

GIVEN = ("apply_rope",)  # ex6's rotation, given whole in the notebook (not asked for again)


def apply_rope(x: torch.Tensor, offset: int = 0, base: float = 10000.0) -> torch.Tensor:
    """RoPE as in ex6 (split halves): x (..., T, head_dim), row t at position offset + t."""
    half = x.shape[-1] // 2
    theta = base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


class KVCache:
    """The keys and values of every position seen so far, (B, H_kv, T, head_dim) each."""

    def __init__(self):
        self._k = None
        self._v = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Add k, v (B, H_kv, T_new, head_dim) after what is cached (along time)."""
        self._k = k if self._k is None else torch.cat([self._k, k], dim=2)
        self._v = v if self._v is None else torch.cat([self._v, v], dim=2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self) -> int:
        return 0 if self._k is None else self._k.shape[2]


class CachedSelfAttention(nn.Module):
    """Causal grouped-query self-attention with RoPE that can continue from a KVCache.

    `forward(x (B, T_new, d_model), cache=None)` returns (B, T_new, d_model); the new tokens
    are at positions len(cache) .. len(cache) + T_new - 1, and their K (after RoPE) and V are
    appended to the cache.
    """

    def __init__(
        self, d_model: int, n_heads: int, n_kv_heads: int | None = None, base: float = 10000.0
    ):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads <= 0 or n_kv_heads <= 0 or d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError(
                f"need d_model % n_heads == 0 and n_heads % n_kv_heads == 0, got "
                f"d_model={d_model}, n_heads={n_heads}, n_kv_heads={n_kv_heads}"
            )
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = d_model // n_heads
        self.base = base
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x: torch.Tensor, cache: "KVCache | None" = None) -> torch.Tensor:
        batch, new, _ = x.shape
        past = 0 if cache is None else len(cache)
        q = self.W_q(x).view(batch, new, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(batch, new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(batch, new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, offset=past, base=self.base)
        k = apply_rope(k, offset=past, base=self.base)
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new, device=x.device)[:, None]
        key_positions = torch.arange(k.shape[2], device=x.device)[None, :]
        scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, self.n_heads * self.head_dim))


class TinyLM(nn.Module):
    """Embedding, one cached attention layer with a residual connection, and a linear head."""

    def __init__(
        self, vocab_size: int = 32, d_model: int = 32, n_heads: int = 4, n_kv_heads: int = 2
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, cache: "KVCache | None" = None) -> torch.Tensor:
        x = self.embed(tokens)
        return self.head(x + self.attn(x, cache))


def generate(
    model: TinyLM, prompt: torch.Tensor, n_new: int, use_cache: bool = True
) -> torch.Tensor:
    """Greedy decoding: (B, T0) -> (B, T0 + n_new); with the cache, one pass over the prompt
    and then one pass per new token over that token alone."""
    tokens = prompt
    cache = KVCache() if use_cache else None
    with torch.no_grad():
        for step in range(n_new):
            if cache is None:
                logits = model(tokens)
            else:
                logits = model(tokens if step == 0 else tokens[:, -1:], cache)
            following = logits[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, following], dim=1)
    return tokens


def kv_projections(prompt_len: int, n_new: int, use_cache: bool) -> int:
    """Token positions (per batch row) that `generate` passes through W_k."""
    if n_new <= 0:
        return 0
    if use_cache:
        return prompt_len + n_new - 1
    return sum(prompt_len + step for step in range(n_new))
