"""Exercise 4: grouped-query attention, its K/V parameter count and its KV-cache memory.

Style: the query heads are viewed as (kv_head, group) pairs so that one einsum contracts
each group of queries against its shared K/V head - K and V are never repeated in memory.
"""
import math

import torch
import torch.nn as nn


def _check_sizes(d_model, n_heads, n_kv_heads):
    if n_heads < 1 or n_kv_heads < 1:
        raise ValueError("n_heads and n_kv_heads must be >= 1")
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) is not divisible by n_heads ({n_heads})")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) is not divisible by n_kv_heads ({n_kv_heads})")


def _softmax(scores):
    peak = scores.amax(dim=-1, keepdim=True).detach()
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    e = torch.exp(scores - peak)
    return e / e.sum(dim=-1, keepdim=True)


def _additive_mask(mask, dtype):
    """Bool (True = may attend) -> log(1) = 0 / log(0) = -inf; a float mask is additive already."""
    mask = torch.as_tensor(mask)
    return mask.to(dtype).log() if mask.dtype == torch.bool else mask.to(dtype)


class GroupedQueryAttention(nn.Module):
    """n_heads query heads sharing n_kv_heads K/V heads: K/V head j serves query heads
    j*g ... j*g + g - 1 with g = n_heads // n_kv_heads."""

    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        _check_sizes(d_model, n_heads, n_kv_heads)
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.n_groups = n_heads // n_kv_heads
        self.head_dim = d_model // n_heads
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, mask=None):
        """x (B, L, d_model) -> (B, L, d_model); `mask` bool broadcastable to (B, n_heads, L, L)."""
        kv, g, hd = self.n_kv_heads, self.n_groups, self.head_dim
        # query head index h = j * g + r  <->  (kv head j, slot r): a contiguous unflatten
        q = self.W_q(x).unflatten(-1, (kv, g, hd))          # (B, L, kv, g, hd)
        k = self.W_k(x).unflatten(-1, (kv, hd))             # (B, S, kv, hd)
        v = self.W_v(x).unflatten(-1, (kv, hd))             # (B, S, kv, hd)
        scores = torch.einsum("blkgd,bskd->bkgls", q, k) / math.sqrt(hd)
        if mask is not None:
            flat = scores.flatten(1, 2)                     # (B, n_heads, L, S)
            flat = flat + _additive_mask(mask, flat.dtype).to(flat.device)
            scores = flat.unflatten(1, (kv, g))
        weights = _softmax(scores)
        context = torch.einsum("bkgls,bskd->blkgd", weights, v)  # (B, L, kv, g, hd)
        return self.W_o(context.flatten(-3))


def kv_projection_params(d_model, n_heads, n_kv_heads):
    """Weights of W_k and W_v together: 2 * d_model * n_kv_heads * head_dim (no biases)."""
    _check_sizes(d_model, n_heads, n_kv_heads)
    return 2 * d_model * n_kv_heads * (d_model // n_heads)


def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    """Bytes to cache K and V: 2 * layers * batch * kv_heads * seq_len * head_dim * bytes."""
    return int(2 * n_layers * batch_size * n_kv_heads * seq_len * head_dim * bytes_per_element)


def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    """kv_cache_bytes(...) / 2**20."""
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size,
                          bytes_per_element) / 2 ** 20


def _variant_name(n_heads, n_kv_heads):
    if n_kv_heads == n_heads:
        return "MHA"
    return "MQA" if n_kv_heads == 1 else f"GQA-{n_kv_heads}"


def gqa_report(d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048,
               batch_shape=(2, 32)):
    """One row per K/V head count: name, n_kv_heads, kv_params, kv_cache_mib (one layer,
    batch 1, fp16) and the output shape of a real forward pass on a (*batch_shape, d_model)
    input."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*batch_shape, d_model, generator=gen)
    head_dim = d_model // n_heads
    rows = []
    for n_kv in kv_head_options:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            module = GroupedQueryAttention(d_model, n_heads, n_kv)
        with torch.no_grad():
            out = module(x)
        measured = module.W_k.weight.numel() + module.W_v.weight.numel()
        rows.append({
            "name": _variant_name(n_heads, n_kv),
            "n_kv_heads": n_kv,
            "kv_params": kv_projection_params(d_model, n_heads, n_kv),
            "kv_params_measured": measured,
            "kv_cache_mib": kv_cache_mib(seq_len, n_kv, head_dim, n_layers=1, batch_size=1,
                                         bytes_per_element=2),
            "output_shape": tuple(out.shape),
        })
    return rows


if __name__ == "__main__":
    import torch.nn.functional as F

    for bad in ((10, 3, 1), (12, 4, 3), (12, 6, 4)):
        try:
            GroupedQueryAttention(*bad)
            raise AssertionError(f"no ValueError for {bad}")
        except ValueError:
            pass

    torch.manual_seed(0)
    B, L, d, H, KV = 2, 7, 24, 6, 2
    m = GroupedQueryAttention(d, H, KV)
    assert m.W_q.weight.shape == (24, 24) and m.W_k.weight.shape == (8, 24)
    x = torch.randn(B, L, d)

    def reference(x, mask=None):
        hd = d // H
        q = m.W_q(x).reshape(B, L, H, hd).permute(0, 2, 1, 3)
        k = m.W_k(x).reshape(B, L, KV, hd).permute(0, 2, 1, 3).repeat_interleave(H // KV, 1)
        v = m.W_v(x).reshape(B, L, KV, hd).permute(0, 2, 1, 3).repeat_interleave(H // KV, 1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return m.W_o(o.permute(0, 2, 1, 3).reshape(B, L, d))

    assert torch.allclose(m(x), reference(x), atol=1e-6)
    mask = torch.rand(B, H, L, L) > 0.5
    mask[..., 0] = True
    assert torch.allclose(m(x, mask), reference(x, mask), atol=1e-6)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    assert torch.allclose(m(x, causal), reference(x, causal), atol=1e-6)
    hm = torch.rand(1, H, 1, L) > 0.3
    hm[..., 1] = True
    assert torch.allclose(m(x, hm), reference(x, hm), atol=1e-6)

    assert kv_projection_params(512, 8, 2) == 131072
    assert kv_projection_params(512, 8, 8) == 524288
    assert kv_cache_bytes(2048, 64, 128, n_layers=80) == 2 * 80 * 64 * 2048 * 128 * 2
    assert kv_cache_mib(2048, 8, 64) == 4.0
    rep = gqa_report()
    for row in rep:
        print(row)
        assert row["kv_params"] == row["kv_params_measured"]
    assert [r["name"] for r in rep] == ["MHA", "GQA-4", "MQA"]
    assert [r["kv_cache_mib"] for r in rep] == [4.0, 2.0, 0.5]
    assert all(r["output_shape"] == (2, 32, 512) for r in rep)
    rep = gqa_report(d_model=48, n_heads=1, kv_head_options=(1,), seq_len=10, batch_shape=(3, 5))
    assert rep[0]["name"] == "MHA" and rep[0]["output_shape"] == (3, 5, 48)
    rep = gqa_report(d_model=48, n_heads=6, kv_head_options=(6, 3, 2, 1), seq_len=10, batch_shape=(3, 5))
    assert [r["name"] for r in rep] == ["MHA", "GQA-3", "GQA-2", "MQA"]
    print("ex4 ok")
