"""Exercise 7: cached autoregressive decoding with RoPE and grouped K/V heads.

Style: a plain `KVCache` object that just concatenates, an attention module that builds its
causal mask with `torch.tril(..., diagonal=P)` for a cache of P tokens and loops over query
heads, and a greedy `generate` with an explicit first-maximum argmax.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ----------------------------------------------------------------------------- RoPE (as in ex6)
def _rope_angles(head_dim, start, length, base, device):
    half = head_dim // 2
    pair_index = torch.arange(half, dtype=torch.float64, device=device)
    theta = torch.pow(torch.tensor(float(base), dtype=torch.float64, device=device), -2.0 * pair_index / head_dim)
    positions = torch.arange(start, start + length, dtype=torch.float64, device=device)
    return positions.unsqueeze(1) * theta.unsqueeze(0)          # (length, half)


def _apply_rope(x, offset, base):
    """Split-halves RoPE on x (..., T, head_dim), row t at position offset + t."""
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError("head_dim must be even for RoPE")
    half = head_dim // 2
    angles = _rope_angles(head_dim, offset, x.shape[-2], base, x.device)
    cos, sin = torch.cos(angles), torch.sin(angles)
    x64 = x.to(torch.float64)
    first, second = x64[..., :half], x64[..., half:]
    rotated = torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
    return rotated.to(x.dtype)


# ----------------------------------------------------------------------------- cache
class KVCache:
    """Keeps the keys and values seen so far, each (B, H_kv, T, head_dim)."""

    def __init__(self):
        self._k = None
        self._v = None

    def append(self, k, v):
        if k.dim() != 4 or v.dim() != 4:
            raise ValueError("k and v must have shape (B, H_kv, T_new, head_dim)")
        if k.shape[:3] != v.shape[:3]:
            raise ValueError("k and v must agree on batch, heads and time")
        if self._k is None:
            self._k = k
            self._v = v
        else:
            if k.shape[0] != self._k.shape[0] or k.shape[1] != self._k.shape[1] or k.shape[3] != self._k.shape[3]:
                raise ValueError("new keys do not match the cached ones")
            self._k = torch.cat([self._k, k], dim=2)
            self._v = torch.cat([self._v, v], dim=2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        if self._k is None:
            return 0
        return self._k.shape[2]


# ----------------------------------------------------------------------------- attention
class CachedSelfAttention(nn.Module):
    """Causal GQA self-attention with RoPE that can extend a KVCache."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        if n_kv_heads is None:
            n_kv_heads = n_heads
        if n_heads % n_kv_heads != 0:
            raise ValueError("n_heads must be divisible by n_kv_heads")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.group_size = n_heads // n_kv_heads
        self.head_dim = d_model // n_heads
        self.base = base
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, cache=None):
        batch, new_len, _ = x.shape
        past_len = 0 if cache is None else len(cache)

        Q = self.W_q(x).view(batch, new_len, self.n_heads, self.head_dim).transpose(1, 2)
        K = self.W_k(x).view(batch, new_len, self.n_kv_heads, self.head_dim).transpose(1, 2)
        V = self.W_v(x).view(batch, new_len, self.n_kv_heads, self.head_dim).transpose(1, 2)
        Q = _apply_rope(Q, past_len, self.base)
        K = _apply_rope(K, past_len, self.base)

        if cache is not None:
            cache.append(K, V)
            K_all, V_all = cache.k, cache.v
        else:
            K_all, V_all = K, V
        total_len = K_all.shape[2]

        # new query t sits at position past_len + t and may see keys 0 .. past_len + t
        allowed = torch.tril(torch.ones(new_len, total_len, dtype=torch.bool, device=x.device),
                             diagonal=past_len)
        scale = 1.0 / math.sqrt(self.head_dim)
        head_outputs = []
        for h in range(self.n_heads):
            j = h // self.group_size
            scores = torch.matmul(Q[:, h], K_all[:, j].transpose(-2, -1)) * scale   # (B, T_new, T)
            scores = scores.masked_fill(~allowed, float("-inf"))
            weights = F.softmax(scores, dim=-1)
            head_outputs.append(torch.matmul(weights, V_all[:, j]))
        context = torch.stack(head_outputs, dim=1).transpose(1, 2).contiguous()
        context = context.view(batch, new_len, self.n_heads * self.head_dim)
        return self.W_o(context)


class TinyLM(nn.Module):
    """logits = head(x + attn(x, cache)), x = embed(tokens)."""

    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        return self.head(x + self.attn(x, cache))


def _first_argmax(logits):
    """argmax over the last axis, taking the first index among equal maxima."""
    best = logits.max(dim=-1, keepdim=True).values
    index = torch.arange(logits.shape[-1], device=logits.device)
    candidates = torch.where(logits == best, index, torch.full_like(index, logits.shape[-1]))
    return candidates.min(dim=-1).values


def generate(model, prompt, n_new, use_cache=True):
    """Greedy decoding: returns prompt followed by n_new generated tokens, (B, T0 + n_new)."""
    if prompt.dim() != 2:
        raise ValueError("prompt must have shape (B, T0)")
    if n_new < 0:
        raise ValueError("n_new must not be negative")
    if n_new == 0:
        return prompt.clone()
    was_training = model.training
    model.eval()
    sequence = prompt.clone()
    with torch.no_grad():
        if use_cache:
            cache = KVCache()
            logits = model(prompt, cache)                       # one pass over the prompt
            next_token = _first_argmax(logits[:, -1, :])
            sequence = torch.cat([sequence, next_token.unsqueeze(1)], dim=1)
            for _ in range(n_new - 1):
                logits = model(next_token.unsqueeze(1), cache)  # only the newest token
                next_token = _first_argmax(logits[:, -1, :])
                sequence = torch.cat([sequence, next_token.unsqueeze(1)], dim=1)
        else:
            for _ in range(n_new):
                logits = model(sequence)                         # the whole sequence so far
                next_token = _first_argmax(logits[:, -1, :])
                sequence = torch.cat([sequence, next_token.unsqueeze(1)], dim=1)
    model.train(was_training)
    return sequence


def kv_projections(prompt_len, n_new, use_cache):
    """Token positions (per batch row) that `generate` sends through W_k."""
    if prompt_len < 0 or n_new < 0:
        raise ValueError("prompt_len and n_new must not be negative")
    if n_new == 0:
        return 0
    if use_cache:
        return prompt_len + n_new - 1
    total = 0
    for step in range(n_new):
        total += prompt_len + step
    return total


if __name__ == "__main__":
    torch.manual_seed(0)
    c = KVCache()
    assert len(c) == 0 and c.k is None and c.v is None
    c.append(torch.randn(2, 3, 4, 6), torch.randn(2, 3, 4, 6))
    c.append(torch.randn(2, 3, 1, 6), torch.randn(2, 3, 1, 6))
    assert len(c) == 5 and c.k.shape == (2, 3, 5, 6)

    B, T, d, H, Hkv = 3, 11, 40, 4, 2
    attn = CachedSelfAttention(d, H, Hkv)
    x = torch.randn(B, T, d)
    full = attn(x)
    # reference: rope + sdpa with repeat_interleave
    hd = d // H
    Q = _apply_rope(attn.W_q(x).view(B, T, H, hd).transpose(1, 2), 0, 10000.0)
    K = _apply_rope(attn.W_k(x).view(B, T, Hkv, hd).transpose(1, 2), 0, 10000.0).repeat_interleave(2, 1)
    V = attn.W_v(x).view(B, T, Hkv, hd).transpose(1, 2).repeat_interleave(2, 1)
    ref = attn.W_o(F.scaled_dot_product_attention(Q, K, V, is_causal=True).transpose(1, 2).reshape(B, T, d))
    assert torch.allclose(full, ref, atol=1e-5)
    for splits in ([11], [1] * 11, [4, 1, 1, 1, 1, 1, 1, 1], [3, 5, 3]):
        cache = KVCache()
        outs = []
        s = 0
        for n in splits:
            outs.append(attn(x[:, s:s + n], cache))
            s += n
        diff = (torch.cat(outs, 1) - full).abs().max().item()
        assert diff < 1e-5, (splits, diff)
        assert len(cache) == 11
    print("split equivalence ok")

    # MHA default (n_kv None)
    a2 = CachedSelfAttention(24, 3)
    assert a2.W_k.out_features == 24

    model = TinyLM()
    assert isinstance(model.head, nn.Linear) and model.head.bias is not None
    prompt = torch.randint(0, 32, (2, 5))
    counts = {"n": 0}

    def hook(module, inputs, output):
        assert not torch.is_grad_enabled()
        counts["n"] += inputs[0].shape[1]

    handle = model.attn.W_k.register_forward_hook(hook)
    g1 = generate(model, prompt, 7, use_cache=True)
    n_cache = counts["n"]
    counts["n"] = 0
    g2 = generate(model, prompt, 7, use_cache=False)
    n_nocache = counts["n"]
    handle.remove()
    assert torch.equal(g1, g2) and g1.shape == (2, 12) and torch.equal(g1[:, :5], prompt)
    assert n_cache == kv_projections(5, 7, True) and n_nocache == kv_projections(5, 7, False)
    print(g1, n_cache, n_nocache)
    assert torch.equal(generate(model, prompt, 1), generate(model, prompt, 1, use_cache=False))
    # ties: zero head -> all logits equal -> token 0
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    assert torch.all(generate(model, prompt, 3)[:, 5:] == 0)
    assert _first_argmax(torch.tensor([[1.0, 3.0, 3.0, 2.0]])).item() == 1
    print("ok")
