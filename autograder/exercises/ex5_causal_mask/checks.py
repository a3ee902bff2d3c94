"""Hidden checks of ex5_causal_mask (8 points)."""

import itertools
import math

import numpy as np
import pytest
import torch

from autograder._reference import ex5_causal_mask as ref
from autograder.authoring import (
    Handle,
    StudentError,
    as_array,
    call_checked,
    call_evaluating,
    check,
    close,
    distinct_sizes,
    distinguish,
    ensure,
    expect_batches,
    expect_close,
    expect_evaluated,
    expect_rows_sum_to_one,
    expect_shape,
    expect_tuple,
    expect_weights_changed,
    fail,
    is_real,
    matching_mistake,
    on_the_contracts,
    random_bool_mask,
    trainable_parameters,
    trained_in_batches,
    weights_of,
)

pytestmark = pytest.mark.ex5

# Attention in float32 (as a student may compute it) against the reference: loose enough for
# float32 rounding, far tighter than any catalogued mistake.
ATOL, RTOL = 1e-5, 1e-4
# A causal model's early logits do not change at all when later tokens change (the reference
# gives exactly 0); 1e-5 leaves room for float32 reductions of another order.
CAUSAL_ATOL = 1e-5
TRAIN_TIMEOUT = 120.0

# Learning check: budget and threshold. Calibration (reference/, 1 thread per child): n_points
# 600, context 20, epochs 4, batch 32, lr 3e-3, default CausalTransformer -> 502 training and 58
# held-out windows. Held-out exact-bin accuracy: reference 0.919-0.936 (seeds 0-9); an
# independent implementation (own blocks, post-norm, sinusoidal positions, AdamW) 0.899-0.922;
# torch-default encoder layers 0.934-0.940; no positional encoding 0.888-0.933. Baselines:
# majority bin 0.07; the best guess from the current token alone 0.55; a model trained to copy
# its input (mistake trained_on_inputs) 0.12. Threshold 0.75: far above any model that ignores
# the context, far below every correct implementation measured. Under 5 s per run.
LEARN = {"n_points": 600, "context_len": 20, "epochs": 4, "batch_size": 32, "lr": 3e-3}
MIN_HELD_OUT_ACCURACY = 0.75


def float_mask(keep: np.ndarray) -> np.ndarray:
    """The additive float64 mask of a boolean keep-mask: 0.0 = may attend, -inf = blocked."""
    return np.where(keep, 0.0, -np.inf)


# -- one fault charged once ------------------------------------------------------------------------
def wrong_float_mask(submission) -> bool:
    """Whether the notebook's causal_mask raises, or returns a float tensor of other values
    than the contract's, for a few lengths."""
    for seq_len in (1, 2, 7):
        try:
            mask = submission.call("causal_mask", seq_len)
        except StudentError:
            return True
        if not isinstance(mask, torch.Tensor) or not mask.is_floating_point():
            return False
        if not close(mask, ref.causal_mask(seq_len), atol=0, rtol=0, allow_inf=True):
            return True
    return False


# The checks of a model built on causal_mask (CausalTransformer, train_lm, next_token_accuracy)
# run on the contract's causal_mask where the notebook's is a wrong float mask or raises: a fault
# of causal_mask is charged to its own checks, not again to a model that calls it (an independent
# review found a mask of NaN, ones * -inf, charged 3.75 points more there). A mask of another
# dtype (bool, say) may be what the notebook's own model is written for: it stays, and is
# charged to causal_mask's dtype check.
on_the_contracts_mask = on_the_contracts("causal_mask", ref.causal_mask, wrong_float_mask)


# -- causal_mask -------------------------------------------------------------------------------
@check(
    points=0.25,
    grade_id="check_causal_mask",
    requires=("test_causal_mask_values",),
)
def test_causal_mask_shape_and_dtype(submission, mistakes, rng):
    for seq_len in distinct_sizes(rng, 3, 2, 16):
        what = f"causal_mask({seq_len})"
        answer = call_checked(submission, mistakes, "causal_mask", seq_len)
        mask = as_array(answer.value, what, allow=("tensor",))
        ensure(
            answer.value.is_floating_point(),
            f"{what} should be a float tensor (an additive mask of 0.0 and -inf), got dtype "
            f"{answer.value.dtype}",
            mistake=matching_mistake(mask, answer.candidates, atol=0, rtol=0),
        )
        expect_shape(mask, (seq_len, seq_len), what)
        ensure(
            answer.value.dtype == torch.float32,
            f"{what} should be torch.float32 (the dtype of the scores it is added to), got "
            f"{answer.value.dtype}",
            mistake=mistakes["causal_mask_float64"]
            if answer.value.dtype == torch.float64
            else None,
        )


@check(points=0.75, grade_id="check_causal_mask")
def test_causal_mask_values(submission, mistakes, rng):
    for seq_len in (1, *distinct_sizes(rng, 3, 2, 20)):
        answer = call_checked(submission, mistakes, "causal_mask", seq_len)
        what = f"causal_mask({seq_len}) (0.0 where key j <= query i, -inf where j > i)"
        mask = as_array(answer.value, f"causal_mask({seq_len})", allow=("tensor",))
        expected = ref.causal_mask(seq_len).numpy()
        expect_close(
            mask, expected, what, atol=0, rtol=0, mistakes=answer.candidates, allow_inf=True
        )


# -- masked_attention --------------------------------------------------------------------------
def attention_inputs(rng, dtype: torch.dtype, heads: bool = True):
    """Q (B, [H,] L, d), K (B, [H,] S, d), V (B, [H,] S, d_v), all sizes different."""
    batch, n_heads, length, keys, d, d_v = distinct_sizes(rng, 6, 2, 11)
    lead = (batch, n_heads) if heads else (batch,)
    tensors = [
        torch.from_numpy(rng.normal(size=(*lead, rows, cols))).to(dtype)
        for rows, cols in ((length, d), (keys, d), (keys, d_v))
    ]
    return (*tensors, (batch, n_heads, length, keys))


def expect_attention(answer, expected, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(output, weights) as tensors, then compared with the reference, weights first."""
    output, weights = expect_tuple(answer.value, 2, what)
    arrays = (
        as_array(output, f"the output of {what}", allow=("tensor",)),
        as_array(weights, f"the weights of {what}", allow=("tensor",)),
    )
    for index, name in ((1, "weights"), (0, "output")):
        expect_close(
            arrays[index],
            expected[index].numpy(),
            f"the {name} of {what}",
            atol=ATOL,
            rtol=RTOL,
            mistakes=answer.candidates,
            pick=lambda result, index=index: result[index],
        )
    return arrays


@check(points=0.75, grade_id="check_masked_attention")
def test_masked_attention_matches_reference(submission, mistakes, rng):
    for dtype, heads in ((torch.float64, True), (torch.float32, False)):
        Q, K, V, _ = attention_inputs(rng, dtype, heads)
        answer = call_checked(submission, mistakes, "masked_attention", Q, K, V)
        what = (
            f"masked_attention without a mask (Q {tuple(Q.shape)}, K {tuple(K.shape)}, "
            f"V {tuple(V.shape)}, {str(dtype).removeprefix('torch.')})"
        )
        expect_attention(answer, ref.masked_attention(Q, K, V), what)


@check(points=0.75, grade_id="check_masked_attention")
def test_masked_attention_float_mask_blocks_positions(submission, mistakes, rng):
    Q, K, V, (batch, n_heads, length, keys) = attention_inputs(rng, torch.float64)
    for shape in ((length, keys), (batch, 1, length, keys)):
        keep = random_bool_mask(rng, shape)
        mask = torch.from_numpy(float_mask(keep))
        what = f"masked_attention with a float mask of shape {shape} (Q {tuple(Q.shape)})"
        answer = call_checked(submission, mistakes, "masked_attention", Q, K, V, mask=mask)
        expected = ref.masked_attention(Q, K, V, mask)
        _, weights = expect_tuple(answer.value, 2, what)
        weights = as_array(weights, f"the weights of {what}", allow=("tensor",))
        expect_shape(weights, (batch, n_heads, length, keys), f"the weights of {what}")
        blocked = np.broadcast_to(~keep, weights.shape)
        leaked = blocked & ~(weights == 0)  # NaN counts as not 0
        if leaked.any():
            fail(
                f"where the mask is -inf the weights should be exactly 0 ({what}); "
                f"{int(leaked.sum())} of {int(blocked.sum())} blocked weights are not",
                mistake=matching_mistake(weights, answer.candidates, lambda r: r[1], atol=ATOL),
            )
        expect_rows_sum_to_one(
            weights,
            f"the weights of {what}",
            mistake=matching_mistake(weights, answer.candidates, lambda r: r[1], atol=ATOL),
        )
        expect_attention(answer, expected, what)


# -- discretize_sine ---------------------------------------------------------------------------
def near_bin_edge(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Where v lies within 1e-9 of an edge -1 + 2k/n_bins (there, ±1 bin is accepted)."""
    edges = -1 + 2 * np.arange(n_bins + 1) / n_bins
    return np.min(np.abs(values[:, None] - edges[None, :]), axis=1) <= 1e-9


def float32_bins(n_points: int, n_bins: int, period: float) -> list[np.ndarray]:
    """The bins as two common float32 computations give them (torch's default dtype, and
    NumPy in float32 throughout)."""
    t = torch.arange(n_points, dtype=torch.float32)
    v_torch = torch.sin(2 * math.pi * t / period).numpy()
    t32 = np.arange(n_points, dtype=np.float32)
    v_numpy = np.sin(np.float32(2 * np.pi) * t32 / np.float32(period))
    return [
        np.minimum(np.floor((v + np.float32(1)) / np.float32(2) * n_bins), n_bins - 1)
        for v in (v_torch, v_numpy)
    ]


def float32_parting_case(rng) -> dict:
    """A long input with an irrational period and many bins where float32 rounding puts some
    v across a bin edge (further than the 1e-9 the check forgives) in both float32 recipes:
    the contract says float64, and only such inputs tell the two apart."""
    for _ in range(200):
        n_bins = int(rng.choice([64, 100, 128, 200]))
        period = float(rng.uniform(20.0, 90.0) * math.sqrt(2))
        n_points = int(rng.integers(2500, 4000))
        values = np.sin(2 * np.pi * np.arange(n_points, dtype=np.float64) / period)
        expected = ref.discretize_sine(n_points, n_bins=n_bins, period=period).numpy()
        forgiven = near_bin_edge(values, n_bins)
        if all(
            ((bins != expected) & ~forgiven).any()
            for bins in float32_bins(n_points, n_bins, period)
        ):
            return {"n_points": n_points, "n_bins": n_bins, "period": period}
    raise AssertionError("no input where float32 and float64 part was found")  # never seen


def near_float32_edge(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Where v lies within float32 rounding (1e-5) of an inner bin edge."""
    edges = -1 + 2 * np.arange(1, n_bins) / n_bins
    return np.min(np.abs(values[:, None] - edges[None, :]), axis=1) <= 1e-5


@check(points=0.75, grade_id="check_discretize_sine")
def test_discretize_sine_bins(submission, mistakes, rng):
    cases = [
        {},  # the default 50 bins, period 50
        # a period divisible by 4: the peaks v = 1 and v = -1 are hit
        {"n_bins": int(rng.choice([7, 12, 16, 33])), "period": float(rng.choice([20, 36, 44]))},
        {"n_bins": int(rng.choice([9, 20, 25])), "period": float(rng.choice([17.5, 23.3, 61.7]))},
        float32_parting_case(rng),
    ]
    for kwargs in cases:
        kwargs = dict(kwargs)
        n_points = kwargs.pop("n_points", None) or int(rng.integers(110, 260))
        n_bins, period = kwargs.get("n_bins", 50), kwargs.get("period", 50.0)
        what = f"discretize_sine({n_points}, n_bins={n_bins}, period={period})"
        answer = call_checked(submission, mistakes, "discretize_sine", n_points, **kwargs)
        tokens = as_array(answer.value, what, allow=("tensor",))
        expect_shape(tokens, (n_points,), what)
        named = matching_mistake(tokens, answer.candidates, atol=0, rtol=0)
        ensure(
            tokens.size == 0 or (tokens.min() >= 0 and tokens.max() <= n_bins - 1),
            f"the bins of {what} should lie in 0..{n_bins - 1}; got values from "
            f"{tokens.min():g} to {tokens.max():g}",
            mistake=named,
        )
        values = np.sin(2 * np.pi * np.arange(n_points, dtype=np.float64) / period)
        expected = ref.discretize_sine(n_points, **kwargs).numpy()
        off = np.abs(tokens - expected)
        wrong = (off != 0) & ~(near_bin_edge(values, n_bins) & (off <= 1))
        if wrong.any():
            t = int(np.argmax(wrong))
            if named is None and near_float32_edge(values[wrong], n_bins).all():
                named = mistakes["discretize_in_float32"]
            fail(
                f"{what}: at t={t}, v = sin(2π·{t}/{period}) = {values[t]:.12f} lies in bin "
                f"floor((v + 1) / 2 · {n_bins}) = {expected[t]}, got {tokens[t]:g} "
                f"({int(wrong.sum())} of {n_points} tokens are wrong)",
                mistake=named,
            )
        ensure(
            answer.value.dtype == torch.int64,
            f"{what} should be an int64 tensor (torch.LongTensor), got {answer.value.dtype}",
        )


# -- make_windows and split_holdout ------------------------------------------------------------
def expect_tokens(answer, parts: tuple, expected: tuple, index: int, what: str) -> None:
    """parts[index] is an int64 tensor equal to expected[index]; name a mistake that returns
    the same."""
    expect_close(
        as_array(parts[index], what, allow=("tensor",)),
        expected[index].numpy(),
        what,
        atol=0,
        rtol=0,
        mistakes=answer.candidates,
        pick=lambda result: result[index],
    )
    dtype = parts[index].dtype
    ensure(dtype == torch.int64, f"{what} should hold int64 tokens, got {dtype}")


@check(points=0.5, grade_id="check_make_windows")
def test_make_windows_exact(submission, mistakes, rng):
    for extra in (int(rng.integers(25, 70)), 1):  # the second: exactly one window
        context_len = int(rng.integers(3, 12))
        tokens = torch.from_numpy(rng.integers(0, 40, size=context_len + extra))
        what = f"make_windows(tokens of length {len(tokens)}, context_len={context_len})"
        answer = call_checked(submission, mistakes, "make_windows", tokens, context_len)
        windows = expect_tuple(answer.value, 2, what)
        expected = ref.make_windows(tokens, context_len)
        for index, name in enumerate(("X", "Y")):
            expect_tokens(answer, windows, expected, index, f"{name} of {what}")


def split_case(rng, frac: float, context_len: int):
    """Windows of random tokens whose count N keeps frac·N away from an integer, so that
    ceil(frac·N) has one meaning whatever the rounding."""
    while True:
        n_windows = int(rng.integers(40, 130))
        if not near_integer(frac * n_windows):
            break
    tokens = torch.from_numpy(rng.integers(0, 30, size=n_windows + context_len))
    return ref.make_windows(tokens, context_len)


def near_integer(value: float) -> bool:
    return abs(value - round(value)) <= 1e-9


def fraction_for(rng, n_windows: int, choices: tuple[float, ...]) -> float:
    """One of `choices` whose product with n_windows is not an integer (the contract: checks
    never draw a holdout_frac and N whose product is within 1e-9 of one)."""
    allowed = [frac for frac in choices if not near_integer(frac * n_windows)]
    return float(rng.choice(allowed))


@check(points=0.75, grade_id="check_split_holdout")
def test_split_holdout_exact(submission, mistakes, rng):
    for frac in (None, float(rng.choice([0.15, 0.2, 0.25, 0.3]))):
        context_len = int(rng.integers(3, 10))
        X, Y = split_case(rng, 0.1 if frac is None else frac, context_len)
        judge_split(submission, mistakes, X, Y, frac)
    # the edges the contract allows (0 < holdout_frac < 1): one test window, and too few
    # windows to keep any training window apart from the test ones
    context_len = int(rng.integers(5, 10))
    X, Y = split_case(rng, 0.5, context_len)
    judge_split(submission, mistakes, X, Y, 0.5 / len(X))
    # (a negative gap between train and test must give no training window, not a slice from
    # the end: context_len >= 7 so that X[:gap] would not be empty)
    context_len = int(rng.integers(7, 12))
    tokens = torch.from_numpy(rng.integers(0, 30, size=2 * context_len - 2))
    X, Y = ref.make_windows(tokens, context_len)  # context_len - 2 windows
    judge_split(submission, mistakes, X, Y, fraction_for(rng, len(X), (0.3, 0.35)))
    tokens = torch.from_numpy(rng.integers(0, 30, size=2 * context_len + 3))
    X, Y = ref.make_windows(tokens, context_len)  # context_len + 3 windows, half of them test
    judge_split(submission, mistakes, X, Y, fraction_for(rng, len(X), (0.45, 0.5, 0.55)))


def judge_split(submission, mistakes, X, Y, frac: float | None) -> None:
    kwargs = {} if frac is None else {"holdout_frac": frac}
    if not (0 < (0.1 if frac is None else frac) < 1) or near_integer(
        (0.1 if frac is None else frac) * len(X)
    ):
        raise ValueError(f"holdout_frac={frac} on {len(X)} windows is outside the contract")
    n_test = math.ceil((0.1 if frac is None else frac) * len(X))
    what = (
        f"split_holdout on {len(X)} windows of length {X.shape[1]}"
        f"{'' if frac is None else f' with holdout_frac={frac:g}'} (test = the last "
        f"{n_test} windows; train = the earlier windows sharing no token position with them)"
    )
    answer = call_checked(submission, mistakes, "split_holdout", X, Y, **kwargs)
    parts = expect_tuple(answer.value, 4, "split_holdout")
    expected = ref.split_holdout(X, Y, **kwargs)
    for index in (2, 3, 0, 1):
        name = ("X_train", "Y_train", "X_test", "Y_test")[index]
        expect_tokens(answer, parts, expected, index, f"{name} of {what}")


# -- CausalTransformer -------------------------------------------------------------------------
def model_case(rng) -> tuple[int, int, dict]:
    """(batch, length, constructor arguments) with batch, length, vocab, d_model, heads all
    different."""
    n_heads = int(rng.choice([2, 4]))
    while True:
        batch, length = distinct_sizes(rng, 2, 3, 13)
        vocab, d_model = int(rng.integers(13, 40)), n_heads * int(rng.integers(3, 7))
        if len({batch, length, vocab, d_model, n_heads}) == 5:
            break
    config = {
        "vocab_size": vocab,
        "d_model": d_model,
        "n_layers": int(rng.choice([1, 3])),
        "n_heads": n_heads,
        "max_len": length + int(rng.integers(3, 40)),
    }
    return batch, length, config


def build_model(submission, seed: int, config: dict, mistakes=None) -> Handle:
    """A fresh CausalTransformer, built after seeding the child's global RNGs with `seed`.
    With `mistakes`, a model that cannot be built because its d_model does not divide into 4
    heads, when other heads were asked for, is named `n_heads_ignored`."""
    submission.seed(seed)
    try:
        model = submission.call("CausalTransformer", **config)
    except StudentError as error:
        heads = config.get("n_heads", 4)
        if mistakes is None or heads == 4 or "divisible" not in str(error):
            raise
        fail(
            f"CausalTransformer({shown_config(config)}) raised {error}: it should build "
            f"{heads} heads, as n_heads says",
            mistake=mistakes["n_heads_ignored"],
        )
    ensure(isinstance(model, Handle), "CausalTransformer(...) should build an nn.Module")
    return model


def built_and_perturbed(submission, seed: int, config: dict, mistakes=None) -> Handle:
    """A fresh CausalTransformer with every parameter moved by a little noise (the `perturbed`
    probe): an initialisation that hides a dependence (a residual gate or an output head
    initialised to zero, a correct choice) then shows it, and a structure that ignores
    something still ignores it."""
    return submission.probe("perturbed", build_model(submission, seed, config, mistakes))


def logits_of(model: Handle, x: np.ndarray, what: str) -> np.ndarray:
    logits = as_array(model(torch.from_numpy(x)), f"the output of {what}", allow=("tensor",))
    ensure(
        np.issubdtype(logits.dtype, np.floating) and bool(np.all(np.isfinite(logits))),
        f"the logits of {what} should be finite floats; got dtype {logits.dtype} with "
        f"{int(np.sum(~np.isfinite(logits))) if logits.dtype.kind == 'f' else 'no'} NaN/inf "
        "values",
    )
    return logits


def unused_weights(submission, model: Handle, x: torch.Tensor) -> list[str] | None:
    """The weight matrices of `model` that its output on x does not depend on (None when the
    probe cannot tell)."""
    reach = submission.probe("weights_reaching_the_output", model, x)
    if not isinstance(reach, dict):
        return None
    return sorted(str(name) for name, reached in reach.items() if not reached)


def shown_config(config: dict) -> str:
    return ", ".join(f"{key}={value}" for key, value in config.items())


@check(points=0.5, grade_id="check_causal_transformer")
@on_the_contracts_mask
def test_causal_transformer_output_shape(submission, mistakes, rng, seed):
    """The logits' shape for several configurations, and a model built as its arguments say:
    each layer adds the same number of parameters, and dropout=0.0 leaves a forward pass in
    training mode deterministic."""
    batch, length, config = model_case(rng)
    # longer than the default max_len of 128: the model must size its positions by max_len
    long = int(rng.integers(129, 161))
    longer = {**config, "n_layers": 1, "max_len": long + int(rng.integers(0, 20))}
    cases = ((config, batch, length), ({}, length, batch), (longer, 2, long))  # {}: vocab 50
    for kwargs, rows, steps in cases:
        what = f"CausalTransformer({', '.join(f'{k}={v}' for k, v in kwargs.items())})"
        vocab = kwargs.get("vocab_size", 50)
        model = built_and_perturbed(submission, seed, kwargs, mistakes)
        model.call("eval")
        x = rng.integers(0, vocab, size=(rows, steps))
        x[:, -1] = rng.permutation(vocab)[:rows]  # the last tokens differ
        try:
            logits = logits_of(model, x, f"{what} on x of shape {x.shape}")
        except StudentError as error:
            beyond = steps > 128 and error.type in ("IndexError", "RuntimeError")
            fail(
                f"{error} (x of shape {x.shape})"
                + (": positions should go up to max_len - 1, not 127" if beyond else ""),
                mistake=mistakes["max_len_ignored"] if beyond else None,
            )
        expect_shape(
            logits,
            (rows, steps, vocab),
            f"the logits of {what} on x of shape {x.shape}",
            mistake=mistakes["vocab_size_ignored"]
            if vocab != 50 and logits.shape == (rows, steps, 50)
            else None,
        )
        spread = float(np.max(np.ptp(logits[:, -1], axis=0)))
        ensure(
            spread > 1e-6,
            f"the logits of {what} at the last position are the same for all {rows} sequences "
            f"of x of shape {x.shape} (they differ by at most {spread:.3g}); they should "
            "depend on the tokens",
        )
    # d_model 10 with 2 heads: a model that hard-codes 4 heads cannot be built
    small = {"vocab_size": 13, "d_model": 10, "n_heads": 2, "max_len": 16}
    counts = [
        trainable_parameters(
            submission, build_model(submission, seed, {**small, "n_layers": k}, mistakes)
        )
        for k in (1, 2, 3)
    ]
    steps = [b - a for a, b in itertools.pairwise(counts) if a is not None and b is not None]
    ensure(
        len(steps) == 2 and steps[0] == steps[1] > 0,
        f"CausalTransformer({shown_config(small)}, n_layers=1, 2, 3) has {counts} trainable "
        "parameters: each layer should add the same number (n_layers layers)",
        mistake=mistakes["n_layers_ignored"],
    )
    # d_model is the model's width: another d_model, other parameter counts
    widths = [
        trainable_parameters(
            submission, build_model(submission, seed, {**small, "n_layers": 1, "d_model": width})
        )
        for width in (10, 14)
    ]
    ensure(
        None not in widths and widths[0] != widths[1],
        f"CausalTransformer({shown_config({**small, 'd_model': '10 or 14'})}, n_layers=1) has "
        f"{widths} trainable parameters: a model built with another d_model should have other "
        "layers (`d_model` made no difference)",
        mistake=mistakes["d_model_ignored"],
    )
    # every layer takes the previous one's output: no weight matrix that the logits do not
    # depend on comes with the extra layers (an unused module of the student's own is not
    # counted against them: it is there with one layer too)
    x = torch.from_numpy(rng.integers(0, 13, size=(2, 8)))
    unused = [
        unused_weights(
            submission, built_and_perturbed(submission, seed, {**small, "n_layers": k}), x
        )
        for k in (1, 3)
    ]
    ensure(
        unused[0] is not None and unused[1] is not None and len(unused[1]) == len(unused[0]),
        f"CausalTransformer({shown_config(small)}, n_layers=3): the logits do not depend on the "
        f"weights {unused[1]}: every layer should take the previous layer's output",
        mistake=mistakes["layers_not_chained"],
    )
    model = build_model(submission, seed, {**small, "n_layers": 1})
    model.call("train")
    x = rng.integers(0, 13, size=(3, 10))
    first, second = (logits_of(model, x, "CausalTransformer in training mode") for _ in (0, 1))
    ensure(
        np.array_equal(first, second),
        f"CausalTransformer({shown_config(small)}, n_layers=1) with the default dropout=0.0 "
        "gave other logits on a second forward pass in training mode: it should use the "
        "dropout it is given",
        mistake=mistakes["dropout_ignored"],
    )


@check(
    points=0.75,
    grade_id="check_causal_transformer",
    requires=("test_causal_transformer_output_shape",),
)
@on_the_contracts_mask
def test_causal_transformer_is_causal(submission, mistakes, rng, seed):
    batch, length, config = model_case(rng)
    vocab = config["vocab_size"]
    model = built_and_perturbed(submission, seed, config)
    model.call("eval")
    what = f"CausalTransformer(vocab_size={vocab}, ...) on x of shape ({batch}, {length})"
    x = rng.integers(0, vocab, size=(batch, length))
    logits = logits_of(model, x, what)
    expect_shape(logits, (batch, length, vocab), f"the logits of {what}")
    for t in (0, int(rng.integers(1, length - 1))):
        changed = x.copy()
        changed[:, t + 1 :] = x[:, t + 1 :] + rng.integers(1, vocab, size=(batch, length - t - 1))
        changed %= vocab
        after = logits_of(model, changed, what)
        change = float(np.max(np.abs(after[:, : t + 1] - logits[:, : t + 1])))
        if not change <= CAUSAL_ATOL:  # NaN is a failure too
            fail(
                f"the logits at position{f's 0..{t}' if t else ' 0'} changed by up to "
                f"{change:.3g} when only the tokens after position {t} changed ({what}): a "
                "position must not see later tokens",
                mistake=diagnose_leak(submission, mistakes, t, length),
            )


def diagnose_leak(submission, mistakes, t: int, length: int):
    """`no_causal_mask` when the first position sees the future although the notebook's
    causal_mask is right (so the model does not apply it)."""
    if t != 0:
        return None
    try:
        mask = submission.call("causal_mask", length)
    except StudentError:
        return None
    expected = ref.causal_mask(length).numpy()
    right = hasattr(mask, "numpy") and np.array_equal(mask.numpy(), expected)
    return mistakes["no_causal_mask"] if right else None


# -- train_lm and next_token_accuracy ----------------------------------------------------------
def train(submission, model: Handle, X, Y, *, strict: bool = True, **options) -> list[float]:
    """The history of train_lm(model, X, Y, **options) in the child, checked for its form (not
    `strict`: 0-d tensors count as numbers; the form's checks deduct that slip once)."""
    value = submission.call("train_lm", model, X, Y, timeout=TRAIN_TIMEOUT, **options)
    return checked_history(value, options, strict=strict)


def checked_history(
    value, options: dict, *, strict: bool = True, ignored_epochs=None
) -> list[float]:
    """What train_lm(model, X, Y, **options) returned, checked to be one loss per epoch."""
    shown = ", ".join(f"{key}={setting}" for key, setting in options.items() if key != "seed")
    what = f"train_lm(model, X, Y, {shown}, seed=...)"
    if not strict and isinstance(value, list):
        value = [float(v) if torch.is_tensor(v) and v.numel() == 1 else v for v in value]
    epochs = options["epochs"]
    ensure(
        isinstance(value, list | tuple) and len(value) == epochs,
        f"{what} should return a list of {epochs} losses (one per epoch), got "
        f"{type(value).__name__}" + (f" of length {len(value)}" if isinstance(value, list) else ""),
        mistake=ignored_epochs
        if ignored_epochs is not None and isinstance(value, list | tuple) and len(value) == 20
        else None,
    )
    ensure(
        all(is_real(loss) for loss in value),
        f"the losses returned by {what} should be Python floats, got {value!r}"[:300],
    )
    ensure(
        all(math.isfinite(loss) and loss >= 0 for loss in value),
        f"the losses returned by {what} should be finite and non-negative, got {value}",
    )
    return [float(loss) for loss in value]


def lm_linear_model(submission, rng, vocab: int):
    """Embedding(vocab, 3) -> Linear(3, vocab), weights drawn here: a next-token model whose
    loss the parent computes exactly. (the weights, a function building a fresh copy)"""
    shapes = {"0.weight": (vocab, 3), "1.weight": (vocab, 3), "1.bias": (vocab,)}
    weights = {k: rng.normal(size=v).astype(np.float32) for k, v in shapes.items()}

    def fresh() -> Handle:
        nn_child = submission.module_getattr("torch").getattr("nn")
        parts = [nn_child.call("Embedding", vocab, 3), nn_child.call("Linear", 3, vocab)]
        model = nn_child.call("Sequential", *parts)
        model.call("load_state_dict", {k: torch.from_numpy(w) for k, w in weights.items()})
        return model

    return weights, fresh


def position_losses(weights: dict, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Cross-entropy (N, T) of the linear next-token model at every position, in float64."""
    w = {key: value.astype(np.float64) for key, value in weights.items()}
    logits = w["0.weight"][X] @ w["1.weight"].T + w["1.bias"]
    top = logits.max(axis=-1, keepdims=True)
    log_total = np.log(np.exp(logits - top).sum(axis=-1)) + top[..., 0]
    return log_total - np.take_along_axis(logits, Y[..., None], axis=-1)[..., 0]


@check(points=0.25, grade_id="check_train_lm")
@on_the_contracts_mask
def test_train_lm_reports_sample_weighted_loss(submission, mistakes, rng):
    """With lr=0 the model never changes: every epoch's loss is the mean cross-entropy over
    all positions of all windows, whatever the batches."""
    vocab, length = distinct_sizes(rng, 2, 4, 12)
    batch_size = int(rng.integers(5, 9))
    n = 4 * batch_size + int(rng.integers(1, 3))  # a small last batch
    X, Y = rng.integers(0, vocab, size=(n, length)), rng.integers(0, vocab, size=(n, length))
    weights, fresh = lm_linear_model(submission, rng, vocab)
    options = {"epochs": 3, "batch_size": batch_size, "lr": 0.0, "seed": int(rng.integers(99))}
    data = torch.from_numpy(X), torch.from_numpy(Y)
    model = fresh()
    before = weights_of(model)
    value, sizes = trained_in_batches(submission, "train_lm", model, *data, **options)
    history = checked_history(value, options, ignored_epochs=mistakes["lm_epochs_ignored"])
    after = weights_of(model)
    if not all(torch.equal(after.get(k, torch.empty(0)), v) for k, v in before.items()):
        fail(
            f"train_lm(model, X, Y, epochs=3, batch_size={batch_size}, lr=0.0) changed the "
            "model's weights: with lr=0 Adam leaves them as they are (is lr passed on?)",
            mistake=mistakes["lm_lr_ignored"],
        )
    losses = position_losses(weights, X, Y)
    expected, last = float(losses.mean()), float(losses[:, -1].mean())
    named = None
    if np.allclose(history, last, rtol=1e-4, atol=1e-6):
        named = mistakes["lm_loss_last_position_only"]
    elif np.ptp(history) > 1e-5 * expected:
        named = mistakes["lm_loss_mean_of_batch_means"]
    ensure(
        np.allclose(history, expected, rtol=1e-4, atol=1e-6),
        f"train_lm(model, X, Y, epochs=3, batch_size={batch_size}, lr=0.0) on {n} windows of "
        f"{length} tokens (X, Y of shape {(n, length)}): with lr=0 the model never changes, so "
        "every epoch's loss should be the mean cross-entropy over all positions of all windows, "
        f"{expected:.6f} (at the last position only it would be {last:.6f}); got "
        f"{[round(v, 6) for v in history]}",
        mistake=named,
    )
    expect_batches(
        sizes,
        n,
        batch_size,
        3,
        f"train_lm(..., epochs=3, batch_size={batch_size})",
        mistakes["lm_batch_size_ignored"],
    )


@check(points=0.5, grade_id="check_train_lm")
@on_the_contracts_mask
def test_train_lm_deterministic_for_a_seed(submission, mistakes, rng, seed):
    vocab, context_len = int(rng.integers(12, 24)), int(rng.integers(7, 13))
    tokens = ref.discretize_sine(int(rng.integers(130, 180)), n_bins=vocab, period=23.0)
    X, Y = ref.make_windows(tokens, context_len)
    config = {"vocab_size": vocab, "d_model": 16, "n_layers": 1, "n_heads": 2, "max_len": 24}
    options = {"epochs": int(rng.integers(2, 4)), "batch_size": 16, "lr": 3e-3}
    train_seed = int(rng.integers(0, 10_000))
    # Identically seeded fresh models; before each training the child's global RNGs are put in
    # a different state, which a train_lm seeded by its own `seed` does not notice.
    histories = []
    for global_seed, own_seed in ((1, train_seed), (2, train_seed), (3, train_seed + 1)):
        model = build_model(submission, seed, config)
        submission.seed(seed + global_seed)
        histories.append(train(submission, model, X, Y, seed=own_seed, **options))
    first, again, other = histories
    what = f"train_lm(model, X, Y, epochs={options['epochs']}, batch_size=16, lr=0.003, seed=...)"
    ignores_seed = mistakes["train_lm_ignores_seed"]
    # (whether the windows are shuffled again every epoch the contract leaves open)
    ensure(
        np.allclose(first, again, rtol=1e-6, atol=1e-9),
        f"{what} should return the same losses for the same seed and the same starting model, "
        f"whatever the global random state; got {first} and then {again}",
        mistake=ignores_seed,
    )
    ensure(
        first != other,
        f"{what} should shuffle differently for another seed, but seeds {train_seed} and "
        f"{train_seed + 1} gave the same losses {first}",
        mistake=ignores_seed,
    )


@check(points=1.0, grade_id="check_train_lm")
@on_the_contracts_mask
def test_train_lm_learns_the_sine(submission, mistakes, rng, seed):
    n_points, context_len, epochs, batch_size, lr = LEARN.values()
    X, Y = ref.make_windows(ref.discretize_sine(n_points), context_len)
    X_train, Y_train, X_test, Y_test = ref.split_holdout(X, Y)
    model = build_model(submission, seed, {"vocab_size": 50})
    options = {"epochs": epochs, "batch_size": batch_size, "lr": lr}
    before = weights_of(model)
    train(submission, model, X_train, Y_train, strict=False, seed=seed % 10_000, **options)
    expect_weights_changed(before, weights_of(model), "train_lm(model, X_train, Y_train, ...)")
    model.call("eval")
    logits = logits_of(model, X_test.numpy(), "the trained CausalTransformer(vocab_size=50)")
    expect_shape(logits, (*X_test.shape, 50), "the logits of the trained model")
    predictions = logits.argmax(axis=-1)
    accuracy = float(np.mean(predictions == Y_test.numpy()))
    copies = float(np.mean(predictions == X_test.numpy()))
    ensure(
        accuracy >= MIN_HELD_OUT_ACCURACY,
        f"after train_lm(model, X_train, Y_train, epochs={epochs}, batch_size={batch_size}, "
        f"lr={lr}) on {len(X_train)} windows of {context_len} tokens (a sine in 50 bins), the "
        f"model predicts the next token at {accuracy:.1%} of the positions of the "
        f"{len(X_test)} held-out windows; correct implementations reach about 90% on this "
        f"budget, at least {MIN_HELD_OUT_ACCURACY:.0%} is required",
        mistake=mistakes["trained_on_inputs"]
        if copies >= 0.9
        else (mistakes["lm_no_zero_grad"] if lm_accumulates_gradients(submission, rng) else None),
    )


def lm_accumulates_gradients(submission, rng) -> bool:
    """Diagnosis: one epoch at lr=0 over k equal batches leaves, without zero_grad, the sum of
    the k batch gradients in .grad: k times the gradient of the mean loss over all windows."""
    vocab, length, batch_size, k = 7, 5, 6, 3
    n = k * batch_size
    X, Y = rng.integers(0, vocab, size=(n, length)), rng.integers(0, vocab, size=(n, length))
    weights, fresh = lm_linear_model(submission, rng, vocab)
    model = fresh()
    options: dict = {"epochs": 1, "batch_size": batch_size, "lr": 0.0, "seed": 0}
    try:
        train(submission, model, torch.from_numpy(X), torch.from_numpy(Y), strict=False, **options)
        grads = submission.probe("gradients", model)
        grad = grads.get("1.bias") if isinstance(grads, dict) else None
    except (StudentError, AssertionError):
        return False
    if not torch.is_tensor(grad):
        return False
    w = {key: value.astype(np.float64) for key, value in weights.items()}
    logits = w["0.weight"][X] @ w["1.weight"].T + w["1.bias"]
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    np.put_along_axis(p, Y[..., None], np.take_along_axis(p, Y[..., None], axis=-1) - 1, axis=-1)
    full = p.reshape(-1, vocab).mean(axis=0)
    return bool(np.allclose(grad.numpy(), k * full, rtol=1e-3, atol=1e-5))


@check(points=0.5, grade_id="check_next_token_accuracy")
@on_the_contracts_mask
def test_next_token_accuracy_matches_predictions(submission, mistakes, rng, seed):
    batch, length, config = model_case(rng)
    vocab = config["vocab_size"]
    model = build_model(submission, seed, {**config, "dropout": 0.3})
    # a few windows, then more than one batch of 256 (where a batched loop's slices must meet)
    for windows in (batch, 0):
        windows = windows or int(rng.integers(257, 400))
        x = rng.integers(0, vocab, (windows, length))
        judge_accuracy(submission, mistakes, rng, model, x, vocab)


def judge_accuracy(submission, mistakes, rng, model, x: np.ndarray, vocab: int) -> None:
    model.call("eval")
    predictions = logits_of(model, x, "CausalTransformer(...)").argmax(axis=-1)
    # Targets that agree with the model's predictions at about 60% of the positions.
    hit = rng.random(predictions.shape) < 0.6
    hit[0, -1], hit[-1, -1] = True, False
    if hit.mean() == 0.5:  # a function returning the constant 0.5 must not pass
        hit[0, 0] = not hit[0, 0]
    wrong = (predictions + rng.integers(1, vocab, size=predictions.shape)) % vocab
    y = np.where(hit, predictions, wrong)
    expected = float(np.mean(hit))
    model.call("train")  # next_token_accuracy must switch to eval mode itself (dropout 0.3)
    what = f"next_token_accuracy(model, X, Y) for X, Y of shape {x.shape}"
    X, Y = torch.from_numpy(x), torch.from_numpy(y)
    value, modes = call_evaluating(submission, "next_token_accuracy", model, X, Y)
    ensure(
        isinstance(value, float | np.floating),
        f"{what} should return a Python float, got {getattr(value, 'type', type(value).__name__)}",
    )
    if not abs(value - expected) <= 1e-6:
        # what the forward passes saw decides first: a model run in training mode can score
        # what the last positions alone score, by chance
        ran_training = isinstance(modes, dict) and isinstance(modes.get("training"), int)
        named = None
        if ran_training and modes["training"] > 0:
            named = mistakes["accuracy_in_train_mode"]
        elif abs(value - float(np.mean(hit[:, -1]))) <= 1e-6:
            named = mistakes["accuracy_last_position_only"]
        fail(
            f"{what} should be {distinguish(value, expected)[1]}: the model's argmax equals the "
            f"target at {int(hit.sum())} of {hit.size} positions; got "
            f"{distinguish(value, expected)[0]}",
            mistake=named,
        )
    # "in eval mode without gradients": the constraint gates these points
    expect_evaluated(
        modes,
        what,
        with_gradients=mistakes["accuracy_with_gradients"],
        in_training=mistakes["accuracy_in_train_mode"],
        samples=len(x),
    )
