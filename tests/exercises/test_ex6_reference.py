"""The reference of ex6_rope behaves as EXERCISES.md says, against an independent formulation
(each pair as a complex number turned by e^{i p theta}) and PyTorch's own attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from autograder._reference import ex6_rope as ref

pytestmark = pytest.mark.ex6


def rope_by_complex_numbers(x: torch.Tensor, offset: int = 0, base: float = 10000.0):
    half = x.shape[-1] // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    turn = torch.polar(
        torch.ones(len(positions), half, dtype=torch.float64), positions[:, None] * theta
    )
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * turn
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def test_frequencies():
    assert torch.allclose(
        ref.rope_frequencies(8), torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64)
    )
    assert ref.rope_frequencies(6, base=64.0)[1].item() == pytest.approx(64 ** (-2 / 6))
    for odd in (1, 7):
        with pytest.raises(ValueError):
            ref.rope_frequencies(odd)


@pytest.mark.parametrize("offset", [0, 5, 4096])
def test_rotation_matches_complex_numbers(offset):
    x = torch.randn(3, 2, 7, 10, dtype=torch.float64)
    kept = x.clone()
    assert torch.allclose(
        ref.apply_rope(x, offset=offset), rope_by_complex_numbers(x, offset), atol=1e-12
    )
    assert torch.equal(x, kept), "x is not modified"
    assert ref.apply_rope(x.float(), offset=offset).dtype == torch.float32


def test_norms_offsets_and_distance():
    x = torch.randn(4, 12, dtype=torch.float64)
    y = ref.apply_rope(x, offset=10**6)
    assert torch.allclose(y[:, :6].hypot(y[:, 6:]), x[:, :6].hypot(x[:, 6:]), atol=1e-12)
    longer = torch.cat([torch.randn(9, 12, dtype=torch.float64), x])
    assert torch.allclose(ref.apply_rope(x, offset=9), ref.apply_rope(longer)[9:], atol=1e-12)
    S = ref.relative_scores(
        torch.randn(12, dtype=torch.float64), torch.randn(12, dtype=torch.float64), 15
    )
    assert torch.allclose(S[1:, 1:], S[:-1, :-1], atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_is_rope_then_sdpa(causal):
    module = ref.RoPEAttention(24, 3).double()
    x = torch.randn(2, 6, 24, dtype=torch.float64)

    def heads(t):
        return t.view(2, 6, 3, 8).transpose(1, 2)

    q = rope_by_complex_numbers(heads(module.W_q(x)))
    k = rope_by_complex_numbers(heads(module.W_k(x)))
    out = F.scaled_dot_product_attention(q, k, heads(module.W_v(x)), is_causal=causal)
    expected = module.W_o(out.transpose(1, 2).reshape(2, 6, 24))
    assert torch.allclose(module(x, causal=causal), expected, atol=1e-12)
    for sizes in ((25, 3), (15, 3)):
        with pytest.raises(ValueError):
            ref.RoPEAttention(*sizes)
    assert not any(name.endswith("bias") for name, _ in module.named_parameters())
    assert math.isclose(module.head_dim, 8)
