"""Correct ex8_additive_attention solutions in other styles than the reference's score full
marks: einsum and bmm scores, masking with torch.where, training through a DataLoader with
nll_loss, accuracy by counting."""

from __future__ import annotations

import pytest

from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

pytestmark = pytest.mark.ex8

ADDITIVE_EINSUM = """
class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim, bias=True)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, annotations, state, mask=None):
        hidden = torch.tanh(self.W_h(annotations) + self.W_s(state)[:, None, :])
        scores = torch.einsum("bsa,a->bs", hidden, self.v.weight[0])
        if mask is not None:
            scores = torch.where(mask, scores, torch.full_like(scores, -float("inf")))
        weights = scores.softmax(dim=1)
        return torch.einsum("bs,bse->be", weights, annotations), weights
"""

MULTIPLICATIVE_BMM = """
class MultiplicativeAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def forward(self, annotations, state, mask=None):
        scores = torch.bmm(self.W_a(annotations), state.unsqueeze(2)).squeeze(2)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=1)
        context = torch.bmm(weights.unsqueeze(1), annotations).squeeze(1)
        return context, weights
"""

TRAIN_DATALOADER = """
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    from torch.utils.data import DataLoader, TensorDataset

    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(
        TensorDataset(annotations, states, targets),
        batch_size=batch_size,
        shuffle=True,
        generator=generator,
    )
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    history = []
    module.train()
    for _ in range(epochs):
        total, count = 0.0, 0
        for h, s, t in loader:
            _, weights = module(h, s)
            loss = F.nll_loss(torch.log(weights + 1e-12), t, reduction="sum")
            optimizer.zero_grad()
            (loss / len(t)).backward()
            optimizer.step()
            total, count = total + loss.item(), count + len(t)
        history.append(total / count)
    return history
"""

ACCURACY_COUNT = """
def pointer_accuracy(module, annotations, states, targets):
    mode = module.training
    module.eval()
    with torch.inference_mode():
        weights = module(annotations, states)[1]
    module.train(mode)
    hits = sum(int(w.argmax()) == int(t) for w, t in zip(weights, targets))
    return hits / len(targets)
"""


# A scale kept in a buffer: no parameter (an independent student's correct solution lost 0.25,
# the check read the state_dict)
SCALED_DOT_BUFFER = """
class ScaledDotAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_sqrt_dim", torch.tensor(dim ** -0.5))

    def forward(self, annotations, state, mask=None):
        scores = (annotations * state.unsqueeze(1)).sum(-1) * self.inv_sqrt_dim
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return (weights.unsqueeze(-1) * annotations).sum(1), weights
"""


@pytest.mark.parametrize(
    "cells",
    [
        pytest.param({"ScaledDotAttention": SCALED_DOT_BUFFER}, id="scale-in-a-buffer"),
        pytest.param(
            {"AdditiveAttention": ADDITIVE_EINSUM, "MultiplicativeAttention": MULTIPLICATIVE_BMM},
            id="einsum-bmm-where",
        ),
        pytest.param(
            {"train_pointer": TRAIN_DATALOADER, "pointer_accuracy": ACCURACY_COUNT},
            id="dataloader-nll-count",
        ),
    ],
)
def test_alternative_scores_full_marks(cells, tmp_path, shared_sandbox):
    notebook = source_notebook("ex8_additive_attention", replace=cells)
    path = write_notebook(notebook, tmp_path / "ex8_additive_attention.ipynb")
    report = grade_notebook(path, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert not failed and report.score == 8, failed
