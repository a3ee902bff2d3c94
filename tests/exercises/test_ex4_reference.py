"""The reference of ex4_gqa_analysis behaves as EXERCISES.md says, compared with PyTorch's own
attention where possible (float64, atol 1e-6) and with the lesson's numbers."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder._reference.ex4_gqa_analysis import (
    GroupedQueryAttention,
    gqa_report,
    kv_cache_bytes,
    kv_cache_mib,
    kv_projection_params,
)

pytestmark = pytest.mark.ex4


def module64(d_model: int, n_heads: int, n_kv_heads: int, seed: int = 0) -> GroupedQueryAttention:
    torch.manual_seed(seed)
    return GroupedQueryAttention(d_model, n_heads, n_kv_heads).double().eval()


def expanded_sdpa(module: GroupedQueryAttention, x: torch.Tensor, mask=None) -> torch.Tensor:
    """GQA written with F.scaled_dot_product_attention: K/V heads copied to their query groups."""
    batch, length, d_model = x.shape
    n_heads, n_kv = module.n_heads, module.n_kv_heads
    head_dim = d_model // n_heads
    q = module.W_q(x).unflatten(-1, (n_heads, head_dim)).transpose(1, 2)
    k = module.W_k(x).unflatten(-1, (n_kv, head_dim)).transpose(1, 2)
    v = module.W_v(x).unflatten(-1, (n_kv, head_dim)).transpose(1, 2)
    grouped = (batch, n_kv, n_heads // n_kv, length, head_dim)
    k = k[:, :, None].expand(grouped).reshape(batch, n_heads, length, head_dim)
    v = v[:, :, None].expand(grouped).reshape(batch, n_heads, length, head_dim)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return module.W_o(out.transpose(1, 2).flatten(2))


@pytest.mark.parametrize(
    ("d_model", "n_heads", "n_kv_heads"), [(24, 6, 6), (24, 6, 3), (40, 8, 2), (28, 4, 1)]
)
def test_projection_shapes_without_bias(d_model, n_heads, n_kv_heads):
    module = GroupedQueryAttention(d_model, n_heads, n_kv_heads)
    head_dim = d_model // n_heads
    shapes = {name: tuple(p.shape) for name, p in module.named_parameters()}
    assert shapes == {
        "W_q.weight": (d_model, d_model),
        "W_k.weight": (n_kv_heads * head_dim, d_model),
        "W_v.weight": (n_kv_heads * head_dim, d_model),
        "W_o.weight": (d_model, d_model),
    }
    assert all(isinstance(getattr(module, n), nn.Linear) for n in ("W_q", "W_k", "W_v", "W_o"))


def test_output_shape_with_distinct_sizes():
    module = GroupedQueryAttention(35, 7, 1)
    assert module(torch.randn(3, 11, 35)).shape == (3, 11, 35)


@pytest.mark.parametrize("sizes", [(25, 6, 1), (24, 6, 4), (24, 6, 12), (30, 4, 2)])
def test_indivisible_sizes_raise_value_error(sizes):
    with pytest.raises(ValueError):
        GroupedQueryAttention(*sizes)


@pytest.mark.parametrize("with_mask", [False, True])
def test_mha_case_equals_torch_multihead_attention(with_mask):
    module = module64(24, 6, 6)
    torch_mha = nn.MultiheadAttention(24, 6, bias=False, batch_first=True).double().eval()
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(
            torch.cat([module.W_q.weight, module.W_k.weight, module.W_v.weight])
        )
        torch_mha.out_proj.weight.copy_(module.W_o.weight)
        x = torch.randn(2, 5, 24, dtype=torch.float64)
        keep = torch.rand(5, 5) < 0.6
        keep |= torch.eye(5, dtype=torch.bool)
        mask = keep if with_mask else None
        ours = module(x, mask=mask)
        theirs, _ = torch_mha(
            x, x, x, attn_mask=None if mask is None else ~mask, need_weights=False
        )
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(
    ("d_model", "n_heads", "n_kv_heads"), [(30, 6, 2), (36, 6, 3), (28, 4, 1), (40, 8, 4)]
)
def test_gqa_equals_sdpa_on_expanded_kv(d_model, n_heads, n_kv_heads):
    module = module64(d_model, n_heads, n_kv_heads)
    x = torch.randn(3, 7, d_model, dtype=torch.float64)
    keep = (torch.rand(3, 1, 7, 7) < 0.5) | torch.eye(7, dtype=torch.bool)
    with torch.no_grad():
        for mask in (None, keep, keep[0, 0]):
            torch.testing.assert_close(
                module(x, mask=mask), expanded_sdpa(module, x, mask), atol=1e-6, rtol=1e-5
            )


def test_gqa_equals_sdpa_with_enable_gqa():
    module = module64(30, 6, 2)
    x = torch.randn(2, 9, 30, dtype=torch.float64)
    with torch.no_grad():
        q = module.W_q(x).unflatten(-1, (6, 5)).transpose(1, 2)
        k = module.W_k(x).unflatten(-1, (2, 5)).transpose(1, 2)
        v = module.W_v(x).unflatten(-1, (2, 5)).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        torch.testing.assert_close(
            module(x), module.W_o(out.transpose(1, 2).flatten(2)), atol=1e-6, rtol=1e-5
        )


def test_each_kv_head_serves_its_own_group():
    d_model, n_heads, n_kv, head_dim = 36, 6, 2, 6
    module = module64(d_model, n_heads, n_kv)
    x = torch.randn(2, 5, d_model, dtype=torch.float64)
    with torch.no_grad():
        module.W_o.weight.copy_(torch.eye(d_model))
        before = module(x).unflatten(-1, (n_heads, head_dim))
        for j in range(n_kv):
            saved = module.W_v.weight.clone()
            module.W_v.weight[j * head_dim : (j + 1) * head_dim] += 0.5
            after = module(x).unflatten(-1, (n_heads, head_dim))
            module.W_v.weight.copy_(saved)
            changed = [
                h for h in range(n_heads) if not torch.allclose(after[..., h, :], before[..., h, :])
            ]
            assert changed == [3 * j, 3 * j + 1, 3 * j + 2]


def test_scores_are_scaled_by_sqrt_head_dim():
    """One head, identity-like projections: the output is softmax(x x^T / sqrt(d)) x."""
    module = module64(4, 1, 1)
    with torch.no_grad():
        for linear in (module.W_q, module.W_k, module.W_v, module.W_o):
            linear.weight.copy_(torch.eye(4))
        x = 3 * torch.randn(1, 6, 4, dtype=torch.float64)
        expected = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(4), dim=-1) @ x
        torch.testing.assert_close(module(x), expected, atol=1e-6, rtol=1e-5)


def test_kv_projection_params_lesson_numbers():
    assert [kv_projection_params(512, 8, n) for n in (8, 4, 1)] == [524_288, 262_144, 65_536]
    assert kv_projection_params(512, 8, 2) == 131_072
    for sizes in ((512, 8, 4), (30, 6, 2), (28, 4, 1)):
        module = GroupedQueryAttention(*sizes)
        count = module.W_k.weight.numel() + module.W_v.weight.numel()
        assert kv_projection_params(*sizes) == count
        assert isinstance(kv_projection_params(*sizes), int)


def test_kv_cache_lesson_numbers():
    assert [kv_cache_mib(2048, n, 64) for n in (8, 4, 1)] == [4.0, 2.0, 0.5]
    assert kv_cache_bytes(2048, 64, 128, n_layers=80) == 5_368_709_120  # LLaMA-1 65B, fp16
    assert kv_cache_mib(2048, 64, 128, n_layers=80) == 5120.0
    # lesson 001: 12 heads of 64, 2048 tokens, one layer: 3,145,728 numbers (K and V), so
    # 12 MiB in fp32 and 6 MiB in fp16 (the lesson's "~3 MB (fp16)" is off by a factor 2)
    assert kv_cache_bytes(2048, 12, 64, bytes_per_element=1) == 3_145_728
    assert kv_cache_mib(2048, 12, 64, bytes_per_element=4) == 12.0
    assert kv_cache_mib(2048, 12, 64) == 6.0


def test_kv_cache_uses_every_argument():
    base = kv_cache_bytes(100, 3, 5, n_layers=7, batch_size=11, bytes_per_element=4)
    assert base == 2 * 100 * 3 * 5 * 7 * 11 * 4
    assert isinstance(base, int)
    for name in ("n_layers", "batch_size", "bytes_per_element"):
        kwargs = {"n_layers": 7, "batch_size": 11, "bytes_per_element": 4}
        kwargs[name] *= 3
        assert kv_cache_bytes(100, 3, 5, **kwargs) == 3 * base
    assert kv_cache_bytes(300, 3, 5, 7, 11, 4) == 3 * base
    assert kv_cache_mib(100, 3, 5, 7, 11, 4) == base / 2**20


def test_gqa_report_lesson_configuration():
    rows = gqa_report()
    assert [row["name"] for row in rows] == ["MHA", "GQA-4", "MQA"]
    assert [row["n_kv_heads"] for row in rows] == [8, 4, 1]
    assert [row["kv_params"] for row in rows] == [524_288, 262_144, 65_536]
    assert [row["kv_cache_mib"] for row in rows] == [4.0, 2.0, 0.5]
    assert all(row["output_shape"] == (2, 32, 512) for row in rows)
    assert all(type(row["output_shape"]) in (tuple, torch.Size) for row in rows)


def test_gqa_report_other_configuration():
    rows = gqa_report(
        d_model=48, n_heads=6, kv_head_options=(2, 6, 1, 3), seq_len=1000, batch_shape=(3, 5)
    )
    assert [row["name"] for row in rows] == ["GQA-2", "MHA", "MQA", "GQA-3"]
    assert [row["kv_params"] for row in rows] == [2 * 48 * n * 8 for n in (2, 6, 1, 3)]
    assert [row["kv_cache_mib"] for row in rows] == [
        2 * 1000 * n * 8 * 2 / 2**20 for n in (2, 6, 1, 3)
    ]
    assert all(row["output_shape"] == (3, 5, 48) for row in rows)
    assert gqa_report(d_model=8, n_heads=1, kv_head_options=(1,))[0]["name"] == "MHA"
