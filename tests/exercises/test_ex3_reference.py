"""The reference of ex3_transformer_classifier behaves as EXERCISES.md says: data labels from
integer sums, the positional encoding against the formula written with Python's math, the
classifiers' structure, sample independence and parameter counts, and the training loop's
bookkeeping and determinism."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder._reference.ex3_transformer_classifier import (
    LSTMClassifier,
    PositionalEncoding,
    TransformerClassifier,
    count_parameters,
    evaluate_accuracy,
    make_mean_dataset,
    train_classifier,
)

pytestmark = pytest.mark.ex3


@pytest.mark.parametrize(("n", "seq_len", "vocab"), [(50, 20, 100), (300, 4, 6), (7, 3, 11)])
def test_mean_dataset_labels_are_strictly_above_half(n, seq_len, vocab):
    X, y = make_mean_dataset(n, seq_len=seq_len, vocab_size=vocab, seed=3)
    assert X.shape == (n, seq_len) and y.shape == (n,)
    assert X.dtype == y.dtype == torch.int64
    assert 0 <= int(X.min()) and int(X.max()) < vocab
    for row, label in zip(X.tolist(), y.tolist(), strict=True):
        assert label == int(2 * sum(row) > seq_len * vocab)  # mean > vocab / 2, in integers


def test_mean_dataset_has_ties_labelled_zero_and_is_seeded():
    X, y = make_mean_dataset(300, seq_len=4, vocab_size=6, seed=0)
    ties = 2 * X.sum(dim=1) == 4 * 6
    assert ties.any() and not y[ties].any()
    torch.manual_seed(123)
    again = make_mean_dataset(300, seq_len=4, vocab_size=6, seed=0)[0]
    assert torch.equal(X, again)
    assert not torch.equal(X, make_mean_dataset(300, seq_len=4, vocab_size=6, seed=1)[0])


@pytest.mark.parametrize(("d_model", "max_len"), [(6, 10), (16, 600)])
def test_positional_encoding_matches_the_formula(d_model, max_len):
    table = PositionalEncoding(d_model, max_len=max_len)(torch.zeros(2, max_len, d_model))
    assert table.shape == (2, max_len, d_model) and torch.equal(table[0], table[1])
    for p in (0, 1, 7, max_len - 1):
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            assert table[0, p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[0, p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_positional_encoding_forward_adds_the_first_rows_only():
    module = PositionalEncoding(8)
    x = torch.randn(3, 5, 8)
    table = module(torch.zeros(1, 512, 8))[0]
    torch.testing.assert_close(module(x), x + table[:5], atol=0, rtol=0)
    with pytest.raises(ValueError):
        PositionalEncoding(7)


def test_transformer_classifier_structure_and_logits():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # building and running it must not warn
        model = TransformerClassifier(
            vocab_size=13, d_model=12, nhead=3, num_layers=3, num_classes=5, dim_feedforward=20
        ).eval()
        logits = model(torch.randint(0, 13, (4, 9)))
    assert isinstance(model.encoder, nn.TransformerEncoder) and len(model.encoder.layers) == 3
    assert all(layer.self_attn.batch_first for layer in model.encoder.layers)
    assert logits.shape == (4, 5)


@pytest.mark.parametrize("cls", [TransformerClassifier, LSTMClassifier])
def test_each_sample_depends_on_itself_only(cls):
    torch.manual_seed(0)
    model = cls(vocab_size=20, num_classes=3).eval()
    x = torch.randint(0, 20, (6, 11))
    others = x.clone()
    others[1:] = torch.randint(0, 20, (5, 11))
    with torch.no_grad():
        logits, changed, alone = model(x), model(others), model(x[:1])
    torch.testing.assert_close(changed[0], logits[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(alone[0], logits[0], atol=1e-5, rtol=0)


def test_transformer_mean_pools_and_sees_positions():
    torch.manual_seed(1)
    model = TransformerClassifier(vocab_size=30).eval()
    x = torch.stack([torch.randperm(30)[:10] for _ in range(4)])
    with torch.no_grad():
        states = model.encoder(model.pos_encoder(model.embedding(x)))
        torch.testing.assert_close(model(x), model.fc(states.mean(dim=1)))
        assert (model(x.flip(1)) - model(x)).abs().max() > 1e-3


def test_parameter_counts_are_comparable_and_trainable_only():
    transformer, lstm = (
        count_parameters(TransformerClassifier()),
        count_parameters(LSTMClassifier()),
    )
    assert (transformer, lstm) == (73_474, 73_002)
    assert abs(lstm - transformer) <= 0.2 * transformer
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 4))
    model[0].requires_grad_(False)
    assert count_parameters(model) == 16 and isinstance(count_parameters(model), int)


def test_train_classifier_losses_are_sample_weighted_means():
    """With lr=0 the model never changes: every epoch's loss is the mean over all samples."""
    X, y = make_mean_dataset(53, seq_len=6, vocab_size=10, seed=2)
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=10, d_model=16, nhead=2, num_layers=1).eval()
    with torch.no_grad():
        expected = F.cross_entropy(model(X), y).item()
    history = train_classifier(model, X, y, epochs=3, batch_size=10, lr=0.0)
    assert len(history) == 3 and all(isinstance(loss, float) for loss in history)
    assert history == pytest.approx([expected] * 3, rel=1e-5)


def test_train_classifier_is_seeded_and_learns():
    X, y = make_mean_dataset(600, seq_len=12, vocab_size=20, seed=0)
    X_test, y_test = make_mean_dataset(500, seq_len=12, vocab_size=20, seed=10_000)
    runs, models = [], []
    for global_seed, seed in ((1, 7), (2, 7), (3, 8)):
        torch.manual_seed(0)
        models.append(TransformerClassifier(vocab_size=20, dropout=0.1))
        torch.manual_seed(global_seed)
        runs.append(train_classifier(models[-1], X, y, epochs=4, batch_size=50, seed=seed))
    assert runs[0] == runs[1] and runs[0] != runs[2]
    assert runs[0][-1] < runs[0][0]
    models[0].train()
    accuracy = evaluate_accuracy(models[0], X_test, y_test)
    assert isinstance(accuracy, float) and accuracy > 0.8 and not models[0].training
