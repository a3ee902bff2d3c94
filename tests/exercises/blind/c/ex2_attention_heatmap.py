"""ex2_attention_heatmap: multi-head self-attention on a sentence, drawn as a heatmap."""
import math
import string

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from matplotlib.figure import Figure

_STRIP_PUNCT = str.maketrans("", "", string.punctuation)


def tokenize(sentence):
    """Lower-case, drop every string.punctuation character, split on whitespace."""
    return sentence.lower().translate(_STRIP_PUNCT).split()


def build_vocab(tokens):
    """Token -> id, ids 0.. in order of first appearance."""
    return {tok: i for i, tok in enumerate(dict.fromkeys(tokens))}


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with contiguous head slices and scale 1/sqrt(head_dim)."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def _heads(self, t):
        # (B, L, d_model) -> (B, H, L, head_dim); head k = features k*hd ... (k+1)*hd-1
        return t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    @staticmethod
    def _as_bias(mask, dtype):
        """Boolean (True = may attend) or additive float mask -> additive float bias."""
        if mask.dtype == torch.bool:
            zero = torch.zeros((), dtype=dtype, device=mask.device)
            return torch.where(mask, zero, torch.tensor(float("-inf"), dtype=dtype,
                                                        device=mask.device))
        if mask.is_floating_point():
            return mask.to(dtype)
        return MultiHeadAttention._as_bias(mask != 0, dtype)

    def forward(self, x, mask=None, return_attention=False):
        q, k, v = (self._heads(W(x)) for W in (self.W_q, self.W_k, self.W_v))
        scale = 1.0 / math.sqrt(self.head_dim)
        bias = None if mask is None else self._as_bias(mask, q.dtype)
        if return_attention:
            scores = torch.matmul(q, k.transpose(-1, -2)) * scale
            if bias is not None:
                scores = scores + bias
            weights = torch.softmax(scores, dim=-1)
            ctx = torch.matmul(weights, v)
        else:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
        out = self.W_o(ctx.transpose(-3, -2).flatten(-2))
        return (out, weights) if return_attention else out


def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    """Tokens of `sentence` and the (num_heads, L, L) self-attention weights of a seeded
    random nn.Embedding + MultiHeadAttention (the global RNG state is left untouched)."""
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        embed = nn.Embedding(max(len(vocab), 1), d_model)
        mha = MultiHeadAttention(d_model, num_heads)
    mha.eval()
    ids = torch.tensor([[vocab[t] for t in tokens]], dtype=torch.long)
    with torch.inference_mode():
        _, weights = mha(embed(ids), return_attention=True)
    return tokens, weights[0].numpy().copy()


def plot_attention(weights, tokens, title=None):
    """Heatmap of an (L, L) attention matrix: keys on x, queries on y, one tick per token."""
    w = np.asarray(weights, dtype=float)
    n_q, n_k = w.shape
    fig = Figure(figsize=(1.2 + 0.55 * n_k, 0.9 + 0.5 * n_q), layout="constrained")
    ax = fig.add_subplot()
    # pcolormesh with default edges puts cell (i, j) on [j, j+1] x [i, i+1].
    vmin = min(float(w.min()), 0.0) if w.size else 0.0
    vmax = float(w.max()) if w.size else 1.0
    mesh = ax.pcolormesh(w, cmap="viridis", vmin=vmin, vmax=max(vmax, vmin + 1e-12))
    ax.set_xticks(np.arange(n_k) + 0.5, labels=list(tokens[:n_k]), rotation=45, ha="right",
                  rotation_mode="anchor")
    ax.set_yticks(np.arange(n_q) + 0.5, labels=list(tokens[:n_q]))
    ax.invert_yaxis()  # first query at the top, like a printed matrix
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_aspect("equal")
    fig.colorbar(mesh, ax=ax, label="attention weight")
    if title is not None:
        ax.set_title(title)
    return fig


def strongest_attention(weights, tokens, word):
    """Token most attended to by the first occurrence of `word` (as a query row)."""
    if word not in tokens:
        raise ValueError(f"{word!r} is not among the tokens")
    row = np.asarray(weights)[tokens.index(word)]
    return tokens[int(np.argmax(row))]  # np.argmax: first maximum on ties


if __name__ == "__main__":
    assert tokenize("The cat sat on the mat.") == ["the", "cat", "sat", "on", "the", "mat"]
    assert tokenize("Don't!") == ["dont"]
    assert tokenize("  a -- b\t\nC!! ") == ["a", "b", "c"]
    assert tokenize("\u201cquoted\u201d") == ["\u201cquoted\u201d"]
    assert tokenize("") == []
    assert build_vocab(["b", "a", "b", "c"]) == {"b": 0, "a": 1, "c": 2}

    try:
        MultiHeadAttention(10, 3)
        raise AssertionError
    except ValueError:
        pass

    torch.manual_seed(0)
    B, L, d, H = 3, 5, 12, 2
    mha = MultiHeadAttention(d, H)
    x = torch.randn(B, L, d)
    out = mha(x)
    out2, w = mha(x, return_attention=True)
    assert out.shape == (B, L, d) and w.shape == (B, H, L, L)
    assert torch.allclose(out, out2, atol=1e-6)
    assert torch.allclose(w.sum(-1), torch.ones(B, H, L))
    # compare with nn.MultiheadAttention using the same weights
    ref = nn.MultiheadAttention(d, H, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
        ref.out_proj.bias.copy_(mha.W_o.bias)
    r_out, r_w = ref(x, x, x, average_attn_weights=False)
    assert torch.allclose(r_out, out, atol=1e-5) and torch.allclose(r_w, w, atol=1e-6)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    o1, w1 = mha(x, mask=causal, return_attention=True)
    o2 = mha(x, mask=causal)
    assert torch.allclose(o1, o2, atol=1e-6) and (w1[..., ~causal] == 0).all()
    r_out, r_w = ref(x, x, x, attn_mask=~causal, average_attn_weights=False)
    assert torch.allclose(r_out, o1, atol=1e-5) and torch.allclose(r_w, w1, atol=1e-6)
    pad = torch.ones(B, 1, 1, L, dtype=torch.bool)
    pad[0, ..., -2:] = False
    _, wp = mha(x, mask=pad, return_attention=True)
    assert (wp[0, ..., -2:] == 0).all()

    torch.manual_seed(99)
    state = torch.get_rng_state()
    toks, W = sentence_attention("The cat sat on the mat.", d_model=24, num_heads=3, seed=5)
    assert torch.equal(state, torch.get_rng_state())
    toks2, W2 = sentence_attention("The cat sat on the mat.", d_model=24, num_heads=3, seed=5)
    _, W3 = sentence_attention("The cat sat on the mat.", d_model=24, num_heads=3, seed=6)
    assert toks == toks2 and np.array_equal(W, W2) and not np.allclose(W, W3)
    assert W.shape == (3, 6, 6) and np.allclose(W.sum(-1), 1, atol=1e-6)
    # same word -> same embedding -> identical rows for the two "the"
    assert np.allclose(W[:, 0], W[:, 4])

    fig = plot_attention(W[0], toks, title="head 0")
    axes = fig.axes
    hm = axes[0]
    assert hm.get_title() == "head 0" and len(axes) == 2
    assert [t.get_text() for t in hm.get_xticklabels()] == toks
    assert [t.get_text() for t in hm.get_yticklabels()] == toks
    assert np.allclose(hm.get_xticks(), np.arange(6) + 0.5)
    fig.savefig("/tmp/ex2_c.png")
    fig2 = plot_attention(W[0], toks)
    assert fig2.axes[0].get_title() == ""

    w = np.array([[0.2, 0.4, 0.4], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]])
    tk = ["a", "b", "a"]
    assert strongest_attention(w, tk, "a") == "b"
    assert strongest_attention(w, tk, "b") == "a"
    try:
        strongest_attention(w, tk, "z")
        raise AssertionError
    except ValueError:
        pass
    print("sat ->", strongest_attention(W.mean(0), toks, "sat"))
    print("ex2 ok")
