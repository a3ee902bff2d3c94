"""Named mistakes of ex7_kv_cache (each a wrong version of a contract function or class). The
second is lesson 001's own listed pitfall: new tokens rotated from position 0."""
# ruff: noqa: F811 - every mistake redefines the function it replaces

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder._reference.ex7_kv_cache import KVCache, apply_rope
from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex7_kv_cache")


# -- KVCache -------------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "cache_concatenated_on_the_wrong_axis",
    "the cache concatenates new keys and values along the heads axis (1) instead of time (2)",
    check="test_kv_cache_appends_along_time",
)
class KVCache:
    def __init__(self):
        self._k = None
        self._v = None

    def append(self, k, v):
        self._k = k if self._k is None else torch.cat([self._k, k], dim=1)
        self._v = v if self._v is None else torch.cat([self._v, v], dim=1)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        return 0 if self._k is None else self._k.shape[2]


@CATALOGUE.mistake(
    "cache_length_counts_the_batch",
    "len(cache) is the batch size (axis 0) instead of the number of cached positions (axis 2)",
    check="test_kv_cache_appends_along_time",
)
class KVCache:
    def __init__(self):
        self._k = None
        self._v = None

    def append(self, k, v):
        self._k = k if self._k is None else torch.cat([self._k, k], dim=2)
        self._v = v if self._v is None else torch.cat([self._v, v], dim=2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        return 0 if self._k is None else self._k.shape[0]


# -- CachedSelfAttention -------------------------------------------------------------------------
@CATALOGUE.mistake(
    "cache_stores_k_before_rope",
    "the cache stores K before RoPE, so cached keys are attended to unrotated: append K after "
    "rotating it to its position",
    check="test_cached_attention_fills_the_cache",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad sizes")
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.head_dim = d_model // n_heads
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
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        k = apply_rope(k, offset=0, base=self.base) if cache is None else k
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        scores = scores.masked_fill(torch.arange(k.shape[2])[None, :] > query_positions, -math.inf)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, -1))


@CATALOGUE.mistake(
    "new_tokens_rotated_from_position_0",
    "new tokens are rotated as if they were at position 0: with a cache of P tokens they are "
    "at positions P, P+1, ... (apply RoPE with offset=len(cache))",
    check="test_cached_attention_every_split_equals_the_whole",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad sizes")
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.head_dim = d_model // n_heads
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
        q, k = apply_rope(q, base=self.base), apply_rope(k, base=self.base)
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        scores = scores.masked_fill(torch.arange(k.shape[2])[None, :] > query_positions, -math.inf)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, -1))


@CATALOGUE.mistake(
    "cached_path_forgets_the_base",
    "with a cache the rotation uses the default base 10000 instead of the module's base: pass "
    "base=self.base on every path",
    check="test_cached_attention_every_split_equals_the_whole",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad sizes")
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.head_dim = d_model // n_heads
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
        if cache is None:
            q, k = apply_rope(q, base=self.base), apply_rope(k, base=self.base)
        else:
            q, k = apply_rope(q, offset=past), apply_rope(k, offset=past)
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        scores = scores.masked_fill(torch.arange(k.shape[2])[None, :] > query_positions, -math.inf)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, -1))


@CATALOGUE.mistake(
    "mask_not_aligned_to_the_cache",
    "the causal mask is the triangle of the new tokens alone (as if they started at position "
    "0), not aligned to the cache: new token t may see every cached position up to P + t",
    check="test_cached_attention_every_split_equals_the_whole",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad sizes")
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.head_dim = d_model // n_heads
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
        q, k = (
            apply_rope(q, offset=past, base=self.base),
            apply_rope(k, offset=past, base=self.base),
        )
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        blocked = torch.arange(k.shape[2])[None, :] > torch.arange(new)[:, None]
        scores = scores.masked_fill(blocked, -math.inf)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, -1))


@CATALOGUE.mistake(
    "kv_heads_repeated_in_the_wrong_order",
    "the K/V heads were expanded with repeat (tiling) instead of repeat_interleave: K/V head j "
    "must serve the consecutive query heads j*g ... j*g+g-1",
    check="test_cached_attention_matches_the_reference_without_a_cache",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad sizes")
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.head_dim = d_model // n_heads
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
        q, k = (
            apply_rope(q, offset=past, base=self.base),
            apply_rope(k, offset=past, base=self.base),
        )
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        scores = scores.masked_fill(torch.arange(k.shape[2])[None, :] > query_positions, -math.inf)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, -1))


@CATALOGUE.mistake(
    "rope_on_values",
    "the values V were rotated too: RoPE belongs on Q and K only",
    check="test_cached_attention_matches_the_reference_without_a_cache",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad sizes")
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.head_dim = d_model // n_heads
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
        q, k = (
            apply_rope(q, offset=past, base=self.base),
            apply_rope(k, offset=past, base=self.base),
        )
        v = apply_rope(v, offset=past, base=self.base)
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        scores = scores.masked_fill(torch.arange(k.shape[2])[None, :] > query_positions, -math.inf)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, -1))


@CATALOGUE.mistake(
    "default_is_one_kv_head",
    "n_kv_heads=None should mean one K/V head per query head (n_heads), not a single K/V head",
    check="test_cached_attention_projections_and_sizes",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = 1 if n_kv_heads is None else n_kv_heads
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("bad sizes")
        self.n_heads, self.n_kv_heads, self.base = n_heads, n_kv_heads, base
        self.head_dim = d_model // n_heads
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
        q, k = (
            apply_rope(q, offset=past, base=self.base),
            apply_rope(k, offset=past, base=self.base),
        )
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        scores = scores.masked_fill(torch.arange(k.shape[2])[None, :] > query_positions, -math.inf)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, -1))


# -- TinyLM --------------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "residual_connection_missing",
    "the logits are head(attn(x)): the residual connection x + attn(x) is missing",
    check="test_tinylm_matches_the_reference_on_its_weights",
)
class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, cache=None):
        return self.head(self.attn(self.embed(tokens), cache))


# -- generate ------------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "whole_sequence_fed_with_the_cache",
    "with the cache, every step fed the whole sequence again (the cache then holds every "
    "position several times): after the prompt, feed only the token generated last",
    check="test_kv_projections_match_a_hook_on_W_k",
)
def generate(model, prompt, n_new, use_cache=True):
    tokens = prompt
    cache = KVCache() if use_cache else None
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(tokens, cache)
            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return tokens


@CATALOGUE.mistake(
    "next_token_from_the_first_position",
    "the next token was read from the logits of the first position instead of the last",
    check="test_generate_matches_the_reference",
)
def generate(model, prompt, n_new, use_cache=True):
    tokens = prompt
    cache = KVCache() if use_cache else None
    with torch.no_grad():
        for step in range(n_new):
            fed = tokens if cache is None or step == 0 else tokens[:, -1:]
            logits = model(fed, cache)
            tokens = torch.cat([tokens, logits[:, 0].argmax(dim=-1, keepdim=True)], dim=1)
    return tokens


@CATALOGUE.mistake(
    "generate_with_gradients",
    "generate runs the model with gradients on (every step keeps its graph); decode under "
    "torch.no_grad() (or torch.inference_mode())",
    check="test_generate_runs_without_gradients",
)
def generate(model, prompt, n_new, use_cache=True):
    tokens = prompt
    cache = KVCache() if use_cache else None
    for step in range(n_new):
        fed = tokens if cache is None or step == 0 else tokens[:, -1:]
        logits = model(fed, cache)
        tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return tokens


# -- kv_projections ------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "cached_count_off_by_one",
    "with the cache the count is prompt_len + n_new - 1: the token generated last is never fed",
    check="test_kv_projections_match_the_formula",
)
def kv_projections(prompt_len, n_new, use_cache):
    if use_cache:
        return prompt_len + n_new
    return sum(prompt_len + step for step in range(n_new))


@CATALOGUE.mistake(
    "recompute_counts_the_prompt_only",
    "without the cache each of the n_new passes goes over the whole sequence so far, which "
    "grows by one token per pass",
    check="test_kv_projections_match_the_formula",
)
def kv_projections(prompt_len, n_new, use_cache):
    if use_cache:
        return prompt_len + n_new - 1 if n_new else 0
    return prompt_len * n_new


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "empty_cache_holds_tensors",
    "an empty KVCache holds empty tensors: its k and v are None while empty (and len 0)",
    check="test_kv_cache_appends_along_time",
)
class KVCache:
    def __init__(self):
        self._k, self._v = torch.empty(0), torch.empty(0)

    def append(self, k, v):
        self._k = k if self._k.numel() == 0 else torch.cat([self._k, k], dim=2)
        self._v = v if self._v.numel() == 0 else torch.cat([self._v, v], dim=2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        return 0 if self._k.numel() == 0 else self._k.shape[2]


@CATALOGUE.mistake(
    "new_keys_prepended",
    "append put the new keys and values before what is cached: they go after it, along time",
    check="test_kv_cache_appends_along_time",
)
class KVCache:
    def __init__(self):
        self._k = self._v = None

    def append(self, k, v):
        self._k = k if self._k is None else torch.cat([k, self._k], dim=2)
        self._v = v if self._v is None else torch.cat([v, self._v], dim=2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        return 0 if self._k is None else self._k.shape[2]


@CATALOGUE.mistake(
    "v_holds_the_keys",
    "the cache's v property returns the cached keys: v holds the values appended",
    check="test_kv_cache_appends_along_time",
)
class KVCache:
    def __init__(self):
        self._k = self._v = None

    def append(self, k, v):
        self._k = k if self._k is None else torch.cat([self._k, k], dim=2)
        self._v = v if self._v is None else torch.cat([self._v, v], dim=2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._k

    def __len__(self):
        return 0 if self._k is None else self._k.shape[2]


@CATALOGUE.mistake(
    "cached_projections_with_bias",
    "the projections have biases; CachedSelfAttention's W_q, W_k, W_v and W_o are nn.Linear(..., "
    "bias=False)",
    check="test_cached_attention_projections_and_sizes",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim, self.base = d_model // self.n_heads, base
        self.W_q = nn.Linear(d_model, self.n_heads * self.head_dim, bias=True)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=True)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=True)
        self.W_o = nn.Linear(self.n_heads * self.head_dim, d_model, bias=True)

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
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        key_positions = torch.arange(k.shape[2])[None, :]
        if True:
            scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, self.n_heads * self.head_dim))


@CATALOGUE.mistake(
    "not_causal_without_a_cache",
    "without a cache every query attends to the whole x, later positions included: it is causal "
    "self-attention from position 0",
    check="test_cached_attention_matches_the_reference_without_a_cache",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim, self.base = d_model // self.n_heads, base
        self.W_q = nn.Linear(d_model, self.n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(self.n_heads * self.head_dim, d_model, bias=False)

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
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        key_positions = torch.arange(k.shape[2])[None, :]
        if cache is not None:
            scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, self.n_heads * self.head_dim))


@CATALOGUE.mistake(
    "cache_ignored",
    "forward ignores its cache: it neither appends the new keys and values nor attends to what is "
    "cached, as if every call started at position 0 (read past = len(cache), append, attend to "
    "cache.k and cache.v)",
    check="test_cached_attention_every_split_equals_the_whole",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim, self.base = d_model // self.n_heads, base
        self.W_q = nn.Linear(d_model, self.n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(self.n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, cache=None):
        batch, new, _ = x.shape
        past = 0 if cache is None else len(cache)
        q = self.W_q(x).view(batch, new, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(batch, new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(batch, new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, offset=past, base=self.base)
        k = apply_rope(k, offset=past, base=self.base)
        if False:
            cache.append(k, v)
            k, v = cache.k, cache.v
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        key_positions = torch.arange(k.shape[2])[None, :]
        if True:
            scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, self.n_heads * self.head_dim))


@CATALOGUE.mistake(
    "n_kv_heads_ignored",
    "CachedSelfAttention ignores n_kv_heads: W_k and W_v always have n_heads heads",
    check="test_cached_attention_projections_and_sizes",
)
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim, self.base = d_model // self.n_heads, base
        self.W_q = nn.Linear(d_model, self.n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(self.n_heads * self.head_dim, d_model, bias=False)

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
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        key_positions = torch.arange(k.shape[2])[None, :]
        if True:
            scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, self.n_heads * self.head_dim))


@CATALOGUE.mistake(
    "head_without_bias",
    "TinyLM's head has no bias: it keeps nn.Linear's default bias (nn.Linear(d_model, vocab_size))",
    check="test_tinylm_matches_the_reference_on_its_weights",
)
class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        return self.head(x + self.attn(x, cache))


@CATALOGUE.mistake(
    "tinylm_ignores_cache",
    "TinyLM's forward does not pass its cache on to attn, so a cached call starts again at "
    "position 0 and sees none of the earlier tokens",
    check="test_tinylm_matches_the_reference_on_its_weights",
)
class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        return self.head(x + self.attn(x))


@CATALOGUE.mistake(
    "tinylm_ignores_n_kv_heads",
    "TinyLM ignores n_kv_heads: its attention gets the default (one K/V head per query head)",
    check="test_tinylm_matches_the_reference_on_its_weights",
)
class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        return self.head(x + self.attn(x, cache))


@CATALOGUE.mistake(
    "generate_last_maximum_on_ties",
    "on a tie the last of the largest logits was taken: greedy decoding takes the first maximum "
    "(as torch.argmax does)",
    check="test_generate_matches_the_reference",
)
def generate(model, prompt, n_new, use_cache=True):
    tokens = prompt
    cache = KVCache() if use_cache else None
    with torch.no_grad():
        for step in range(n_new):
            if cache is None:
                logits = model(tokens)
            else:
                logits = model(tokens if step == 0 else tokens[:, -1:], cache)
            last = logits[:, -1]
            following = last.shape[-1] - 1 - last.flip(-1).argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, following], dim=1)
    return tokens


@CATALOGUE.mistake(
    "recompute_feeds_the_last_token_only",
    "without the cache each step fed only the token generated last, so the model saw no "
    "context: without the cache every pass goes over the whole sequence so far",
    check="test_generate_matches_the_reference",
)
def generate(model, prompt, n_new, use_cache=True):
    tokens = prompt
    cache = KVCache() if use_cache else None
    with torch.no_grad():
        for step in range(n_new):
            if cache is None:
                logits = model(tokens if step == 0 else tokens[:, -1:])
            else:
                logits = model(tokens if step == 0 else tokens[:, -1:], cache)
            following = logits[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, following], dim=1)
    return tokens


@CATALOGUE.mistake(
    "use_cache_ignored",
    "generate ignores use_cache: it always decodes with a cache, also when use_cache=False",
    check="test_kv_projections_match_a_hook_on_W_k",
)
def generate(model, prompt, n_new, use_cache=True):
    tokens = prompt
    cache = KVCache()
    with torch.no_grad():
        for step in range(n_new):
            logits = model(tokens if step == 0 else tokens[:, -1:], cache)
            following = logits[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, following], dim=1)
    return tokens


@CATALOGUE.mistake(
    "generate_keeps_a_cache_between_calls",
    "generate keeps its cache in a keyword default (cache=KVCache()), created once: the next "
    "call continues from the last one's positions. Extra keyword arguments need defaults that "
    "keep no state between calls (cache=None, then a new KVCache inside)",
    check="test_generate_matches_the_reference",
)
def generate(model, prompt, n_new, use_cache=True, cache=KVCache()):
    tokens = prompt
    with torch.no_grad():
        for step in range(n_new):
            if not use_cache:
                logits = model(tokens)
            else:
                logits = model(tokens if step == 0 else tokens[:, -1:], cache)
            following = logits[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, following], dim=1)
    return tokens


@CATALOGUE.mistake(
    "kv_projections_ignores_use_cache",
    "kv_projections ignores use_cache: it always counts the cached passes",
    check="test_kv_projections_match_the_formula",
)
def kv_projections(prompt_len, n_new, use_cache):
    return prompt_len + n_new - 1
