"""Exercise 1: scaled dot-product attention by hand, in pure NumPy.

Style: everything is an einsum over named axes; the mask is turned into an additive
bias once; softmax is written from the shifted-exponential identity.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F


def _float_array(x):
    """`x` as a floating NumPy array (a copy only when a conversion is needed)."""
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def make_qkv(seq_len=4, d_k=8, seed=0):
    """Float64 standard-normal Q, K, V, each of shape (seq_len, d_k), from a seeded Generator."""
    rng = np.random.default_rng(seed)
    qkv = rng.standard_normal((3, seq_len, d_k))  # float64
    return qkv[0].copy(), qkv[1].copy(), qkv[2].copy()


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`; never modifies `x`.

    exp(x - max) keeps every exponent <= 0, so nothing overflows, and the largest
    term is exactly 1, so the denominator is >= 1 (no division by zero).
    """
    z = _float_array(x)
    peak = np.max(z, axis=axis, keepdims=True)
    # a slice that is entirely -inf has no finite peak: shift it by 0 instead
    peak = np.where(np.isfinite(peak), peak, 0.0)
    e = np.exp(z - peak)  # new array: the input is untouched
    return e / np.sum(e, axis=axis, keepdims=True)


def _additive_bias(mask, dtype):
    """Boolean mask (True = may attend) -> additive bias: 0 where allowed, -inf where blocked."""
    allowed = np.asarray(mask).astype(bool)
    return np.where(allowed, dtype.type(0.0), dtype.type(-np.inf))


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V in NumPy.

    Q (..., L, d_k), K (..., S, d_k), V (..., S, d_v); `mask` bool broadcastable to (..., L, S).
    Returns (output (..., L, d_v), weights (..., L, S)).
    """
    Q, K, V = _float_array(Q), _float_array(K), _float_array(V)
    dtype = np.result_type(Q, K, V)
    d_k = Q.shape[-1]
    scores = np.einsum("...ld,...sd->...ls", Q, K) / dtype.type(math.sqrt(d_k))
    if mask is not None:
        scores = scores + _additive_bias(mask, scores.dtype)
    weights = softmax(scores, axis=-1)
    output = np.einsum("...ls,...sv->...lv", weights, V)
    return output, weights


def max_abs_diff_vs_torch(Q, K, V, mask=None):
    """max |ours - torch.nn.functional.scaled_dot_product_attention| as a Python float."""
    ours, _ = scaled_dot_product_attention(Q, K, V, mask)
    q, k, v = (torch.from_numpy(np.array(_float_array(a), dtype=np.float64)) for a in (Q, K, V))
    attn_mask = None if mask is None else torch.from_numpy(np.array(mask, dtype=bool))
    with torch.no_grad():
        theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    return float(np.max(np.abs(ours - theirs.numpy()))) if ours.size else 0.0


def score_variance(d_k, n_samples=10_000, seed=0):
    """Empirical variance of q.k and of q.k / sqrt(d_k) for q, k ~ N(0, I_{d_k})."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n_samples, d_k))
    dots = np.einsum("nd,nd->n", q, k)
    return float(np.var(dots)), float(np.var(dots / math.sqrt(d_k)))


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("error")  # any RuntimeWarning becomes a failure

    Q, K, V = make_qkv()
    assert Q.shape == K.shape == V.shape == (4, 8) and Q.dtype == np.float64
    Q2, _, _ = make_qkv(seed=0)
    Q3, _, _ = make_qkv(seed=1)
    assert np.array_equal(Q, Q2) and not np.array_equal(Q, Q3)

    big = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [1e4, 1e4 - 1, 3.0]])
    before = big.copy()
    p = softmax(big)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(-1), 1) and np.array_equal(big, before)
    assert np.allclose(softmax(big, axis=0).sum(0), 1)

    out, w = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (4, 8) and w.shape == (4, 4)
    print("2-D diff", max_abs_diff_vs_torch(Q, K, V))

    rng = np.random.default_rng(5)
    B, H, L, S, d, dv = 2, 3, 5, 7, 4, 6
    Q = rng.standard_normal((B, H, L, d))
    K = rng.standard_normal((B, H, S, d))
    V = rng.standard_normal((B, H, S, dv))
    m = rng.random((L, S)) > 0.4
    m[:, 0] = True
    m4 = rng.random((B, H, L, S)) > 0.5
    m4[..., 1] = True
    for mask in (None, m, m4, m[None, None], m4[:, :1]):
        o, w = scaled_dot_product_attention(Q, K, V, mask)
        assert o.shape == (B, H, L, dv) and w.shape == (B, H, L, S)
        assert np.allclose(w.sum(-1), 1)
        if mask is not None:
            assert np.all(w[..., ~np.broadcast_to(mask, w.shape)[0, 0]] == 0) if mask.ndim == 2 else True
            assert np.all(np.where(np.broadcast_to(mask, w.shape), 0, w) == 0)
        diff = max_abs_diff_vs_torch(Q, K, V, mask)
        assert diff < 1e-12, diff
    # 3-D batch
    o, w = scaled_dot_product_attention(Q[0], K[0], V[0], m)
    assert max_abs_diff_vs_torch(Q[0], K[0], V[0], m) < 1e-12
    # inputs untouched
    Qc = Q.copy()
    scaled_dot_product_attention(Q, K, V, m)
    assert np.array_equal(Q, Qc)

    for dk in (1, 4, 16, 64, 256, 512):
        for seed in range(5):
            a, b = score_variance(dk, seed=seed)
            assert abs(a / dk - 1) < 0.1 and abs(b - 1) < 0.1, (dk, seed, a, b)
    print(score_variance(64))
    print("ex1 ok")
