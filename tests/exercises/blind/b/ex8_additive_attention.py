"""Exercise 8: additive (Bahdanau), multiplicative (Luong "general") and scaled dot-product
attention over encoder annotations, and a pointer task to train them on.

Style: the three modules share a small base class that turns scores into masked softmax
weights and a context vector; each subclass only defines `score`. Training uses DataLoader +
TensorDataset with a seeded generator and the log-softmax of the (masked) scores.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class _ScoreAttentionBase(nn.Module):
    """Shared forward: scores (B, S) -> masked softmax -> context = sum_i w_i h_i."""

    def score(self, annotations, state):
        raise NotImplementedError

    @staticmethod
    def _check_inputs(annotations, state, mask):
        if annotations.dim() != 3 or state.dim() != 2:
            raise ValueError("annotations must be (B, S, enc_dim) and state (B, dec_dim)")
        if annotations.shape[0] != state.shape[0]:
            raise ValueError("annotations and state must have the same batch size")
        if mask is not None and tuple(mask.shape) != tuple(annotations.shape[:2]):
            raise ValueError("mask must have shape (B, S)")

    def masked_scores(self, annotations, state, mask=None):
        """Scores (B, S) with blocked positions set to -inf."""
        self._check_inputs(annotations, state, mask)
        scores = self.score(annotations, state)
        if mask is not None:
            scores = scores.masked_fill(~mask.to(torch.bool), float("-inf"))
        return scores

    def forward(self, annotations, state, mask=None):
        scores = self.masked_scores(annotations, state, mask)
        weights = F.softmax(scores, dim=-1)                                    # (B, S)
        context = torch.bmm(weights.unsqueeze(1), annotations).squeeze(1)     # (B, enc_dim)
        return context, weights


class AdditiveAttention(_ScoreAttentionBase):
    """Bahdanau: score_i = v^T tanh(W_h h_i + W_s s)."""

    def __init__(self, enc_dim, dec_dim, attn_dim):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def score(self, annotations, state):
        projected_h = self.W_h(annotations)                # (B, S, attn_dim)
        projected_s = self.W_s(state).unsqueeze(1)         # (B, 1, attn_dim)
        return self.v(torch.tanh(projected_h + projected_s)).squeeze(-1)   # (B, S)


class MultiplicativeAttention(_ScoreAttentionBase):
    """Luong "general": score_i = s^T W_a h_i."""

    def __init__(self, enc_dim, dec_dim):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def score(self, annotations, state):
        projected_h = self.W_a(annotations)                # (B, S, dec_dim)
        return torch.bmm(projected_h, state.unsqueeze(2)).squeeze(2)       # (B, S)


class ScaledDotAttention(_ScoreAttentionBase):
    """score_i = s . h_i / sqrt(dim); no parameters."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def score(self, annotations, state):
        return torch.bmm(annotations, state.unsqueeze(2)).squeeze(2) / math.sqrt(self.dim)


def _count_trainable(module):
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def attention_parameter_counts(enc_dim, dec_dim, attn_dim):
    """Trainable parameters of each scoring module built with these sizes."""
    with torch.random.fork_rng(devices=[]):
        additive = AdditiveAttention(enc_dim, dec_dim, attn_dim)
        multiplicative = MultiplicativeAttention(enc_dim, dec_dim)
    dot = ScaledDotAttention(enc_dim)
    return {
        "additive": int(_count_trainable(additive)),
        "multiplicative": int(_count_trainable(multiplicative)),
        "dot": int(_count_trainable(dot)),
    }


def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    """Standard-normal annotations (n, S, dim) and states (n, dim); target = argmax_i h_i . s."""
    if n_samples < 1 or seq_len < 1 or dim < 1:
        raise ValueError("n_samples, seq_len and dim must be positive")
    generator = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, seq_len, dim, generator=generator, dtype=torch.float32)
    states = torch.randn(n_samples, dim, generator=generator, dtype=torch.float32)
    dots = torch.bmm(annotations.double(), states.double().unsqueeze(2)).squeeze(2)   # (n, S)
    targets = dots.argmax(dim=1).to(torch.long)
    return annotations, states, targets


def _log_weights(module, annotations, states):
    """log of the attention weights; via log-softmax of the scores when the module exposes them."""
    if hasattr(module, "masked_scores"):
        return F.log_softmax(module.masked_scores(annotations, states), dim=-1)
    _, weights = module(annotations, states)
    return torch.log(weights.clamp_min(1e-12))


def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    """Adam on the negative log-likelihood of the target; sample-weighted mean loss per epoch."""
    if epochs < 0 or batch_size < 1:
        raise ValueError("epochs must be >= 0 and batch_size >= 1")
    if not (len(annotations) == len(states) == len(targets)):
        raise ValueError("annotations, states and targets must have the same length")
    parameters = [p for p in module.parameters() if p.requires_grad]
    history = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(annotations, states, targets),
            batch_size=batch_size, shuffle=True,
            generator=torch.Generator().manual_seed(seed))
        # a module without parameters (ScaledDotAttention) is only evaluated
        optimizer = torch.optim.Adam(parameters, lr=lr) if len(parameters) > 0 else None
        was_training = module.training
        module.train()
        for _ in range(epochs):
            loss_sum = 0.0
            seen = 0
            for batch_h, batch_s, batch_t in loader:
                log_w = _log_weights(module, batch_h, batch_s)
                loss = F.nll_loss(log_w, batch_t)
                if optimizer is not None:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                loss_sum += loss.item() * batch_h.shape[0]
                seen += batch_h.shape[0]
            history.append(loss_sum / seen)
    module.train(was_training)  # back to the mode the caller had
    return history


def pointer_accuracy(module, annotations, states, targets):
    """Fraction of samples whose largest weight (first maximum) is on the target."""
    was_training = module.training
    module.eval()
    with torch.no_grad():
        _, weights = module(annotations, states)
        predictions = weights.argmax(dim=-1)
        correct = (predictions == targets).sum().item()
    module.train(was_training)
    return float(correct / len(targets))


if __name__ == "__main__":
    torch.manual_seed(0)
    B, S, E, D, A = 3, 5, 6, 4, 7
    h = torch.randn(B, S, E)
    s = torch.randn(B, D)
    mask = torch.rand(B, S) > 0.3
    mask[:, 0] = True
    add = AdditiveAttention(E, D, A)
    mul = MultiplicativeAttention(E, D)
    for module in (add, mul):
        ctx, w = module(h, s, mask)
        assert ctx.shape == (B, E) and w.shape == (B, S)
        assert torch.allclose(w.sum(-1), torch.ones(B)) and torch.all(w[~mask] == 0)
        assert torch.allclose(ctx, (w.unsqueeze(-1) * h).sum(1), atol=1e-6)
    # explicit score formulas
    i = 2
    manual = add.v.weight @ torch.tanh(add.W_h.weight @ h[1, i] + add.W_s.weight @ s[1] + add.W_s.bias)
    assert torch.allclose(add.score(h, s)[1, i], manual.squeeze(), atol=1e-6)
    assert torch.allclose(mul.score(h, s)[1, i], s[1] @ mul.W_a.weight @ h[1, i], atol=1e-6)
    dot = ScaledDotAttention(E)
    s_e = torch.randn(B, E)
    ctx, w = dot(h, s_e, mask)
    assert torch.allclose(dot.score(h, s_e)[0, 1], h[0, 1] @ s_e[0] / math.sqrt(E))
    print(attention_parameter_counts(E, D, A))
    assert attention_parameter_counts(E, D, A) == {"additive": E * A + D * A + A + A,
                                                   "multiplicative": E * D, "dot": 0}

    a1, s1, t1 = make_pointer_task(50, seq_len=6, dim=5, seed=3)
    a2, s2, t2 = make_pointer_task(50, seq_len=6, dim=5, seed=3)
    assert torch.equal(a1, a2) and torch.equal(t1, t2) and a1.dtype == torch.float32 and t1.dtype == torch.long
    assert not torch.equal(a1, make_pointer_task(50, seq_len=6, dim=5, seed=4)[0])
    assert torch.equal(t1, (a1 * s1.unsqueeze(1)).sum(-1).argmax(-1))

    torch.set_num_threads(1)
    Htr, Str, Ttr = make_pointer_task(2000, seed=0)
    Hte, Ste, Tte = make_pointer_task(500, seed=1)
    for name, make in (("mult", lambda: MultiplicativeAttention(16, 16)),
                       ("add", lambda: AdditiveAttention(16, 16, 64)),
                       ("dot", lambda: ScaledDotAttention(16))):
        for init_seed in (0, 1, 2):
            torch.manual_seed(init_seed)
            m = make()
            t0 = time.process_time()
            hist = train_pointer(m, Htr, Str, Ttr)
            dt = time.process_time() - t0
            print(name, init_seed, f"{dt:.1f}s", [round(v, 3) for v in hist[::5]],
                  "acc", pointer_accuracy(m, Hte, Ste, Tte))
    # determinism and seed dependence of the history
    torch.manual_seed(0)
    m1 = MultiplicativeAttention(16, 16)
    torch.manual_seed(0)
    m2 = MultiplicativeAttention(16, 16)
    torch.randn(5)
    h1 = train_pointer(m1, Htr[:300], Str[:300], Ttr[:300], epochs=3)
    h2 = train_pointer(m2, Htr[:300], Str[:300], Ttr[:300], epochs=3)
    torch.manual_seed(0)
    m3 = MultiplicativeAttention(16, 16)
    h3 = train_pointer(m3, Htr[:300], Str[:300], Ttr[:300], epochs=3, seed=1)
    assert h1 == h2 and h1 != h3
    print("ok")
