"""The reference of ex5_causal_mask behaves as EXERCISES.md says: attention compared with
PyTorch's own (float64, atol 1e-6), data helpers with loops written from the contract, the
model's causality and the training loop's determinism."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from autograder._reference.ex5_causal_mask import (
    CausalTransformer,
    causal_mask,
    discretize_sine,
    make_windows,
    masked_attention,
    next_token_accuracy,
    split_holdout,
    train_lm,
)

pytestmark = pytest.mark.ex5


@pytest.mark.parametrize("seq_len", [1, 2, 5, 17])
def test_causal_mask_is_zero_on_and_below_the_diagonal_and_minus_inf_above(seq_len):
    mask = causal_mask(seq_len)
    assert mask.shape == (seq_len, seq_len)
    assert mask.is_floating_point()
    for i in range(seq_len):
        for j in range(seq_len):
            assert mask[i, j].item() == (0.0 if j <= i else float("-inf"))


@pytest.mark.parametrize("mask_shape", [None, (4, 6), (2, 1, 4, 6), (3, 4, 6)])
def test_masked_attention_equals_torch_with_a_float_mask(mask_shape):
    generator = torch.Generator().manual_seed(0)
    Q = torch.randn(2, 3, 4, 5, dtype=torch.float64, generator=generator)
    K = torch.randn(2, 3, 6, 5, dtype=torch.float64, generator=generator)
    V = torch.randn(2, 3, 6, 7, dtype=torch.float64, generator=generator)
    mask = None
    if mask_shape is not None:
        keep = torch.rand(mask_shape, generator=generator) < 0.6
        keep[..., 0] = True  # no row is fully blocked
        mask = torch.zeros(mask_shape, dtype=torch.float64).masked_fill(~keep, float("-inf"))
    output, weights = masked_attention(Q, K, V, mask)
    expected = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    assert output.shape == (2, 3, 4, 7) and weights.shape == (2, 3, 4, 6)
    torch.testing.assert_close(output, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4, dtype=torch.float64))
    if mask is not None:
        blocked = torch.isinf(mask).expand_as(weights)
        assert torch.all(weights[blocked] == 0)


def test_causal_weights_of_future_positions_are_exactly_zero():
    generator = torch.Generator().manual_seed(1)
    Q, K, V = (torch.randn(3, 9, 4, generator=generator) for _ in range(3))
    _, weights = masked_attention(Q, K, V, causal_mask(9))
    assert torch.all(weights.triu(diagonal=1) == 0)
    assert torch.all(weights[:, torch.ones(9, 9).tril().bool()] > 0)


@pytest.mark.parametrize(
    ("n_points", "n_bins", "period"), [(120, 50, 50.0), (77, 9, 20.0), (60, 13, 17.5)]
)
def test_discretize_sine_follows_the_formula(n_points, n_bins, period):
    tokens = discretize_sine(n_points, n_bins=n_bins, period=period)
    assert tokens.dtype == torch.int64 and tokens.shape == (n_points,)
    assert 0 <= tokens.min() and tokens.max() <= n_bins - 1
    for t in range(n_points):
        v = math.sin(2 * math.pi * t / period)
        expected = min(math.floor((v + 1) / 2 * n_bins), n_bins - 1)
        on_edge = min(abs(v - (-1 + 2 * k / n_bins)) for k in range(n_bins + 1)) <= 1e-9
        assert abs(tokens[t].item() - expected) <= (1 if on_edge else 0), t


def test_discretize_sine_clips_the_peak_and_defaults_to_50_bins():
    assert discretize_sine(20, n_bins=10, period=20.0)[5].item() == 9  # v = 1
    assert torch.equal(discretize_sine(80), discretize_sine(80, n_bins=50, period=50.0))
    assert discretize_sine(200).max().item() == 49


@pytest.mark.parametrize(("length", "context_len"), [(10, 3), (4, 3), (31, 8)])
def test_make_windows_are_shifted_by_one(length, context_len):
    tokens = torch.randint(0, 50, (length,), generator=torch.Generator().manual_seed(length))
    X, Y = make_windows(tokens, context_len)
    assert X.dtype == Y.dtype == torch.int64
    assert X.shape == Y.shape == (length - context_len, context_len)
    for i in range(length - context_len):
        assert X[i].tolist() == tokens[i : i + context_len].tolist()
        assert Y[i].tolist() == tokens[i + 1 : i + 1 + context_len].tolist()


@pytest.mark.parametrize(
    ("n_tokens", "context_len", "holdout_frac"),
    [(60, 5, 0.1), (47, 4, 0.25), (130, 9, 0.17), (33, 3, 0.3)],
)
def test_split_holdout_keeps_train_and_test_apart(n_tokens, context_len, holdout_frac):
    X, Y = make_windows(torch.arange(n_tokens), context_len)  # token value = position
    n = len(X)
    X_train, Y_train, X_test, Y_test = split_holdout(X, Y, holdout_frac)
    n_test = math.ceil(holdout_frac * n)
    assert torch.equal(X_test, X[n - n_test :]) and torch.equal(Y_test, Y[n - n_test :])
    assert torch.equal(X_train, X[: len(X_train)]) and torch.equal(Y_train, Y[: len(X_train)])
    test_positions = set(X_test.flatten().tolist()) | set(Y_test.flatten().tolist())

    def positions(i):
        return set(X[i].tolist()) | set(Y[i].tolist())

    assert all(not positions(i) & test_positions for i in range(len(X_train)))
    # every later window before the test set shares a position with it: train is maximal
    assert all(positions(i) & test_positions for i in range(len(X_train), n - n_test))


def test_split_holdout_default_is_ten_percent():
    X, Y = make_windows(torch.arange(106), 6)
    X_train, _, X_test, _ = split_holdout(X, Y)
    assert len(X_test) == 10 and len(X_train) == 100 - 10 - 6


def small_model(seed: int = 0, **kwargs) -> CausalTransformer:
    torch.manual_seed(seed)
    config = {"vocab_size": 11, "d_model": 16, "n_layers": 2, "n_heads": 2, "max_len": 24}
    return CausalTransformer(**{**config, **kwargs})


def test_causal_transformer_logits_ignore_later_tokens():
    model = small_model().eval()
    x = torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(2))
    logits = model(x)
    assert logits.shape == (3, 9, 11)
    for t in range(8):
        changed = x.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % 11
        after = model(changed)
        assert torch.equal(after[:, : t + 1], logits[:, : t + 1])
        assert not torch.allclose(after[:, t + 1 :], logits[:, t + 1 :])


def test_causal_transformer_defaults():
    logits = CausalTransformer()(torch.zeros(2, 128, dtype=torch.long))
    assert logits.shape == (2, 128, 50)


def test_train_lm_is_deterministic_for_a_seed_and_learns():
    X, Y = make_windows(discretize_sine(150, n_bins=11, period=20.0), 8)
    histories = []
    for global_seed, seed in ((1, 3), (2, 3), (1, 4)):
        model = small_model()
        torch.manual_seed(global_seed)
        histories.append(train_lm(model, X, Y, epochs=3, batch_size=16, seed=seed))
    first, again, other = histories
    assert len(first) == 3 and all(isinstance(loss, float) for loss in first)
    assert first == again
    assert first != other
    assert first[-1] < first[0]


def test_next_token_accuracy_counts_every_position_in_eval_mode():
    model = small_model(dropout=0.5)
    x = torch.randint(0, 11, (5, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        predictions = model.eval()(x).argmax(-1)
    y = predictions.clone()
    y[:, :3] = (y[:, :3] + 1) % 11
    model.train()
    accuracy = next_token_accuracy(model, x, y)
    assert isinstance(accuracy, float)
    assert accuracy == pytest.approx(4 / 7)
    assert not model.training
