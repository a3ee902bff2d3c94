"""ex7_kv_cache: cached autoregressive decoding with RoPE and grouped K/V heads."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class KVCache:
    """Keys/values of the positions seen so far, each (B, H_kv, T, head_dim)."""

    def __init__(self):
        self._k = None
        self._v = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        if self._k is None:
            self._k, self._v = k, v
        else:
            self._k = torch.cat((self._k, k), dim=-2)
            self._v = torch.cat((self._v, v), dim=-2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        return 0 if self._k is None else self._k.size(-2)


def _rope_tables(head_dim, base, start, n_pos, dtype, device):
    """cos/sin (n_pos, head_dim/2) for positions start .. start+n_pos-1 (angles in float64)."""
    theta = torch.pow(torch.tensor(float(base), dtype=torch.float64),
                      -torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    pos = torch.arange(start, start + n_pos, dtype=torch.float64)
    ang = torch.outer(pos, theta)
    return ang.cos().to(dtype=dtype, device=device), ang.sin().to(dtype=dtype, device=device)


def _rotate_halves(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class CachedSelfAttention(nn.Module):
    """Causal GQA self-attention with RoPE; with a KVCache the new tokens continue the
    cached sequence (positions P .. P+T_new-1)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                 base: float = 10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = d_model // n_heads
        self.base = base
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def _split(self, t, heads):
        return t.unflatten(-1, (heads, self.head_dim)).transpose(1, 2)  # (B, heads, T, hd)

    def forward(self, x, cache: KVCache | None = None):
        T = x.size(1)
        past = 0 if cache is None else len(cache)
        q = self._split(self.W_q(x), self.n_heads)
        k = self._split(self.W_k(x), self.n_kv_heads)
        v = self._split(self.W_v(x), self.n_kv_heads)
        cos, sin = _rope_tables(self.head_dim, self.base, past, T, q.dtype, q.device)
        q, k = _rotate_halves(q, cos, sin), _rotate_halves(k, cos, sin)
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        S = k.size(-2)
        # query t (absolute position past + t) sees keys 0 .. past + t; bottom-right aligned
        # causal mask (a single new token sees everything, so no mask is needed then)
        mask = None
        if T > 1:
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             scale=1.0 / math.sqrt(self.head_dim),
                                             enable_gqa=self.n_heads != self.n_kv_heads)
        return self.W_o(ctx.transpose(1, 2).flatten(-2))


class TinyLM(nn.Module):
    """logits = head(x + attn(x, cache)), x = embed(tokens)."""

    def __init__(self, vocab_size: int = 32, d_model: int = 32, n_heads: int = 4,
                 n_kv_heads: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, cache: KVCache | None = None):
        x = self.embed(tokens)
        return self.head(x + self.attn(x, cache))


def generate(model, prompt, n_new, use_cache=True):
    """Greedy decoding of n_new tokens after prompt (B, T0) -> (B, T0 + n_new), no grad."""
    if n_new <= 0:
        return prompt.clone()
    new_tokens = []
    with torch.no_grad():
        if use_cache:
            cache = KVCache()
            nxt = model(prompt, cache)[:, -1].argmax(dim=-1, keepdim=True)
            new_tokens.append(nxt)
            for _ in range(n_new - 1):
                nxt = model(nxt, cache)[:, -1].argmax(dim=-1, keepdim=True)
                new_tokens.append(nxt)
        else:
            seq = prompt
            for _ in range(n_new):
                nxt = model(seq)[:, -1].argmax(dim=-1, keepdim=True)
                new_tokens.append(nxt)
                seq = torch.cat((seq, nxt), dim=1)
    return torch.cat([prompt, *new_tokens], dim=1)


def kv_projections(prompt_len, n_new, use_cache):
    """Token positions (per batch row) that generate() pushes through W_k."""
    if use_cache:
        return prompt_len + n_new - 1
    # passes over prompt_len, prompt_len + 1, ..., prompt_len + n_new - 1 tokens
    return n_new * prompt_len + n_new * (n_new - 1) // 2


if __name__ == "__main__":
    torch.manual_seed(0)
    c = KVCache()
    assert len(c) == 0 and c.k is None and c.v is None
    c.append(torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5))
    c.append(torch.randn(2, 3, 1, 5), torch.randn(2, 3, 1, 5))
    assert len(c) == 5 and c.k.shape == (2, 3, 5, 5) and c.v.shape == (2, 3, 5, 5)

    # reference: explicit loops, repeat_interleave GQA, float64 RoPE
    def ref_attn(m, x):
        B, T, _ = x.shape
        q = m.W_q(x).view(B, T, m.n_heads, m.head_dim).transpose(1, 2)
        k = m.W_k(x).view(B, T, m.n_kv_heads, m.head_dim).transpose(1, 2)
        v = m.W_v(x).view(B, T, m.n_kv_heads, m.head_dim).transpose(1, 2)
        h = m.head_dim // 2
        th = m.base ** (-2 * torch.arange(h, dtype=torch.float64) / m.head_dim)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * th
        cs, sn = ang.cos().float(), ang.sin().float()

        def rot(t):
            return torch.cat([t[..., :h] * cs - t[..., h:] * sn, t[..., :h] * sn + t[..., h:] * cs], -1)
        q, k = rot(q), rot(k)
        g = m.n_heads // m.n_kv_heads
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(m.head_dim)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        return m.W_o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1))

    B, T, d = 3, 11, 24
    for H, Hkv in ((6, 3), (6, 6), (6, 1), (6, None)):
        m = CachedSelfAttention(d, H, Hkv)
        assert all(l.bias is None for l in (m.W_q, m.W_k, m.W_v, m.W_o))
        x = torch.randn(B, T, d)
        with torch.no_grad():
            full = m(x)
            assert torch.allclose(full, ref_attn(m, x), atol=1e-5)
            for splits in ([T], [1] * T, [4] + [1] * 7, [3, 5, 2, 1]):
                cache, outs, i = KVCache(), [], 0
                for s_ in splits:
                    outs.append(m(x[:, i:i + s_], cache))
                    i += s_
                assert len(cache) == T and cache.k.shape == (B, Hkv or H, T, d // H)
                assert torch.allclose(torch.cat(outs, 1), full, atol=1e-5), (H, Hkv, splits)
    # gradients flow through a cacheless forward
    m = CachedSelfAttention(d, 6, 2)
    m(torch.randn(2, 5, d)).sum().backward()
    assert m.W_k.weight.grad is not None

    torch.manual_seed(1)
    lm = TinyLM()
    assert isinstance(lm.head, nn.Linear) and lm.head.bias is not None
    prompt = torch.randint(0, 32, (3, 5))
    counts = []
    hook = lm.attn.W_k.register_forward_hook(lambda mod, inp, out: counts.append(inp[0].shape[1]))
    grad_flags = []
    h2 = lm.register_forward_pre_hook(lambda mod, inp: grad_flags.append(torch.is_grad_enabled()))
    for n_new in (1, 2, 9):
        counts.clear()
        a = generate(lm, prompt, n_new, use_cache=True)
        ca = sum(counts)
        counts.clear()
        b = generate(lm, prompt, n_new, use_cache=False)
        cb = sum(counts)
        assert a.shape == (3, 5 + n_new) and a.dtype == torch.long and torch.equal(a, b)
        assert torch.equal(a[:, :5], prompt)
        assert ca == kv_projections(5, n_new, True) and cb == kv_projections(5, n_new, False), (ca, cb)
    assert not any(grad_flags)
    hook.remove()
    h2.remove()
    # greedy check by hand
    seq = prompt
    with torch.no_grad():
        for _ in range(4):
            seq = torch.cat([seq, lm(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(seq, generate(lm, prompt, 4))
    assert kv_projections(7, 1, False) == 7 and kv_projections(7, 3, False) == 7 + 8 + 9
    print("generated", generate(lm, prompt, 6)[0].tolist())
    print("ex7 ok")
