"""Exercise 2: self-attention on a sentence, visualised as a heatmap.

Style: a translate table for tokenising, einsum for every contraction, a hand-written
softmax, masks turned into additive biases by log(), parameters drawn from a
torch.Generator instead of the global RNG.
"""
import math
import string

import numpy as np
import torch
import torch.nn as nn
from matplotlib.figure import Figure

_STRIP_PUNCT = str.maketrans("", "", string.punctuation)


def tokenize(sentence):
    """Lowercase, split on whitespace, delete string.punctuation characters, drop empties."""
    pieces = (piece.translate(_STRIP_PUNCT) for piece in sentence.lower().split())
    return [piece for piece in pieces if piece]


def build_vocab(tokens):
    """Token -> id, ids 0.. in order of first appearance."""
    vocab = {}
    for tok in tokens:
        vocab.setdefault(tok, len(vocab))
    return vocab


def _softmax(scores, dim=-1):
    """exp(s - max) / sum; blocked entries (-inf) become exact zeros."""
    peak = scores.amax(dim=dim, keepdim=True).detach()
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    e = torch.exp(scores - peak)
    return e / e.sum(dim=dim, keepdim=True)


def _additive_mask(mask, dtype):
    """Bool mask (True = may attend) -> 0 / -inf bias via log(1) = 0, log(0) = -inf.
    A floating mask is taken to be additive already."""
    if mask.dtype == torch.bool:
        return mask.to(dtype).log()
    return mask.to(dtype)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention; head k owns features k*head_dim ... (k+1)*head_dim - 1."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads})"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def _heads(self, t):
        # (B, L, d_model) -> (B, H, L, head_dim)
        return t.unflatten(-1, (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, x, mask=None, return_attention=False):
        q, k, v = self._heads(self.W_q(x)), self._heads(self.W_k(x)), self._heads(self.W_v(x))
        scores = torch.einsum("bhld,bhsd->bhls", q, k) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + _additive_mask(torch.as_tensor(mask, device=scores.device), scores.dtype)
        weights = _softmax(scores)
        context = torch.einsum("bhls,bhsd->bhld", weights, v)
        out = self.W_o(context.permute(0, 2, 1, 3).flatten(-2))
        return (out, weights) if return_attention else out


def _reset_from_generator(module, gen):
    """Re-draw every parameter from `gen` with PyTorch's own default init laws:
    Embedding ~ N(0, 1); Linear weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.Embedding):
                sub.weight.normal_(0.0, 1.0, generator=gen)
            elif isinstance(sub, nn.Linear):
                bound = 1.0 / math.sqrt(sub.in_features)
                sub.weight.uniform_(-bound, bound, generator=gen)
                if sub.bias is not None:
                    sub.bias.uniform_(-bound, bound, generator=gen)


def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    """Tokens of `sentence` and the (num_heads, L, L) self-attention weights of a seeded
    nn.Embedding + MultiHeadAttention (eval mode, no gradients)."""
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # construction must not disturb the caller's RNG
        embed = nn.Embedding(max(len(vocab), 1), d_model)
        mha = MultiHeadAttention(d_model, num_heads)
    _reset_from_generator(embed, gen)
    _reset_from_generator(mha, gen)
    embed.eval()
    mha.eval()
    ids = torch.tensor([[vocab[t] for t in tokens]], dtype=torch.long).reshape(1, len(tokens))
    with torch.no_grad():
        _, weights = mha(embed(ids), return_attention=True)
    return tokens, weights[0].numpy()


def plot_attention(weights, tokens, title=None):
    """Heatmap of an (L, L) attention matrix: keys on x, queries on y, one labelled tick per
    token at its cell centre, a colorbar, and `title` on the heatmap's axes."""
    w = np.asarray(weights.detach().cpu() if torch.is_tensor(weights) else weights, dtype=float)
    n_q, n_k = w.shape
    fig = Figure(figsize=(1.0 + 0.55 * n_k, 0.8 + 0.5 * n_q), constrained_layout=True)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(w, cmap="viridis", aspect="auto", interpolation="nearest")
    ax.set_xticks(np.arange(n_k))
    ax.set_xticklabels(list(tokens)[:n_k], rotation=45, ha="right")
    ax.set_yticks(np.arange(n_q))
    ax.set_yticklabels(list(tokens)[:n_q])
    ax.set_xlabel("key (attended-to token)")
    ax.set_ylabel("query (attending token)")
    fig.colorbar(image, ax=ax, label="attention weight")
    if title is not None:
        ax.set_title(title)
    return fig


def strongest_attention(weights, tokens, word):
    """The token that the first occurrence of `word` (a query row) attends to most strongly
    (first maximum on ties)."""
    if word not in tokens:
        raise ValueError(f"{word!r} is not among the tokens {tokens!r}")
    row = np.asarray(weights.detach().cpu() if torch.is_tensor(weights) else weights)[tokens.index(word)]
    return tokens[int(np.argmax(row))]


if __name__ == "__main__":
    assert tokenize("The cat sat on the mat.") == ["the", "cat", "sat", "on", "the", "mat"]
    assert tokenize("Don't!") == ["dont"]
    assert tokenize("  a -- b\t\n C... ") == ["a", "b", "c"]
    assert tokenize("\u201cQuoted\u201d") == ["\u201cquoted\u201d"]
    assert build_vocab(["b", "a", "b", "c"]) == {"b": 0, "a": 1, "c": 2}

    try:
        MultiHeadAttention(10, 3)
        raise AssertionError("no ValueError")
    except ValueError:
        pass

    torch.manual_seed(0)
    B, H, L, dm = 2, 3, 5, 12
    mha = MultiHeadAttention(dm, H)
    x = torch.randn(B, L, dm)
    out, w = mha(x, return_attention=True)
    assert out.shape == (B, L, dm) and w.shape == (B, H, L, L)
    assert torch.allclose(w.sum(-1), torch.ones(B, H, L))
    assert torch.equal(mha(x), out)

    # compare with nn.MultiheadAttention sharing the same weights
    ref = nn.MultiheadAttention(dm, H, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
        ref.out_proj.bias.copy_(mha.W_o.bias)
    mask = torch.rand(L, L) > 0.4
    mask[:, 2] = True
    r_out, r_w = ref(x, x, x, attn_mask=~mask, average_attn_weights=False)
    o2, w2 = mha(x, mask=mask, return_attention=True)
    assert torch.allclose(o2, r_out, atol=1e-6) and torch.allclose(w2, r_w, atol=1e-6)
    assert torch.all(w2[:, :, ~mask] == 0)
    m4 = torch.rand(B, H, L, L) > 0.5
    m4[..., 0] = True
    r_out, r_w = ref(x, x, x, attn_mask=(~m4).flatten(0, 1), average_attn_weights=False)
    o2, w2 = mha(x, mask=m4, return_attention=True)
    assert torch.allclose(o2, r_out, atol=1e-6) and torch.allclose(w2, r_w, atol=1e-6)
    o2.sum().backward()  # differentiable

    state = torch.random.get_rng_state()
    toks, w = sentence_attention("The cat sat on the mat.")
    assert torch.equal(state, torch.random.get_rng_state())
    torch.manual_seed(123)
    toks2, w_2 = sentence_attention("The cat sat on the mat.")
    assert toks == toks2 and np.array_equal(w, w_2) and w.shape == (4, 6, 6)
    assert np.allclose(w.sum(-1), 1, atol=1e-6)
    _, w3 = sentence_attention("The cat sat on the mat.", seed=1)
    assert not np.allclose(w, w3)
    _, w5 = sentence_attention("A b c d e f g", d_model=30, num_heads=5, seed=3)
    assert w5.shape == (5, 7, 7)
    _, w1 = sentence_attention("one two", num_heads=1)
    assert w1.shape == (1, 2, 2)

    fig = plot_attention(w[0], toks, title="head 0")
    ax = fig.axes[0]
    assert ax.get_title() == "head 0" and len(fig.axes) == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == toks
    assert list(ax.get_xticks()) == list(range(6))
    fig.savefig("/tmp/ex2_heatmap.png")
    fig2 = plot_attention(w[0], toks)
    assert fig2.axes[0].get_title() == ""

    ww = np.array([[0.1, 0.5, 0.5], [0.9, 0.05, 0.05], [0.2, 0.2, 0.6]])
    assert strongest_attention(ww, ["a", "b", "a"], "a") == "b"
    assert strongest_attention(ww, ["x", "y", "z"], "y") == "x"
    try:
        strongest_attention(ww, ["x", "y", "z"], "w")
        raise AssertionError("no ValueError")
    except ValueError:
        pass
    print(toks, strongest_attention(w.mean(0), toks, "sat"))
    print("ex2 ok")
