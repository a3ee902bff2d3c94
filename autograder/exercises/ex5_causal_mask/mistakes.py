"""Named mistakes of ex5_causal_mask (each a wrong version of a contract function or class)."""
# ruff: noqa: F811 - every mistake redefines the function or class it replaces

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex5_causal_mask")


# -- causal_mask -------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "bool_causal_mask",
    "causal_mask returned a boolean mask; here the mask is additive: 0.0 = may attend, "
    "-inf = blocked",
    check="test_causal_mask_shape_and_dtype",
)
def causal_mask(seq_len):
    return torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool))


@CATALOGUE.mistake(
    "causal_mask_float64",
    "causal_mask is float64 (as NumPy builds it): the contract asks for torch.float32, the "
    "dtype of the scores it is added to",
    check="test_causal_mask_shape_and_dtype",
)
def causal_mask(seq_len):
    return torch.from_numpy(np.triu(np.full((seq_len, seq_len), -np.inf), k=1))


@CATALOGUE.mistake(
    "reversed_triangle",
    "the mask blocks the past instead of the future: -inf belongs above the diagonal "
    "(key j later than query i), 0.0 on and below it",
    check="test_causal_mask_values",
)
def causal_mask(seq_len):
    return torch.tril(torch.full((seq_len, seq_len), float("-inf")), diagonal=-1)


@CATALOGUE.mistake(
    "diagonal_blocked",
    "the diagonal is blocked too: a position must be able to attend to itself (with nothing "
    "to attend to, the first row's softmax is NaN)",
    check="test_causal_mask_values",
)
def causal_mask(seq_len):
    return torch.triu(torch.full((seq_len, seq_len), float("-inf")))


# -- masked_attention --------------------------------------------------------------------------
@CATALOGUE.mistake(
    "no_sqrt_scaling",
    "the scores were not divided by sqrt(d)",
    check="test_masked_attention_matches_reference",
)
def masked_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "mask_after_softmax",
    "the mask was added to the weights after the softmax; it belongs on the scores, before it",
    check="test_masked_attention_float_mask_blocks_positions",
)
def masked_attention(Q, K, V, mask=None):
    weights = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights + mask
    return weights @ V, weights


@CATALOGUE.mistake(
    "zeroed_after_softmax",
    "the blocked weights were set to 0 after the softmax, so the rows no longer sum to 1",
    check="test_masked_attention_float_mask_blocks_positions",
)
def masked_attention(Q, K, V, mask=None):
    weights = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(torch.isinf(mask), 0.0)
    return weights @ V, weights


@CATALOGUE.mistake(
    "masked_fill_zero",
    "blocked scores were set to 0 instead of -inf, so blocked positions still get weight",
    check="test_masked_attention_float_mask_blocks_positions",
)
def masked_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(torch.isinf(mask), 0.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


# -- discretize_sine ---------------------------------------------------------------------------
@CATALOGUE.mistake(
    "round_not_floor",
    "the bins were rounded to the nearest integer instead of floored",
    check="test_discretize_sine_bins",
)
def discretize_sine(n_points, n_bins=50, period=50.0):
    v = np.sin(2 * np.pi * np.arange(n_points, dtype=np.float64) / period)
    bins = np.minimum(np.round((v + 1) / 2 * n_bins), n_bins - 1)
    return torch.from_numpy(bins.astype(np.int64))


@CATALOGUE.mistake(
    "bins_not_clipped",
    "v = 1 falls in bin n_bins, one past the last: clip the bins to n_bins - 1",
    check="test_discretize_sine_bins",
)
def discretize_sine(n_points, n_bins=50, period=50.0):
    v = np.sin(2 * np.pi * np.arange(n_points, dtype=np.float64) / period)
    return torch.from_numpy(np.floor((v + 1) / 2 * n_bins).astype(np.int64))


@CATALOGUE.mistake(
    "discretize_in_float32",
    "the sine was computed in float32 (torch's default dtype): over a long input some values "
    "round across a bin edge; compute t and v in float64",
    check="test_discretize_sine_bins",
)
def discretize_sine(n_points, n_bins=50, period=50.0):
    v = torch.sin(2 * math.pi * torch.arange(n_points) / period)
    return torch.clamp(torch.floor((v + 1) / 2 * n_bins), max=n_bins - 1).long()


# -- make_windows and split_holdout ------------------------------------------------------------
@CATALOGUE.mistake(
    "targets_not_shifted",
    "the targets Y are the inputs X themselves: Y[i] must be the window shifted by one token",
    check="test_make_windows_exact",
)
def make_windows(tokens, context_len):
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    X = torch.stack([tokens[i : i + context_len] for i in range(len(tokens) - context_len)])
    return X, X.clone()


@CATALOGUE.mistake(
    "one_window_short",
    "the last window is missing: starts run from 0 to len(tokens) - context_len - 1 inclusive",
    check="test_make_windows_exact",
)
def make_windows(tokens, context_len):
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    starts = range(len(tokens) - context_len - 1)
    X = torch.stack([tokens[i : i + context_len] for i in starts])
    Y = torch.stack([tokens[i + 1 : i + 1 + context_len] for i in starts])
    return X, Y


@CATALOGUE.mistake(
    "negative_gap_slices_from_the_end",
    "with fewer windows than the gap needs, first_test - context_len is negative and X[:gap] "
    "slices from the end: no training window is left then (clamp the gap at 0)",
    check="test_split_holdout_exact",
)
def split_holdout(X, Y, holdout_frac=0.1):
    n = X.shape[0]
    n_test = math.ceil(holdout_frac * n)
    first_test = n - n_test
    n_train = first_test if n_test == 0 else first_test - X.shape[1]
    return X[:n_train], Y[:n_train], X[first_test:], Y[first_test:]


@CATALOGUE.mistake(
    "split_without_gap",
    "train and test windows overlap: the training windows just before the test windows share "
    "tokens with them, so the held-out accuracy is not measured on unseen data",
    check="test_split_holdout_exact",
)
def split_holdout(X, Y, holdout_frac=0.1):
    first_test = X.shape[0] - math.ceil(holdout_frac * X.shape[0])
    return X[:first_test], Y[:first_test], X[first_test:], Y[first_test:]


@CATALOGUE.mistake(
    "gap_ignores_targets",
    "the gap keeps only the inputs apart: the last training window's target is the first test "
    "window's first token",
    check="test_split_holdout_exact",
)
def split_holdout(X, Y, holdout_frac=0.1):
    first_test = X.shape[0] - math.ceil(holdout_frac * X.shape[0])
    n_train = max(first_test - X.shape[1] + 1, 0)
    return X[:n_train], Y[:n_train], X[first_test:], Y[first_test:]


# -- CausalTransformer -------------------------------------------------------------------------
@CATALOGUE.mistake(
    "no_causal_mask",
    "CausalTransformer does not pass a causal mask to its attention, so every position sees "
    "the whole window, future tokens included",
    check="test_causal_transformer_is_causal",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        h = self.token_emb(x) + self.pos_emb(torch.arange(x.shape[1]))
        return self.head(self.encoder(h))


@CATALOGUE.mistake(
    "max_len_ignored",
    "CausalTransformer ignores max_len: its positions stop at the default 128, so a model built "
    "for longer sequences fails on them",
    check="test_causal_transformer_output_shape",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(128, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        length = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(length))
        mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        return self.head(self.encoder(h, mask=mask))


@CATALOGUE.mistake(
    "n_layers_ignored",
    "CausalTransformer ignores n_layers: it always stacks two layers",
    check="test_causal_transformer_output_shape",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, 2, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        length = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(length))
        mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        return self.head(self.encoder(h, mask=mask))


@CATALOGUE.mistake(
    "n_heads_ignored",
    "CausalTransformer ignores n_heads: it always builds 4 heads",
    check="test_causal_transformer_output_shape",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, 4, 4 * d_model, dropout, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        length = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(length))
        mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        return self.head(self.encoder(h, mask=mask))


@CATALOGUE.mistake(
    "layers_not_chained",
    "the layers are not chained: each takes the embeddings instead of the previous layer's "
    "output, so only the last one counts (h = layer(h))",
    check="test_causal_transformer_output_shape",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, n_heads, 4 * d_model, dropout, batch_first=True, norm_first=True
            )
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        length = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(length))
        mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        for layer in self.layers:
            out = layer(h, src_mask=mask)
        return self.head(self.norm(out))


@CATALOGUE.mistake(
    "dropout_ignored",
    "CausalTransformer uses a dropout of 0.1 whatever its dropout argument says",
    check="test_causal_transformer_output_shape",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, 0.1, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        length = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(length))
        mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        return self.head(self.encoder(h, mask=mask))


# -- train_lm ----------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "train_lm_ignores_seed",
    "train_lm ignores its seed: the same seed must give the same losses (whatever the global "
    "random state) and another seed other ones",
    check="test_train_lm_deterministic_for_a_seed",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(X.shape[0])
        total = 0.0
        for start in range(0, X.shape[0], batch_size):
            idx = order[start : start + batch_size]
            logits = model(X[idx])
            loss = F.cross_entropy(logits.flatten(0, 1), Y[idx].flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        history.append(total / X.shape[0])
    return history


@CATALOGUE.mistake(
    "trained_on_inputs",
    "train_lm compares the logits with the inputs X instead of the targets Y, so the model "
    "learns to copy the current token rather than predict the next one",
    check="test_train_lm_learns_the_sine",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(X.shape[0], generator=generator)
        total = 0.0
        for start in range(0, X.shape[0], batch_size):
            idx = order[start : start + batch_size]
            logits = model(X[idx])
            loss = F.cross_entropy(logits.flatten(0, 1), X[idx].flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        history.append(total / X.shape[0])
    return history


# -- next_token_accuracy -----------------------------------------------------------------------
@CATALOGUE.mistake(
    "accuracy_in_train_mode",
    "next_token_accuracy leaves the model in training mode, so dropout changes its predictions",
    check="test_next_token_accuracy_matches_predictions",
)
def next_token_accuracy(model, X, Y):
    with torch.no_grad():
        return (model(X).argmax(dim=-1) == Y).float().mean().item()


@CATALOGUE.mistake(
    "accuracy_last_position_only",
    "only the last position of each window was scored; the accuracy is over every position",
    check="test_next_token_accuracy_matches_predictions",
)
def next_token_accuracy(model, X, Y):
    model.eval()
    with torch.no_grad():
        return (model(X)[:, -1].argmax(dim=-1) == Y[:, -1]).float().mean().item()


@CATALOGUE.mistake(
    "accuracy_with_gradients",
    "next_token_accuracy runs the model with gradients on; measure under torch.no_grad() (or "
    "torch.inference_mode())",
    check="test_next_token_accuracy_matches_predictions",
)
def next_token_accuracy(model, X, Y):
    model.eval()
    return (model(X).argmax(dim=-1) == Y).float().mean().item()


# -- round 2 (issue 8) ---------------------------------------------------------------------------


@CATALOGUE.mistake(
    "lm_batch_size_ignored",
    "train_lm ignores its batch_size argument (always 64): use the batch_size it is given",
    check="test_train_lm_reports_sample_weighted_loss",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.shape[0], []
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, 64):
                idx = order[start : start + 64]
                logits = model(X[idx])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y[idx].reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
            history.append(total / n)
    return history


@CATALOGUE.mistake(
    "lm_loss_mean_of_batch_means",
    "the epoch loss is the plain mean of the batch losses; weight each batch by its "
    "number of windows (the last batch is smaller)",
    check="test_train_lm_reports_sample_weighted_loss",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.shape[0], []
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total, batches = 0.0, 0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                logits = model(X[idx])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y[idx].reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item()
                batches += 1
            history.append(total / batches)
    return history


@CATALOGUE.mistake(
    "lm_loss_last_position_only",
    "the loss was taken at the last position of each window only; a language model is "
    "trained on the next token at every position",
    check="test_train_lm_reports_sample_weighted_loss",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.shape[0], []
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total, batches = 0.0, 0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                logits = model(X[idx])
                loss = F.cross_entropy(logits[:, -1], Y[idx][:, -1])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
                batches += 1
            history.append(total / n)
    return history


@CATALOGUE.mistake(
    "lm_no_zero_grad",
    "the gradients were never reset (no optimizer.zero_grad()), so each step uses the sum "
    "of all gradients so far",
    check="test_train_lm_learns_the_sine",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.shape[0], []
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total, batches = 0.0, 0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                logits = model(X[idx])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y[idx].reshape(-1))
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
                batches += 1
            history.append(total / n)
    return history


@CATALOGUE.mistake(
    "scaled_by_sqrt_d_v",
    "the scores were divided by sqrt(d_v) (the size of V's rows) instead of sqrt(d)",
    check="test_masked_attention_matches_reference",
)
def masked_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(V.shape[-1])
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "none_mask_means_causal",
    "with mask=None the attention was made causal: mask=None masks nothing (a causal model passes "
    "causal_mask itself)",
    check="test_masked_attention_matches_reference",
)
def masked_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is None:
        mask = torch.triu(torch.full(scores.shape[-2:], float("-inf")), diagonal=1)
    scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "masked_attention_ignores_mask",
    "masked_attention ignores its mask: blocked positions still get weight",
    check="test_masked_attention_float_mask_blocks_positions",
)
def masked_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    pass
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "n_bins_ignored",
    "discretize_sine ignores n_bins: it always uses the default 50 bins",
    check="test_discretize_sine_bins",
)
def discretize_sine(n_points, n_bins=50, period=50.0):
    t = torch.arange(n_points, dtype=torch.float64)
    v = torch.sin(2 * math.pi * t / period)
    return torch.clamp(torch.floor((v + 1) / 2 * 50), max=50 - 1).long()


@CATALOGUE.mistake(
    "period_ignored",
    "discretize_sine ignores period: the sine always has the default period 50",
    check="test_discretize_sine_bins",
)
def discretize_sine(n_points, n_bins=50, period=50.0):
    t = torch.arange(n_points, dtype=torch.float64)
    v = torch.sin(2 * math.pi * t / 50.0)
    return torch.clamp(torch.floor((v + 1) / 2 * n_bins), max=n_bins - 1).long()


@CATALOGUE.mistake(
    "test_size_rounded",
    "the number of test windows was rounded to the nearest integer: it is ceil(holdout_frac * N)",
    check="test_split_holdout_exact",
)
def split_holdout(X, Y, holdout_frac=0.1):
    n = X.shape[0]
    n_test = round(holdout_frac * n)
    first_test = n - n_test
    n_train = max(first_test - X.shape[1], 0)

    return X[:n_train], Y[:n_train], X[first_test:], Y[first_test:]


@CATALOGUE.mistake(
    "train_windows_shuffled",
    "the training windows were shuffled: the split keeps their order",
    check="test_split_holdout_exact",
)
def split_holdout(X, Y, holdout_frac=0.1):
    n = X.shape[0]
    n_test = math.ceil(holdout_frac * n)
    first_test = n - n_test
    n_train = max(first_test - X.shape[1], 0)
    order = torch.randperm(n_train, generator=torch.Generator().manual_seed(0))
    return X[:n_train][order], Y[:n_train][order], X[first_test:], Y[first_test:]


@CATALOGUE.mistake(
    "holdout_frac_ignored",
    "split_holdout ignores holdout_frac: the test set is always the default 10% of the windows",
    check="test_split_holdout_exact",
)
def split_holdout(X, Y, holdout_frac=0.1):
    n = X.shape[0]
    n_test = math.ceil(0.1 * n)
    first_test = n - n_test
    n_train = max(first_test - X.shape[1], 0)

    return X[:n_train], Y[:n_train], X[first_test:], Y[first_test:]


@CATALOGUE.mistake(
    "lm_epochs_ignored",
    "train_lm ignores epochs: it always trains for the default 20 epochs",
    check="test_train_lm_reports_sample_weighted_loss",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.shape[0], []
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(20):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                logits = model(X[idx])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y[idx].reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
            history.append(total / n)
    return history


@CATALOGUE.mistake(
    "lm_lr_ignored",
    "train_lm ignores lr: Adam always gets the default 3e-3",
    check="test_train_lm_reports_sample_weighted_loss",
)
def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    n, history = X.shape[0], []
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                logits = model(X[idx])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y[idx].reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(idx)
            history.append(total / n)
    return history


@CATALOGUE.mistake(
    "vocab_size_ignored",
    "CausalTransformer ignores vocab_size: its logits always have the default 50 entries",
    check="test_causal_transformer_output_shape",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        vocab_size, d_model = 50, d_model
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        h = self.token_emb(x) + self.pos_emb(torch.arange(x.shape[1]))
        mask = causal_mask(x.shape[1])
        return self.head(self.encoder(h, mask=mask))


@CATALOGUE.mistake(
    "d_model_ignored",
    "CausalTransformer ignores d_model: its layers always have the default 64 features",
    check="test_causal_transformer_output_shape",
)
class CausalTransformer(nn.Module):
    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        vocab_size, d_model = vocab_size, 64
        self.token_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(
            layer, n_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        h = self.token_emb(x) + self.pos_emb(torch.arange(x.shape[1]))
        mask = causal_mask(x.shape[1])
        return self.head(self.encoder(h, mask=mask))
