"""Named mistakes of ex1_numpy_attention (each a wrong version of a contract function)."""
# ruff: noqa: F811 - every mistake redefines the function it replaces

import numpy as np
import torch
import torch.nn.functional as F

from autograder._reference.ex1_numpy_attention import softmax
from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex1_numpy_attention")


@CATALOGUE.mistake(
    "uniform_not_normal",
    "Q, K, V were drawn from a uniform distribution instead of the standard normal",
    check="test_make_qkv_seeded_standard_normal",
)
def make_qkv(seq_len=4, d_k=8, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.random((seq_len, d_k)) for _ in range(3))


@CATALOGUE.mistake(
    "identical_qkv",
    "Q, K and V are the same matrix (the generator was re-seeded for each one)",
    check="test_make_qkv_seeded_standard_normal",
)
def make_qkv(seq_len=4, d_k=8, seed=0):
    return tuple(np.random.default_rng(seed).standard_normal((seq_len, d_k)) for _ in range(3))


@CATALOGUE.mistake(
    "unstable_softmax",
    "the softmax overflows for large logits: subtract the maximum before np.exp",
    check="test_softmax_stable_for_large_logits",
)
def softmax(x, axis=-1):
    exps = np.exp(x)
    return exps / np.sum(exps, axis=axis, keepdims=True)


@CATALOGUE.mistake(
    "softmax_global_max",
    "the softmax subtracts the maximum of the whole array, not of each slice along `axis`: a "
    "slice whose own maximum lies far below it underflows to 0/0",
    check="test_softmax_stable_for_large_logits",
)
def softmax(x, axis=-1):
    exps = np.exp(x - np.max(x))
    return exps / np.sum(exps, axis=axis, keepdims=True)


@CATALOGUE.mistake(
    "softmax_ignores_axis",
    "the softmax always normalises the last axis and ignores `axis`",
    check="test_softmax_matches_reference",
)
def softmax(x, axis=-1):
    exps = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exps / np.sum(exps, axis=-1, keepdims=True)


@CATALOGUE.mistake(
    "softmax_global_sum",
    "the softmax divides by the sum of the whole array, not of each slice along `axis`",
    check="test_softmax_matches_reference",
)
def softmax(x, axis=-1):
    exps = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exps / np.sum(exps)


@CATALOGUE.mistake(
    "no_sqrt_scaling",
    "the scores were not divided by sqrt(d_k)",
    check="test_sdpa_single_head_matches_reference",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "divided_by_d_k",
    "the scores were divided by d_k instead of sqrt(d_k)",
    check="test_sdpa_single_head_matches_reference",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "softmax_over_queries",
    "the softmax ran over the queries (axis -2) instead of the keys (the last axis)",
    check="test_sdpa_single_head_matches_reference",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-2)
    return weights @ V, weights


@CATALOGUE.mistake(
    "transpose_all_axes",
    "K.T reverses every axis of a batched array; swap only the last two (np.swapaxes(K, -1, -2))",
    check="test_sdpa_batched_inputs",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "mask_polarity_reversed",
    "the mask was applied the wrong way round: True means 'may attend'",
    check="test_sdpa_bool_mask_blocks_positions",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "masked_fill_zero",
    "blocked scores were set to 0 instead of -inf, so blocked positions still get weight",
    check="test_sdpa_bool_mask_blocks_positions",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, 0.0)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "mask_after_softmax",
    "the mask was applied after the softmax, so the remaining weights no longer sum to 1",
    check="test_sdpa_bool_mask_blocks_positions",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = softmax(scores, axis=-1)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
    return weights @ V, weights


@CATALOGUE.mistake(
    "torch_inside_numpy",
    "scaled_dot_product_attention uses PyTorch; this exercise asks for NumPy only",
    check="test_sdpa_uses_numpy_only",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    q, k, v = torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V)
    scores = q @ k.transpose(-2, -1) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~torch.from_numpy(np.asarray(mask)), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).numpy(), weights.numpy()


@CATALOGUE.mistake(
    "diff_hardcoded",
    "max_abs_diff_vs_torch does not really compare with PyTorch",
    check="test_max_abs_diff_compares_with_torch",
)
def max_abs_diff_vs_torch(Q, K, V, mask=None):
    return 0.0


@CATALOGUE.mistake(
    "diff_without_abs",
    "the difference was not taken in absolute value",
    check="test_max_abs_diff_compares_with_torch",
)
def max_abs_diff_vs_torch(Q, K, V, mask=None):
    ours, _ = scaled_dot_product_attention(Q, K, V, mask)
    attn_mask = None if mask is None else torch.from_numpy(np.asarray(mask, dtype=bool))
    theirs = F.scaled_dot_product_attention(
        torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V), attn_mask=attn_mask
    )
    return float(np.max(ours - theirs.numpy()))


@CATALOGUE.mistake(
    "variance_scaled_by_d_k",
    "the scaled scores were divided by d_k, not sqrt(d_k), so their variance is about 1/d_k",
    check="test_score_variance_close_to_d_k_and_one",
)
def score_variance(d_k, n_samples=10_000, seed=0):
    rng = np.random.default_rng(seed)
    dots = np.sum(rng.standard_normal((n_samples, d_k)) * rng.standard_normal((n_samples, d_k)), 1)
    return float(np.var(dots)), float(np.var(dots / d_k))


@CATALOGUE.mistake(
    "variance_ignores_seed",
    "score_variance ignores its seed (same seed must give the same numbers, another seed others)",
    check="test_score_variance_uses_its_arguments",
)
def score_variance(d_k, n_samples=10_000, seed=0):
    q = np.random.standard_normal((n_samples, d_k))
    k = np.random.standard_normal((n_samples, d_k))
    dots = np.sum(q * k, axis=1)
    return float(np.var(dots)), float(np.var(dots / np.sqrt(d_k)))


@CATALOGUE.mistake(
    "variance_not_sampled",
    "score_variance's numbers do not come from n_samples random draws (made up near d_k and "
    "1, or always the same number of samples): they do not vary with the seed as an estimate "
    "from n_samples draws does",
    check="test_score_variance_uses_its_arguments",
)
def score_variance(d_k, n_samples=10_000, seed=0):
    wobble = np.random.default_rng(seed).normal(scale=1e-3)
    return float(d_k) * (1 + wobble), 1.0 + wobble


@CATALOGUE.mistake(
    "scaled_by_sqrt_d_v",
    "the scores were divided by sqrt(d_v) (the size of V's rows) instead of sqrt(d_k)",
    check="test_sdpa_single_head_matches_reference",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(V.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "mask_boolean_index",
    "the mask was applied by indexing the scores with ~mask, which works only for a mask of "
    "shape (L, S) or of the scores' full shape; use np.where(mask, scores, -np.inf), which "
    "broadcasts masks such as (B, 1, L, S) or (1, H, 1, S)",
    check="test_sdpa_bool_mask_blocks_positions",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores[..., ~mask] = -np.inf
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


@CATALOGUE.mistake(
    "torch_dynamic_import",
    "PyTorch was imported inside the function by another spelling; this function must use "
    "NumPy only",
    check="test_sdpa_uses_numpy_only",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    backend = __import__("importlib").import_module("to" + "rch")
    q, k, v = (backend.from_numpy(np.asarray(a)) for a in (Q, K, V))
    scores = q @ k.transpose(-2, -1) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~backend.from_numpy(np.asarray(mask)), float("-inf"))
    weights = backend.softmax(scores, dim=-1)
    return (weights @ v).numpy(), weights.numpy()


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "qkv_ignores_seed",
    "make_qkv ignores its seed: it draws from NumPy's global generator, so the same seed gives "
    "other matrices (use np.random.default_rng(seed))",
    check="test_make_qkv_seeded_standard_normal",
)
def make_qkv(seq_len=4, d_k=8, seed=0):
    return tuple(np.random.standard_normal((seq_len, d_k)) for _ in range(3))


@CATALOGUE.mistake(
    "softmax_in_place",
    "softmax changed its input in place (x -= x.max(...)): it must leave x as it was",
    check="test_softmax_matches_reference",
)
def softmax(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= np.sum(x, axis=axis, keepdims=True)
    return x


@CATALOGUE.mistake(
    "sdpa_ignores_mask",
    "scaled_dot_product_attention ignores its mask: blocked positions still get weight",
    check="test_sdpa_bool_mask_blocks_positions",
)
def scaled_dot_product_attention(Q, K, V, mask=None):
    weights = softmax(np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1]), axis=-1)
    return np.matmul(weights, V), weights


@CATALOGUE.mistake(
    "diff_ignores_mask",
    "max_abs_diff_vs_torch ignores its mask: both attentions get the same mask",
    check="test_max_abs_diff_compares_with_torch",
)
def max_abs_diff_vs_torch(Q, K, V, mask=None):
    ours, _ = scaled_dot_product_attention(Q, K, V, mask)
    theirs = F.scaled_dot_product_attention(
        torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V)
    )
    return float(np.max(np.abs(ours - theirs.numpy())))
