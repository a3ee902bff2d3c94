"""ex1_numpy_attention: scaled dot-product attention by hand, in pure NumPy."""
import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F


def make_qkv(seq_len=4, d_k=8, seed=0):
    """Seeded float64 standard-normal Q, K, V, each of shape (seq_len, d_k)."""
    rng = np.random.default_rng(seed)
    # One draw for all three keeps them independent and reproducible.
    Q, K, V = rng.standard_normal((3, seq_len, d_k), dtype=np.float64)
    return Q.copy(), K.copy(), V.copy()


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`; the input is never modified."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    shift = np.max(x, axis=axis, keepdims=True)
    # A row that is entirely -inf (or +inf) would give inf - inf = nan: shift by 0 there.
    shift = np.where(np.isfinite(shift), shift, 0.0)
    e = np.exp(x - shift)  # new array: largest entry of each row is exp(0) = 1
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V with an optional boolean mask (True = may attend).

    Q (..., L, d_k), K (..., S, d_k), V (..., S, d_v); mask broadcastable to (..., L, S).
    Returns (output (..., L, d_v), weights (..., L, S)).
    """
    Q = np.asarray(Q)
    K = np.asarray(K)
    V = np.asarray(V)
    d_k = Q.shape[-1]
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return np.matmul(weights, V), weights


def max_abs_diff_vs_torch(Q, K, V, mask=None):
    """max |ours - F.scaled_dot_product_attention| on the same (float64) values."""
    ours, _ = scaled_dot_product_attention(Q, K, V, mask)
    tq, tk, tv = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (Q, K, V))
    tmask = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))
    with torch.inference_mode():
        ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask)
    return float(np.max(np.abs(ours - ref.numpy()))) if ours.size else 0.0


def score_variance(d_k, n_samples=10_000, seed=0):
    """Empirical variance of q.k and of q.k / sqrt(d_k) for q, k ~ N(0, I_{d_k})."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.einsum("nd,nd->n", q, k)
    return float(np.var(dots)), float(np.var(dots / math.sqrt(d_k)))


if __name__ == "__main__":
    # --- make_qkv
    Q, K, V = make_qkv()
    assert Q.shape == K.shape == V.shape == (4, 8) and Q.dtype == np.float64
    assert all(np.array_equal(a, b) for a, b in zip(make_qkv(5, 3, 7), make_qkv(5, 3, 7)))
    assert not np.array_equal(make_qkv(5, 3, 7)[0], make_qkv(5, 3, 8)[0])
    assert not np.array_equal(Q, K)
    np.random.seed(123)
    assert np.array_equal(make_qkv(5, 3, 7)[0], make_qkv(5, 3, 7)[0])

    # --- softmax
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4 + 1, -1e4]])
        before = big.copy()
        s = softmax(big)
        assert np.all(np.isfinite(s)) and np.allclose(s.sum(-1), 1)
        assert np.array_equal(big, before)
        s0 = softmax(big, axis=0)
        assert np.allclose(s0.sum(0), 1)
        m = np.array([[0.0, -np.inf, 1.0]])
        assert softmax(m)[0, 1] == 0.0
        assert np.allclose(softmax(np.array([1.0, 2.0, 3.0])),
                           np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())

    # --- attention vs torch, shapes with distinct dims
    rng = np.random.default_rng(1)
    B, H, L, S, d, dv = 2, 3, 5, 7, 4, 6
    Q = rng.standard_normal((B, H, L, d))
    K = rng.standard_normal((B, H, S, d))
    V = rng.standard_normal((B, H, S, dv))
    out, w = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (B, H, L, dv) and w.shape == (B, H, L, S)
    assert np.allclose(w.sum(-1), 1)
    print("no mask diff", max_abs_diff_vs_torch(Q, K, V))
    mask2 = rng.random((L, S)) > 0.4
    mask2[:, 0] = True
    mask4 = rng.random((B, 1, L, S)) > 0.4
    mask4[..., 2] = True
    for mk in (mask2, mask4):
        out, w = scaled_dot_product_attention(Q, K, V, mk)
        assert np.all(w[..., ~np.broadcast_to(mk, w.shape)[0, 0]] == 0) if mk.ndim == 2 else True
        assert np.all(np.where(np.broadcast_to(mk, w.shape), True, w == 0))
        d_ = max_abs_diff_vs_torch(Q, K, V, mk)
        print("mask diff", d_)
        assert d_ < 1e-12
    Q, K, V = make_qkv()
    assert max_abs_diff_vs_torch(Q, K, V) < 1e-12
    causal = np.tril(np.ones((4, 4), dtype=bool))
    assert max_abs_diff_vs_torch(Q, K, V, causal) < 1e-12
    Qc = Q.copy()
    scaled_dot_product_attention(Q, K, V, causal)
    assert np.array_equal(Q, Qc)

    # --- score variance
    for dk in (1, 4, 16, 64, 512):
        for sd in range(5):
            a, b = score_variance(dk, seed=sd)
            assert abs(a / dk - 1) < 0.1 and abs(b - 1) < 0.1, (dk, sd, a, b)
    print(score_variance(64), score_variance(64, seed=1))
    print("ex1 ok")
