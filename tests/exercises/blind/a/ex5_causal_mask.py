"""Exercise 5: the causal mask, masked attention and a next-token model of a sine wave.

Style: masks from log() of an index comparison, windows by fancy indexing with an
(N, context) index grid, the holdout split as one boolean index, a pre-norm decoder
written with einsum, and a randperm-driven training loop with its own Generator.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(seq_len):
    """float32 (L, L): 0.0 where key <= query (on/below the diagonal), -inf above.

    log(1) = 0 and log(0) = -inf turn the 0/1 'allowed' matrix into the additive bias."""
    pos = torch.arange(seq_len)
    allowed = (pos.reshape(1, -1) <= pos.reshape(-1, 1)).to(torch.float32)
    return allowed.log()


def _softmax(scores):
    peak = scores.amax(dim=-1, keepdim=True).detach()
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    e = torch.exp(scores - peak)  # exp(-inf) = 0 exactly: blocked weights are exact zeros
    return e / e.sum(dim=-1, keepdim=True)


def masked_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d) + mask) V.

    Q (..., L, d), K (..., S, d), V (..., S, d_v); `mask` additive float (0 / -inf)
    broadcastable to (..., L, S), or None for no masking. Returns (output, weights)."""
    scores = torch.einsum("...ld,...sd->...ls", Q, K) / math.sqrt(Q.shape[-1])
    if mask is not None:
        mask = torch.as_tensor(mask, device=scores.device)
        bias = mask.to(scores.dtype).log() if mask.dtype == torch.bool else mask.to(scores.dtype)
        scores = scores + bias
    weights = _softmax(scores)
    return torch.einsum("...ls,...sv->...lv", weights, V), weights


def discretize_sine(n_points, n_bins=50, period=50.0):
    """Bins of v = sin(2 pi t / period), t = 0..n_points-1, computed in float64:
    floor((v + 1) / 2 * n_bins) clipped to [0, n_bins - 1]."""
    t = torch.arange(n_points, dtype=torch.float64)
    v = torch.sin(2.0 * math.pi * t / period)
    bins = torch.floor((v + 1.0) / 2.0 * n_bins)
    return bins.clamp(0, n_bins - 1).to(torch.long)


def make_windows(tokens, context_len):
    """X[i] = tokens[i : i+C], Y[i] = tokens[i+1 : i+1+C] for i = 0 .. len - C - 1."""
    n_windows = max(int(tokens.shape[0]) - context_len, 0)
    grid = torch.arange(n_windows).reshape(-1, 1) + torch.arange(context_len).reshape(1, -1)
    return tokens[grid], tokens[grid + 1]


def split_holdout(X, Y, holdout_frac=0.1):
    """Last ceil(frac * N) windows are the test set; training keeps the earlier windows that
    share no token position with any test window.

    Window i covers token positions i .. i + C (inputs i..i+C-1, targets i+1..i+C); the
    first test window s covers s .. s + C, so window i is clean iff i + C < s."""
    n, context = X.shape[0], X.shape[1]
    n_test = math.ceil(holdout_frac * n)
    first_test = n - n_test
    starts = torch.arange(n)
    train = starts + context < first_test
    test = starts >= first_test
    return X[train], Y[train], X[test], Y[test]


class _DecoderBlock(nn.Module):
    """Pre-norm block: x + MHA(LN(x)) with a causal mask, then x + MLP(LN(x))."""

    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) is not divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.ln_attn = nn.LayerNorm(d_model)
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, 4 * d_model)
        self.down = nn.Linear(4 * d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def _heads(self, t):
        return t.unflatten(-1, (self.n_heads, -1)).permute(0, 2, 1, 3)  # (B, H, T, hd)

    def forward(self, x, mask):
        h = self.ln_attn(x)
        ctx, _ = masked_attention(self._heads(self.W_q(h)), self._heads(self.W_k(h)),
                                  self._heads(self.W_v(h)), mask)
        x = x + self.drop(self.W_o(ctx.permute(0, 2, 1, 3).flatten(-2)))
        return x + self.drop(self.down(F.gelu(self.up(self.ln_mlp(x)))))


class CausalTransformer(nn.Module):
    """Token + learned position embeddings, n_layers causal pre-norm blocks, final LayerNorm,
    linear head: logits (B, T, vocab_size), position t sees tokens 0..t only."""

    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128,
                 dropout=0.0):
        super().__init__()
        self.max_len = max_len
        self.tok_embed = nn.Embedding(vocab_size, d_model)
        self.pos_embed = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(_DecoderBlock(d_model, n_heads, dropout)
                                    for _ in range(n_layers))
        self.ln_out = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len {self.max_len}")
        h = self.drop(self.tok_embed(x) + self.pos_embed(torch.arange(T, device=x.device)))
        mask = causal_mask(T).to(device=h.device, dtype=h.dtype)
        for block in self.blocks:
            h = block(h, mask)
        return self.head(self.ln_out(h))


def _token_nll(logits, targets):
    """Mean over all positions of -log softmax(logits)[target], with a hand-written log-softmax."""
    shifted = logits - logits.amax(dim=-1, keepdim=True).detach()
    log_probs = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
    return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()


def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    """Adam on shuffled mini-batches (order from torch.Generator(seed)); returns per epoch the
    sample-weighted mean of the batch losses (each the mean next-token NLL of its windows)."""
    n = X.shape[0]
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    was_training = model.training
    model.train()
    with torch.random.fork_rng(devices=[]):  # dropout, if any, seeded too; caller's RNG untouched
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=gen)
            total = torch.zeros((), dtype=torch.float64)
            for start in range(0, n, batch_size):
                idx = order[start:start + batch_size]
                loss = _token_nll(model(X[idx]), Y[idx])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.detach().double() * idx.numel()
            history.append(float(total / max(n, 1)))
    model.train(was_training)
    return history


def next_token_accuracy(model, X, Y):
    """Fraction of all (window, position) pairs whose argmax logit is the target; eval mode,
    no gradients, previous mode restored."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            hits = sum(int((model(X[i:i + 512]).argmax(dim=-1) == Y[i:i + 512]).sum())
                       for i in range(0, X.shape[0], 512))
    finally:
        model.train(was_training)
    return hits / Y.numel() if Y.numel() else 0.0


if __name__ == "__main__":
    import time

    torch.set_num_threads(1)
    m = causal_mask(4)
    assert m.dtype == torch.float32 and m.shape == (4, 4)
    ref = torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf"))
    assert torch.equal(m, ref)
    assert causal_mask(1).tolist() == [[0.0]]

    g = torch.Generator().manual_seed(0)
    B, H, L, S, d, dv = 2, 3, 5, 6, 4, 7
    Q = torch.randn(B, H, L, d, generator=g, dtype=torch.float64)
    K = torch.randn(B, H, S, d, generator=g, dtype=torch.float64)
    V = torch.randn(B, H, S, dv, generator=g, dtype=torch.float64)
    out, w = masked_attention(Q, K, V)
    assert torch.allclose(out, F.scaled_dot_product_attention(Q, K, V))
    fm = torch.zeros(L, S, dtype=torch.float64)
    fm[torch.rand(L, S, generator=g) > 0.5] = float("-inf")
    fm[:, 0] = 0.0
    out, w = masked_attention(Q, K, V, fm)
    assert torch.allclose(out, F.scaled_dot_product_attention(Q, K, V, attn_mask=fm))
    assert torch.all(w[..., torch.isinf(fm)] == 0) and torch.allclose(w.sum(-1), torch.ones(()).double())
    Qf, Kf, Vf = Q[:, :, :, :].float(), K[:, :, :L].float(), V[:, :, :L].float()
    out, w = masked_attention(Qf, Kf, Vf, causal_mask(L))
    assert out.dtype == torch.float32
    assert torch.all(w[..., causal_mask(L) == float("-inf")] == 0)
    assert torch.allclose(out, F.scaled_dot_product_attention(Qf, Kf, Vf, is_causal=True), atol=1e-6)

    tok = discretize_sine(200)
    v = torch.sin(2 * math.pi * torch.arange(200, dtype=torch.float64) / 50)
    assert tok.dtype == torch.long and tok.max() <= 49 and tok.min() >= 0
    assert tok[[0, 25, 12, 37]].tolist() == [25, 25, 49, 0], tok[[0, 25, 12, 37]].tolist()
    assert torch.equal(tok, torch.clamp(((v + 1) / 2 * 50).floor(), max=49).long())

    X, Y = make_windows(torch.arange(10), 3)
    assert X.shape == (7, 3) and X[0].tolist() == [0, 1, 2] and Y[-1].tolist() == [7, 8, 9]
    assert X[6].tolist() == [6, 7, 8]

    X, Y = make_windows(torch.arange(40), 4)  # N = 36
    Xtr, Ytr, Xte, Yte = split_holdout(X, Y, 0.1)  # ceil(3.6) = 4 test windows: 32..35
    assert Xte[:, 0].tolist() == [32, 33, 34, 35]
    test_pos = set(torch.cat([Xte, Yte], 1).flatten().tolist())
    train_pos = set(torch.cat([Xtr, Ytr], 1).flatten().tolist())
    assert not (test_pos & train_pos) and Xtr[:, 0].tolist() == list(range(28))
    Xtr, Ytr, Xte, Yte = split_holdout(X, Y, 0.27)  # ceil(9.72) = 10
    assert len(Xte) == 10 and len(Xtr) == 36 - 10 - 4

    model = CausalTransformer()
    model.eval()
    xb = torch.randint(0, 50, (3, 20))
    lo = model(xb)
    assert lo.shape == (3, 20, 50)
    for t in (0, 7, 18):
        xc = xb.clone()
        xc[:, t + 1:] = torch.randint(0, 50, (3, 19 - t))
        assert torch.equal(model(xc)[:, :t + 1], lo[:, :t + 1]), t

    tokens = discretize_sine(2000)
    X, Y = make_windows(tokens, 32)
    Xtr, Ytr, Xte, Yte = split_holdout(X, Y, 0.1)
    torch.manual_seed(0)
    model = CausalTransformer()
    t0 = time.time()
    hist = train_lm(model, Xtr, Ytr)
    print(f"train {time.time() - t0:.1f}s", [round(h, 3) for h in hist])
    print("train acc", next_token_accuracy(model, Xtr, Ytr), "held-out acc",
          next_token_accuracy(model, Xte, Yte))

    torch.manual_seed(3)
    m1 = CausalTransformer(dropout=0.1)
    m2 = CausalTransformer(dropout=0.1)
    m2.load_state_dict(m1.state_dict())
    torch.manual_seed(11)
    h1 = train_lm(m1, Xtr[:200], Ytr[:200], epochs=2)
    torch.manual_seed(12)
    h2 = train_lm(m2, Xtr[:200], Ytr[:200], epochs=2)
    assert h1 == h2
    print("ex5 ok")
