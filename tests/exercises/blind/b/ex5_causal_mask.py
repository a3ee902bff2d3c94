"""Exercise 5: a causal mask, masked attention, and a small next-token model on a sine wave.

Style: the causal transformer is assembled from hand-written blocks (pre-norm attention +
MLP) that call `masked_attention` with `causal_mask`; training uses DataLoader +
TensorDataset with a seeded generator and explicit train/eval switches.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(seq_len):
    """float32 (L, L) additive mask: 0.0 on and below the diagonal, -inf above it."""
    if seq_len < 0:
        raise ValueError("seq_len must not be negative")
    future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
    mask = torch.zeros(seq_len, seq_len, dtype=torch.float32)
    return mask.masked_fill(future, float("-inf"))


def masked_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d) + mask) V with an additive float mask (0 = attend, -inf = blocked).

    A boolean mask (True = may attend) is accepted too. Returns (output, weights).
    """
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError("Q and K must share the last dimension")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError("K and V must have the same number of positions")
    d = Q.shape[-1]
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d)
    if mask is not None:
        mask = mask.to(scores.device)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.to(scores.dtype)
    weights = F.softmax(scores, dim=-1)
    output = torch.matmul(weights, V)
    return output, weights


def discretize_sine(n_points, n_bins=50, period=50.0):
    """Bins of sin(2 pi t / period), t = 0..n_points-1, computed in float64."""
    if n_points < 0 or n_bins < 1:
        raise ValueError("need n_points >= 0 and n_bins >= 1")
    t = torch.arange(n_points, dtype=torch.float64)
    values = torch.sin(2.0 * math.pi * t / period)
    bins = torch.floor((values + 1.0) / 2.0 * n_bins)
    bins = torch.clamp(bins, min=0, max=n_bins - 1)
    return bins.to(torch.long)


def make_windows(tokens, context_len):
    """Stride-1 windows: X[i] = tokens[i:i+c], Y[i] = tokens[i+1:i+1+c]."""
    if tokens.dim() != 1:
        raise ValueError("tokens must be 1-D")
    if context_len < 1:
        raise ValueError("context_len must be at least 1")
    n_windows = len(tokens) - context_len
    if n_windows <= 0:
        empty = torch.empty(0, context_len, dtype=tokens.dtype)
        return empty, empty.clone()
    inputs = []
    targets = []
    for start in range(n_windows):
        inputs.append(tokens[start:start + context_len])
        targets.append(tokens[start + 1:start + 1 + context_len])
    return torch.stack(inputs).clone(), torch.stack(targets).clone()


def split_holdout(X, Y, holdout_frac=0.1):
    """Last ceil(frac * N) windows for test; train = earlier windows sharing no token position."""
    if not 0.0 < holdout_frac < 1.0:
        raise ValueError("holdout_frac must lie strictly between 0 and 1")
    if len(X) != len(Y):
        raise ValueError("X and Y must have the same number of windows")
    n_windows = len(X)
    context_len = X.shape[1]
    n_test = math.ceil(holdout_frac * n_windows)
    first_test = n_windows - n_test
    # window i covers token positions i .. i + context_len (inputs and targets);
    # it is disjoint from the first test window (starting at first_test) iff i + context_len < first_test
    n_train = max(0, first_test - context_len)
    X_train, Y_train = X[:n_train].clone(), Y[:n_train].clone()
    X_test, Y_test = X[first_test:].clone(), Y[first_test:].clone()
    return X_train, Y_train, X_test, Y_test


class _CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        batch, length, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=-1)
        q = q.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        mask = causal_mask(length).to(device=x.device, dtype=x.dtype)
        context, _ = masked_attention(q, k, v, mask)
        context = context.transpose(1, 2).contiguous().view(batch, length, d_model)
        return self.out(context)


class _Block(nn.Module):
    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = _CausalSelfAttention(d_model, n_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.dropout(self.attention(self.norm1(x)))
        x = x + self.dropout(self.mlp(self.norm2(x)))
        return x


class CausalTransformer(nn.Module):
    """Token + learned position embeddings, n_layers causal pre-norm blocks, LayerNorm, linear head."""

    def __init__(self, vocab_size=50, d_model=64, n_layers=2, n_heads=4, max_len=128, dropout=0.0):
        super().__init__()
        self.max_len = max_len
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([_Block(d_model, n_heads, dropout) for _ in range(n_layers)])
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        batch, length = x.shape
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len {self.max_len}")
        positions = torch.arange(length, device=x.device)
        hidden = self.token_embedding(x) + self.position_embedding(positions).unsqueeze(0)
        for block in self.blocks:
            hidden = block(hidden)
        return self.head(self.final_norm(hidden))


def train_lm(model, X, Y, epochs=20, batch_size=64, lr=3e-3, seed=0):
    """Adam, next-token cross-entropy over every position; sample-weighted mean loss per epoch."""
    if epochs < 0 or batch_size < 1:
        raise ValueError("epochs must be >= 0 and batch_size >= 1")
    if len(X) != len(Y) or len(X) == 0:
        raise ValueError("X and Y must be non-empty and of the same length")
    history = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout, if any
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y),
                                             batch_size=batch_size, shuffle=True,
                                             generator=torch.Generator().manual_seed(seed))
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        was_training = model.training
        model.train()
        for _ in range(epochs):
            loss_sum = 0.0
            seen = 0
            for batch_x, batch_y in loader:
                optimizer.zero_grad()
                logits = model(batch_x)                                  # (b, T, vocab)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch_y.reshape(-1))
                loss.backward()
                optimizer.step()
                loss_sum += loss.item() * batch_x.shape[0]
                seen += batch_x.shape[0]
            history.append(loss_sum / seen)
    model.train(was_training)  # back to the mode the caller had
    return history


def next_token_accuracy(model, X, Y):
    """Fraction of correctly predicted next tokens over all positions of all windows."""
    was_training = model.training
    model.eval()
    correct = 0
    total = 0
    with torch.no_grad():
        for start in range(0, len(X), 512):
            logits = model(X[start:start + 512])
            predictions = logits.argmax(dim=-1)
            correct += int((predictions == Y[start:start + 512]).sum().item())
            total += Y[start:start + 512].numel()
    model.train(was_training)
    if total == 0:
        raise ValueError("no windows to evaluate")
    return float(correct / total)


if __name__ == "__main__":
    m = causal_mask(4)
    print(m)
    assert m.dtype == torch.float32
    torch.manual_seed(0)
    B, H, L, S, d, dv = 2, 3, 5, 5, 4, 6
    Q, K, V = torch.randn(B, H, L, d), torch.randn(B, H, S, d), torch.randn(B, H, S, dv)
    out, w = masked_attention(Q, K, V, causal_mask(L))
    assert torch.all(w[..., torch.triu(torch.ones(L, L, dtype=torch.bool), 1)] == 0)
    ref = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
    assert torch.allclose(out, ref, atol=1e-6)
    K7, V7 = torch.randn(B, H, 7, d), torch.randn(B, H, 7, dv)
    fm = torch.zeros(L, 7)
    fm[1, 3] = float("-inf")
    out, w = masked_attention(Q, K7, V7, fm)
    assert w[:, :, 1, 3].eq(0).all() and out.shape == (B, H, L, dv)
    assert torch.allclose(out, F.scaled_dot_product_attention(Q, K7, V7, attn_mask=fm), atol=1e-6)
    out0, _ = masked_attention(Q, K7, V7)
    assert torch.allclose(out0, F.scaled_dot_product_attention(Q, K7, V7), atol=1e-6)

    toks = discretize_sine(200)
    assert toks.dtype == torch.long and toks.max() <= 49 and toks.min() >= 0
    assert discretize_sine(13, n_bins=7, period=4.0)[1] == 6  # v = 1
    X, Y = make_windows(torch.arange(10), 3)
    assert X.shape == (7, 3) and torch.equal(X[2], torch.tensor([2, 3, 4])) and torch.equal(Y[2], torch.tensor([3, 4, 5]))
    Xtr, Ytr, Xte, Yte = split_holdout(X, Y, 0.25)   # n_test = 2, first test start 5 -> train i + 3 < 5
    assert len(Xte) == 2 and len(Xtr) == 2, (len(Xtr), len(Xte))
    assert set(range(int(Xtr[-1, -1]) + 2)).isdisjoint(range(int(Xte[0, 0]), 10)) or True
    # explicit disjointness check with positions = token values here
    tr_pos = set(torch.cat([Xtr.flatten(), Ytr.flatten()]).tolist())
    te_pos = set(torch.cat([Xte.flatten(), Yte.flatten()]).tolist())
    assert tr_pos.isdisjoint(te_pos)
    # one more window would overlap
    assert not set(torch.cat([X[len(Xtr)], Y[len(Xtr)]]).tolist()).isdisjoint(te_pos)

    model = CausalTransformer()
    model.eval()
    xx = torch.randint(0, 50, (3, 20))
    l1 = model(xx)
    xx2 = xx.clone()
    xx2[:, 12:] = torch.randint(0, 50, (3, 8))
    l2 = model(xx2)
    assert torch.allclose(l1[:, :12], l2[:, :12], atol=1e-6) and not torch.allclose(l1[:, 12:], l2[:, 12:])

    tokens = discretize_sine(1000)
    X, Y = make_windows(tokens, 32)
    Xtr, Ytr, Xte, Yte = split_holdout(X, Y, 0.1)
    print(len(X), len(Xtr), len(Xte))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = CausalTransformer()
    t0 = time.process_time()
    hist = train_lm(model, Xtr, Ytr)
    print("cpu s", time.process_time() - t0, [round(v, 3) for v in hist])
    print("train acc", next_token_accuracy(model, Xtr, Ytr), "test acc", next_token_accuracy(model, Xte, Yte))
    torch.manual_seed(0)
    model2 = CausalTransformer()
    torch.rand(10)
    hist2 = train_lm(model2, Xtr, Ytr, epochs=2)
    assert hist2 == hist[:2]
    print("ok")
