"""Exercise 7: a KV cache for autoregressive decoding with RoPE and grouped K/V heads.

Style: one einsum over (kv_head, group) pairs so K/V are never repeated, RoPE computed
in float64 at absolute positions P .. P+T_new-1, the causal mask from log() of an index
comparison between absolute query and key positions.
"""
import math

import torch
import torch.nn as nn


def _rope(x, offset=0, base=10000.0):
    """Split-halves RoPE (as in ex6) on x (..., T, head_dim); row t at position offset + t."""
    T, head_dim = x.shape[-2], x.shape[-1]
    exponent = -2.0 * torch.arange(head_dim // 2, dtype=torch.float64, device=x.device) / head_dim
    theta = torch.pow(torch.tensor(float(base), dtype=torch.float64, device=x.device), exponent)
    positions = offset + torch.arange(T, dtype=torch.float64, device=x.device)
    angles = torch.einsum("t,i->ti", positions, theta)
    cos, sin = angles.cos(), angles.sin()
    lo, hi = x.to(torch.float64).unflatten(-1, (2, -1)).unbind(dim=-2)
    out = torch.stack((lo * cos - hi * sin, lo * sin + hi * cos), dim=-2).flatten(-2)
    return out.to(x.dtype)


def _softmax(scores):
    peak = scores.amax(dim=-1, keepdim=True).detach()
    e = torch.exp(scores - peak)
    return e / e.sum(dim=-1, keepdim=True)


class KVCache:
    """Keys and values of the tokens seen so far, (B, H_kv, T, head_dim) each."""

    def __init__(self):
        self._k = None
        self._v = None

    def append(self, k, v):
        """Concatenate k, v (B, H_kv, T_new, head_dim) after the cached time steps."""
        if self._k is None:
            self._k, self._v = k.clone(), v.clone()
        else:
            self._k = torch.cat((self._k, k), dim=2)
            self._v = torch.cat((self._v, v), dim=2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        return 0 if self._k is None else int(self._k.shape[2])


class CachedSelfAttention(nn.Module):
    """Causal GQA self-attention with RoPE that can continue from a KVCache."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.n_groups = n_heads // n_kv_heads
        self.head_dim = d_model // n_heads
        self.base = base
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, cache=None):
        """x (B, T_new, d_model) -> (B, T_new, d_model); new tokens sit at positions
        P .. P+T_new-1 where P = len(cache) (0 without a cache)."""
        kv, g, hd = self.n_kv_heads, self.n_groups, self.head_dim
        past = 0 if cache is None else len(cache)
        t_new = x.shape[1]
        # (B, T, H*hd) -> (B, H, T, hd); query head h = j*g + r belongs to K/V head j
        q = _rope(self.W_q(x).unflatten(-1, (self.n_heads, hd)).permute(0, 2, 1, 3),
                  past, self.base)
        k = _rope(self.W_k(x).unflatten(-1, (kv, hd)).permute(0, 2, 1, 3), past, self.base)
        v = self.W_v(x).unflatten(-1, (kv, hd)).permute(0, 2, 1, 3)
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        q = q.unflatten(1, (kv, g))                                  # (B, kv, g, T_new, hd)
        scores = torch.einsum("bkgtd,bksd->bkgts", q, k) / math.sqrt(hd)
        q_pos = past + torch.arange(t_new, device=x.device)
        k_pos = torch.arange(k.shape[2], device=x.device)
        allowed = (k_pos.reshape(1, -1) <= q_pos.reshape(-1, 1)).to(scores.dtype)
        weights = _softmax(scores + allowed.log())                   # log: 0 / -inf
        context = torch.einsum("bkgts,bksd->btkgd", weights, v)      # (B, T_new, kv, g, hd)
        return self.W_o(context.flatten(-3))


class TinyLM(nn.Module):
    """logits = head(x + attn(x, cache)) with x = embed(tokens)."""

    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        return self.head(x + self.attn(x, cache))


def generate(model, prompt, n_new, use_cache=True):
    """Greedy decoding (argmax, first maximum on ties) of n_new tokens after prompt (B, T0).

    With the cache: one pass over the prompt, then one pass per generated token over that
    token alone. Without: one pass over the whole sequence so far per new token."""
    seq = prompt.clone()
    if n_new <= 0:
        return seq
    with torch.no_grad():
        if use_cache:
            cache = KVCache()
            step_input = prompt
            for _ in range(n_new):
                logits = model(step_input, cache)
                step_input = logits[:, -1].argmax(dim=-1).reshape(-1, 1).to(seq.dtype)
                seq = torch.cat((seq, step_input), dim=1)
        else:
            for _ in range(n_new):
                logits = model(seq)
                nxt = logits[:, -1].argmax(dim=-1).reshape(-1, 1).to(seq.dtype)
                seq = torch.cat((seq, nxt), dim=1)
    return seq


def kv_projections(prompt_len, n_new, use_cache):
    """Token positions per batch row that `generate` sends through W_k (and W_v)."""
    if n_new <= 0:
        return 0
    if use_cache:
        return prompt_len + n_new - 1
    # passes over lengths prompt_len, prompt_len + 1, ..., prompt_len + n_new - 1
    return n_new * prompt_len + n_new * (n_new - 1) // 2


if __name__ == "__main__":
    import torch.nn.functional as F

    c = KVCache()
    assert c.k is None and c.v is None and len(c) == 0
    a = torch.randn(2, 3, 4, 5)
    c.append(a, a + 1)
    c.append(a[:, :, :1], a[:, :, :1] + 1)
    assert c.k.shape == (2, 3, 5, 5) and len(c) == 5 and torch.equal(c.k[:, :, 4], a[:, :, 0])
    assert torch.equal(c.v[:, :, :4], a + 1)

    torch.manual_seed(0)
    B, T, d, H, KV = 3, 9, 40, 4, 2
    att = CachedSelfAttention(d, H, KV)
    assert att.W_k.weight.shape == (20, 40)
    x = torch.randn(B, T, d)
    full = att(x)

    # reference: repeat_interleave + SDPA
    hd = d // H
    q = _rope(att.W_q(x).reshape(B, T, H, hd).transpose(1, 2))
    k = _rope(att.W_k(x).reshape(B, T, KV, hd).transpose(1, 2)).repeat_interleave(H // KV, 1)
    v = att.W_v(x).reshape(B, T, KV, hd).transpose(1, 2).repeat_interleave(H // KV, 1)
    ref = att.W_o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, d))
    assert torch.allclose(full, ref, atol=1e-6)

    for splits in ([9], [1] * 9, [4, 1, 1, 1, 1, 1], [2, 3, 4], [5, 4]):
        cache = KVCache()
        outs, s = [], 0
        for n in splits:
            outs.append(att(x[:, s:s + n], cache))
            s += n
        assert len(cache) == T
        assert torch.allclose(torch.cat(outs, 1), full, atol=1e-5), splits
    att_mha = CachedSelfAttention(d, H)
    assert att_mha.n_kv_heads == H and att_mha.W_k.weight.shape == (40, 40)

    lm = TinyLM()
    assert lm.head.bias is not None
    prompt = torch.randint(0, 32, (2, 5))
    pc = prompt.clone()
    counts = []
    hook = lm.attn.W_k.register_forward_hook(lambda m, i, o: counts.append(i[0].shape[1]))
    grad_flags = []
    hook2 = lm.attn.register_forward_hook(lambda m, i, o: grad_flags.append(torch.is_grad_enabled()))
    g1 = generate(lm, prompt, 7, use_cache=True)
    n_cached = sum(counts)
    counts.clear()
    g2 = generate(lm, prompt, 7, use_cache=False)
    n_plain = sum(counts)
    assert torch.equal(g1, g2) and g1.shape == (2, 12) and torch.equal(g1[:, :5], prompt)
    assert torch.equal(prompt, pc) and g1.dtype == torch.long
    assert n_cached == kv_projections(5, 7, True) == 11
    assert n_plain == kv_projections(5, 7, False) == sum(range(5, 12))
    assert not any(grad_flags)
    counts.clear()
    g3 = generate(lm, prompt, 1, use_cache=True)
    assert sum(counts) == kv_projections(5, 1, True) == 5 and g3.shape == (2, 6)
    counts.clear()
    generate(lm, prompt, 1, use_cache=False)
    assert sum(counts) == kv_projections(5, 1, False) == 5
    hook.remove()
    hook2.remove()
    # longer decode
    big = TinyLM(vocab_size=17, d_model=24, n_heads=6, n_kv_heads=3)
    p = torch.randint(0, 17, (4, 3))
    assert torch.equal(generate(big, p, 30), generate(big, p, 30, use_cache=False))
    print("ex7 ok")
