"""ex6_rope: rotary position embeddings (split-halves pairing: x_i with x_{i + head_dim/2})."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_frequencies(head_dim, base=10000.0):
    """theta_i = base^(-2i / head_dim), i = 0 .. head_dim/2 - 1, in float64."""
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return torch.pow(torch.tensor(float(base), dtype=torch.float64), -exponent)


def _rotate(x, cos, sin):
    """Split-halves rotation with (T, h) cos/sin tables already in x's dtype."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def _cos_sin(theta, n_pos, offset, dtype, device):
    # angles in float64 (exact positions), cast once to the data dtype
    pos = torch.arange(offset, offset + n_pos, dtype=torch.float64, device=device)
    angles = torch.outer(pos, theta.to(device=device, dtype=torch.float64))
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x, offset=0, base=10000.0):
    """Rotate each pair (x_i, x_{i+h}) of every row t (axis -2) by (offset + t) * theta_i.
    Returns a new tensor of x's shape and dtype; x itself is untouched."""
    theta = rope_frequencies(x.size(-1), base)
    cos, sin = _cos_sin(theta, x.size(-2), offset, x.dtype, x.device)
    return _rotate(x, cos, sin)


class RoPEAttention(nn.Module):
    """Multi-head self-attention with RoPE on Q and K (positions 0 .. L-1)."""

    def __init__(self, d_model: int, num_heads: int, base: float = 10000.0):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) is not divisible by num_heads ({num_heads})")
        head_dim = d_model // num_heads
        if head_dim % 2:
            raise ValueError(f"head_dim ({head_dim}) must be even for RoPE")
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.base = base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)
        # precomputed frequencies: a derived table, kept out of the state_dict
        self.register_buffer("inv_freq", rope_frequencies(head_dim, base), persistent=False)

    def forward(self, x, causal: bool = True):
        L = x.size(-2)
        q, k, v = (W(x).unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)
                   for W in (self.W_q, self.W_k, self.W_v))
        cos, sin = _cos_sin(self.inv_freq, L, 0, q.dtype, q.device)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                             scale=1.0 / math.sqrt(self.head_dim))
        return self.W_o(ctx.transpose(-3, -2).flatten(-2))


def relative_scores(q, k, positions, base=10000.0):
    """S[m, n] = rope(q at m) . rope(k at n) for m, n < positions, in q's dtype."""
    qs = apply_rope(q.expand(positions, -1), base=base)
    ks = apply_rope(k.to(q.dtype).expand(positions, -1), base=base)
    return qs @ ks.T


def _rope_loop(x, offset=0, base=10000.0):
    """Slow float64 reference straight from the formula."""
    *_, T, d = x.shape
    h = d // 2
    out = x.clone().double()
    xd = x.double()
    for t in range(T):
        p = offset + t
        for i in range(h):
            th = base ** (-2 * i / d)
            c, s = math.cos(p * th), math.sin(p * th)
            out[..., t, i] = xd[..., t, i] * c - xd[..., t, i + h] * s
            out[..., t, i + h] = xd[..., t, i] * s + xd[..., t, i + h] * c
    return out


if __name__ == "__main__":
    th = rope_frequencies(8)
    assert th.shape == (4,) and torch.allclose(th, torch.tensor([10000 ** (-2 * i / 8) for i in range(4)],
                                                               dtype=torch.float64), rtol=1e-12)
    try:
        rope_frequencies(7)
        raise AssertionError
    except ValueError:
        pass

    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    x0 = x.clone()
    for off in (0, 7, 1000):
        for base in (10000.0, 500.0):
            y = apply_rope(x, offset=off, base=base)
            assert y.dtype == x.dtype and y.shape == x.shape
            assert torch.allclose(y, _rope_loop(x, off, base), atol=1e-9, rtol=0)
            y32 = apply_rope(x.float(), offset=off, base=base)
            assert y32.dtype == torch.float32
            assert torch.allclose(y32.double(), _rope_loop(x, off, base), atol=1e-5, rtol=0)
    assert torch.equal(x, x0)
    assert torch.allclose(apply_rope(x, offset=0)[..., 0, :], x[..., 0, :])  # position 0 = identity
    # offset composes: rows of a long sequence == shorter sequence with an offset
    assert torch.allclose(apply_rope(x)[..., 3:, :], apply_rope(x[..., 3:, :], offset=3), atol=1e-12)

    for bad in ((10, 3), (12, 4)):  # not divisible / odd head_dim (12/4=3)
        try:
            RoPEAttention(*bad)
            raise AssertionError(bad)
        except ValueError:
            pass
    B, L, d, H = 3, 7, 20, 2
    att = RoPEAttention(d, H)
    assert set(att.state_dict()) == {f"{n}.weight" for n in ("W_q", "W_k", "W_v", "W_o")}
    x = torch.randn(B, L, d)
    out = att(x)
    assert out.shape == (B, L, d)

    def ref_forward(m, x, causal):
        Bn, Ln, _ = x.shape
        hd = m.head_dim
        q = m.W_q(x).view(Bn, Ln, m.num_heads, hd).transpose(1, 2).double()
        k = m.W_k(x).view(Bn, Ln, m.num_heads, hd).transpose(1, 2).double()
        v = m.W_v(x).view(Bn, Ln, m.num_heads, hd).transpose(1, 2).double()
        q, k = _rope_loop(q), _rope_loop(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        if causal:
            s = s.masked_fill(torch.ones(Ln, Ln, dtype=torch.bool).triu(1), float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(Bn, Ln, -1)
        return m.W_o(o.float())
    with torch.no_grad():
        for causal in (True, False):
            assert torch.allclose(att(x, causal=causal), ref_forward(att, x, causal), atol=1e-5)
        # causal: changing later tokens leaves earlier outputs alone
        x2 = x.clone()
        x2[:, 4:] = torch.randn(B, L - 4, d)
        assert torch.allclose(att(x)[:, :4], att(x2)[:, :4], atol=1e-6)
        att64 = RoPEAttention(d, H).double()
        assert att64(x.double()).dtype == torch.float64

    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    S = relative_scores(q, k, 9)
    assert S.shape == (9, 9) and S.dtype == torch.float64
    # Toeplitz: S[m, n] == S[m+1, n+1]
    assert torch.allclose(S[1:, 1:], S[:-1, :-1], atol=1e-9)
    direct = torch.stack([torch.stack([_rope_loop(q.view(1, -1), m_)[0] @ _rope_loop(k.view(1, -1), n_)[0]
                                       for n_ in range(9)]) for m_ in range(9)])
    assert torch.allclose(S, direct, atol=1e-9)
    S32 = relative_scores(q.float(), k.float(), 5)
    assert S32.dtype == torch.float32 and torch.allclose(S32.double(), direct[:5, :5], atol=1e-5)
    print("ex6 ok")
