"""Reference solution of ex1_numpy_attention: scaled dot-product attention by hand in NumPy."""

import numpy as np
import torch
import torch.nn.functional as F


def make_qkv(
    seq_len: int = 4, d_k: int = 8, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return float64 standard-normal Q, K, V, each of shape (seq_len, d_k).

    The same seed gives the same matrices; different seeds give different ones.
    """
    rng = np.random.default_rng(seed)
    queries = rng.standard_normal((seq_len, d_k))
    keys = rng.standard_normal((seq_len, d_k))
    values = rng.standard_normal((seq_len, d_k))
    return queries, keys, values


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax of x along `axis`, numerically stable (finite, no warning, for logits of 1e4)."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def scaled_dot_product_attention(
    Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Attention of Q (..., L, d_k) over K (..., S, d_k) and V (..., S, d_v), NumPy only.

    `mask` (bool, True = may attend) broadcasts to (..., L, S).
    Returns (output (..., L, d_v), weights (..., L, S)).
    """
    d_k = Q.shape[-1]
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return np.matmul(weights, V), weights


def max_abs_diff_vs_torch(
    Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: np.ndarray | None = None
) -> float:
    """Largest absolute difference between our attention output and PyTorch's
    F.scaled_dot_product_attention on the same inputs (and mask)."""
    ours, _ = scaled_dot_product_attention(Q, K, V, mask)
    attn_mask = None if mask is None else torch.from_numpy(np.asarray(mask, dtype=bool))
    theirs = F.scaled_dot_product_attention(
        torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V), attn_mask=attn_mask
    )
    return float(np.max(np.abs(ours - theirs.numpy())))


def score_variance(d_k: int, n_samples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Sample variance of q·k and of q·k / sqrt(d_k) for q, k ~ N(0, I_{d_k}).

    Expected: about (d_k, 1).
    """
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=1)
    return float(np.var(dots)), float(np.var(dots / np.sqrt(d_k)))
