"""Exercise 6: rotary position embeddings (split-halves style).

Style: a small `_RotationTable` object computes the cos/sin of every (position, pair)
angle in float64; `apply_rope` rotates the two halves of each head vector with it, and
`RoPEAttention` handles the heads one at a time in a loop.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_frequencies(head_dim, base=10000.0):
    """theta_i = base ** (-2 i / head_dim) for i = 0 .. head_dim/2 - 1 (float64)."""
    if head_dim <= 0 or head_dim % 2 != 0:
        raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
    pair_index = torch.arange(head_dim // 2, dtype=torch.float64)
    return torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * pair_index / head_dim)


class _RotationTable:
    """cos and sin of the angles p * theta_i for positions offset .. offset + length - 1."""

    def __init__(self, head_dim, length, offset=0, base=10000.0, device=None):
        self.head_dim = head_dim
        self.half = head_dim // 2
        theta = rope_frequencies(head_dim, base).to(device)
        positions = torch.arange(offset, offset + length, dtype=torch.float64, device=device)
        angles = positions.unsqueeze(1) * theta.unsqueeze(0)          # (length, half)
        self.cos = torch.cos(angles)
        self.sin = torch.sin(angles)

    def rotate(self, x):
        """Rotate x (..., length, head_dim); the result is float64."""
        x64 = x.to(torch.float64)
        first = x64[..., : self.half]
        second = x64[..., self.half:]
        new_first = first * self.cos - second * self.sin
        new_second = first * self.sin + second * self.cos
        return torch.cat([new_first, new_second], dim=-1)


def apply_rope(x, offset=0, base=10000.0):
    """Rotate every row t of x (..., T, head_dim) as if it sat at position offset + t."""
    if x.dim() < 2:
        raise ValueError("x must have shape (..., T, head_dim)")
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError("head_dim must be even")
    length = x.shape[-2]
    table = _RotationTable(head_dim, length, offset=offset, base=base, device=x.device)
    return table.rotate(x).to(x.dtype)


class RoPEAttention(nn.Module):
    """Multi-head self-attention with RoPE on Q and K (positions 0 .. L-1), optionally causal."""

    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        head_dim = d_model // num_heads
        if head_dim % 2 != 0:
            raise ValueError(f"head_dim={head_dim} must be even for RoPE")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.base = base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"expected x of shape (B, L, {self.d_model}), got {tuple(x.shape)}")
        batch, length, _ = x.shape
        Q = self.W_q(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        K = self.W_k(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        V = self.W_v(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        Q = apply_rope(Q, offset=0, base=self.base)
        K = apply_rope(K, offset=0, base=self.base)

        blocked = None
        if causal:
            blocked = torch.triu(torch.ones(length, length, dtype=torch.bool, device=x.device), diagonal=1)
        scale = 1.0 / math.sqrt(self.head_dim)
        head_outputs = []
        for h in range(self.num_heads):
            scores = torch.matmul(Q[:, h], K[:, h].transpose(-2, -1)) * scale     # (B, L, L)
            if blocked is not None:
                scores = scores.masked_fill(blocked, float("-inf"))
            weights = F.softmax(scores, dim=-1)
            head_outputs.append(torch.matmul(weights, V[:, h]))
        context = torch.stack(head_outputs, dim=1).transpose(1, 2).contiguous()
        context = context.view(batch, length, self.d_model)
        return self.W_o(context)


def relative_scores(q, k, positions, base=10000.0):
    """S[m, n] = rope(q at position m) . rope(k at position n), shape (positions, positions)."""
    if q.dim() != 1 or k.dim() != 1 or q.shape != k.shape:
        raise ValueError("q and k must be 1-D vectors of the same length")
    if q.shape[0] % 2 != 0:
        raise ValueError("head_dim must be even")
    table = _RotationTable(q.shape[0], positions, offset=0, base=base, device=q.device)
    q_rows = table.rotate(q.unsqueeze(0).expand(positions, -1))     # (P, head_dim) float64
    k_rows = table.rotate(k.unsqueeze(0).expand(positions, -1))
    scores = torch.matmul(q_rows, k_rows.transpose(0, 1))
    return scores.to(q.dtype)


if __name__ == "__main__":
    th = rope_frequencies(8)
    assert th.shape == (4,)
    assert torch.allclose(th, torch.tensor([10000 ** (-2 * i / 8) for i in range(4)], dtype=torch.float64))
    try:
        rope_frequencies(7)
        raise AssertionError
    except ValueError:
        pass

    # compare apply_rope with a naive per-element loop
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    x_copy = x.clone()
    y = apply_rope(x, offset=4, base=100.0)
    assert torch.equal(x, x_copy) and y.dtype == x.dtype and y.shape == x.shape
    naive = torch.empty_like(x)
    h = 3
    for t in range(5):
        p = 4 + t
        for i in range(h):
            a = p * 100.0 ** (-2 * i / 6)
            naive[..., t, i] = x[..., t, i] * math.cos(a) - x[..., t, i + h] * math.sin(a)
            naive[..., t, i + h] = x[..., t, i] * math.sin(a) + x[..., t, i + h] * math.cos(a)
    print("rope diff", (y - naive).abs().max().item())
    assert torch.allclose(y, naive, atol=1e-12)
    x32 = x.float()
    y32 = apply_rope(x32, offset=4, base=100.0)
    assert y32.dtype == torch.float32 and torch.allclose(y32.double(), naive, atol=1e-5)
    # large positions
    xl = torch.randn(3, 8, dtype=torch.float64)
    assert torch.allclose(apply_rope(xl, offset=100000)[1], apply_rope(xl[1:2], offset=100001)[0], atol=1e-9)

    q, k = torch.randn(8), torch.randn(8)
    S = relative_scores(q, k, 6)
    assert S.shape == (6, 6) and S.dtype == torch.float32
    for m in range(6):
        for n in range(6):
            if m >= 1 and n >= 1:
                assert abs(S[m, n] - S[m - 1, n - 1]) < 1e-5
    direct = apply_rope(q.double().expand(6, 8)) @ apply_rope(k.double().expand(6, 8)).T
    assert torch.allclose(S.double(), direct, atol=1e-5)

    for bad in ((10, 3), (12, 4)):
        try:
            RoPEAttention(*bad)
            raise AssertionError(bad)
        except ValueError:
            pass
    att = RoPEAttention(24, 3)
    assert set(att.state_dict().keys()) == {"W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"}
    xb = torch.randn(2, 7, 24)
    # reference with torch sdpa
    B, L, H, hd = 2, 7, 3, 8
    Q = apply_rope(att.W_q(xb).view(B, L, H, hd).transpose(1, 2))
    K = apply_rope(att.W_k(xb).view(B, L, H, hd).transpose(1, 2))
    V = att.W_v(xb).view(B, L, H, hd).transpose(1, 2)
    for causal in (True, False):
        ref = F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
        ref = att.W_o(ref.transpose(1, 2).reshape(B, L, 24))
        out = att(xb, causal=causal)
        print("attn diff", causal, (out - ref).abs().max().item())
        assert torch.allclose(out, ref, atol=1e-5)
    # causal: prefix outputs do not depend on later tokens
    xb2 = xb.clone()
    xb2[:, 4:] = torch.randn(2, 3, 24)
    assert torch.allclose(att(xb)[:, :4], att(xb2)[:, :4], atol=1e-6)
    print("ok")
