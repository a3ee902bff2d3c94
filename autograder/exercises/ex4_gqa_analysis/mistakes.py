"""Named mistakes of ex4_gqa_analysis (each a wrong version of a contract function or class)."""
# ruff: noqa: F811 - every mistake redefines the function it replaces

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder._reference.ex4_gqa_analysis import (
    GroupedQueryAttention,
    kv_cache_mib,
    kv_projection_params,
)
from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex4_gqa_analysis")


# -- GroupedQueryAttention ---------------------------------------------------------------------
@CATALOGUE.mistake(
    "kv_repeat_not_interleave",
    "K/V heads were expanded with `repeat` (head j then serves query heads j, j+n_kv_heads, "
    "...) instead of `repeat_interleave` (K/V head j serves query heads j*g .. j*g+g-1)",
    check="test_gqa_kv_head_serves_its_group",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.kv, self.d = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.kv, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.kv, self.d).transpose(1, 2)
        k, v = k.repeat(1, self.h // self.kv, 1, 1), v.repeat(1, self.h // self.kv, 1, 1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


@CATALOGUE.mistake(
    "no_head_dim_scaling",
    "the scores were not divided by sqrt(head_dim)",
    check="test_gqa_matches_reference_with_its_own_weights",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.kv, self.d = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.kv, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


@CATALOGUE.mistake(
    "scaled_by_d_model",
    "the scores were divided by sqrt(d_model) instead of sqrt(head_dim), the size of one head",
    check="test_gqa_matches_reference_with_its_own_weights",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.kv, self.d = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, L, d_model = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.kv, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


@CATALOGUE.mistake(
    "mask_polarity_reversed",
    "the mask was applied the wrong way round: True means 'may attend'",
    check="test_gqa_bool_mask_blocks_positions",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.kv, self.d = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.kv, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


@CATALOGUE.mistake(
    "mask_ignored",
    "forward ignores its `mask` argument",
    check="test_gqa_bool_mask_blocks_positions",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.kv, self.d = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.kv, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


@CATALOGUE.mistake(
    "projections_with_bias",
    "the projections have biases; GQA's W_q, W_k, W_v and W_o are nn.Linear(..., bias=False)",
    check="test_gqa_projection_shapes_without_bias",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.kv, self.d = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.kv, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


@CATALOGUE.mistake(
    "kv_projections_use_query_heads",
    "W_k and W_v project to n_heads heads, as in multi-head attention; they should have "
    "n_kv_heads * head_dim outputs",
    check="test_gqa_projection_shapes_without_bias",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.h, self.d = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.h, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.h, self.d).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


@CATALOGUE.mistake(
    "assert_not_value_error",
    "the sizes were checked with `assert` (AssertionError, and skipped under python -O); "
    "raise ValueError",
    check="test_gqa_rejects_indivisible_sizes",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        assert n_heads % n_kv_heads == 0, "n_heads must be divisible by n_kv_heads"
        self.h, self.kv, self.d = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q = self.W_q(x).view(B, L, self.h, self.d).transpose(1, 2)
        k = self.W_k(x).view(B, L, self.kv, self.d).transpose(1, 2)
        v = self.W_v(x).view(B, L, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


# -- parameters -----------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "params_count_query_heads",
    "the K/V projections were counted with n_heads heads; in GQA they have n_kv_heads heads",
    check="test_kv_projection_params",
)
def kv_projection_params(d_model, n_heads, n_kv_heads):
    return 2 * d_model * n_heads * (d_model // n_heads)


@CATALOGUE.mistake(
    "params_missing_factor_two",
    "only one projection was counted; K and V each have one (a factor 2)",
    check="test_kv_projection_params",
)
def kv_projection_params(d_model, n_heads, n_kv_heads):
    return d_model * n_kv_heads * (d_model // n_heads)


@CATALOGUE.mistake(
    "params_head_dim_is_d_model",
    "each K/V head was given d_model features; a head has head_dim = d_model // n_heads",
    check="test_kv_projection_params",
)
def kv_projection_params(d_model, n_heads, n_kv_heads):
    return 2 * d_model * n_kv_heads * d_model


# -- cache ----------------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "cache_missing_factor_two",
    "only K (or only V) was counted; the cache holds both (a factor 2)",
    check="test_kv_cache_bytes_defaults",
)
def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return n_layers * batch_size * seq_len * n_kv_heads * head_dim * bytes_per_element


@CATALOGUE.mistake(
    "cache_ignores_n_layers",
    "kv_cache_bytes ignores n_layers (every layer has its own cache)",
    check="test_kv_cache_bytes_uses_every_argument",
)
def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return 2 * batch_size * seq_len * n_kv_heads * head_dim * bytes_per_element


@CATALOGUE.mistake(
    "cache_ignores_batch_size",
    "kv_cache_bytes ignores batch_size (every sequence has its own cache)",
    check="test_kv_cache_bytes_uses_every_argument",
)
def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return 2 * n_layers * seq_len * n_kv_heads * head_dim * bytes_per_element


@CATALOGUE.mistake(
    "cache_fp16_hardcoded",
    "kv_cache_bytes always counts 2 bytes per element and ignores bytes_per_element",
    check="test_kv_cache_bytes_uses_every_argument",
)
def kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return 2 * n_layers * batch_size * seq_len * n_kv_heads * head_dim * 2


@CATALOGUE.mistake(
    "mib_as_mb",
    "the bytes were divided by 10**6 (MB); a MiB is 2**20 bytes",
    check="test_kv_cache_mib",
)
def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return (
        kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size, bytes_per_element)
        / 10**6
    )


@CATALOGUE.mistake(
    "mib_as_kib",
    "the bytes were divided by 1024 once (KiB); a MiB is 1024 * 1024 bytes",
    check="test_kv_cache_mib",
)
def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return (
        kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size, bytes_per_element)
        / 1024
    )


# -- report ---------------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "mha_is_the_largest_option",
    'the row with the most K/V heads was named "MHA"; it is MHA only when n_kv_heads == n_heads',
    check="test_gqa_report_names",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv_heads in kv_head_options:
        if n_kv_heads == max(kv_head_options):
            name = "MHA"
        elif n_kv_heads == 1:
            name = "MQA"
        else:
            name = f"GQA-{n_kv_heads}"
        module = GroupedQueryAttention(d_model, n_heads, n_kv_heads)
        with torch.no_grad():
            out = module(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv_heads,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv_heads),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv_heads, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_mqa_named_gqa_1",
    "a single K/V head was named 'GQA-1'; it is 'MQA'",
    check="test_gqa_report_names",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        with torch.no_grad():
            out = GroupedQueryAttention(d_model, n_heads, n_kv)(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": "MHA" if n_kv == n_heads else f"GQA-{n_kv}",
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_one_head_named_mqa",
    "a one-head model was named 'MQA': when n_kv_heads == n_heads every query head has its own "
    "K/V head, so it is 'MHA' (decide that before testing for a single K/V head)",
    check="test_gqa_report_names",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MQA" if n_kv == 1 else "MHA" if n_kv == n_heads else f"GQA-{n_kv}"
        with torch.no_grad():
            out = GroupedQueryAttention(d_model, n_heads, n_kv)(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_named_by_group_size",
    "GQA rows were named after the group size n_heads // n_kv_heads; the name carries "
    "n_kv_heads ('GQA-4' has 4 K/V heads)",
    check="test_gqa_report_names",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_heads // n_kv}"
        with torch.no_grad():
            out = GroupedQueryAttention(d_model, n_heads, n_kv)(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_cache_head_dim_is_d_model",
    "the cache was computed with head_dim = d_model; one head has d_model // n_heads features",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            out = GroupedQueryAttention(d_model, n_heads, n_kv)(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_cache_uses_batch",
    "the report's cache was computed for batch_shape[0] sequences; the report asks for one "
    "sequence (batch_size=1)",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            out = GroupedQueryAttention(d_model, n_heads, n_kv)(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(
                    seq_len, n_kv, d_model // n_heads, batch_size=batch_shape[0]
                ),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_shape_not_measured",
    "output_shape was written down as (*batch_shape, d_model) instead of read from the "
    "output of a forward pass",
    check="test_gqa_report_output_shape_from_forward_pass",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": (*batch_shape, d_model),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_shape_hardcoded",
    "output_shape was hard-coded to the lesson's (2, 32, 512), whatever batch_shape and d_model "
    "say",
    check="test_gqa_report_output_shape_from_forward_pass",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": (2, 32, 512),
            }
        )
    return rows


@CATALOGUE.mistake(
    "heads_merged_without_transpose",
    "the heads were merged with a plain reshape of (B, n_heads, L, head_dim) to (B, L, d_model), "
    "which mixes positions and heads; transpose(1, 2) back first",
    check="test_gqa_matches_reference_with_its_own_weights",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, mask=None):
        batch, length, _ = x.shape
        q = self.W_q(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return self.W_o((weights @ v).reshape(batch, length, self.n_heads * self.head_dim))


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "heads_not_merged",
    "forward returned the heads' contexts (B, n_heads, L, head_dim) without merging them back "
    "to (B, L, d_model) and projecting them with W_o",
    check="test_gqa_output_shape",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if n_heads <= 0 or n_kv_heads <= 0 or d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        batch, length, _ = x.shape
        q = self.W_q(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        return F.softmax(scores, dim=-1) @ v


@CATALOGUE.mistake(
    "mask_heads_in_kv_order",
    "a mask with one slice per head was read with its heads in K/V-head order (query head "
    "i*n_kv_heads + j for K/V head j): its heads axis is the query heads', in their own order",
    check="test_gqa_bool_mask_blocks_positions",
)
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        if n_heads <= 0 or n_kv_heads <= 0 or d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("d_model % n_heads and n_heads % n_kv_heads must be 0")
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        batch, length, d_model = x.shape
        group = self.n_heads // self.n_kv_heads
        q = self.W_q(x).view(batch, length, self.n_kv_heads, group, self.head_dim)
        k = self.W_k(x).view(batch, length, self.n_kv_heads, self.head_dim)
        v = self.W_v(x).view(batch, length, self.n_kv_heads, self.head_dim)
        scores = torch.einsum("blkgd,bskd->bkgls", q, k) / math.sqrt(self.head_dim)
        if mask is not None:
            mask = mask.bool()
            if mask.dim() == 4 and mask.shape[1] == self.n_heads:
                mask = mask.unflatten(1, (group, self.n_kv_heads)).transpose(1, 2)
            else:
                mask = mask.unsqueeze(-3) if mask.dim() == 4 else mask
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = torch.einsum("bkgls,bskd->blkgd", weights, v).reshape(batch, length, d_model)
        return self.W_o(out)


@CATALOGUE.mistake(
    "mib_ignores_n_layers",
    "kv_cache_mib ignores n_layers (it passes kv_cache_bytes its default of one layer)",
    check="test_kv_cache_mib",
)
def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, 1, batch_size, bytes_per_element) / 2**20


@CATALOGUE.mistake(
    "mib_ignores_batch_size",
    "kv_cache_mib ignores batch_size (it passes kv_cache_bytes its default of one sequence)",
    check="test_kv_cache_mib",
)
def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, 1, bytes_per_element) / 2**20


@CATALOGUE.mistake(
    "mib_ignores_bytes_per_element",
    "kv_cache_mib ignores bytes_per_element (it passes kv_cache_bytes its default of 2 bytes)",
    check="test_kv_cache_mib",
)
def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
    return kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size) / 2**20


@CATALOGUE.mistake(
    "report_params_of_every_head",
    "the report's kv_params counted K/V projections for all n_heads heads in every row; each "
    "row has its own n_kv_heads",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            module = GroupedQueryAttention(d_model, n_heads, n_kv)
            out = module(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_heads),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_rows_sorted",
    "the rows were sorted by n_kv_heads; the report has one row per option, in the order of "
    "kv_head_options",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in sorted(kv_head_options):
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            module = GroupedQueryAttention(d_model, n_heads, n_kv)
            out = module(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_ignores_seq_len",
    "gqa_report ignores seq_len: its cache is always that of the default 2048 positions",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            module = GroupedQueryAttention(d_model, n_heads, n_kv)
            out = module(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(2048, n_kv, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_ignores_d_model",
    "gqa_report ignores d_model: its modules and counts use the default 512",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            module = GroupedQueryAttention(512, n_heads, n_kv)
            out = module(torch.randn(*batch_shape, 512))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(512, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, 512 // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_ignores_n_heads",
    "gqa_report ignores n_heads: its modules, names and counts use the default 8 query heads",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in kv_head_options:
        name = "MHA" if n_kv == 8 else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            module = GroupedQueryAttention(d_model, 8, n_kv)
            out = module(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, 8, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // 8),
                "output_shape": tuple(out.shape),
            }
        )
    return rows


@CATALOGUE.mistake(
    "report_ignores_kv_head_options",
    "gqa_report ignores kv_head_options: its rows are those of the default options (8, 4, 1)",
    check="test_gqa_report_values",
)
def gqa_report(
    d_model=512, n_heads=8, kv_head_options=(8, 4, 1), seq_len=2048, batch_shape=(2, 32)
):
    rows = []
    for n_kv in (8, 4, 1):
        name = "MHA" if n_kv == n_heads else "MQA" if n_kv == 1 else f"GQA-{n_kv}"
        with torch.no_grad():
            module = GroupedQueryAttention(d_model, n_heads, n_kv)
            out = module(torch.randn(*batch_shape, d_model))
        rows.append(
            {
                "name": name,
                "n_kv_heads": n_kv,
                "kv_params": kv_projection_params(d_model, n_heads, n_kv),
                "kv_cache_mib": kv_cache_mib(seq_len, n_kv, d_model // n_heads),
                "output_shape": tuple(out.shape),
            }
        )
    return rows
