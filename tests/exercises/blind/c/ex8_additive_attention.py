"""ex8_additive_attention: additive (Bahdanau), multiplicative (Luong general) and scaled
dot-product scoring of encoder annotations against one decoder state."""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def _attend(scores, annotations, mask):
    """Masked softmax over the S annotations and the weighted sum of the annotations."""
    if mask is not None:
        scores = scores.masked_fill(~mask.to(torch.bool), float("-inf"))
    weights = torch.softmax(scores, dim=-1)                              # (B, S)
    context = torch.bmm(weights.unsqueeze(1), annotations).squeeze(1)    # (B, enc_dim)
    return context, weights


class AdditiveAttention(nn.Module):
    """score_i = v^T tanh(W_h h_i + W_s s)."""

    def __init__(self, enc_dim: int, dec_dim: int, attn_dim: int):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def _scores(self, annotations, state):
        hidden = torch.tanh(self.W_h(annotations) + self.W_s(state).unsqueeze(1))  # (B, S, A)
        return self.v(hidden).squeeze(-1)                                           # (B, S)

    def forward(self, annotations, state, mask=None):
        return _attend(self._scores(annotations, state), annotations, mask)


class MultiplicativeAttention(nn.Module):
    """score_i = s^T W_a h_i (Luong "general")."""

    def __init__(self, enc_dim: int, dec_dim: int):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, dec_dim, bias=False)

    def _scores(self, annotations, state):
        # s^T W_a h_i = (W_a^T s) . h_i : map the single state into encoder space once
        query = state @ self.W_a.weight                                    # (B, enc_dim)
        return torch.bmm(annotations, query.unsqueeze(-1)).squeeze(-1)     # (B, S)

    def forward(self, annotations, state, mask=None):
        return _attend(self._scores(annotations, state), annotations, mask)


class ScaledDotAttention(nn.Module):
    """score_i = s . h_i / sqrt(dim); no parameters."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def _scores(self, annotations, state):
        return torch.bmm(annotations, state.unsqueeze(-1)).squeeze(-1) / math.sqrt(self.dim)

    def forward(self, annotations, state, mask=None):
        return _attend(self._scores(annotations, state), annotations, mask)


def attention_parameter_counts(enc_dim, dec_dim, attn_dim):
    """Trainable parameters of each module built with these sizes (built on the meta device:
    no memory, no draw from the global RNG)."""
    def count(m):
        return sum(p.numel() for p in m.parameters() if p.requires_grad)
    with torch.device("meta"):
        return {
            "additive": count(AdditiveAttention(enc_dim, dec_dim, attn_dim)),
            "multiplicative": count(MultiplicativeAttention(enc_dim, dec_dim)),
            "dot": count(ScaledDotAttention(dec_dim)),
        }


def make_pointer_task(n_samples, seq_len=8, dim=16, seed=0):
    """Standard-normal annotations (n, S, dim) and states (n, dim); target = the annotation
    with the largest dot product with the state (first maximum on ties)."""
    gen = torch.Generator().manual_seed(seed)
    annotations = torch.randn(n_samples, seq_len, dim, generator=gen, dtype=torch.float32)
    states = torch.randn(n_samples, dim, generator=gen, dtype=torch.float32)
    dots = torch.einsum("nsd,nd->ns", annotations, states)
    return annotations, states, dots.argmax(dim=1)


def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2,
                  seed=0):
    """Adam on the negative log-likelihood of the target under the module's weights.
    Returns, per epoch, the batch losses (computed before each update) weighted by batch
    size and divided by the number of samples."""
    n = annotations.size(0)
    order_gen = torch.Generator().manual_seed(seed)
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr) if params else None  # ScaledDot has nothing to fit
    history = []
    module.train()
    for _ in range(epochs):
        total = 0.0
        for idx in torch.randperm(n, generator=order_gen).split(batch_size):
            _, weights = module(annotations[idx], states[idx])
            log_w = torch.log(weights.clamp_min(1e-12))
            loss_sum = F.nll_loss(log_w, targets[idx], reduction="sum")
            if opt is not None:
                opt.zero_grad(set_to_none=True)
                (loss_sum / idx.numel()).backward()
                opt.step()
            total += loss_sum.item()
        history.append(total / n)
    return history


def pointer_accuracy(module, annotations, states, targets):
    """Fraction of samples whose largest weight (first maximum) is on the target."""
    module.eval()
    with torch.inference_mode():
        _, weights = module(annotations, states)
        return (weights.argmax(dim=-1) == targets).float().mean().item()


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    B, S, E, D, A = 3, 7, 5, 4, 6
    h, s = torch.randn(B, S, E), torch.randn(B, D)
    add = AdditiveAttention(E, D, A)
    mul = MultiplicativeAttention(E, D)
    ctx, w = add(h, s)
    assert ctx.shape == (B, E) and w.shape == (B, S) and torch.allclose(w.sum(-1), torch.ones(B))
    ref = add.v(torch.tanh(add.W_h(h) + add.W_s(s)[:, None])).squeeze(-1).softmax(-1)
    assert torch.allclose(w, ref, atol=1e-6)
    assert torch.allclose(ctx, (w[..., None] * h).sum(1), atol=1e-6)
    ctx, w = mul(h, s)
    ref = torch.einsum("bd,bsd->bs", s, mul.W_a(h)).softmax(-1)
    assert ctx.shape == (B, E) and torch.allclose(w, ref, atol=1e-6)
    dot = ScaledDotAttention(E)
    s_e = torch.randn(B, E)
    ctx, w = dot(h, s_e)
    assert torch.allclose(w, (torch.einsum("be,bse->bs", s_e, h) / math.sqrt(E)).softmax(-1), atol=1e-6)
    assert len(list(dot.parameters())) == 0
    mask = torch.rand(B, S) > 0.4
    mask[:, 0] = True
    for mod, st in ((add, s), (mul, s), (dot, s_e)):
        c_, w_ = mod(h, st, mask)
        assert (w_[~mask] == 0).all() and torch.allclose(w_.sum(-1), torch.ones(B))
        assert torch.allclose(c_, (w_[..., None] * h).sum(1), atol=1e-6)

    counts = attention_parameter_counts(E, D, A)
    assert counts == {"additive": E * A + D * A + A + A, "multiplicative": E * D, "dot": 0}
    state = torch.get_rng_state()
    attention_parameter_counts(16, 16, 64)
    assert torch.equal(state, torch.get_rng_state())
    print(attention_parameter_counts(16, 16, 64))

    a1, s1, t1 = make_pointer_task(50, seq_len=6, dim=9, seed=3)
    assert a1.shape == (50, 6, 9) and s1.shape == (50, 9) and t1.dtype == torch.long
    assert a1.dtype == s1.dtype == torch.float32
    assert torch.equal(t1, torch.stack([(a1[j] @ s1[j]).argmax() for j in range(50)]))
    assert torch.equal(a1, make_pointer_task(50, 6, 9, 3)[0])
    assert not torch.equal(a1, make_pointer_task(50, 6, 9, 4)[0])

    tr = make_pointer_task(2000, seed=0)
    te = make_pointer_task(500, seed=1)
    for seed in (0, 1, 2):
        for name, ctor in (("multiplicative", lambda: MultiplicativeAttention(16, 16)),
                           ("additive", lambda: AdditiveAttention(16, 16, 64))):
            torch.manual_seed(seed)
            mod = ctor()
            t0 = time.process_time()
            hist = train_pointer(mod, *tr)
            acc = pointer_accuracy(mod, *te)
            print(f"init seed {seed} {name}: {time.process_time() - t0:.1f}s cpu, "
                  f"loss {hist[0]:.3f} -> {hist[-1]:.3f}, held-out acc {acc:.3f}")
    print("dot (untrained, no params):", pointer_accuracy(ScaledDotAttention(16), *te))

    def hist_for(seed, noise):
        torch.manual_seed(7)
        mod = AdditiveAttention(16, 16, 8)
        torch.manual_seed(noise)
        return train_pointer(mod, *[t[:300] for t in tr], epochs=2, seed=seed)
    h1, h2, h3 = hist_for(0, 1), hist_for(0, 2), hist_for(1, 1)
    assert h1 == h2 and h1 != h3
    print("ex8 ok")
