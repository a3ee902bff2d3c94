"""Exercise 4: grouped-query attention, its KV parameters and its KV-cache memory.

Style: the module loops over the query heads and looks up the K/V head that serves each
one (j = h // g), so the grouping is visible in the code; the report is built row by row.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _check_heads(d_model, n_heads, n_kv_heads):
    if n_heads < 1 or n_kv_heads < 1:
        raise ValueError("n_heads and n_kv_heads must be at least 1")
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    if n_heads % n_kv_heads != 0:
        raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")


class GroupedQueryAttention(nn.Module):
    """GQA: n_heads query heads share n_kv_heads K/V heads (g = n_heads // n_kv_heads each)."""

    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        _check_heads(d_model, n_heads, n_kv_heads)
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.group_size = n_heads // n_kv_heads
        self.head_dim = d_model // n_heads
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def kv_head_for(self, query_head):
        """Index of the K/V head used by query head `query_head`."""
        return query_head // self.group_size

    def forward(self, x, mask=None):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"expected x of shape (B, L, {self.d_model}), got {tuple(x.shape)}")
        batch, length, _ = x.shape
        Q = self.W_q(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        K = self.W_k(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        V = self.W_v(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)

        full_mask = None
        if mask is not None:
            # the mask's heads axis is the query heads'
            full_mask = torch.broadcast_to(mask.to(x.device), (batch, self.n_heads, length, length))

        scale = 1.0 / math.sqrt(self.head_dim)
        outputs = []
        for h in range(self.n_heads):
            j = self.kv_head_for(h)
            scores = torch.matmul(Q[:, h], K[:, j].transpose(-2, -1)) * scale   # (B, L, L)
            if full_mask is not None:
                head_mask = full_mask[:, h]
                if head_mask.dtype == torch.bool:
                    scores = scores.masked_fill(~head_mask, float("-inf"))
                else:
                    scores = scores + head_mask.to(scores.dtype)
            weights = F.softmax(scores, dim=-1)
            outputs.append(torch.matmul(weights, V[:, j]))                         # (B, L, hd)
        context = torch.stack(outputs, dim=1)                                       # (B, H, L, hd)
        context = context.transpose(1, 2).contiguous().view(batch, length, self.n_heads * self.head_dim)
        return self.W_o(context)


def kv_projection_params(d_model, n_heads, n_kv_heads):
    """Parameters of W_k and W_v together (no bias)."""
    _check_heads(d_model, n_heads, n_kv_heads)
    head_dim = d_model // n_heads
    one_projection = d_model * n_kv_heads * head_dim
    return int(2 * one_projection)


def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    """Bytes needed to cache K and V: 2 * layers * batch * kv_heads * seq_len * head_dim * bytes."""
    for name, value in (("seq_len", seq_len), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim),
                        ("n_layers", n_layers), ("batch_size", batch_size),
                        ("bytes_per_element", bytes_per_element)):
        if value < 0:
            raise ValueError(f"{name} must not be negative")
    elements = 2 * n_layers * batch_size * n_kv_heads * seq_len * head_dim
    return int(elements * bytes_per_element)


def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    """kv_cache_bytes(...) in MiB (bytes / 2**20)."""
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size, bytes_per_element) / 2 ** 20


def _variant_name(n_heads, n_kv_heads):
    if n_kv_heads == n_heads:
        return "MHA"
    if n_kv_heads == 1:
        return "MQA"
    return f"GQA-{n_kv_heads}"


def gqa_report(d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)):
    """One row per n_kv_heads option: name, n_kv_heads, kv_params, kv_cache_mib, output_shape."""
    rows = []
    head_dim = d_model // n_heads
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = torch.randn(*batch_shape, d_model)
        for n_kv_heads in kv_head_options:
            module = GroupedQueryAttention(d_model, n_heads, n_kv_heads)
            module.eval()
            with torch.no_grad():
                output = module(x)
            rows.append({
                "name": _variant_name(n_heads, n_kv_heads),
                "n_kv_heads": n_kv_heads,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv_heads),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv_heads, head_dim,
                                             n_layers=1, batch_size=1, bytes_per_element=2),
                "output_shape": tuple(output.shape),
            })
    return rows


if __name__ == "__main__":
    for bad in ((10, 3, 1), (12, 4, 3)):
        try:
            GroupedQueryAttention(*bad)
            raise AssertionError(bad)
        except ValueError:
            pass

    torch.manual_seed(0)
    B, L, d, H, Hkv = 2, 7, 24, 6, 3
    gqa = GroupedQueryAttention(d, H, Hkv)
    x = torch.randn(B, L, d)
    y = gqa(x)
    assert y.shape == (B, L, d)
    # reference with repeat_interleave + torch sdpa
    hd = d // H
    Q = gqa.W_q(x).view(B, L, H, hd).transpose(1, 2)
    K = gqa.W_k(x).view(B, L, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
    V = gqa.W_v(x).view(B, L, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
    mask = torch.rand(B, H, L, L) > 0.4
    mask[..., 0] = True
    for m in (None, mask, mask[:, :1], torch.ones(L, L, dtype=torch.bool).tril()):
        ref = F.scaled_dot_product_attention(Q, K, V, attn_mask=m)
        ref = gqa.W_o(ref.transpose(1, 2).reshape(B, L, d))
        print("diff", (gqa(x, m) - ref).abs().max().item())
        assert torch.allclose(gqa(x, m), ref, atol=1e-5)

    assert kv_projection_params(512, 8, 8) == 2 * 512 * 512
    assert kv_projection_params(512, 8, 2) == 2 * 512 * 128
    assert kv_cache_bytes(2048, 8, 64) == 2 * 8 * 2048 * 64 * 2
    print(kv_cache_mib(2048, 8, 64), kv_cache_mib(2048, 64, 128, n_layers=80) * 2 ** 20 / 1e9)
    before = torch.get_rng_state()
    for row in gqa_report():
        print(row)
    assert torch.equal(before, torch.get_rng_state())
    print(gqa_report(d_model=24, n_heads=1, kv_head_options=(1,), seq_len=10, batch_shape=(3, 5)))
    print(gqa_report(d_model=48, n_heads=6, kv_head_options=(6, 3, 2, 1), seq_len=10, batch_shape=(3, 5)))
    print("ok")
