"""ex7_kv_cache: the contract's own KVCache, CachedSelfAttention and TinyLM (with the RoPE of ex6),
stand-ins for `authoring.upstream.on_the_contracts` (hidden: each is sent to the sandbox only at its
swap)."""


def contract_kv_cache():
    """ex7's KVCache as its contract states it (k, v (B, H_kv, T, head_dim) concatenated along
    time, None while empty; len = T): swapped in while the checks of an attention built on it
    run, so that a fault of the notebook's KVCache is charged to KVCache's own check only."""
    import torch

    class KVCache:
        def __init__(self):
            self.k = None
            self.v = None

        def append(self, k, v):
            self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
            self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)

        def __len__(self):
            return 0 if self.k is None else self.k.shape[-2]

    return KVCache


def contract_rope_frequencies():
    """rope_frequencies as ex6 states it states it (theta_i = base ** (-2i / head_dim),
    float64; ValueError for an odd head_dim): swapped in while the checks of apply_rope and of
    what is built on it run, so that a wrong frequency formula is charged to its own checks."""
    import torch

    def rope_frequencies(head_dim, base=10000.0):
        if head_dim <= 0 or head_dim % 2:
            raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
        return base ** (-(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))

    return rope_frequencies


def contract_apply_rope():
    """ex6's apply_rope as its contract states it (each pair (x_i, x_{i+h}) of row t rotated by
    (offset + t) * theta_i, angles in float64, a new tensor of x's shape and dtype), with its
    own frequencies (not the notebook's): swapped in while the checks of RoPEAttention and
    relative_scores run, so that a fault of the rotation is charged to its own checks."""
    import torch

    frequencies = contract_rope_frequencies()

    def apply_rope(x, offset=0, base=10000.0):
        half = x.shape[-1] // 2
        theta = frequencies(x.shape[-1], base)
        positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
        angles = positions[:, None] * theta[None, :]
        cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)

    return apply_rope


def contract_cached_attention():
    """ex7's CachedSelfAttention as its contract states it (grouped-query, RoPE at positions
    len(cache) ..., K after RoPE and V appended to the cache, causal), rotating with the
    contract's apply_rope: swapped in while TinyLM's check runs, so that a fault of the
    notebook's attention is charged to its own checks."""
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    apply_rope = contract_apply_rope()

    class CachedSelfAttention(nn.Module):
        def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
            super().__init__()
            n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
            if n_heads <= 0 or n_kv_heads <= 0 or d_model % n_heads or n_heads % n_kv_heads:
                raise ValueError("need d_model % n_heads == 0 and n_heads % n_kv_heads == 0")
            self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
            self.head_dim = d_model // n_heads
            self.base = base
            self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
            self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
            self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
            self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

        def forward(self, x, cache=None):
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
            query_positions = torch.arange(past, past + new)[:, None]
            key_positions = torch.arange(k.shape[2])[None, :]
            scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
            out = F.softmax(scores, dim=-1) @ v
            return self.W_o(out.transpose(1, 2).reshape(batch, new, self.n_heads * self.head_dim))

    return CachedSelfAttention


def contract_tinylm():
    """ex7's TinyLM as its contract states it (head(x + attn(x, cache)), x = embed(tokens)), on
    the contract's CachedSelfAttention: swapped in while generate's checks run, so that a fault
    of the notebook's model is charged to its own checks."""
    import torch.nn as nn

    attention = contract_cached_attention()

    class TinyLM(nn.Module):
        def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
            super().__init__()
            self.embed = nn.Embedding(vocab_size, d_model)
            self.attn = attention(d_model, n_heads, n_kv_heads)
            self.head = nn.Linear(d_model, vocab_size)

        def forward(self, tokens, cache=None):
            x = self.embed(tokens)
            return self.head(x + self.attn(x, cache))

    return TinyLM
