"""ex5_causal_mask: causal attention and a small next-token model on a discretised sine."""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(seq_len):
    """float32 (L, L) additive mask: 0.0 on and below the diagonal, -inf above."""
    return torch.full((seq_len, seq_len), float("-inf"), dtype=torch.float32).triu(diagonal=1)


def masked_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d) + mask) V with an additive float mask (0 = attend, -inf =
    blocked), broadcastable to (..., L, S). Returns (output, weights); blocked weights are 0."""
    d = Q.size(-1)
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d)
    if mask is not None:
        if mask.dtype == torch.bool:  # tolerate the boolean convention (True = may attend)
            mask = torch.zeros_like(mask, dtype=scores.dtype).masked_fill(~mask, float("-inf"))
        scores = scores + mask.to(dtype=scores.dtype, device=scores.device)
    weights = torch.softmax(scores, dim=-1)  # exp(-inf) == 0 exactly
    return torch.matmul(weights, V), weights


def discretize_sine(n_points, n_bins=50, period=50.0):
    """Tokens floor((v + 1) / 2 * n_bins) (clipped to n_bins - 1) of v = sin(2 pi t / period),
    t = 0 .. n_points - 1, computed in float64."""
    t = torch.arange(n_points, dtype=torch.float64)
    v = torch.sin(2 * math.pi * t / period)
    bins = torch.floor((v + 1) / 2 * n_bins)
    return bins.clamp_(0, n_bins - 1).to(torch.long)


def make_windows(tokens, context_len):
    """Stride-1 windows: X[i] = tokens[i : i+c], Y[i] = tokens[i+1 : i+1+c],
    i = 0 .. len(tokens) - c - 1."""
    tokens = torch.as_tensor(tokens).reshape(-1)
    n = tokens.numel() - context_len
    if n <= 0:
        empty = tokens.new_empty((0, context_len))
        return empty, empty.clone()
    spans = tokens.unfold(0, context_len + 1, 1)  # (n, c+1) view
    return spans[:, :-1].clone(), spans[:, 1:].clone()


def split_holdout(X, Y, holdout_frac=0.1):
    """Test = last ceil(frac * N) windows; train = the earlier windows that share no token
    position (inputs or targets) with a test window. Window i covers positions i .. i+c."""
    if not 0.0 < holdout_frac < 1.0:
        raise ValueError("holdout_frac must lie strictly between 0 and 1")
    n = X.size(0)
    c = X.size(1)
    n_test = math.ceil(holdout_frac * n)
    first_test = n - n_test
    # train window i (positions i..i+c) must end before the first test position first_test
    n_train = max(0, first_test - c)
    return X[:n_train], Y[:n_train], X[first_test:], Y[first_test:]


class _CausalBlock(nn.Module):
    """Pre-LN decoder block: x + MHA(LN(x)) with a causal mask, then x + MLP(LN(x))."""

    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model), nn.Dropout(dropout))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        q, k, v = (t.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)
                   for t in self.qkv(self.ln1(x)).chunk(3, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.proj(a.transpose(1, 2).flatten(-2)))
        return x + self.mlp(self.ln2(x))


class CausalTransformer(nn.Module):
    """Token + learned position embeddings -> causal pre-LN blocks -> LayerNorm -> logits."""

    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128,
                 dropout=0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.max_len = max_len
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(_CausalBlock(d_model, n_heads, dropout)
                                    for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        T = x.size(1)
        h = self.drop(self.tok(x) + self.pos(torch.arange(T, device=x.device)))
        for block in self.blocks:
            h = block(h)
        return self.lm_head(self.ln_f(h))


def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    """AdamW with next-token cross-entropy; returns the sample-weighted mean training loss
    of each epoch (every window has the same length, so this is the per-token mean)."""
    n = X.size(0)
    order_gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    history = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        for _ in range(epochs):
            total = 0.0
            for idx in torch.randperm(n, generator=order_gen).split(batch_size):
                logits = model(X[idx])
                loss_sum = F.cross_entropy(logits.flatten(0, 1), Y[idx].flatten(),
                                           reduction="sum")
                opt.zero_grad(set_to_none=True)
                (loss_sum / Y[idx].numel()).backward()
                opt.step()
                total += loss_sum.item() / Y.size(1)  # per-window mean, summed over windows
            history.append(total / n)
    return history


def next_token_accuracy(model, X, Y):
    """Fraction of all (window, position) predictions that match Y; eval mode, no grad."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            hits = sum(int((model(xb).argmax(dim=-1) == yb).sum())
                       for xb, yb in zip(X.split(512), Y.split(512)))
    finally:
        model.train(was_training)
    return hits / max(Y.numel(), 1)


if __name__ == "__main__":
    torch.set_num_threads(1)
    m = causal_mask(4)
    assert m.dtype == torch.float32 and m.shape == (4, 4)
    assert (m.tril() == 0).all() and torch.isinf(m.triu(1)).sum() == 6
    assert (m[torch.ones(4, 4, dtype=torch.bool).triu(1)] == float("-inf")).all()

    torch.manual_seed(0)
    B, H, L, S, d, dv = 2, 3, 5, 5, 4, 6
    Q, K, V = torch.randn(B, H, L, d), torch.randn(B, H, S, d), torch.randn(B, H, S, dv)
    out, w = masked_attention(Q, K, V, causal_mask(L))
    assert out.shape == (B, H, L, dv) and w.shape == (B, H, L, S)
    assert (w[..., torch.ones(L, S, dtype=torch.bool).triu(1)] == 0).all()
    ref = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
    assert torch.allclose(out, ref, atol=1e-6)
    out0, w0 = masked_attention(Q, K, V)
    assert torch.allclose(out0, F.scaled_dot_product_attention(Q, K, V), atol=1e-6)
    K7, V7 = torch.randn(B, H, 7, d, dtype=torch.float64), torch.randn(B, H, 7, dv, dtype=torch.float64)
    Q64 = Q.double()
    pm = torch.zeros(B, 1, L, 7)
    pm[0, ..., 5:] = float("-inf")
    o64, w64 = masked_attention(Q64, K7, V7, pm)
    assert o64.dtype == torch.float64 and (w64[0, ..., 5:] == 0).all()
    assert torch.allclose(o64, F.scaled_dot_product_attention(Q64, K7, V7, attn_mask=pm.double()))

    tok = discretize_sine(200)
    assert tok.dtype == torch.long and int(tok.min()) >= 0 and int(tok.max()) <= 49
    t = np.arange(200)
    v = np.sin(2 * np.pi * t / 50.0)
    ref_bins = np.minimum(np.floor((v + 1) / 2 * 50), 49).astype(int)
    assert np.array_equal(tok.numpy(), ref_bins)
    assert discretize_sine(20, n_bins=7, period=4.0)[1] == 6  # v = 1 -> top bin
    print(tok[:26].tolist())

    X, Y = make_windows(torch.arange(10), 3)
    assert X.shape == (7, 3) and torch.equal(X[0], torch.tensor([0, 1, 2]))
    assert torch.equal(Y[-1], torch.tensor([7, 8, 9]))
    Xtr, Ytr, Xte, Yte = split_holdout(X, Y, 0.25)  # ceil(1.75) = 2 test windows (starts 5, 6)
    assert Xte.shape[0] == 2 and torch.equal(Xte[0], torch.tensor([5, 6, 7]))
    assert Xtr.shape[0] == 2  # windows 0, 1 end at positions 3, 4 < 5
    used_train = set(torch.cat([Xtr.flatten(), Ytr.flatten()]).tolist())
    used_test = set(torch.cat([Xte.flatten(), Yte.flatten()]).tolist())
    assert not used_train & used_test and max(used_train) == 4
    for bad in (0.0, 1.0):
        try:
            split_holdout(X, Y, bad)
            raise AssertionError
        except ValueError:
            pass
    assert make_windows(torch.arange(3), 3)[0].shape == (0, 3)

    # causality of the model
    torch.manual_seed(0)
    model = CausalTransformer(vocab_size=11, d_model=16, n_layers=2, n_heads=2, max_len=20)
    model.eval()
    xa = torch.randint(0, 11, (3, 9))
    xb = xa.clone()
    xb[:, 6:] = torch.randint(0, 11, (3, 3))
    with torch.no_grad():
        la, lb = model(xa), model(xb)
    assert la.shape == (3, 9, 11)
    assert torch.allclose(la[:, :6], lb[:, :6], atol=1e-6) and not torch.allclose(la, lb)

    # training on the sine task
    tokens = discretize_sine(1200)
    X, Y = make_windows(tokens, 32)
    Xtr, Ytr, Xte, Yte = split_holdout(X, Y, 0.1)
    print("windows", X.shape, "train", Xtr.shape, "test", Xte.shape)
    torch.manual_seed(0)
    model = CausalTransformer()
    t0 = time.process_time()
    hist = train_lm(model, Xtr, Ytr)
    print(f"train cpu {time.process_time() - t0:.1f}s", [round(h, 3) for h in hist])
    acc_tr = next_token_accuracy(model, Xtr, Ytr)
    acc_te = next_token_accuracy(model, Xte, Yte)
    assert model.training
    print(f"train acc {acc_tr:.3f} held-out acc {acc_te:.3f}")

    def hist_for(seed, noise):
        torch.manual_seed(1)
        m_ = CausalTransformer(dropout=0.1)
        torch.manual_seed(noise)
        return train_lm(m_, Xtr[:200], Ytr[:200], epochs=2, seed=seed)
    h1, h2, h3 = hist_for(0, 5), hist_for(0, 6), hist_for(1, 5)
    assert h1 == h2 and h1 != h3
    print("ex5 ok")
