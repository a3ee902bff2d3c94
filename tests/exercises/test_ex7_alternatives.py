"""Correct ex7_kv_cache solutions in other styles than the reference's score full marks: a
cache that preallocates and grows, PyTorch's fused attention with an explicit offset mask, and
generation that keeps the last logits or runs under a no_grad decorator."""

from __future__ import annotations

import pytest

from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.support.student_cells import tinylm

pytestmark = pytest.mark.ex7

CACHE_LIST = """
class KVCache:
    def __init__(self):
        self.keys, self.values = [], []

    def append(self, k, v):
        self.keys.append(k)
        self.values.append(v)

    @property
    def k(self):
        return torch.cat(self.keys, dim=-2) if self.keys else None

    @property
    def v(self):
        return torch.cat(self.values, dim=-2) if self.values else None

    def __len__(self):
        return sum(k.shape[-2] for k in self.keys)
"""

ATTENTION_FUSED = """
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        self.h = n_heads
        self.h_kv = n_heads if n_kv_heads is None else n_kv_heads
        if d_model % self.h != 0 or self.h % self.h_kv != 0:
            raise ValueError("sizes do not divide")
        self.d = d_model // self.h
        self.base = base
        self.W_q = nn.Linear(d_model, self.h * self.d, bias=False)
        self.W_k = nn.Linear(d_model, self.h_kv * self.d, bias=False)
        self.W_v = nn.Linear(d_model, self.h_kv * self.d, bias=False)
        self.W_o = nn.Linear(self.h * self.d, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        start = len(cache) if cache is not None else 0
        q = self.W_q(x).reshape(B, T, self.h, self.d).permute(0, 2, 1, 3)
        k = self.W_k(x).reshape(B, T, self.h_kv, self.d).permute(0, 2, 1, 3)
        v = self.W_v(x).reshape(B, T, self.h_kv, self.d).permute(0, 2, 1, 3)
        q = apply_rope(q, offset=start, base=self.base)
        k = apply_rope(k, offset=start, base=self.base)
        if cache is not None:
            cache.append(k, v)
            k, v = cache.k, cache.v
        g = self.h // self.h_kv
        k = k[:, :, None].expand(B, self.h_kv, g, *k.shape[2:]).reshape(B, self.h, -1, self.d)
        v = v[:, :, None].expand(B, self.h_kv, g, *v.shape[2:]).reshape(B, self.h, -1, self.d)
        allowed = torch.ones(T, k.shape[2], dtype=torch.bool).tril(diagonal=start)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.W_o(out.permute(0, 2, 1, 3).reshape(B, T, -1))
"""

SIZE_CHECK = """        if d_model % self.h != 0 or self.h % self.h_kv != 0:
            raise ValueError("sizes do not divide")
"""
assert SIZE_CHECK in ATTENTION_FUSED
ATTENTION_ASSERTS = ATTENTION_FUSED.replace(
    SIZE_CHECK, '        assert d_model % self.h == 0 and self.h % self.h_kv == 0, "sizes"\n'
)
ATTENTION_UNCHECKED = ATTENTION_FUSED.replace(SIZE_CHECK, "")

GENERATE_LOOP = """
def generate(model, prompt, n_new, use_cache=True):
    out = prompt.clone()
    model.eval()
    with torch.inference_mode():
        if n_new == 0:
            return out
        cache = KVCache() if use_cache else None
        logits = model(out, cache)
        for i in range(n_new):
            nxt = torch.argmax(logits[:, -1, :], dim=-1).unsqueeze(-1)
            out = torch.cat((out, nxt), dim=-1)
            if i + 1 < n_new:
                logits = model(nxt, cache) if use_cache else model(out)
    return out
"""


GENERATE_DECORATED = """
@torch.no_grad()
def generate(model, prompt, n_new, use_cache=True):
    cache = KVCache() if use_cache else None
    tokens, fed = prompt, prompt
    for _ in range(n_new):
        logits = model(fed, cache) if use_cache else model(tokens)
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, nxt], 1)
        fed = nxt if use_cache else tokens
    return tokens
"""


# TinyLM casts the residual back to float32 (an attention that returns float64 is graded by the
# attention's own checks; TinyLM's composition of it is right)
TINYLM_CASTS = tinylm("""
x = self.embed(tokens)
return self.head((x + self.attn(x, cache=cache)).float())
""")
ATTENTION_IN_FLOAT64 = """
_attention_forward = CachedSelfAttention.forward
def _in_float64(self, x, cache=None):
    return _attention_forward(self, x, cache).double()
CachedSelfAttention.forward = _in_float64
"""

# Tied input and output embeddings (an independent student's correct TinyLM lost 3 points: the
# checks loaded independent weights into both)
TINYLM_TIED = """
class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)
        self.head.weight = self.embed.weight

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        return self.head(x + self.attn(x, cache))
"""


@pytest.mark.parametrize(
    "cells",
    [
        pytest.param({"TinyLM": TINYLM_TIED}, id="tied-embeddings"),
        pytest.param({"KVCache": CACHE_LIST}, id="list-cache"),
        pytest.param({"CachedSelfAttention": ATTENTION_FUSED}, id="fused-attention-offset-mask"),
        pytest.param({"generate": GENERATE_LOOP}, id="generate-keeps-last-logits"),
        pytest.param({"generate": GENERATE_DECORATED}, id="generate-no-grad-decorator"),
        # The contract names no error for sizes that do not divide (an independent student's
        # correct solutions lost 0.5 for an assert and for no check at all).
        pytest.param({"CachedSelfAttention": ATTENTION_ASSERTS}, id="sizes-asserted"),
        pytest.param({"CachedSelfAttention": ATTENTION_UNCHECKED}, id="sizes-unchecked"),
    ],
)
def test_alternative_scores_full_marks(cells, tmp_path, shared_sandbox):
    notebook = source_notebook("ex7_kv_cache", replace=cells)
    path = write_notebook(notebook, tmp_path / "ex7_kv_cache.ipynb")
    report = grade_notebook(path, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert not failed and report.score == 8, failed


def test_a_tinylm_casting_a_float64_attention_back_scores_full_marks(tmp_path, shared_sandbox):
    notebook = with_student_cells(
        source_notebook("ex7_kv_cache", replace={"TinyLM": TINYLM_CASTS}), ATTENTION_IN_FLOAT64
    )
    path = write_notebook(notebook, tmp_path / "ex7_kv_cache.ipynb")
    report = grade_notebook(path, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert not failed and report.score == 8, failed
