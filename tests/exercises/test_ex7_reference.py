"""The reference of ex7_kv_cache behaves as EXERCISES.md says: every split of a sequence gives
the outputs of the whole, with grouped K/V heads; the cache holds K after RoPE; generate agrees
with and without the cache; kv_projections is what a hook on W_k counts."""

from __future__ import annotations

import pytest
import torch

from autograder._reference import ex7_kv_cache as ref

pytestmark = pytest.mark.ex7


@pytest.mark.parametrize("pieces", [[9], [1] * 9, [4, 1, 1, 1, 1, 1], [3, 2, 4]])
def test_every_split_equals_the_whole(pieces):
    torch.manual_seed(0)
    attention = ref.CachedSelfAttention(24, 6, 2)
    x = torch.randn(2, 9, 24)
    whole = attention(x)
    cache, outputs, start = ref.KVCache(), [], 0
    for size in pieces:
        outputs.append(attention(x[:, start : start + size], cache))
        start += size
    assert torch.allclose(torch.cat(outputs, dim=1), whole, atol=1e-5)
    assert len(cache) == 9 and cache.k.shape == (2, 2, 9, 4)
    k = attention.W_k(x).view(2, 9, 2, 4).transpose(1, 2)
    assert torch.allclose(cache.k, ref.apply_rope(k), atol=1e-6), "K is cached after RoPE"


def test_without_cache_is_causal_gqa():
    torch.manual_seed(1)
    attention = ref.CachedSelfAttention(24, 6, 3)
    x = torch.randn(1, 6, 24)
    changed = x.clone()
    changed[:, -1] += 1
    assert torch.allclose(attention(changed)[:, :-1], attention(x)[:, :-1], atol=1e-6)
    assert ref.CachedSelfAttention(24, 6).W_k.weight.shape == (24, 24)
    for args in ((25, 6, 3), (24, 6, 4)):
        with pytest.raises(ValueError):
            ref.CachedSelfAttention(*args)


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_and_the_hook_count(use_cache):
    torch.manual_seed(2)
    model = ref.TinyLM()
    prompt = torch.randint(0, 32, (3, 5))
    seen = []
    hook = model.attn.W_k.register_forward_pre_hook(lambda m, i: seen.append(i[0].shape[-2]))
    tokens = ref.generate(model, prompt, 7, use_cache=use_cache)
    hook.remove()
    assert tokens.shape == (3, 12) and torch.equal(tokens[:, :5], prompt)
    assert torch.equal(tokens, ref.generate(model, prompt, 7, use_cache=not use_cache))
    assert sum(seen) == ref.kv_projections(5, 7, use_cache)
    assert ref.kv_projections(5, 0, use_cache) == 0
