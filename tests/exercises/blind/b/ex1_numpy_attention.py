"""Exercise 1: scaled dot-product attention by hand, in pure NumPy.

Style: a careful, explicit walk through every step. A tiny helper class keeps the
intermediate results of one attention call (scores, weights, output) so they can be
inspected while debugging.
"""
import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F


def make_qkv(seq_len=4, d_k=8, seed=0):
    """Return float64 standard-normal Q, K, V, each of shape (seq_len, d_k)."""
    if seq_len < 1 or d_k < 1:
        raise ValueError("seq_len and d_k must be positive")
    generator = np.random.default_rng(seed)
    Q = generator.standard_normal((seq_len, d_k)).astype(np.float64)
    K = generator.standard_normal((seq_len, d_k)).astype(np.float64)
    V = generator.standard_normal((seq_len, d_k)).astype(np.float64)
    return Q, K, V


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`; the input array is not modified."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    # the largest entry of every slice; slices made only of -inf get a shift of 0
    row_max = np.max(x, axis=axis, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    shifted = x - row_max          # a new array: x itself stays untouched
    exps = np.exp(shifted)         # every exponent is <= 0, so no overflow
    totals = np.sum(exps, axis=axis, keepdims=True)
    # a slice that is blocked everywhere has total 0: give it zeros, not NaN
    safe_totals = np.where(totals > 0, totals, 1.0)
    return exps / safe_totals


class _AttentionRecord:
    """Keeps the pieces of one scaled dot-product attention computation."""

    def __init__(self, Q, K, V, mask):
        self.Q = np.asarray(Q, dtype=np.float64)
        self.K = np.asarray(K, dtype=np.float64)
        self.V = np.asarray(V, dtype=np.float64)
        self.mask = None if mask is None else np.asarray(mask).astype(bool)
        self.scores = None
        self.weights = None
        self.output = None
        self._check_shapes()

    def _check_shapes(self):
        if self.Q.ndim < 2 or self.K.ndim < 2 or self.V.ndim < 2:
            raise ValueError("Q, K and V need at least two dimensions (..., seq, dim)")
        if self.Q.shape[-1] != self.K.shape[-1]:
            raise ValueError("Q and K must have the same last dimension d_k")
        if self.K.shape[-2] != self.V.shape[-2]:
            raise ValueError("K and V must have the same number of positions S")

    def run(self):
        d_k = self.Q.shape[-1]
        # step 1: raw scores Q K^T, shape (..., L, S)
        K_transposed = np.swapaxes(self.K, -1, -2)
        raw_scores = np.matmul(self.Q, K_transposed)
        # step 2: scale by 1 / sqrt(d_k)
        self.scores = raw_scores / math.sqrt(d_k)
        # step 3: blocked positions (mask False) get -inf before the softmax
        if self.mask is not None:
            self.scores = np.where(self.mask, self.scores, -np.inf)
        # step 4: softmax over the keys
        self.weights = softmax(self.scores, axis=-1)
        # step 5: weighted sum of the values
        self.output = np.matmul(self.weights, self.V)
        return self.output, self.weights


def scaled_dot_product_attention(Q, K, V, mask=None):
    """NumPy attention. Q (..., L, d_k), K (..., S, d_k), V (..., S, d_v).

    mask: optional boolean array broadcastable to (..., L, S), True = may attend.
    Returns (output (..., L, d_v), weights (..., L, S)).
    """
    record = _AttentionRecord(Q, K, V, mask)
    return record.run()


def max_abs_diff_vs_torch(Q, K, V, mask=None):
    """Largest absolute difference between our output and torch's F.scaled_dot_product_attention."""
    ours, _ = scaled_dot_product_attention(Q, K, V, mask)
    q_t = torch.as_tensor(np.asarray(Q, dtype=np.float64))
    k_t = torch.as_tensor(np.asarray(K, dtype=np.float64))
    v_t = torch.as_tensor(np.asarray(V, dtype=np.float64))
    mask_t = None
    if mask is not None:
        mask_t = torch.as_tensor(np.asarray(mask).astype(bool))
    with torch.no_grad():
        theirs = F.scaled_dot_product_attention(q_t, k_t, v_t, attn_mask=mask_t)
    difference = np.abs(ours - theirs.numpy())
    return float(np.max(difference))


def score_variance(d_k, n_samples=10_000, seed=0):
    """Empirical variance of q.k and of q.k / sqrt(d_k) for q, k ~ N(0, I_{d_k})."""
    if d_k < 1 or n_samples < 2:
        raise ValueError("need d_k >= 1 and n_samples >= 2")
    generator = np.random.default_rng(seed)
    q = generator.standard_normal((n_samples, d_k))
    k = generator.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=1)
    scaled_dots = dots / math.sqrt(d_k)
    return float(np.var(dots)), float(np.var(scaled_dots))


if __name__ == "__main__":
    Q, K, V = make_qkv()
    assert Q.shape == (4, 8) and Q.dtype == np.float64
    Q2, _, _ = make_qkv(seed=0)
    assert np.array_equal(Q, Q2)
    assert not np.array_equal(Q, make_qkv(seed=1)[0])
    out, w = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (4, 8) and w.shape == (4, 4)
    assert np.allclose(w.sum(-1), 1.0)
    print("diff 2d", max_abs_diff_vs_torch(Q, K, V))

    # softmax stability and no modification of the input
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4]])
        copy = big.copy()
        s = softmax(big)
        assert np.all(np.isfinite(s)) and np.array_equal(big, copy)
        s0 = softmax(big, axis=0)
        assert np.allclose(s0.sum(0), 1)

    # batched, masked, shapes all distinct
    rng = np.random.default_rng(5)
    B, H, L, S, d, dv = 2, 3, 5, 7, 4, 6
    Qb = rng.standard_normal((B, H, L, d))
    Kb = rng.standard_normal((B, H, S, d))
    Vb = rng.standard_normal((B, H, S, dv))
    m2 = rng.random((L, S)) > 0.4
    m2[:, 0] = True
    m4 = rng.random((B, 1, L, S)) > 0.4
    m4[..., 1] = True
    for m in (None, m2, m4):
        Qc, Kc, Vc = Qb.copy(), Kb.copy(), Vb.copy()
        o, ww = scaled_dot_product_attention(Qb, Kb, Vb, m)
        assert o.shape == (B, H, L, dv) and ww.shape == (B, H, L, S)
        assert np.array_equal(Qc, Qb)
        if m is not None:
            assert np.all(ww[np.broadcast_to(~m, ww.shape)] == 0)
        print("diff batched", max_abs_diff_vs_torch(Qb, Kb, Vb, m))
    # 3-D with a 3-D mask
    m3 = rng.random((B, L, S)) > 0.3
    m3[..., 2] = True
    print("diff 3d", max_abs_diff_vs_torch(Qb[:, 0], Kb[:, 0], Vb[:, 0], m3))

    for dk in (1, 4, 16, 64, 512):
        print(dk, score_variance(dk))
        a, b = score_variance(dk)
        assert abs(a / dk - 1) < 0.1 and abs(b - 1) < 0.1
    print("ok")
