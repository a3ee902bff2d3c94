"""Exercise 2: self-attention on a sentence, and a heatmap of the weights.

Style: a word-level tokenizer, a multi-head attention module that handles one head at a
time in a plain Python loop, and a pyplot heatmap built with plt.subplots + ax.imshow.
"""
import math
import string

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import matplotlib
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

_PUNCTUATION_TABLE = str.maketrans("", "", string.punctuation)


def tokenize(sentence):
    """Lowercase, split on whitespace, strip ASCII punctuation, drop empty tokens."""
    if not isinstance(sentence, str):
        raise TypeError("sentence must be a str")
    tokens = []
    for piece in sentence.lower().split():
        cleaned = piece.translate(_PUNCTUATION_TABLE)
        if cleaned != "":
            tokens.append(cleaned)
    return tokens


def build_vocab(tokens):
    """Map every distinct token to an id 0, 1, ... in order of first appearance."""
    vocab = {}
    for token in tokens:
        if token not in vocab:
            vocab[token] = len(vocab)
    return vocab


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention; head k uses features k*head_dim .. (k+1)*head_dim - 1."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        if num_heads < 1:
            raise ValueError("num_heads must be at least 1")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def _split_heads(self, tensor):
        # (B, L, d_model) -> (B, num_heads, L, head_dim)
        batch, length, _ = tensor.shape
        tensor = tensor.view(batch, length, self.num_heads, self.head_dim)
        return tensor.transpose(1, 2)

    def forward(self, x, mask=None, return_attention=False):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"expected x of shape (B, L, {self.d_model}), got {tuple(x.shape)}")
        batch, length, _ = x.shape
        Q = self._split_heads(self.W_q(x))
        K = self._split_heads(self.W_k(x))
        V = self._split_heads(self.W_v(x))

        full_mask = None
        if mask is not None:
            full_mask = torch.broadcast_to(mask.to(x.device), (batch, self.num_heads, length, length))

        scale = 1.0 / math.sqrt(self.head_dim)
        head_outputs = []
        head_weights = []
        for h in range(self.num_heads):
            scores = torch.matmul(Q[:, h], K[:, h].transpose(-2, -1)) * scale  # (B, L, L)
            if full_mask is not None:
                head_mask = full_mask[:, h]
                if head_mask.dtype == torch.bool:
                    scores = scores.masked_fill(~head_mask, float("-inf"))
                else:
                    scores = scores + head_mask.to(scores.dtype)
            weights = F.softmax(scores, dim=-1)
            head_weights.append(weights)
            head_outputs.append(torch.matmul(weights, V[:, h]))  # (B, L, head_dim)

        weights_all = torch.stack(head_weights, dim=1)      # (B, H, L, L)
        context = torch.stack(head_outputs, dim=1)           # (B, H, L, head_dim)
        context = context.transpose(1, 2).contiguous().view(batch, length, self.d_model)
        output = self.W_o(context)
        if return_attention:
            return output, weights_all
        return output


def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    """Tokens of `sentence` and the (num_heads, L, L) self-attention weights of a seeded model."""
    tokens = tokenize(sentence)
    if len(tokens) == 0:
        raise ValueError("the sentence has no tokens")
    vocab = build_vocab(tokens)
    ids = torch.tensor([[vocab[token] for token in tokens]], dtype=torch.long)
    # fork_rng: the global RNG state before (and after) the call does not matter
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        embedding = nn.Embedding(len(vocab), d_model)
        attention = MultiHeadAttention(d_model, num_heads)
    embedding.eval()
    attention.eval()
    with torch.no_grad():
        x = embedding(ids)
        _, weights = attention(x, return_attention=True)
    return tokens, weights[0].cpu().numpy()


def plot_attention(weights, tokens, title=None):
    """Heatmap of an (L, L) attention matrix: keys on x, queries on y, with a colorbar."""
    weights = np.asarray(weights)
    if weights.ndim != 2 or weights.shape[0] != weights.shape[1]:
        raise ValueError("weights must be a square (L, L) matrix")
    if weights.shape[0] != len(tokens):
        raise ValueError("need one token per row/column of weights")
    n = len(tokens)
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * n, 0.8 + 0.6 * n))
    image = ax.imshow(weights, cmap="viridis", aspect="equal")
    positions = np.arange(n)
    ax.set_xticks(positions)
    ax.set_xticklabels(tokens, rotation=45, ha="right")
    ax.set_yticks(positions)
    ax.set_yticklabels(tokens)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    fig.colorbar(image, ax=ax)
    if title is not None:
        ax.set_title(title)
    fig.tight_layout()
    # detach from pyplot's list of open figures (no double display, no pile-up);
    # the Figure object itself stays fully usable
    plt.close(fig)
    return fig


def strongest_attention(weights, tokens, word):
    """Token that the first occurrence of `word` (as a query row) attends to most."""
    weights = np.asarray(weights)
    if word not in tokens:
        raise ValueError(f"{word!r} is not among the tokens")
    if weights.ndim != 2 or weights.shape[0] != len(tokens) or weights.shape[1] != len(tokens):
        raise ValueError("weights must have shape (L, L) with L = len(tokens)")
    row_index = tokens.index(word)
    row = weights[row_index]
    best_column = 0
    for column in range(1, len(row)):
        if row[column] > row[best_column]:  # strict: the first maximum wins ties
            best_column = column
    return tokens[best_column]


if __name__ == "__main__":
    assert tokenize("The cat sat on the mat.") == ["the", "cat", "sat", "on", "the", "mat"]
    assert tokenize("Don't!") == ["dont"]
    assert tokenize(" ... \t hello,\nWORLD ! ") == ["hello", "world"]
    assert tokenize("\u201cquoted\u201d") == ["\u201cquoted\u201d"]
    assert build_vocab(["b", "a", "b", "c"]) == {"b": 0, "a": 1, "c": 2}

    try:
        MultiHeadAttention(10, 3)
        raise AssertionError
    except ValueError:
        pass

    torch.manual_seed(0)
    B, H, L, d = 2, 3, 5, 12
    mha = MultiHeadAttention(d, H)
    x = torch.randn(B, L, d)
    out, w = mha(x, return_attention=True)
    assert out.shape == (B, L, d) and w.shape == (B, H, L, L)
    # compare with nn.MultiheadAttention using the same weights
    ref = nn.MultiheadAttention(d, H, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
        ref.out_proj.bias.copy_(mha.W_o.bias)
    mask = torch.rand(B, 1, L, L) > 0.3
    mask[..., 0] = True
    o1, w1 = mha(x, mask=mask, return_attention=True)
    o2, w2 = ref(x, x, x, attn_mask=~mask.expand(B, H, L, L).reshape(B * H, L, L),
                 average_attn_weights=False)
    print("vs nn.MultiheadAttention", (o1 - o2).abs().max().item(), (w1 - w2).abs().max().item())
    assert torch.allclose(o1, o2, atol=1e-5) and torch.allclose(w1, w2, atol=1e-6)

    torch.manual_seed(123)
    toks, ww = sentence_attention("The cat sat on the mat.", d_model=24, num_heads=3, seed=7)
    torch.manual_seed(999)
    toks2, ww2 = sentence_attention("The cat sat on the mat.", d_model=24, num_heads=3, seed=7)
    assert toks == toks2 and np.array_equal(ww, ww2)
    assert ww.shape == (3, 6, 6) and np.allclose(ww.sum(-1), 1, atol=1e-5)
    _, ww3 = sentence_attention("The cat sat on the mat.", d_model=24, num_heads=3, seed=8)
    assert not np.array_equal(ww, ww3)
    print(strongest_attention(ww[0], toks, "sat"))
    assert strongest_attention(np.ones((3, 3)), ["a", "b", "a"], "a") == "a"
    try:
        strongest_attention(ww[0], toks, "dog")
        raise AssertionError
    except ValueError:
        pass

    fig = plot_attention(ww[0], toks, title="head 0")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_title() == "head 0"
    assert [t.get_text() for t in ax.get_xticklabels()] == toks
    assert list(ax.get_xticks()) == list(range(6))
    assert len(fig.axes) == 2
    fig.savefig("/tmp/ex2_heat.png")
    fig2 = plot_attention(ww[1], toks)
    assert fig2.axes[0].get_title() == ""
    print("ok")
