"""Named mistakes of ex2_attention_heatmap (each a wrong version of a contract function/class).

Each runs in a copy of the reference module's namespace (string, np, torch, nn, F, math, Figure
and the other contract names mean what they mean there); anything else is imported inside.
"""
# ruff: noqa: F811 - every mistake redefines the function or class it replaces

import math
import string

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from matplotlib.figure import Figure

from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex2_attention_heatmap")


# -- tokenize ----------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "punctuation_only_at_ends",
    "punctuation was stripped only from the ends of "
    'each word; remove it everywhere ("don\'t" -> "dont")',
    check="test_tokenize_lowercases_and_removes_punctuation",
)
def tokenize(sentence):
    words = (word.strip(string.punctuation) for word in sentence.lower().split())
    return [word for word in words if word]


@CATALOGUE.mistake(
    "regex_class_unescaped",
    "string.punctuation was pasted into a regex character class unescaped, so the backslash "
    "stays (inside [...] its \\] is an escaped ]): escape it with re.escape, or use "
    "str.translate",
    check="test_tokenize_lowercases_and_removes_punctuation",
)
def tokenize(sentence):
    import re

    return re.sub("[" + string.punctuation + "]", "", sentence.lower()).split()


@CATALOGUE.mistake(
    "not_lowercased",
    "the tokens were not lowercased",
    check="test_tokenize_lowercases_and_removes_punctuation",
)
def tokenize(sentence):
    table = str.maketrans("", "", string.punctuation)
    words = (word.translate(table) for word in sentence.split())
    return [word for word in words if word]


@CATALOGUE.mistake(
    "split_on_spaces_only",
    "the sentence was split on single spaces only; split "
    "on any whitespace (tabs, newlines, runs of spaces) with str.split()",
    check="test_tokenize_splits_on_any_whitespace",
)
def tokenize(sentence):
    table = str.maketrans("", "", string.punctuation)
    words = (word.translate(table) for word in sentence.lower().split(" "))
    return [word for word in words if word]


# -- build_vocab -------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "vocab_sorted",
    "the vocabulary was sorted alphabetically; ids follow the order in which tokens first appear",
    check="test_build_vocab_first_appearance_order",
)
def build_vocab(tokens):
    return {token: index for index, token in enumerate(sorted(set(tokens)))}


@CATALOGUE.mistake(
    "vocab_ids_are_positions",
    "ids were positions in the token list (a repeated "
    "token takes its last position); give each new token the next id 0, 1, 2, ...",
    check="test_build_vocab_first_appearance_order",
)
def build_vocab(tokens):
    return {token: index for index, token in enumerate(tokens)}


# -- MultiHeadAttention ------------------------------------------------------------------------
@CATALOGUE.mistake(
    "no_divisibility_check",
    "MultiHeadAttention accepted a d_model that is not divisible by num_heads; raise ValueError",
    check="test_mha_rejects_indivisible_d_model",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "assert_instead_of_valueerror",
    "an assert raises AssertionError (and is "
    "skipped under python -O); raise ValueError when d_model % num_heads != 0",
    check="test_mha_rejects_indivisible_d_model",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "softmax_over_queries",
    "the softmax ran over the queries (dim=-2) instead "
    "of the keys (dim=-1), so the rows of the weights do not sum to 1",
    check="test_mha_output_and_weight_shapes",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-2)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "weights_averaged_over_heads",
    "the attention weights were averaged over the "
    "heads; return one matrix per head, shape (B, num_heads, L, L)",
    check="test_mha_output_and_weight_shapes",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights.mean(dim=1)) if return_attention else output


@CATALOGUE.mistake(
    "heads_interleaved",
    "the heads take every num_heads-th feature (view(B, L, head_dim, num_heads)): split them "
    "contiguously, head k = features k*head_dim .. (k+1)*head_dim - 1, with "
    "view(B, L, num_heads, head_dim)",
    check="test_mha_matches_reference_with_its_own_weights",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.head_dim, self.num_heads).permute(0, 3, 1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        merged = (weights @ v).permute(0, 2, 3, 1).reshape(batch, length, d_model)
        output = self.W_o(merged)
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "heads_split_without_transpose",
    "the heads were split with a plain "
    "view(B, num_heads, L, head_dim), which mixes positions and features; view "
    "as (B, L, num_heads, head_dim), then transpose(1, 2)",
    check="test_mha_matches_reference_with_its_own_weights",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, self.num_heads, length, -1) for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "no_sqrt_scaling",
    "the scores were not divided by sqrt(head_dim)",
    check="test_mha_matches_reference_with_its_own_weights",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "scaled_by_sqrt_d_model",
    "the scores were divided by sqrt(d_model); each head "
    "works in head_dim = d_model // num_heads dimensions, divide by sqrt(head_dim)",
    check="test_mha_matches_reference_with_its_own_weights",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "no_output_projection",
    "the heads' concatenated output was returned without the output projection W_o",
    check="test_mha_matches_reference_with_its_own_weights",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "mask_polarity_reversed",
    "the mask was applied the wrong way round: True means 'may attend'",
    check="test_mha_bool_mask_blocks_positions",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "mask_ignored", "the mask argument was ignored", check="test_mha_bool_mask_blocks_positions"
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        q, k, v = (
            W(x).view(batch, length, self.num_heads, -1).transpose(1, 2)
            for W in (self.W_q, self.W_k, self.W_v)
        )
        weights = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


# -- sentence_attention ------------------------------------------------------------------------
@CATALOGUE.mistake(
    "sentence_keeps_batch_dim",
    "the batch dimension was not removed: return weights of shape (num_heads, L, L)",
    check="test_sentence_attention_shapes_and_rows",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    torch.manual_seed(seed)
    embedding = nn.Embedding(len(vocab), d_model)
    attention = MultiHeadAttention(d_model, num_heads)
    ids = torch.tensor([[vocab[token] for token in tokens]])
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return tokens, weights.numpy()


@CATALOGUE.mistake(
    "sentence_ignores_num_heads",
    "the attention module was built with 4 heads whatever `num_heads` was asked for",
    check="test_sentence_attention_shapes_and_rows",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    torch.manual_seed(seed)
    embedding = nn.Embedding(len(vocab), d_model)
    attention = MultiHeadAttention(d_model, 4)
    ids = torch.tensor([[vocab[token] for token in tokens]])
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return tokens, weights[0].numpy()


@CATALOGUE.mistake(
    "sentence_weights_not_from_attention",
    "the weights were not computed by the notebook's MultiHeadAttention (a row-stochastic "
    "matrix made some other way)",
    check="test_sentence_attention_is_seeded",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    table = torch.randn(len(vocab), d_model, generator=torch.Generator().manual_seed(seed))
    x = table[[vocab[token] for token in tokens]]
    scores = torch.stack([x @ x.T * (head + 1) / d_model for head in range(num_heads)])
    return tokens, torch.softmax(scores, dim=-1).numpy()


@CATALOGUE.mistake(
    "sentence_ignores_seed",
    "the embedding and the attention module were not "
    "created after torch.manual_seed(seed), so the same seed gives different weights",
    check="test_sentence_attention_is_seeded",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    embedding = nn.Embedding(len(vocab), d_model)
    attention = MultiHeadAttention(d_model, num_heads)
    ids = torch.tensor([[vocab[token] for token in tokens]])
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return tokens, weights[0].numpy()


@CATALOGUE.mistake(
    "embedding_by_position",
    "each position was embedded by its index, not by "
    "its vocabulary id, so a repeated word gets a different vector each time",
    check="test_sentence_attention_same_word_same_weights",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    torch.manual_seed(seed)
    embedding = nn.Embedding(len(tokens), d_model)
    attention = MultiHeadAttention(d_model, num_heads)
    ids = torch.arange(len(tokens)).unsqueeze(0)
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return tokens, weights[0].numpy()


# -- plot_attention ----------------------------------------------------------------------------
@CATALOGUE.mistake(
    "heatmap_transposed",
    "the heatmap is transposed: row i of the weights (query "
    "i) must be drawn as a row, with the keys along the x axis",
    check="test_plot_attention_cells_show_the_weights",
)
def plot_attention(weights, tokens, title=None):
    figure = Figure()
    axes = figure.subplots()
    image = axes.imshow(np.asarray(weights).T)
    axes.set_xticks(range(len(tokens)), labels=tokens)
    axes.set_yticks(range(len(tokens)), labels=tokens)
    if title:
        axes.set_title(title)
    figure.colorbar(image, ax=axes)
    return figure


@CATALOGUE.mistake(
    "ticks_at_cell_edges",
    "the ticks sit on the cell edges, not the cell centres "
    "(pcolormesh draws cell i from i to i + 1: its centre is i + 0.5)",
    check="test_plot_attention_ticks_label_cell_centres",
)
def plot_attention(weights, tokens, title=None):
    figure = Figure()
    axes = figure.subplots()
    mesh = axes.pcolormesh(np.asarray(weights))
    axes.set_xticks(range(len(tokens)), labels=tokens)
    axes.set_yticks(range(len(tokens)), labels=tokens)
    if title:
        axes.set_title(title)
    figure.colorbar(mesh, ax=axes)
    return figure


@CATALOGUE.mistake(
    "query_labels_reversed",
    "the query labels on the y axis are in reverse order: "
    "with imshow, row 0 of the weights is drawn at the top",
    check="test_plot_attention_ticks_label_cell_centres",
)
def plot_attention(weights, tokens, title=None):
    figure = Figure()
    axes = figure.subplots()
    image = axes.imshow(np.asarray(weights))
    axes.set_xticks(range(len(tokens)), labels=tokens)
    axes.set_yticks(range(len(tokens)), labels=tokens[::-1])
    if title:
        axes.set_title(title)
    figure.colorbar(image, ax=axes)
    return figure


@CATALOGUE.mistake(
    "ticks_from_vocabulary",
    "the ticks were labelled from the vocabulary (one per distinct word), not the tokens: a "
    "word that occurs twice needs two ticks, one on each of its rows and columns",
    check="test_plot_attention_ticks_label_cell_centres",
)
def plot_attention(weights, tokens, title=None):
    figure = Figure()
    axes = figure.subplots()
    image = axes.imshow(np.asarray(weights))
    vocabulary = list(dict.fromkeys(tokens))
    axes.set_xticks(range(len(vocabulary)), labels=vocabulary)
    axes.set_yticks(range(len(vocabulary)), labels=vocabulary)
    if title:
        axes.set_title(title)
    figure.colorbar(image, ax=axes)
    return figure


@CATALOGUE.mistake(
    "no_colorbar", "the figure has no colorbar", check="test_plot_attention_has_colorbar_and_title"
)
def plot_attention(weights, tokens, title=None):
    figure = Figure()
    axes = figure.subplots()
    axes.imshow(np.asarray(weights))
    axes.set_xticks(range(len(tokens)), labels=tokens)
    axes.set_yticks(range(len(tokens)), labels=tokens)
    if title:
        axes.set_title(title)
    return figure


@CATALOGUE.mistake(
    "title_not_on_the_axes",
    "the title went to the figure (suptitle) or nowhere: the contract puts it on the heatmap's "
    "axes (axes.set_title)",
    check="test_plot_attention_has_colorbar_and_title",
)
def plot_attention(weights, tokens, title=None):
    figure = Figure()
    axes = figure.subplots()
    image = axes.imshow(np.asarray(weights))
    axes.set_xticks(range(len(tokens)), labels=tokens)
    axes.set_yticks(range(len(tokens)), labels=tokens)
    figure.colorbar(image, ax=axes)
    if title:
        figure.suptitle(title)
    return figure


# -- strongest_attention -----------------------------------------------------------------------
@CATALOGUE.mistake(
    "strongest_reads_column",
    "a column was read instead of a row: the word is the query, so read its row weights[i, :]",
    check="test_strongest_attention_reads_the_query_row",
)
def strongest_attention(weights, tokens, word):
    if word not in tokens:
        raise ValueError(f"{word!r} is not one of the tokens")
    return tokens[int(np.argmax(np.asarray(weights)[:, tokens.index(word)]))]


@CATALOGUE.mistake(
    "strongest_last_occurrence",
    "the last occurrence of the word was used; use its first occurrence",
    check="test_strongest_attention_reads_the_query_row",
)
def strongest_attention(weights, tokens, word):
    if word not in tokens:
        raise ValueError(f"{word!r} is not one of the tokens")
    row = len(tokens) - 1 - tokens[::-1].index(word)
    return tokens[int(np.argmax(np.asarray(weights)[row]))]


@CATALOGUE.mistake(
    "strongest_last_max_on_ties",
    "on a tie the last maximum was returned; return the first (as np.argmax does)",
    check="test_strongest_attention_ties_and_missing_words",
)
def strongest_attention(weights, tokens, word):
    if word not in tokens:
        raise ValueError(f"{word!r} is not one of the tokens")
    row = np.asarray(weights)[tokens.index(word)]
    return tokens[int(np.flatnonzero(row == row.max())[-1])]


@CATALOGUE.mistake(
    "strongest_skips_the_word_itself",
    "the word's own position (the diagonal) was skipped: a word may attend most to itself, "
    "and then the answer is the word",
    check="test_strongest_attention_reads_the_query_row",
)
def strongest_attention(weights, tokens, word):
    if word not in tokens:
        raise ValueError(f"{word!r} is not one of the tokens")
    index = tokens.index(word)
    row = np.array(weights, dtype=float)[index]
    row[index] = -np.inf
    return tokens[int(np.argmax(row))]


@CATALOGUE.mistake(
    "strongest_keyerror",
    "a missing word raised KeyError; raise ValueError",
    check="test_strongest_attention_ties_and_missing_words",
)
def strongest_attention(weights, tokens, word):
    first = {}
    for index, token in enumerate(tokens):
        first.setdefault(token, index)
    return tokens[int(np.argmax(np.asarray(weights)[first[word]]))]


@CATALOGUE.mistake(
    "heads_merged_without_transpose",
    "the heads were merged with a plain reshape of (B, num_heads, L, head_dim) to "
    "(B, L, d_model), which mixes positions and heads; transpose(1, 2) back first",
    check="test_mha_matches_reference_with_its_own_weights",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        heads = (batch, length, self.num_heads, self.head_dim)
        q, k, v = (W(x).view(heads).transpose(1, 2) for W in (self.W_q, self.W_k, self.W_v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "empty_tokens_kept",
    "a word made only of punctuation became an empty token that was kept; drop empty tokens",
    check="test_tokenize_lowercases_and_removes_punctuation",
)
def tokenize(sentence):
    table = str.maketrans("", "", string.punctuation)
    return [word.translate(table) for word in sentence.lower().split()]


@CATALOGUE.mistake(
    "projections_not_named",
    "the projections are not the submodules W_q, W_k, W_v and W_o the contract names (one fused "
    "layer for Q, K and V, say): give each its own nn.Linear(d_model, d_model) under its name",
    check="test_mha_matches_reference_with_its_own_weights",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        heads = (batch, length, self.num_heads, self.head_dim)
        q, k, v = (t.reshape(heads).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "num_heads_ignored",
    "MultiHeadAttention ignores num_heads: it attends with one head over all d_model features",
    check="test_mha_output_and_weight_shapes",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        q, k, v = self.W_q(x)[:, None], self.W_k(x)[:, None], self.W_v(x)[:, None]
        scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v)[:, 0])
        return (output, weights) if return_attention else output


@CATALOGUE.mistake(
    "return_attention_ignored",
    "forward ignores return_attention: it returns the tuple (output, weights) even when "
    "return_attention=False, where the output alone is asked for",
    check="test_mha_output_and_weight_shapes",
)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None, return_attention=False):
        batch, length, d_model = x.shape
        heads = (batch, length, self.num_heads, self.head_dim)
        q, k, v = (W(x).view(heads).transpose(1, 2) for W in (self.W_q, self.W_k, self.W_v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        output = self.W_o((weights @ v).transpose(1, 2).reshape(batch, length, d_model))
        return output, weights


@CATALOGUE.mistake(
    "sentence_weights_transposed",
    "the weights came back transposed (the queries along the columns), so their rows do not "
    "sum to 1: row i is query i",
    check="test_sentence_attention_shapes_and_rows",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    torch.manual_seed(seed)
    embedding = nn.Embedding(len(vocab), d_model)
    attention = MultiHeadAttention(d_model, num_heads)
    ids = torch.tensor([[vocab[token] for token in tokens]])
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return tokens, weights[0].transpose(-1, -2).numpy()


@CATALOGUE.mistake(
    "sentence_returns_the_vocabulary",
    "sentence_attention returned the vocabulary's words (each distinct word once) instead of "
    "the sentence's tokens, in which a repeated word appears each time",
    check="test_sentence_attention_same_word_same_weights",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    torch.manual_seed(seed)
    embedding = nn.Embedding(len(vocab), d_model)
    attention = MultiHeadAttention(d_model, num_heads)
    ids = torch.tensor([[vocab[token] for token in tokens]])
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return list(vocab), weights[0].numpy()


@CATALOGUE.mistake(
    "sentence_ignores_d_model",
    "sentence_attention ignores d_model: its embedding and attention always have the default "
    "32 features",
    check="test_sentence_attention_is_seeded",
)
def sentence_attention(sentence, d_model=32, num_heads=4, seed=0):
    tokens = tokenize(sentence)
    vocab = build_vocab(tokens)
    torch.manual_seed(seed)
    embedding = nn.Embedding(len(vocab), 32)
    attention = MultiHeadAttention(32, num_heads)
    ids = torch.tensor([[vocab[token] for token in tokens]])
    with torch.no_grad():
        _, weights = attention(embedding(ids), return_attention=True)
    return tokens, weights[0].numpy()


@CATALOGUE.mistake(
    "strongest_matches_any_case",
    "the word was matched without regard to case; `word` must match a token exactly (raise "
    "ValueError when it does not)",
    check="test_strongest_attention_ties_and_missing_words",
)
def strongest_attention(weights, tokens, word):
    lowered = [token.lower() for token in tokens]
    if word.lower() not in lowered:
        raise ValueError(f"{word!r} is not one of the tokens")
    return tokens[int(np.argmax(np.asarray(weights)[lowered.index(word.lower())]))]
