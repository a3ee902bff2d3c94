"""Exercise 8: additive (Bahdanau), multiplicative (Luong "general") and scaled dot-product
attention over encoder annotations, trained on a pointer task.

Style: each module only defines its score function; a shared base turns scores into
(masked) weights and an einsum context. Training uses log-softmax of the scores (written
by hand), batches from a torch.randperm permutation of a seeded Generator.
"""
import math

import torch
import torch.nn as nn


def _log_softmax(scores):
    peak = scores.amax(dim=-1, keepdim=True).detach()
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    shifted = scores - peak
    return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()


class _ScoredAttention(nn.Module):
    """Base: subclasses implement scores(annotations, state) -> (B, S)."""

    def scores(self, annotations, state):  # pragma: no cover - abstract
        raise NotImplementedError

    def masked_scores(self, annotations, state, mask=None):
        e = self.scores(annotations, state)
        if mask is not None:
            mask = torch.as_tensor(mask, device=e.device)
            e = e + (mask.to(e.dtype).log() if mask.dtype == torch.bool else mask.to(e.dtype))
        return e

    def forward(self, annotations, state, mask=None):
        """annotations (B, S, enc_dim), state (B, dec_dim), mask bool (B, S) True = may attend
        -> (context (B, enc_dim), weights (B, S))."""
        weights = _log_softmax(self.masked_scores(annotations, state, mask)).exp()
        context = torch.einsum("bs,bse->be", weights, annotations)
        return context, weights


class AdditiveAttention(_ScoredAttention):
    """score_i = v^T tanh(W_h h_i + W_s s)."""

    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def scores(self, annotations, state):
        hidden = torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))  # (B, S, A)
        return self.v(hidden).squeeze(-1)


class MultiplicativeAttention(_ScoredAttention):
    """score_i = s^T W_a h_i."""

    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def scores(self, annotations, state):
        return torch.einsum("bsd,bd->bs", self.W_a(annotations), state)


class ScaledDotAttention(_ScoredAttention):
    """score_i = s . h_i / sqrt(dim); no parameters."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def scores(self, annotations, state):
        return torch.einsum("bsd,bd->bs", annotations, state) / math.sqrt(self.dim)


def attention_parameter_counts(enc_dim, dec_dim, attn_dim):
    """Trainable parameters of each module built with these sizes."""
    return {
        "additive": attn_dim * enc_dim + (attn_dim * dec_dim + attn_dim) + attn_dim,
        "multiplicative": dec_dim * enc_dim,
        "dot": 0,
    }


def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    """Standard-normal float32 annotations (n, seq_len, dim) and states (n, dim) from
    torch.Generator().manual_seed(seed); target = argmax_i annotations[j, i] . states[j]."""
    gen = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, seq_len, dim, generator=gen, dtype=torch.float32)
    states = torch.randn(n_samples, dim, generator=gen, dtype=torch.float32)
    dots = torch.einsum("nsd,nd->ns", annotations.double(), states.double())
    return annotations, states, dots.argmax(dim=1)


def _target_nll(module, annotations, states, targets):
    """Mean -log p(target): log-softmax of the scores when the module exposes them,
    otherwise log of its (clamped) weights."""
    if isinstance(module, _ScoredAttention):
        log_p = _log_softmax(module.masked_scores(annotations, states))
    else:
        _, weights = module(annotations, states)
        log_p = weights.clamp_min(1e-12).log()
    return -log_p.gather(1, targets.reshape(-1, 1)).mean()


def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2,
                  seed=0):
    """Adam on mini-batches visited in an order drawn from `seed`; per epoch the batch losses
    (computed before each update) averaged with batch-size weights."""
    n = annotations.shape[0]
    gen = torch.Generator().manual_seed(seed)
    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr) if params else None
    history = []
    module.train()
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        total = torch.zeros((), dtype=torch.float64)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            loss = _target_nll(module, annotations[idx], states[idx], targets[idx])
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            total += loss.detach().double() * idx.numel()
        history.append(float(total / max(n, 1)))
    return history


def pointer_accuracy(module, annotations, states, targets):
    """Fraction of samples whose largest weight (first maximum) is on the target;
    eval mode, no gradients."""
    module.eval()
    with torch.no_grad():
        _, weights = module(annotations, states)
    return float((weights.argmax(dim=1) == targets).double().mean())


if __name__ == "__main__":
    import time

    torch.set_num_threads(1)
    torch.manual_seed(0)
    B, S, E, D, A = 3, 5, 6, 4, 7
    h = torch.randn(B, S, E)
    s = torch.randn(B, D)
    add = AdditiveAttention(E, D, A)
    ctx, w = add(h, s)
    manual = add.v(torch.tanh(add.W_h(h) + add.W_s(s)[:, None])).squeeze(-1).softmax(-1)
    assert ctx.shape == (B, E) and w.shape == (B, S) and torch.allclose(w, manual)
    assert torch.allclose(ctx, (manual[..., None] * h).sum(1), atol=1e-6)
    mask = torch.rand(B, S) > 0.4
    mask[:, 2] = True
    ctx, w = add(h, s, mask)
    assert torch.all(w[~mask] == 0) and torch.allclose(w.sum(-1), torch.ones(B))
    mul = MultiplicativeAttention(E, D)
    _, w = mul(h, s)
    assert torch.allclose(w, torch.einsum("bd,bsd->bs", s, mul.W_a(h)).softmax(-1))
    dot = ScaledDotAttention(E)
    _, w = dot(h, torch.randn(B, E))
    assert sum(p.numel() for p in dot.parameters()) == 0
    counts = attention_parameter_counts(E, D, A)
    assert counts["additive"] == sum(p.numel() for p in add.parameters())
    assert counts["multiplicative"] == sum(p.numel() for p in mul.parameters())
    assert counts["dot"] == 0

    a1, s1, t1 = make_pointer_task(10, seq_len=5, dim=3, seed=2)
    a2, s2, t2 = make_pointer_task(10, seq_len=5, dim=3, seed=2)
    a3, _, _ = make_pointer_task(10, seq_len=5, dim=3, seed=3)
    assert a1.shape == (10, 5, 3) and s1.shape == (10, 3) and a1.dtype == torch.float32
    assert t1.dtype == torch.long and torch.equal(t1, (a1 * s1[:, None]).sum(-1).argmax(1))
    assert torch.equal(a1, a2) and torch.equal(t1, t2) and not torch.equal(a1, a3)

    # lr = 0: every epoch reports the full-data loss
    A_, S_, T_ = make_pointer_task(300)
    m0 = MultiplicativeAttention(16, 16)
    hist = train_pointer(m0, A_, S_, T_, epochs=2, lr=0.0)
    with torch.no_grad():
        _, w = m0(A_, S_)
        full = -w[torch.arange(300), T_].log().mean().item()
    assert abs(hist[0] - full) < 1e-5 and abs(hist[1] - full) < 1e-5, (hist, full)
    hd = train_pointer(ScaledDotAttention(16), A_, S_, T_, epochs=2)
    assert len(hd) == 2

    tr = make_pointer_task(2000, seed=0)
    te = make_pointer_task(500, seed=1)
    print("dot (untrained)", pointer_accuracy(ScaledDotAttention(16), *te))
    for name, build in (("multiplicative", lambda: MultiplicativeAttention(16, 16)),
                        ("additive", lambda: AdditiveAttention(16, 16, 64))):
        for init_seed in range(3):
            torch.manual_seed(init_seed)
            mod = build()
            t0 = time.time()
            hist = train_pointer(mod, *tr)
            print(name, init_seed, f"{time.time() - t0:.1f}s", round(hist[0], 3),
                  round(hist[-1], 3), "test acc", pointer_accuracy(mod, *te))
    # determinism and seed dependence
    torch.manual_seed(0)
    m1 = MultiplicativeAttention(16, 16)
    m2 = MultiplicativeAttention(16, 16)
    m2.load_state_dict(m1.state_dict())
    m3 = MultiplicativeAttention(16, 16)
    m3.load_state_dict(m1.state_dict())
    h1 = train_pointer(m1, *tr, epochs=2, seed=4)
    torch.manual_seed(77)
    h2 = train_pointer(m2, *tr, epochs=2, seed=4)
    h3 = train_pointer(m3, *tr, epochs=2, seed=5)
    assert h1 == h2 and h1 != h3
    print("ex8 ok")
