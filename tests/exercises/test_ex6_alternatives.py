"""Correct ex6_rope solutions in other styles than the reference's score full marks: complex
numbers, float32 frequencies, PyTorch's fused attention with cached tables, a loop."""

from __future__ import annotations

import pytest

from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

pytestmark = pytest.mark.ex6

FREQUENCIES_FLOAT32 = """
def rope_frequencies(head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError("odd head_dim")
    return 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
"""

APPLY_ROPE_COMPLEX = """
def apply_rope(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base).double()
    positions = torch.arange(offset, offset + x.shape[-2]).double()
    turn = torch.polar(torch.ones(len(positions), half).double(), torch.outer(positions, theta))
    z = torch.view_as_complex(
        torch.stack([x[..., :half].double(), x[..., half:].double()], dim=-1).contiguous()
    )
    z = z * turn
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)
"""

ATTENTION_FUSED = """
class RoPEAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        head_dim, rest = divmod(d_model, num_heads)
        if rest or head_dim % 2:
            raise ValueError("d_model must split into heads of even size")
        self.h, self.d, self.base = num_heads, head_dim, base
        self.W_q, self.W_k, self.W_v, self.W_o = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(4)
        )

    def forward(self, x, causal=True):
        B, L, D = x.shape
        split = lambda t: t.reshape(B, L, self.h, self.d).permute(0, 2, 1, 3)
        q = apply_rope(split(self.W_q(x)), base=self.base)
        k = apply_rope(split(self.W_k(x)), base=self.base)
        out = F.scaled_dot_product_attention(q, k, split(self.W_v(x)), is_causal=causal)
        return self.W_o(out.permute(0, 2, 1, 3).reshape(B, L, D))
"""

RELATIVE_LOOP = """
def relative_scores(q, k, positions, base=10000.0):
    S = torch.zeros(positions, positions, dtype=q.dtype)
    for m in range(positions):
        for n in range(positions):
            qm = apply_rope(q[None, :], offset=m, base=base)[0]
            kn = apply_rope(k[None, :], offset=n, base=base)[0]
            S[m, n] = torch.dot(qm, kn)
    return S
"""


def test_float32_frequencies_earn_the_frequency_points(tmp_path):
    """float32 frequencies are within the frequency checks' tolerance (rtol 1e-6); a rotation
    of float64 inputs built on them is not within the contract's 1e-9 (the notebook says to
    compute angles in float64)."""
    notebook = source_notebook("ex6_rope", replace={"rope_frequencies": FREQUENCIES_FLOAT32})
    checks = [
        "test_rope_frequencies_match_the_formula",
        "test_rope_frequencies_rejects_an_odd_head_dim",
    ]
    report = grade_notebook(write_notebook(notebook, tmp_path / "ex6_rope.ipynb"), only=checks)
    assert all(c.passed for c in report.checks) and len(report.checks) == 2


@pytest.mark.parametrize(
    "cells",
    [
        pytest.param(
            {"apply_rope": APPLY_ROPE_COMPLEX, "RoPEAttention": ATTENTION_FUSED},
            id="complex-rotation-fused-attention",
        ),
        pytest.param({"relative_scores": RELATIVE_LOOP}, id="relative-scores-loop"),
    ],
)
def test_alternative_scores_full_marks(cells, tmp_path, shared_sandbox):
    notebook = source_notebook("ex6_rope", replace=cells)
    path = write_notebook(notebook, tmp_path / "ex6_rope.ipynb")
    report = grade_notebook(path, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert not failed and report.score == 8, failed
