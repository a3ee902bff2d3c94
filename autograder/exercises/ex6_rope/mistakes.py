"""Named mistakes of ex6_rope (each a wrong version of a contract function or class)."""
# ruff: noqa: F811 - every mistake redefines the function it replaces

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder._reference.ex6_rope import apply_rope, rope_frequencies
from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex6_rope")


# -- rope_frequencies ----------------------------------------------------------------------------
@CATALOGUE.mistake(
    "exponent_i_over_d",
    "the frequencies use the exponent -i/head_dim instead of -2i/head_dim",
    check="test_rope_frequencies_match_the_formula",
)
def rope_frequencies(head_dim, base=10000.0):
    if head_dim <= 0 or head_dim % 2:
        raise ValueError("head_dim must be even")
    return base ** (-torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)


@CATALOGUE.mistake(
    "frequencies_from_one",
    "the frequency index starts at 1 instead of 0 (theta_0 should be 1)",
    check="test_rope_frequencies_match_the_formula",
)
def rope_frequencies(head_dim, base=10000.0):
    if head_dim <= 0 or head_dim % 2:
        raise ValueError("head_dim must be even")
    return base ** (-torch.arange(2, head_dim + 2, 2, dtype=torch.float64) / head_dim)


@CATALOGUE.mistake(
    "base_ignored",
    "the frequencies always use base 10000 and ignore the `base` argument",
    check="test_rope_frequencies_match_the_formula",
)
def rope_frequencies(head_dim, base=10000.0):
    if head_dim <= 0 or head_dim % 2:
        raise ValueError("head_dim must be even")
    return 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


@CATALOGUE.mistake(
    "odd_head_dim_accepted",
    "an odd head_dim is accepted (its last feature has no partner): raise ValueError",
    check="test_rope_frequencies_rejects_an_odd_head_dim",
)
def rope_frequencies(head_dim, base=10000.0):
    return base ** (-torch.arange(0, head_dim - 1, 2, dtype=torch.float64) / head_dim)


# -- apply_rope ----------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "float32_frequencies",
    "the angles were computed from float32 frequencies (as `torch.arange(...).float()` gives): "
    "float64 inputs need float64 frequencies and angles (the checks compare them at 1e-9)",
    check="test_apply_rope_matches_the_formula",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = 1.0 / (base ** (torch.arange(0, x.shape[-1], 2).float() / x.shape[-1]))
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


@CATALOGUE.mistake(
    "interleaved_pairs",
    "neighbouring features (x_2i, x_2i+1) were rotated together instead of the split halves "
    "(x_i, x_i+h)",
    check="test_apply_rope_matches_the_formula",
)
def apply_rope(x, offset=0, base=10000.0):
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


@CATALOGUE.mistake(
    "rotation_reversed",
    "the pairs are rotated in the wrong direction (by -p*theta instead of +p*theta)",
    check="test_apply_rope_matches_the_formula",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos + second * sin, second * cos - first * sin], dim=-1)


@CATALOGUE.mistake(
    "positions_from_one",
    "positions start at 1 instead of 0 (the first row should not be rotated)",
    check="test_apply_rope_matches_the_formula",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(offset + 1, offset + 1 + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


@CATALOGUE.mistake(
    "offset_ignored",
    "`offset` is ignored: every call rotates its rows from position 0",
    check="test_apply_rope_offset_continues_the_positions",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


@CATALOGUE.mistake(
    "positions_in_float32",
    "the positions were made in float32, which cannot hold every integer past 2**24 "
    "(2**24 + 1 becomes 2**24): make them in float64 (or keep them integers)",
    check="test_apply_rope_offset_continues_the_positions",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = offset + torch.arange(x.shape[-2]).float()
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


@CATALOGUE.mistake(
    "positions_along_the_wrong_axis",
    "the position was taken from the first axis of x instead of the second-to-last (rows)",
    check="test_apply_rope_matches_the_formula",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base)
    positions = torch.arange(offset, offset + x.shape[0], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (half,)
    cos = torch.cos(angles).reshape(shape).to(x.dtype)
    sin = torch.sin(angles).reshape(shape).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


# -- RoPEAttention -------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "rope_on_values",
    "the values V were rotated too: RoPE belongs on Q and K only",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = apply_rope(heads(self.W_v(x)), base=self.base)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "rope_before_head_split",
    "RoPE was applied over the whole d_model before the heads were split: each head must be "
    "rotated with its own head_dim",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = heads(apply_rope(self.W_q(x), base=self.base))
        k = heads(apply_rope(self.W_k(x), base=self.base))
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "scores_not_scaled",
    "the scores were not divided by sqrt(head_dim)",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "causal_mask_reversed",
    "the causal mask hides the past instead of the future (tril instead of triu)",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).tril(-1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "heads_split_by_stride",
    "the heads were split by stride (view(B, L, head_dim, num_heads)) instead of contiguous "
    "blocks of head_dim features",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.head_dim, self.num_heads).permute(0, 3, 1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.permute(0, 2, 3, 1).reshape(batch, length, d_model))


# -- relative_scores -----------------------------------------------------------------------------
@CATALOGUE.mistake(
    "only_q_rotated",
    "only q was rotated: k must be rotated to its own position too",
    check="test_relative_scores_match_the_formula",
)
def relative_scores(q, k, positions, base=10000.0):
    rotated_q = apply_rope(q.expand(positions, q.shape[-1]), base=base)
    return rotated_q @ k.expand(positions, k.shape[-1]).T


@CATALOGUE.mistake(
    "scores_transposed",
    "the matrix is transposed: row m must be the query's position, column n the key's",
    check="test_relative_scores_match_the_formula",
)
def relative_scores(q, k, positions, base=10000.0):
    rotated_q = apply_rope(q.expand(positions, q.shape[-1]), base=base)
    rotated_k = apply_rope(k.expand(positions, k.shape[-1]), base=base)
    return rotated_k @ rotated_q.T


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "rope_returns_float64",
    "apply_rope returned float64 for a float32 x: it returns a tensor of x's dtype (compute the "
    "angles in float64, then cast the result back)",
    check="test_apply_rope_float32_in_float32_out",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base).double()
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    first, second = x[..., :half].double(), x[..., half:].double()
    cos, sin = torch.cos(angles), torch.sin(angles)
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


@CATALOGUE.mistake(
    "rope_in_place",
    "apply_rope rotated x in place: it returns a new tensor and leaves x as it was",
    check="test_apply_rope_float32_in_float32_out",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base).double()
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half].clone(), x[..., half:].clone()
    x[..., :half] = first * cos - second * sin
    x[..., half:] = first * sin + second * cos
    return x


@CATALOGUE.mistake(
    "apply_rope_ignores_base",
    "apply_rope ignores its base: the frequencies always use the default 10000",
    check="test_apply_rope_matches_the_formula",
)
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1]).double()
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


@CATALOGUE.mistake(
    "rope_projections_with_bias",
    "the projections have biases; RoPEAttention's W_q, W_k, W_v and W_o are "
    "nn.Linear(d_model, d_model, bias=False)",
    check="test_rope_attention_projections_and_sizes",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=True)
        self.W_k = nn.Linear(d_model, d_model, bias=True)
        self.W_v = nn.Linear(d_model, d_model, bias=True)
        self.W_o = nn.Linear(d_model, d_model, bias=True)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "frequencies_in_the_state_dict",
    "the frequencies were registered as a persistent buffer, so the state_dict holds more than "
    "W_q, W_k, W_v and W_o: register it with persistent=False (or keep no buffer)",
    check="test_rope_attention_projections_and_sizes",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("theta", rope_frequencies(d_model // num_heads, base))

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "odd_head_dim_accepted_by_the_module",
    "RoPEAttention accepted an odd head_dim (its last feature has no partner): raise "
    "ValueError at construction",
    check="test_rope_attention_projections_and_sizes",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "no_output_projection",
    "the merged heads were returned without the output projection W_o",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return out.transpose(1, 2).reshape(batch, length, d_model)


@CATALOGUE.mistake(
    "rope_attention_ignores_num_heads",
    "RoPEAttention ignores num_heads: it attends with one head over all d_model features",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = 1, d_model // 1, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "rope_attention_ignores_base",
    "RoPEAttention ignores its base: it rotates with the default 10000",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, 10000.0
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "causal_ignored",
    "forward ignores causal: it always applies the causal mask, even with causal=False",
    check="test_rope_attention_matches_the_reference_on_its_weights",
)
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.num_heads, self.head_dim, self.base = num_heads, d_model // num_heads, base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, causal=True):
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = apply_rope(heads(self.W_q(x)), base=self.base)
        k = apply_rope(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if True:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))


@CATALOGUE.mistake(
    "relative_scores_ignores_base",
    "relative_scores ignores its base: it rotates with the default 10000",
    check="test_relative_scores_match_the_formula",
)
def relative_scores(q, k, positions, base=10000.0):
    rotated_q = apply_rope(q.expand(positions, q.shape[-1]))
    rotated_k = apply_rope(k.expand(positions, k.shape[-1]))
    return rotated_q @ rotated_k.T


@CATALOGUE.mistake(
    "relative_scores_in_float64",
    "relative_scores returned float64 for float32 q and k: it returns q's dtype",
    check="test_relative_scores_match_the_formula",
)
def relative_scores(q, k, positions, base=10000.0):
    rotated_q = apply_rope(q.double().expand(positions, q.shape[-1]), base=base)
    rotated_k = apply_rope(k.double().expand(positions, k.shape[-1]), base=base)
    return rotated_q @ rotated_k.T
