"""Cells that test students write: the parts of a class that every variant shares, so that a
test spells only what its student does differently."""

from __future__ import annotations

import textwrap

TINYLM_INIT = """
class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)
"""


def tinylm(forward_body: str, after: str = "") -> str:
    """ex7's TinyLM, built as the contract says, with `forward(self, tokens, cache=None)` doing
    `forward_body`; `after`: more code after the class (at the cell's top level)."""
    forward = "\n    def forward(self, tokens, cache=None):\n"
    forward += textwrap.indent(textwrap.dedent(forward_body).strip("\n"), " " * 8) + "\n"
    return TINYLM_INIT + forward + textwrap.dedent(after)
