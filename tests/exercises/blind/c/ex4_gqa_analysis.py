"""ex4_gqa_analysis: grouped-query attention, its K/V parameter count and KV-cache size."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupedQueryAttention(nn.Module):
    """n_heads query heads share n_kv_heads K/V heads; K/V head j serves query heads
    j*g ... j*g+g-1 (g = n_heads // n_kv_heads), like repeat_interleave."""

    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if n_heads < 1 or n_kv_heads < 1:
            raise ValueError("n_heads and n_kv_heads must be positive")
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) is not divisible by n_heads ({n_heads})")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads ({n_heads}) is not divisible by n_kv_heads ({n_kv_heads})")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.n_groups = n_heads // n_kv_heads
        self.head_dim = d_model // n_heads
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def _split(self, t, heads):
        # (..., L, heads*hd) -> (..., heads, L, hd), head k = columns k*hd ... (k+1)*hd-1
        return t.unflatten(-1, (heads, self.head_dim)).transpose(-3, -2)

    def _share(self, t):
        # (..., H_kv, L, hd) -> (..., H_kv*g, L, hd) where KV head j fills slots j*g ... j*g+g-1
        # (a broadcast view + one reshape: same layout as repeat_interleave(g, dim=-3))
        if self.n_groups == 1:
            return t
        *lead, hkv, length, hd = t.shape
        return t.unsqueeze(-3).expand(*lead, hkv, self.n_groups, length, hd) \
                .reshape(*lead, hkv * self.n_groups, length, hd)

    def forward(self, x, mask=None):
        q = self._split(self.W_q(x), self.n_heads)
        k = self._share(self._split(self.W_k(x), self.n_kv_heads))
        v = self._share(self._split(self.W_v(x), self.n_kv_heads))
        if mask is not None and not (mask.dtype == torch.bool or mask.is_floating_point()):
            mask = mask != 0  # 0/1 integer masks: nonzero = may attend
        if mask is not None and mask.is_floating_point():
            mask = mask.to(q.dtype)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             scale=1.0 / math.sqrt(self.head_dim))
        return self.W_o(ctx.transpose(-3, -2).flatten(-2))


def kv_projection_params(d_model, n_heads, n_kv_heads):
    """Weights of W_k and W_v (no bias): 2 * d_model * n_kv_heads * head_dim."""
    return 2 * d_model * n_kv_heads * (d_model // n_heads)


def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1,
                   bytes_per_element=2):
    """Bytes to cache K and V: 2 * layers * batch * kv_heads * seq_len * head_dim * bytes."""
    return 2 * n_layers * batch_size * n_kv_heads * seq_len * head_dim * bytes_per_element


def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1,
                 bytes_per_element=2):
    """kv_cache_bytes(...) / 2**20."""
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size,
                          bytes_per_element) / 2 ** 20


def _variant_name(n_heads, n_kv_heads):
    if n_kv_heads == n_heads:
        return "MHA"
    if n_kv_heads == 1:
        return "MQA"
    return f"GQA-{n_kv_heads}"


def gqa_report(d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048,
               batch_shape=(2, 32)):
    """One row per n_kv_heads option: name, n_kv_heads, kv_params, kv_cache_mib (1 layer,
    batch 1, fp16), output_shape of a real forward pass on a (*batch_shape, d_model) input."""
    head_dim = d_model // n_heads
    rows = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = torch.randn(*batch_shape, d_model)
        for n_kv in kv_head_options:
            module = GroupedQueryAttention(d_model, n_heads, n_kv)
            with torch.inference_mode():
                out = module(x)
            rows.append({
                "name": _variant_name(n_heads, n_kv),
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, head_dim, n_layers=1,
                                             batch_size=1, bytes_per_element=2),
                "output_shape": tuple(out.shape),
                "kv_params_counted": module.W_k.weight.numel() + module.W_v.weight.numel(),
            })
    return rows


def _reference_gqa(m, x, mask=None):
    """Loop-over-heads reference (the lesson's repeat_interleave recipe)."""
    B, L, _ = x.shape
    q = m.W_q(x).view(B, L, m.n_heads, m.head_dim).transpose(1, 2)
    k = m.W_k(x).view(B, L, m.n_kv_heads, m.head_dim).transpose(1, 2)
    v = m.W_v(x).view(B, L, m.n_kv_heads, m.head_dim).transpose(1, 2)
    k = k.repeat_interleave(m.n_groups, dim=1)
    v = v.repeat_interleave(m.n_groups, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(m.head_dim)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return m.W_o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, -1))


if __name__ == "__main__":
    torch.manual_seed(0)
    for bad in ((10, 4, 2), (12, 4, 3)):
        try:
            GroupedQueryAttention(*bad)
            raise AssertionError(bad)
        except ValueError:
            pass
    B, L, d = 3, 5, 24
    for H, Hkv in ((6, 6), (6, 3), (6, 2), (6, 1), (1, 1)):
        m = GroupedQueryAttention(d, H, Hkv)
        assert not any(lin.bias is not None for lin in (m.W_q, m.W_k, m.W_v, m.W_o))
        assert m.W_k.weight.shape == (Hkv * (d // H), d)
        x = torch.randn(B, L, d)
        out = m(x)
        assert out.shape == (B, L, d)
        assert torch.allclose(out, _reference_gqa(m, x), atol=1e-5)
        mask = torch.rand(B, H, L, L) > 0.3
        mask[..., 0] = True
        assert torch.allclose(m(x, mask), _reference_gqa(m, x, mask), atol=1e-5)
        causal = torch.ones(L, L, dtype=torch.bool).tril()
        assert torch.allclose(m(x, causal), _reference_gqa(m, x, causal), atol=1e-5)
        assert sum(p.numel() for n_, p in m.named_parameters() if n_[:3] in ("W_k", "W_v")) \
            == kv_projection_params(d, H, Hkv)
    # head-to-group assignment: perturb KV head 1's key weights -> only query heads 2, 3 change
    m = GroupedQueryAttention(16, 4, 2)
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        q = m._split(m.W_q(x), 4)
        k = m._share(m._split(m.W_k(x), 2))
        assert torch.equal(k[:, 0], k[:, 1]) and torch.equal(k[:, 2], k[:, 3])
        assert torch.equal(k[:, 2], m._split(m.W_k(x), 2)[:, 1])

    assert kv_projection_params(512, 8, 8) == 524_288 and kv_projection_params(512, 8, 2) == 131_072
    assert kv_cache_bytes(2048, 8, 64) == 2 * 8 * 2048 * 64 * 2
    assert kv_cache_bytes(2048, 64, 128, n_layers=80) == 2 * 80 * 64 * 2048 * 128 * 2
    assert kv_cache_mib(2048, 8, 64) == 4.0
    assert kv_cache_bytes(10, 2, 4, n_layers=3, batch_size=5, bytes_per_element=4) == \
        2 * 3 * 5 * 2 * 10 * 4 * 4

    rows = gqa_report()
    for r in rows:
        print(r)
    assert [r["name"] for r in rows] == ["MHA", "GQA-4", "MQA"]
    assert all(r["output_shape"] == (2, 32, 512) for r in rows)
    assert [_variant_name(1, 1), _variant_name(6, 2), _variant_name(6, 6)] == ["MHA", "GQA-2", "MHA"]
    r2 = gqa_report(d_model=24, n_heads=6, kv_head_options=(6, 3, 2, 1), seq_len=100,
                    batch_shape=(4, 9))
    print([(r["name"], r["kv_params"], r["kv_cache_mib"], r["output_shape"]) for r in r2])
    print("ex4 ok")
