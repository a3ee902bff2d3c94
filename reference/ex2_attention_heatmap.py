"""Reference solution of ex2_attention_heatmap: multi-head self-attention on a sentence."""

import math
import string

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from matplotlib.figure import Figure


def tokenize(sentence: str) -> list[str]:
    """Lowercase, split on whitespace, remove every character of string.punctuation from each
    token and drop empty tokens: "Don't!" -> ["dont"]."""
    table = str.maketrans("", "", string.punctuation)
    words = (word.translate(table) for word in sentence.lower().split())
    return [word for word in words if word]


def build_vocab(tokens: list[str]) -> dict[str, int]:
    """Map each distinct token to an id 0, 1, ... in order of first appearance."""
    vocab: dict[str, int] = {}
    for token in tokens:
        vocab.setdefault(token, len(vocab))
    return vocab


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with projections W_q, W_k, W_v, W_o (d_model -> d_model).

    forward(x (B, L, d_model), mask=None, return_attention=False) returns the output
    (B, L, d_model), or (output, weights (B, num_heads, L, L)); mask is bool, True = attend.
    """

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, return_attention: bool = False
    ):
        batch, length, d_model = x.shape
        heads = (batch, length, self.num_heads, self.head_dim)
        q = self.W_q(x).view(heads).transpose(1, 2)
        k = self.W_k(x).view(heads).transpose(1, 2)
        v = self.W_v(x).view(heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        context = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
        output = self.W_o(context)
        if return_attention:
            return output, weights
        return output


def sentence_attention(
    sentence: str, d_model: int = 32, num_heads: int = 4, seed: int = 0
) -> tuple[list[str], np.ndarray]:
    """Tokens of `sentence` and their self-attention weights (num_heads, L, L) from a seeded
    nn.Embedding followed by MultiHeadAttention (same seed, same weights)."""
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        embedding = nn.Embedding(len(vocab), d_model)
        attention = MultiHeadAttention(d_model, num_heads)
    ids = torch.tensor([[vocab[token] for token in tokens]])
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return tokens, weights[0].numpy()


def plot_attention(weights: np.ndarray, tokens: list[str], title: str | None = None) -> Figure:
    """Heatmap of an (L, L) attention matrix: keys on the x axis, queries on the y axis, one
    tick per token at its cell's centre labelled with the token, and a colorbar."""
    size = 1.5 + 0.6 * len(tokens)
    figure = Figure(figsize=(size + 1.0, size), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(weights, cmap="viridis")
    positions = range(len(tokens))
    axes.set_xticks(positions, labels=tokens, rotation=45, ha="right")
    axes.set_yticks(positions, labels=tokens)
    axes.set_xlabel("key")
    axes.set_ylabel("query")
    if title:
        axes.set_title(title)
    figure.colorbar(image, ax=axes)
    return figure


def strongest_attention(weights: np.ndarray, tokens: list[str], word: str) -> str:
    """The token that the first occurrence of `word` (a query: a row of `weights`) attends to
    most strongly; the first maximum on ties. ValueError if `word` is not among the tokens."""
    if word not in tokens:
        raise ValueError(f"{word!r} is not one of the tokens {tokens}")
    row = np.asarray(weights)[tokens.index(word)]
    return tokens[int(np.argmax(row))]
