"""Hidden checks of ex1_numpy_attention (8 points)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autograder._reference import ex1_numpy_attention as ref
from autograder.authoring import (
    StudentError,
    as_array,
    call_checked,
    check,
    close,
    distinct_sizes,
    distinguish,
    ensure,
    expect_close,
    expect_shape,
    expect_tuple,
    fail,
    functions_using,
    is_real,
    matching_mistake,
    random_bool_mask,
    within,
)

pytestmark = pytest.mark.ex1
SDPA = "scaled_dot_product_attention"


def qkv_arrays(submission, *args, **kwargs) -> list[np.ndarray]:
    value = expect_tuple(submission.call("make_qkv", *args, **kwargs), 3, "make_qkv")
    return [
        as_array(matrix, f"make_qkv's {name}", allow=("ndarray",))
        for name, matrix in zip("QKV", value, strict=True)
    ]


@check(
    points=0.5,
    grade_id="check_make_qkv",
    requires=("test_make_qkv_seeded_standard_normal",),
)
def test_make_qkv_shapes_and_dtype(submission, rng, seed):
    seq_len, d_k = distinct_sizes(rng, 2, 2, 20)
    for name, matrix in zip(
        "QKV", qkv_arrays(submission, seq_len=seq_len, d_k=d_k, seed=seed), strict=True
    ):
        expect_shape(matrix, (seq_len, d_k), f"{name} from make_qkv(seq_len={seq_len}, d_k={d_k})")
        ensure(matrix.dtype == np.float64, f"{name} should be float64, got {matrix.dtype}")


@check(points=0.5, grade_id="check_make_qkv")
def test_make_qkv_seeded_standard_normal(submission, mistakes, seed):
    first = qkv_arrays(submission, seq_len=120, d_k=50, seed=seed)
    again = qkv_arrays(submission, seq_len=120, d_k=50, seed=seed)
    other = qkv_arrays(submission, seq_len=120, d_k=50, seed=seed + 1)
    ensure(
        all(np.array_equal(a, b) for a, b in zip(first, again, strict=True)),
        "make_qkv should return the same matrices for the same seed",
        mistake=mistakes["qkv_ignores_seed"],
    )
    ensure(
        not np.array_equal(first[0], other[0]),
        "make_qkv should return different matrices for different seeds",
    )
    ensure(
        not (np.array_equal(first[0], first[1]) or np.array_equal(first[1], first[2])),
        "Q, K and V should be three different matrices",
        mistake=mistakes["identical_qkv"],
    )
    values = np.concatenate([matrix.ravel() for matrix in first])
    ensure(
        abs(values.mean()) < 0.05 and abs(values.std() - 1) < 0.05,
        f"entries should be standard normal (mean 0, std 1); got mean {values.mean():.3f}, "
        f"std {values.std():.3f}",
        mistake=mistakes["uniform_not_normal"] if values.min() >= 0 else None,
    )


@check(points=0.5, grade_id="check_softmax")
def test_softmax_matches_reference(submission, mistakes, rng):
    logits = rng.normal(scale=3.0, size=tuple(distinct_sizes(rng, 3, 2, 8)))
    for axis in (-1, 1, 0):
        answer = call_checked(submission, mistakes, "softmax", logits, axis=axis)
        observed = as_array(answer.value, f"softmax(x, axis={axis})", allow=("ndarray",))
        expect_close(
            observed,
            ref.softmax(logits, axis=axis),
            f"softmax(x, axis={axis})",
            atol=1e-10,
            rtol=1e-8,
            mistakes=answer.candidates,
        )
    # "softmax must not modify its input": x as it is in the notebook after the call
    function = submission.module_getattr("softmax")
    _, after = submission.probe("inputs_after", function, [logits], {"axis": 1})
    ensure(
        isinstance(after, list) and len(after) == 1 and np.array_equal(after[0], logits),
        "softmax(x, axis=1) changed x: it should return a new array and leave x as it was",
        mistake=mistakes["softmax_in_place"],
    )


@check(
    points=1.0,
    grade_id="check_softmax",
    requires=("test_softmax_matches_reference",),
)
def test_softmax_stable_for_large_logits(submission, mistakes, rng):
    """Two inputs of magnitude 1e4: rows sharing one maximum (only a softmax that never
    subtracts a maximum overflows there), then rows whose maxima lie thousands apart (a softmax
    that subtracts the whole array's maximum underflows to 0/0 in the lower rows)."""
    logits = rng.normal(scale=1e4, size=(4, 6))
    logits[0] = [1e4, -1e4, 0.0, 5e3, 1e4 - 1, -5e3]
    logits[1] -= logits[1].max() + 5e3  # its maximum, -5e3, is 1.5e4 or more below row 0's
    shared_peak = logits - logits.max(axis=-1, keepdims=True) + 1e4
    for x, mistake in (
        (shared_peak, mistakes["unstable_softmax"]),
        (logits, mistakes["softmax_global_max"]),
    ):
        (value, warned) = submission.call_recording_warnings("softmax", x)
        observed = as_array(value, "softmax of large logits", allow=("ndarray",))
        ensure(
            observed.shape == x.shape and bool(np.all(np.isfinite(observed))),
            "softmax of logits of magnitude 1e4 should be finite",
            mistake=mistake,
        )
        ensure(
            not warned,
            f"softmax of large logits raised a warning: {warned[0]}" if warned else "",
            mistake=mistake,
        )
        expect_close(observed, ref.softmax(x), "softmax of large logits", atol=1e-10)


def expect_attention(answer, expected, what: str) -> None:
    """Compare (output, weights) with the reference, naming a matching mistake."""
    out, weights = expect_tuple(answer.value, 2, what)
    weights = as_array(weights, f"the weights of {what}")
    out = as_array(out, f"the output of {what}")
    expect_close(
        weights,
        expected[1],
        f"the weights of {what}",
        mistakes=answer.candidates,
        pick=lambda result: result[1],
    )
    expect_close(
        out,
        expected[0],
        f"the output of {what}",
        mistakes=answer.candidates,
        pick=lambda result: result[0],
    )


@check(points=0.75, grade_id="check_sdpa")
def test_sdpa_single_head_matches_reference(submission, mistakes, rng):
    L, S, d_k, d_v = distinct_sizes(rng, 4, 2, 12)
    while d_v == d_k * d_k:  # sqrt(d_v) would equal d_k: two scaling mistakes would look alike
        L, S, d_k, d_v = distinct_sizes(rng, 4, 2, 12)
    Q, K, V = rng.normal(size=(L, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    answer = call_checked(submission, mistakes, "scaled_dot_product_attention", Q, K, V)
    expect_attention(
        answer,
        ref.scaled_dot_product_attention(Q, K, V),
        f"attention with L={L}, S={S}, d_k={d_k}, d_v={d_v}",
    )


@check(points=0.75, grade_id="check_sdpa")
def test_sdpa_batched_inputs(submission, mistakes, rng):
    B, H, L, S, d_k, d_v = distinct_sizes(rng, 6, 2, 12)
    Q = rng.normal(size=(B, H, L, d_k))
    K, V = rng.normal(size=(B, H, S, d_k)), rng.normal(size=(B, H, S, d_v))
    answer = call_checked(submission, mistakes, "scaled_dot_product_attention", Q, K, V)
    expect_attention(
        answer,
        ref.scaled_dot_product_attention(Q, K, V),
        f"batched attention, Q of shape {Q.shape}",
    )


@check(points=0.75, grade_id="check_sdpa")
def test_sdpa_bool_mask_blocks_positions(submission, mistakes, rng):
    B, H, L, S, d_k, d_v = distinct_sizes(rng, 6, 2, 12)
    # Masks the contract allows: (L, S) with 3-D inputs, and 4-D masks that broadcast over the
    # heads (B, 1, L, S) or over the batch and the queries (1, H, 1, S) with 4-D inputs.
    for lead, mask_shape in (((B,), (L, S)), ((B, H), (B, 1, L, S)), ((B, H), (1, H, 1, S))):
        Q = rng.normal(size=(*lead, L, d_k))
        K, V = rng.normal(size=(*lead, S, d_k)), rng.normal(size=(*lead, S, d_v))
        mask = random_bool_mask(rng, mask_shape)
        what = f"attention with Q of shape {Q.shape} and a boolean mask of shape {mask_shape}"
        answer = call_checked(
            submission, mistakes, "scaled_dot_product_attention", Q, K, V, mask=mask
        )
        _, weights = expect_tuple(answer.value, 2, what)
        weights = as_array(weights, f"the weights of {what}")
        expected = ref.scaled_dot_product_attention(Q, K, V, mask)
        expect_shape(weights, expected[1].shape, f"the weights of {what}")
        blocked = ~np.broadcast_to(mask, weights.shape)
        if not np.all(weights[blocked] == 0):
            fail(
                f"positions where the mask is False should get weight exactly 0 ({what})",
                mistake=matching_mistake(weights, answer.candidates, lambda result: result[1]),
            )
        expect_attention(answer, expected, what)


@check(
    points=0.75,
    grade_id="check_sdpa",
    requires=("test_sdpa_single_head_matches_reference", "test_sdpa_batched_inputs"),
)
def test_sdpa_uses_numpy_only(submission, mistakes, rng):
    offenders = functions_using(
        [cell.source for cell in submission.program], "scaled_dot_product_attention", "torch"
    )
    ensure(
        not offenders,
        f"{', '.join(offenders)} use(s) PyTorch; use NumPy only here",
        mistake=mistakes["torch_inside_numpy"],
    )
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = random_bool_mask(rng, (3, 5))
    submission.call("scaled_dot_product_attention", Q, K, V)  # an unfilled stub says so
    function = submission.module_getattr("scaled_dot_product_attention")
    # The evidence: called with PyTorch out of reach (unimportable, every torch module it can
    # reach poisoned, every torch operation refused), it must still answer, having used none.
    try:
        value, used = expect_tuple(
            submission.probe("without_torch", function, Q, K, V, mask), 2, "without_torch"
        )
    except StudentError as error:
        imported = error.type == "ModuleNotFoundError" and "torch" in error.message
        refused = "out of reach" in error.message
        fail(
            f"scaled_dot_product_attention raised {error.type} when PyTorch was out of reach "
            f"({error.message[:160]}); use NumPy only here",
            mistake=mistakes["torch_dynamic_import"]
            if imported
            else (mistakes["torch_inside_numpy"] if refused else None),
        )
    ensure(
        not used,
        f"scaled_dot_product_attention used PyTorch ({', '.join(map(str, used))[:160]}) when "
        "it was out of reach; use NumPy only here",
        mistake=mistakes["torch_inside_numpy"],
    )
    out, weights = expect_tuple(value, 2, "scaled_dot_product_attention")
    for name, value in (("output", out), ("weights", weights)):
        as_array(value, f"the {name} of scaled_dot_product_attention", allow=("ndarray",))
    # Using none is not enough: with PyTorch out of reach it must still give its answer (a
    # function that answers otherwise then, or from answers PyTorch gave before, needs it).
    expected_out, expected_weights = ref.scaled_dot_product_attention(Q, K, V, mask)
    without = "scaled_dot_product_attention with PyTorch out of reach"
    # named PyTorch's only when it answers otherwise with PyTorch in reach (else it is wrong
    # either way, which the checks it requires charge)
    relies = (
        []
        if same_answers(submission.call(SDPA, Q, K, V, mask), (out, weights))
        else [(mistakes["torch_inside_numpy"], (out, weights))]
    )
    expect_close(
        as_array(weights, f"the weights of {without}"),
        expected_weights,
        f"the weights of {without}",
        mistakes=relies,
        pick=lambda result: result[1],
    )
    expect_close(
        as_array(out, f"the output of {without}"),
        expected_out,
        f"the output of {without}",
        mistakes=relies,
        pick=lambda result: result[0],
    )


def same_answers(first, second) -> bool:
    """Two (output, weights) answers of the notebook are the same numbers (the API's `close`
    at NumPy's default tolerances; the same infinities and NaNs agree)."""
    try:
        pairs = list(zip(first, second, strict=True))
    except (TypeError, ValueError):
        return False
    return all(close(a, b, atol=1e-8, rtol=1e-5, allow_inf=True, same_nan=True) for a, b in pairs)


def torch_attention(Q, K, V, mask=None) -> np.ndarray:
    attn_mask = None if mask is None else torch.from_numpy(mask)
    return F.scaled_dot_product_attention(
        torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V), attn_mask=attn_mask
    ).numpy()


@check(
    points=0.5,
    grade_id="check_vs_torch",
    requires=("test_max_abs_diff_compares_with_torch",),
)
def test_max_abs_diff_matches_its_definition(submission, rng):
    """The reported number is max |student's attention output - PyTorch's| (whatever the
    student's attention computes: its correctness is checked by the check_sdpa checks)."""
    L, S, d_k, d_v = distinct_sizes(rng, 4, 2, 12)
    Q, K, V = rng.normal(size=(L, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    mask = random_bool_mask(rng, (L, S))
    for kwargs in ({}, {"mask": mask}):
        value = submission.call("max_abs_diff_vs_torch", Q, K, V, **kwargs)
        ensure(
            isinstance(value, float) and not isinstance(value, bool),
            f"max_abs_diff_vs_torch should return a float, got {type(value).__name__}",
        )
        out, _ = expect_tuple(
            submission.call("scaled_dot_product_attention", Q, K, V, **kwargs),
            2,
            "scaled_dot_product_attention",
        )
        ours = as_array(out, "the output of scaled_dot_product_attention")
        expected = float(np.max(np.abs(ours - torch_attention(Q, K, V, kwargs.get("mask")))))
        shown, wanted = distinguish(float(value), expected)
        ensure(
            within(value, expected, 1e-9 + 1e-6 * expected),
            f"max_abs_diff_vs_torch returned {shown}, but your attention differs from "
            f"PyTorch's by {wanted} on these inputs (Q {Q.shape}, K {K.shape}, V {V.shape}"
            f"{', mask ' + str(mask.shape) if kwargs else ''})",
        )


@check(points=0.5, grade_id="check_vs_torch")
def test_max_abs_diff_compares_with_torch(submission, mistakes, rng):
    """Swap the student's attention for a stub with a known output: the reported difference
    must then be exactly the distance between that output and PyTorch's."""
    L, S, d_k, d_v = distinct_sizes(rng, 4, 2, 12)
    Q, K, V = rng.normal(size=(L, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    mask = random_bool_mask(rng, (L, S))
    torch_out = torch_attention(Q, K, V, mask)
    # the largest |difference| is negative, so a difference without abs() always shows
    noise = rng.normal(size=(L, d_v))
    noise = -noise if noise.flat[np.argmax(np.abs(noise))] > 0 else noise
    fake_out = torch_out + noise
    stub = submission.probe("returns", (fake_out, np.full((L, S), 1.0 / S)))
    original = submission.module_getattr("scaled_dot_product_attention")
    submission.module_setattr("scaled_dot_product_attention", stub)
    try:
        value = submission.call("max_abs_diff_vs_torch", Q, K, V, mask=mask)
    finally:
        submission.module_setattr("scaled_dot_product_attention", original)
    expected = float(np.max(np.abs(fake_out - torch_out)))
    ensure(is_real(value), f"expected a float, got {type(value).__name__}")
    if not within(value, expected, 1e-9):
        signed = float(np.max(fake_out - torch_out))
        unmasked = float(np.max(np.abs(fake_out - torch_attention(Q, K, V, None))))
        named = (
            mistakes["diff_without_abs"]
            if within(value, signed, 1e-9)
            else mistakes["diff_ignores_mask"]
            if within(value, unmasked, 1e-9)
            else (mistakes["diff_hardcoded"] if value == 0 else None)
        )
        fail(
            "max_abs_diff_vs_torch should compare scaled_dot_product_attention's output with "
            f"F.scaled_dot_product_attention on the same inputs and mask (expected "
            f"{distinguish(float(value), expected)[1]} for an attention returning a known "
            f"output, got {distinguish(float(value), expected)[0]})",
            mistake=named,
        )


@check(
    points=0.75,
    grade_id="check_score_variance",
    requires=("test_score_variance_uses_its_arguments",),
)
def test_score_variance_close_to_d_k_and_one(submission, mistakes, rng, seed):
    for d_k in (int(rng.integers(3, 9)), int(rng.integers(30, 90))):
        answer = call_checked(
            submission, mistakes, "score_variance", d_k, n_samples=20_000, seed=seed
        )
        raw, scaled = expect_tuple(answer.value, 2, "score_variance")
        ensure(
            all(isinstance(v, float | int) for v in (raw, scaled)),
            "score_variance should return two floats",
        )
        ensure(
            abs(raw - d_k) <= 0.1 * d_k,
            f"the variance of q·k for d_k={d_k} should be within 10% of {d_k}, got {raw:.4g}",
        )
        named = mistakes["variance_scaled_by_d_k"] if abs(scaled - 1 / d_k) < 0.1 / d_k else None
        ensure(
            abs(scaled - 1) <= 0.1,
            f"the variance of q·k/sqrt(d_k) for d_k={d_k} should be "
            f"within 10% of 1, got {scaled:.4g}",
            mistake=named,
        )


@check(
    points=0.75,
    grade_id="check_score_variance",
    requires=("test_score_variance_close_to_d_k_and_one",),
)
def test_score_variance_uses_its_arguments(submission, mistakes, seed):
    first = expect_tuple(
        submission.call("score_variance", 12, n_samples=5_000, seed=seed), 2, "score_variance"
    )
    again = submission.call("score_variance", 12, n_samples=5_000, seed=seed)
    other = submission.call("score_variance", 12, n_samples=5_000, seed=seed + 7)
    ignores_seed = mistakes["variance_ignores_seed"]
    ensure(
        tuple(again) == tuple(first),
        "score_variance should give the same numbers for the same seed",
        mistake=ignores_seed,
    )
    ensure(
        tuple(other) != tuple(first),
        "score_variance should give different numbers for different seeds",
        mistake=ignores_seed,
    )
    wide = submission.call("score_variance", 48, n_samples=5_000, seed=seed)
    ensure(
        abs(wide[0] - 48) <= 4.8,
        f"the variance of q·k for d_k=48 should be near 48, got {wide[0]:.4g}",
    )
    expect_sampling_spread(submission, mistakes, seed)


# The spread over seeds of a variance estimated from n samples of q·k (q, k ~ N(0, I_d)):
# sd = sqrt((E[x^4] - d^2) / n) with E[x^4] = 3d^2 + 6d. Over 20 seeds the reference's observed
# sd / theory stayed in 0.49 .. 1.64 in 2,000 trials (an E[x^2] estimator: 0.50 .. 1.55).
SPREAD_D_K, SPREAD_N, SPREAD_SEEDS, SPREAD_RANGE = 10, 100, 20, (0.3, 3.0)


def expect_sampling_spread(submission, mistakes, seed: int) -> None:
    """The numbers come from n_samples random draws: a value made up to sit near d_k (with or
    without a seeded wobble) does not shrink and grow with n_samples as an estimate does."""
    d, n = SPREAD_D_K, SPREAD_N
    values = [
        float(submission.call("score_variance", d, n_samples=n, seed=seed + 101 + j)[0])
        for j in range(SPREAD_SEEDS)
    ]
    theory = math.sqrt((2 * d * d + 6 * d) / n)
    ratio = float(np.std(values, ddof=1)) / theory
    low, high = SPREAD_RANGE
    ensure(
        math.isfinite(ratio) and low <= ratio <= high,
        f"score_variance({d}, n_samples={n}) over {SPREAD_SEEDS} seeds varied by "
        f"{ratio * theory:.3g} (standard deviation); a variance estimated from {n} samples of "
        f"q·k varies by about {theory:.3g}: the numbers should come from n_samples random "
        "draws",
        mistake=mistakes["variance_not_sampled"] if ratio < low else None,
    )
    expect_never_negative(submission, mistakes, seed)


# From 3 samples an estimate varies by about its own size: a value made up as d_k plus a normal
# wobble of that spread is negative for about one seed in seven (all 60 positive: p < 0.0002),
# while a variance computed from samples (np.var, ddof 0 or 1, or the mean of squares) never is.
TINY_N, TINY_SEEDS = 3, 60


def expect_never_negative(submission, mistakes, seed: int) -> None:
    d = SPREAD_D_K
    for at in range(seed + 301, seed + 301 + TINY_SEEDS):
        raw = float(submission.call("score_variance", d, n_samples=TINY_N, seed=at)[0])
        ensure(
            math.isfinite(raw) and raw >= 0,
            f"score_variance({d}, n_samples={TINY_N}, seed={at}) gave {raw:.4g}: a "
            f"variance estimated from {TINY_N} samples of q·k is never negative; the numbers "
            "should come from n_samples random draws",
            mistake=mistakes["variance_not_sampled"],
        )
