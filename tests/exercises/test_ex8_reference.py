"""The reference of ex8_additive_attention behaves as EXERCISES.md says: the three scores by
their formulas, softmax over the annotations, masks, counts from the modules themselves, the
pointer task's targets, and the lesson's own snippet returning weights that are all 1."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from autograder._reference import ex8_additive_attention as ref

pytestmark = pytest.mark.ex8


def test_scores_follow_their_formulas_and_masks_give_zero():
    h, s = torch.randn(3, 5, 6, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    mask = torch.tensor([[True, False, True, True, False]] * 3)
    additive = ref.AdditiveAttention(6, 4, 7).double()
    scores = additive.v(torch.tanh(additive.W_h(h) + additive.W_s(s)[:, None])).squeeze(-1)
    context, weights = additive(h, s, mask=mask)
    expected = F.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    assert torch.allclose(weights, expected) and torch.all(weights[:, 1] == 0)
    assert torch.allclose(context, torch.einsum("bs,bse->be", weights, h))
    general = ref.MultiplicativeAttention(6, 4).double()
    scores = torch.einsum("bd,de,bse->bs", s, general.W_a.weight, h)
    assert torch.allclose(general(h, s)[1], F.softmax(scores, dim=-1))
    dot = ref.ScaledDotAttention(6)
    q = torch.randn(3, 6, dtype=torch.float64)
    assert torch.allclose(
        dot(h, q)[1], F.softmax(torch.einsum("bd,bsd->bs", q, h) / math.sqrt(6), -1)
    )


def test_counts_are_the_modules_parameters():
    counts = ref.attention_parameter_counts(6, 4, 7)
    assert counts["additive"] == sum(p.numel() for p in ref.AdditiveAttention(6, 4, 7).parameters())
    assert counts["multiplicative"] == sum(
        p.numel() for p in ref.MultiplicativeAttention(6, 4).parameters()
    )
    assert counts["dot"] == 0 == len(list(ref.ScaledDotAttention(6).parameters()))


def test_pointer_task_and_the_lessons_singleton_softmax():
    h, s, t = ref.make_pointer_task(50, seq_len=5, dim=3, seed=4)
    assert h.dtype == s.dtype == torch.float32 and t.dtype == torch.long
    assert torch.equal(t, torch.einsum("nsd,nd->ns", h, s).argmax(-1))
    assert torch.equal(ref.make_pointer_task(50, 5, 3, seed=4)[0], h)
    scores = torch.randn(2, 5, 1)
    assert torch.all(F.softmax(scores, dim=-1) == 1), "the lesson's snippet: every weight is 1"
