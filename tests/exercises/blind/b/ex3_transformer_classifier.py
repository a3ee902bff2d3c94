"""Exercise 3: a TransformerEncoder classifier against an LSTM of similar size.

Style: small explicit modules, a sinusoidal table filled position by position, training
with DataLoader + TensorDataset and a seeded generator, model.train()/model.eval() and
torch.no_grad() written out.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def make_mean_dataset(n_samples, seq_len=20, vocab_size=100, seed=0):
    """X (n, seq_len) ints in [0, vocab_size); y = 1 where mean(X_i) > vocab_size / 2."""
    if n_samples < 1 or seq_len < 1 or vocab_size < 1:
        raise ValueError("n_samples, seq_len and vocab_size must be positive")
    generator = torch.Generator().manual_seed(seed)
    X = torch.randint(0, vocab_size, (n_samples, seq_len), generator=generator, dtype=torch.long)
    # mean > vocab_size / 2  <=>  2 * sum > vocab_size * seq_len  (exact integer test)
    sums = X.sum(dim=1)
    y = (2 * sums > vocab_size * seq_len).long()
    return X, y


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table PE[:L] to x (B, L, d_model). No dropout, no scaling."""

    def __init__(self, d_model, max_len=512):
        super().__init__()
        if d_model % 2 != 0:
            raise ValueError("d_model must be even")
        self.d_model = d_model
        self.max_len = max_len
        table = torch.zeros(max_len, d_model, dtype=torch.float64)
        positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)      # (max_len, 1)
        pair_index = torch.arange(0, d_model, 2, dtype=torch.float64)            # 2i
        denominators = torch.pow(torch.tensor(10000.0, dtype=torch.float64), pair_index / d_model)
        table[:, 0::2] = torch.sin(positions / denominators)
        table[:, 1::2] = torch.cos(positions / denominators)
        self.register_buffer("pe", table.to(torch.float32), persistent=False)

    def forward(self, x):
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len {self.max_len}")
        return x + self.pe[:length].to(dtype=x.dtype, device=x.device).unsqueeze(0)


class TransformerClassifier(nn.Module):
    """Embedding -> positional encoding -> TransformerEncoder -> mean pool -> LayerNorm -> Linear."""

    def __init__(self, vocab_size=100, d_model=64, nhead=4, num_layers=2, num_classes=2,
                 dim_feedforward=128, dropout=0.0):
        super().__init__()
        if d_model % nhead != 0:
            raise ValueError("d_model must be divisible by nhead")
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead,
                                           dim_feedforward=dim_feedforward, dropout=dropout,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers,
                                             enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.classifier = nn.Linear(d_model, num_classes)

    def forward(self, x):
        embedded = self.embedding(x)              # (B, L, d_model)
        embedded = self.pos_encoder(embedded)
        encoded = self.encoder(embedded)          # (B, L, d_model)
        pooled = encoded.mean(dim=1)              # mean over the sequence
        return self.classifier(self.norm(pooled))


class LSTMClassifier(nn.Module):
    """Embedding -> LSTM -> last hidden state -> Linear.

    With the defaults (64, 100) it has 73,002 trainable parameters, against 73,602 for the
    default TransformerClassifier (about 0.8 % fewer).
    """

    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=100, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.classifier = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        embedded = self.embedding(x)
        _, (h_last, _) = self.lstm(embedded)      # h_last (1, B, hidden_dim)
        return self.classifier(h_last[-1])


def count_parameters(model):
    """Number of trainable parameters."""
    total = 0
    for parameter in model.parameters():
        if parameter.requires_grad:
            total += parameter.numel()
    return total


def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    """Adam training with cross-entropy; returns the sample-weighted mean loss of each epoch."""
    if epochs < 0 or batch_size < 1:
        raise ValueError("epochs must be >= 0 and batch_size >= 1")
    if len(X) != len(y):
        raise ValueError("X and y must have the same number of samples")
    history = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # only matters for dropout > 0
        loader_generator = torch.Generator().manual_seed(seed)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y),
                                             batch_size=batch_size, shuffle=True,
                                             generator=loader_generator)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        loss_function = nn.CrossEntropyLoss()
        was_training = model.training
        model.train()
        for _ in range(epochs):
            loss_sum = 0.0
            seen = 0
            for batch_x, batch_y in loader:
                optimizer.zero_grad()
                logits = model(batch_x)
                loss = loss_function(logits, batch_y)
                loss.backward()
                optimizer.step()
                loss_sum += loss.item() * batch_x.shape[0]
                seen += batch_x.shape[0]
            history.append(loss_sum / seen)
    model.train(was_training)  # back to the mode the caller had
    return history


def evaluate_accuracy(model, X, y):
    """Fraction of correct argmax predictions, computed in eval mode without gradients."""
    was_training = model.training
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(X), 1024):
            logits = model(X[start:start + 1024])
            predictions = logits.argmax(dim=-1)
            correct += int((predictions == y[start:start + 1024]).sum().item())
    model.train(was_training)
    return float(correct / len(X))


if __name__ == "__main__":
    X, y = make_mean_dataset(2000, seed=0)
    X2, y2 = make_mean_dataset(2000, seed=0)
    assert torch.equal(X, X2) and X.dtype == torch.long and y.dtype == torch.long
    assert not torch.equal(X, make_mean_dataset(2000, seed=1)[0])
    assert torch.equal(y, (X.double().mean(1) > 50).long())
    print("positive fraction", y.float().mean().item())

    pe = PositionalEncoding(6, max_len=10)
    p, i = 3, 1
    assert abs(pe.pe[p, 2 * i].item() - math.sin(p / 10000 ** (2 * i / 6))) < 1e-6
    assert abs(pe.pe[p, 2 * i + 1].item() - math.cos(p / 10000 ** (2 * i / 6))) < 1e-6
    z = torch.zeros(2, 7, 6)
    assert torch.allclose(pe(z)[1], pe.pe[:7])

    tc = TransformerClassifier()
    lc = LSTMClassifier()
    print("params", count_parameters(tc), count_parameters(lc),
          count_parameters(lc) / count_parameters(tc))
    assert isinstance(tc.encoder, nn.TransformerEncoder) and len(tc.encoder.layers) == 2

    # sample independence in eval mode
    tc.eval()
    xb = torch.randint(0, 100, (5, 13))
    out = tc(xb)
    xb2 = xb.clone()
    xb2[3] = torch.randint(0, 100, (13,))
    out2 = tc(xb2)
    assert torch.allclose(out[[0, 1, 2, 4]], out2[[0, 1, 2, 4]], atol=1e-6)
    assert torch.allclose(tc(xb[1:2]), out[1:2], atol=1e-5)

    torch.set_num_threads(1)
    Xte, yte = make_mean_dataset(500, seed=1)
    for name, cls in (("transformer", TransformerClassifier), ("lstm", LSTMClassifier)):
        torch.manual_seed(0)
        model = cls()
        t0 = time.time()
        torch.manual_seed(42)
        h = train_classifier(model, X, y, epochs=30)
        dt = time.time() - t0
        torch.manual_seed(0)
        model_b = cls()
        torch.randn(100)
        h2 = train_classifier(model_b, X, y, epochs=3)
        assert h2 == h[:3], (h2, h[:3])
        model.train()
        acc = evaluate_accuracy(model, Xte, yte)
        assert model.training
        print(name, f"{dt:.1f}s", [round(v, 3) for v in h[::3]], "test acc", acc)
    print("ok")
