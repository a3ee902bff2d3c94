"""Exercise 6: rotary position embeddings, split-halves style.

Style: angles as one outer product (einsum) in float64, the rotation applied to the two
halves by unflattening the last axis into (2, h) - no slicing and concatenating - and the
result cast back to the input dtype.
"""
import math

import torch
import torch.nn as nn


def rope_frequencies(head_dim, base=10000.0):
    """theta_i = base^(-2i / head_dim), i = 0 .. head_dim/2 - 1, as float64."""
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    exponent = -2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim
    return torch.pow(torch.tensor(float(base), dtype=torch.float64), exponent)


def _rotate(x, cos, sin):
    """Rotate pairs (x_i, x_{i+h}) of the last axis by angles with the given cos/sin (T, h)."""
    halves = x.unflatten(-1, (2, -1))            # (..., T, 2, h): [x_lo, x_hi]
    lo, hi = halves.unbind(dim=-2)
    rotated = torch.stack((lo * cos - hi * sin, lo * sin + hi * cos), dim=-2)
    return rotated.flatten(-2)


def apply_rope(x, offset=0, base=10000.0):
    """Rotate x (..., T, head_dim): row t is at position offset + t.

    Computed in float64 and returned as a new tensor of x's shape and dtype."""
    T, head_dim = x.shape[-2], x.shape[-1]
    theta = rope_frequencies(head_dim, base).to(x.device)
    positions = offset + torch.arange(T, dtype=torch.float64, device=x.device)
    angles = torch.einsum("t,i->ti", positions, theta)          # (T, h)
    out = _rotate(x.to(torch.float64), angles.cos(), angles.sin())
    return out.to(x.dtype)


def _softmax(scores):
    peak = scores.amax(dim=-1, keepdim=True).detach()
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    e = torch.exp(scores - peak)
    return e / e.sum(dim=-1, keepdim=True)


class RoPEAttention(nn.Module):
    """Multi-head self-attention with RoPE on every head of Q and K (positions 0 .. L-1)."""

    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) is not divisible by num_heads ({num_heads})")
        if (d_model // num_heads) % 2:
            raise ValueError(f"head_dim ({d_model // num_heads}) must be even for RoPE")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.base = base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def _heads(self, t):
        return t.unflatten(-1, (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, x, causal=True):
        L = x.shape[1]
        q = apply_rope(self._heads(self.W_q(x)), base=self.base)
        k = apply_rope(self._heads(self.W_k(x)), base=self.base)
        v = self._heads(self.W_v(x))
        scores = torch.einsum("bhld,bhsd->bhls", q, k) / math.sqrt(self.head_dim)
        if causal:
            pos = torch.arange(L, device=x.device)
            allowed = (pos.reshape(1, -1) <= pos.reshape(-1, 1)).to(scores.dtype)
            scores = scores + allowed.log()       # 0 on/below the diagonal, -inf above
        context = torch.einsum("bhls,bhsd->bhld", _softmax(scores), v)
        return self.W_o(context.permute(0, 2, 1, 3).flatten(-2))


def relative_scores(q, k, positions, base=10000.0):
    """S[m, n] = rope(q at m) . rope(k at n) for m, n < positions; in q's dtype."""
    q_rot = apply_rope(q.to(torch.float64).expand(positions, -1), base=base)
    k_rot = apply_rope(k.to(torch.float64).expand(positions, -1), base=base)
    return torch.einsum("md,nd->mn", q_rot, k_rot).to(q.dtype)


if __name__ == "__main__":
    import torch.nn.functional as F

    th = rope_frequencies(8)
    assert th.shape == (4,) and abs(th[0] - 1) < 1e-15 and abs(th[1] - 10000 ** (-0.25)) < 1e-15
    try:
        rope_frequencies(7)
        raise AssertionError
    except ValueError:
        pass

    def naive(x, offset=0, base=10000.0):
        D = x.shape[-1]
        h = D // 2
        out = torch.empty_like(x)
        for t in range(x.shape[-2]):
            p = offset + t
            for i in range(h):
                a = p * base ** (-2 * i / D)
                c, s = math.cos(a), math.sin(a)
                out[..., t, i] = x[..., t, i] * c - x[..., t, i + h] * s
                out[..., t, i + h] = x[..., t, i] * s + x[..., t, i + h] * c
        return out

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 6, generator=g, dtype=torch.float64)
    xc = x.clone()
    y = apply_rope(x, offset=7)
    assert torch.equal(x, xc) and y.shape == x.shape and y.dtype == x.dtype
    assert torch.allclose(y, naive(x, 7), atol=1e-12, rtol=0)
    assert torch.allclose(apply_rope(x, base=100.0), naive(x, 0, 100.0), atol=1e-12, rtol=0)
    xf = x.float()
    assert apply_rope(xf, 3).dtype == torch.float32
    assert torch.allclose(apply_rope(xf, 3), naive(x, 3).float(), atol=1e-6)
    # big offsets
    assert torch.allclose(apply_rope(x, 100000), naive(x, 100000), atol=1e-9, rtol=0)
    # 2-D input and norm preservation
    x2 = torch.randn(4, 10, generator=g, dtype=torch.float64)
    assert torch.allclose(apply_rope(x2).norm(dim=-1), x2.norm(dim=-1))
    # offset consistency: rope(x, offset=o)[t] == rope of full sequence at row o + t
    full = apply_rope(torch.cat([x2, x2], 0))
    assert torch.allclose(apply_rope(x2, offset=4), full[4:8])

    for bad in ((10, 3), (12, 4)):
        try:
            RoPEAttention(*bad)
            raise AssertionError(bad)
        except ValueError:
            pass
    torch.manual_seed(0)
    B, L, d, H = 2, 7, 24, 3
    att = RoPEAttention(d, H)
    assert set(att.state_dict()) == {"W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"}
    xx = torch.randn(B, L, d)

    def ref(x, causal):
        hd = d // H
        q = att.W_q(x).reshape(B, L, H, hd).transpose(1, 2)
        k = att.W_k(x).reshape(B, L, H, hd).transpose(1, 2)
        v = att.W_v(x).reshape(B, L, H, hd).transpose(1, 2)
        q, k = naive(q.double()).float(), naive(k.double()).float()
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return att.W_o(o.transpose(1, 2).reshape(B, L, d))

    for causal in (True, False):
        assert torch.allclose(att(xx, causal=causal), ref(xx, causal), atol=1e-6)
    out = att(xx)
    assert out.shape == (B, L, d) and out.dtype == torch.float32
    out.sum().backward()
    assert att.W_q.weight.grad is not None

    q = torch.randn(8, generator=g, dtype=torch.float64)
    k = torch.randn(8, generator=g, dtype=torch.float64)
    S = relative_scores(q, k, 9)
    assert S.shape == (9, 9) and S.dtype == torch.float64
    for m in range(9):
        for n in range(9):
            direct = naive(q.reshape(1, 1, 8), m)[0, 0] @ naive(k.reshape(1, 1, 8), n)[0, 0]
            assert abs(S[m, n] - direct) < 1e-12
            if m and n:
                assert abs(S[m, n] - S[m - 1, n - 1]) < 1e-12
    assert relative_scores(q.float(), k.float(), 5).dtype == torch.float32
    print("ex6 ok")
