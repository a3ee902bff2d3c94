"""Hidden checks of ex2_attention_heatmap (8 points)."""

import string
import warnings

import numpy as np
import pytest
import torch

from autograder.checks import check
from autograder.grading.expect import (
    as_array,
    call_checked,
    close,
    ensure,
    expect_close,
    expect_shape,
    expect_tuple,
    fail,
    is_tensor,
    matching_mistake,
)
from autograder.grading.inputs import distinct_sizes, random_bool_mask
from autograder.grading.submission import StudentError
from autograder.mistakes import Raised
from reference import ex2_attention_heatmap as ref

pytestmark = pytest.mark.ex2

# Lowercase words, none a prefix of another (the missing-word check uses prefixes).
WORDS = tuple(
    "river lamp quiet orbit maple violin harbor pencil tiger velvet cobalt meadow puzzle"
    " lantern walnut glacier saddle thunder ember falcon mosaic nectar oyster quartz raven spruce"
    " tundra umbra wisp yonder zephyr basil cinder dune fable gravel hollow ivory jasper".split()
)
# Characters that are not in string.punctuation and must survive tokenize.
OTHER_SYMBOLS = ("“{}”", "‘{}’", "«{}»", "{}…")
# ASCII whitespace only: every whitespace-aware split (str.split(), re's \s, string.whitespace)
# agrees on these, so the check tests "split on whitespace" without Unicode corner cases.
SEPARATORS = (" ", "  ", "\t", "\n", " \t ", "\r\n", "\x0b", "\x0c", "   \n  ")
# float32 module in the child against a float64 reference in the parent
ATOL, RTOL = 2e-5, 1e-4
LINEARS = ("W_q", "W_k", "W_v", "W_o")


def same_as(value, candidates) -> object:
    """The first catalogued mistake whose plain-data output equals `value`."""
    for mistake, output in candidates:
        try:
            if type(output) is type(value) and output == value:
                return mistake
        except Exception:  # noqa: BLE001 - an output that cannot be compared is no match
            continue
    return None


def expect_raises(
    submission, mistakes, target: str, error_type: str, *args, what: str, returned=None
) -> None:
    """`target(*args)` must raise `error_type`; name a mistake that raises the same other type
    (or `returned` when it returns)."""
    candidates = mistakes.outputs(target, *args)
    try:
        value = submission.call(target, *args)
    except StudentError as error:
        if error.type == error_type:
            return
        named = next(
            (m for m, out in candidates if isinstance(out, Raised) and out.type == error.type), None
        )
        fail(f"{what} should raise {error_type}; instead {error}", mistake=named)
    shown = getattr(value, "type", None) or type(value).__name__
    fail(
        f"{what} should raise {error_type}, but it returned a {shown.rsplit('.', 1)[-1]}",
        mistake=returned,
    )


# -- tokenize and build_vocab ------------------------------------------------------------------
def punctuated_sentence(rng) -> str:
    """Capitals, punctuation inside and around words, lone punctuation and symbols outside
    string.punctuation: every rule of tokenize shows in each sentence."""
    words = [str(w) for w in rng.choice(WORDS, size=7, replace=False)]
    marks = [str(c) for c in rng.choice(list(string.punctuation), size=6)]
    pieces = [
        words[0].capitalize(),
        words[1][:2] + "'" + words[1][2:],
        words[2][:3] + marks[0] + words[2][3:].upper(),
        marks[1] + words[3] + marks[2] + marks[3],
        str(rng.choice(OTHER_SYMBOLS)).format(words[4].title()),
        marks[4] + marks[5],
        "—",
        words[5],
        words[6].upper() + ".",
    ]
    return " ".join(pieces[i] for i in rng.permutation(len(pieces)))


def expect_tokens(submission, mistakes, sentence: str) -> None:
    answer = call_checked(submission, mistakes, "tokenize", sentence)
    expected = ref.tokenize(sentence)
    value = answer.value
    ensure(
        isinstance(value, list) and all(isinstance(token, str) for token in value),
        f"tokenize should return a list of strings, got {type(value).__name__}",
    )
    if value != expected:
        fail(
            f"tokenize({sentence!r}) should be {expected}, got {value}",
            mistake=same_as(value, answer.candidates),
        )


@check(points=0.75, grade_id="check_tokenize")
def test_tokenize_lowercases_and_removes_punctuation(submission, mistakes, rng):
    for _ in range(3):
        expect_tokens(submission, mistakes, punctuated_sentence(rng))


@check(points=0.5, grade_id="check_tokenize")
def test_tokenize_splits_on_any_whitespace(submission, mistakes, rng):
    words = [str(w) for w in rng.choice(WORDS, size=8, replace=False)]
    gaps = [str(g) for g in rng.choice(SEPARATORS, size=len(words) + 1)]
    sentence = gaps[0] + "".join(w + g for w, g in zip(words, gaps[1:], strict=True))
    for text in (sentence, "".join(str(g) for g in rng.choice(SEPARATORS, size=3)), ""):
        expect_tokens(submission, mistakes, text)


@check(points=0.5, grade_id="check_build_vocab")
def test_build_vocab_first_appearance_order(submission, mistakes, rng):
    distinct = [str(w) for w in rng.choice(WORDS, size=int(rng.integers(5, 9)), replace=False)]
    if distinct == sorted(distinct):
        distinct.reverse()
    tokens = []
    for word in distinct:  # every new word, then an earlier one again
        tokens += [word, str(rng.choice([*tokens, word]))]
    for case in (tokens, []):
        answer = call_checked(submission, mistakes, "build_vocab", case)
        expected = ref.build_vocab(case)
        value = answer.value
        ensure(
            isinstance(value, dict), f"build_vocab should return a dict, got {type(value).__name__}"
        )
        ensure(
            all(
                isinstance(i, int | np.integer) and not isinstance(i, bool) for i in value.values()
            ),
            "build_vocab's ids should be integers",
        )
        if value != expected:
            fail(
                f"build_vocab({case}) should be {expected}, got {value}",
                mistake=same_as(value, answer.candidates),
            )


# -- MultiHeadAttention ------------------------------------------------------------------------
def mha_case(submission, rng):
    """The student's module (in eval mode) for fresh sizes (B, L, num_heads and d_model all
    different), its projections' float64 weights and biases, the head count, an input x and a
    description of the call."""
    while True:
        batch, length, heads = distinct_sizes(rng, 3, 2, 8)
        d_model = heads * int(rng.integers(2, 6))
        if d_model not in (batch, length, heads):
            break
    module = submission.call("MultiHeadAttention", d_model, heads)
    module.call("eval")
    state = module.call("state_dict")
    ensure(isinstance(state, dict), "MultiHeadAttention.state_dict() should return a dict")
    params = {}
    for name in LINEARS:
        weight, bias = state.get(f"{name}.weight"), state.get(f"{name}.bias")
        ensure(
            is_tensor(weight) and (bias is None or is_tensor(bias)),
            f"MultiHeadAttention should have a submodule {name} = nn.Linear(d_model, d_model), "
            f"but its state_dict has no tensor '{name}.weight'",
        )
        expect_shape(weight, (d_model, d_model), f"{name}.weight for d_model={d_model}")
        if bias is not None:  # nn.Linear(..., bias=False) is allowed
            expect_shape(bias, (d_model,), f"{name}.bias for d_model={d_model}")
        params[name] = (weight.double(), None if bias is None else bias.double())
    x = rng.normal(size=(batch, length, d_model)).astype(np.float32)
    what = f"MultiHeadAttention(d_model={d_model}, num_heads={heads}) on x of shape {x.shape}"
    return module, params, heads, x, what


def attention_with(cls, params, heads, x, mask):
    """(output, weights) of class `cls` in float64 with the given projection weights."""
    module = cls(x.shape[-1], heads).double().eval()
    with torch.no_grad():
        for name, (weight, bias) in params.items():
            linear = getattr(module, name)
            linear.weight.copy_(weight)
            if linear.bias is not None:
                linear.bias.copy_(torch.zeros_like(linear.bias) if bias is None else bias)
        kwargs = {} if mask is None else {"mask": torch.from_numpy(mask)}
        output, weights = module(torch.from_numpy(x).double(), return_attention=True, **kwargs)
    return output.numpy(), weights.numpy()


def mha_expected(mistakes, params, heads, x, mask=None):
    """The reference's (output, weights) with the student's weights, and the mistakes' ones."""
    expected = attention_with(ref.MultiHeadAttention, params, heads, x, mask)
    candidates = []
    for mistake in mistakes.for_target("MultiHeadAttention"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                output = attention_with(mistake.bound(mistakes.exercise), params, heads, x, mask)
        except Exception:  # noqa: BLE001 - a mistake that cannot run here names nothing
            continue
        candidates.append((mistake, output))
    return expected, candidates


def student_attention(module, x, mask, what: str) -> tuple[np.ndarray, np.ndarray]:
    kwargs = {} if mask is None else {"mask": torch.from_numpy(mask)}
    value = module(torch.from_numpy(x), return_attention=True, **kwargs)
    output, weights = expect_tuple(value, 2, f"{what} with return_attention=True")
    return (
        as_array(output, f"the output of {what}", allow=("tensor",)),
        as_array(weights, f"the attention weights of {what}", allow=("tensor",)),
    )


def expect_attention(output, weights, expected, candidates, what: str) -> None:
    """Weights, then output, against the reference's; name a mistake that gives the same."""
    for index, name, value in ((1, "attention weights", weights), (0, "output", output)):
        expect_close(
            value,
            expected[index],
            f"the {name} of {what}",
            atol=ATOL,
            rtol=RTOL,
            mistakes=candidates,
            pick=lambda result, index=index: result[index],
        )


@check(points=0.5, grade_id="check_mha")
def test_mha_output_and_weight_shapes(submission, mistakes, rng):
    module, params, heads, x, what = mha_case(submission, rng)
    batch, length, _ = x.shape
    plain = as_array(module(torch.from_numpy(x)), f"the output of {what}", allow=("tensor",))
    expect_shape(plain, x.shape, f"the output of {what}")
    output, weights = student_attention(module, x, None, what)
    _, candidates = mha_expected(mistakes, params, heads, x)
    named = matching_mistake(weights, candidates, lambda r: r[1], atol=ATOL, rtol=RTOL)
    expect_shape(output, x.shape, f"the output of {what}")
    shape = (batch, heads, length, length)
    expect_shape(weights, shape, f"the attention weights of {what}", mistake=named)
    sums = weights.sum(axis=-1)
    ensure(
        bool(np.all(weights >= 0)) and np.allclose(sums, 1.0, atol=1e-5),
        "each row of the attention weights (one query over all keys) should be non-negative "
        f"and sum to 1; the row sums range from {sums.min():.4g} to {sums.max():.4g}",
        mistake=named,
    )
    ensure(
        np.allclose(plain, output, atol=1e-6), "return_attention=True should not change the output"
    )


@check(points=0.25, grade_id="check_mha")
def test_mha_rejects_indivisible_d_model(submission, mistakes, rng):
    for _ in range(2):
        heads = int(rng.integers(3, 7))
        d_model = heads * int(rng.integers(2, 5)) + int(rng.integers(1, heads))
        what = f"MultiHeadAttention(d_model={d_model}, num_heads={heads})"
        returned = mistakes["no_divisibility_check"]
        expect_raises(
            submission,
            mistakes,
            "MultiHeadAttention",
            "ValueError",
            d_model,
            heads,
            what=what,
            returned=returned,
        )


@check(points=1.0, grade_id="check_mha")
def test_mha_matches_reference_with_its_own_weights(submission, mistakes, rng):
    module, params, heads, x, what = mha_case(submission, rng)
    output, weights = student_attention(module, x, None, what)
    expected, candidates = mha_expected(mistakes, params, heads, x)
    expect_attention(output, weights, expected, candidates, what)


@check(points=0.75, grade_id="check_mha")
def test_mha_bool_mask_blocks_positions(submission, mistakes, rng):
    module, params, heads, x, what = mha_case(submission, rng)
    batch, length, _ = x.shape
    for shape in ((length, length), (batch, 1, length, length)):
        mask = random_bool_mask(rng, shape)
        masked = f"{what} with a boolean mask of shape {shape}"
        output, weights = student_attention(module, x, mask, masked)
        expected, candidates = mha_expected(mistakes, params, heads, x, mask)
        expect_shape(weights, expected[1].shape, f"the attention weights of {masked}")
        leaked = ~(np.abs(weights) <= 1e-8) & ~np.broadcast_to(mask, weights.shape)
        if leaked.any():
            fail(
                f"positions where the mask is False should get weight 0 ({masked}); "
                f"{int(leaked.sum())} blocked positions got weight",
                mistake=matching_mistake(weights, candidates, lambda r: r[1], atol=ATOL, rtol=RTOL),
            )
        expect_attention(output, weights, expected, candidates, masked)


# -- sentence_attention ------------------------------------------------------------------------
def sentence_sizes(rng) -> tuple[int, int, int]:
    """(L, num_heads, d_model), all different."""
    while True:
        length, heads = distinct_sizes(rng, 2, 3, 9)
        d_model = heads * int(rng.integers(2, 5))
        if d_model not in (length, heads):
            return length, heads, d_model


def plain_sentence(rng, length: int) -> tuple[str, int, int]:
    """Lowercase words without punctuation, single spaces (so any tokenize agrees), with one
    word at positions i < j repeated; returns (sentence, i, j)."""
    words = [str(w) for w in rng.choice(WORDS, size=length - 1, replace=False)]
    first, second = sorted(int(p) for p in rng.choice(length, size=2, replace=False))
    words.insert(second, words[first])
    return " ".join(words), first, second


def sentence_weights(submission, sentence, **kwargs) -> tuple[list, np.ndarray]:
    value = expect_tuple(
        submission.call("sentence_attention", sentence, **kwargs), 2, "sentence_attention"
    )
    tokens = value[0]  # the contract says list[str]; a tuple is not worth a failed check here
    ensure(
        isinstance(tokens, list | tuple) and list(tokens) == sentence.split(),
        f"the tokens of sentence_attention({sentence!r}) should be {sentence.split()}, got "
        f"{tokens!r}",
    )
    return list(tokens), as_array(value[1], "the weights of sentence_attention", allow=("ndarray",))


@check(points=0.5, grade_id="check_sentence_attention")
def test_sentence_attention_shapes_and_rows(submission, mistakes, rng, seed):
    length, heads, d_model = sentence_sizes(rng)
    sentence, _, _ = plain_sentence(rng, length)
    cases = ({"d_model": d_model, "num_heads": heads, "seed": seed % 1000}, {})
    for kwargs, shape in zip(cases, ((heads, length, length), (4, length, length)), strict=True):
        _, weights = sentence_weights(submission, sentence, **kwargs)
        what = f"the weights of sentence_attention({sentence!r}, {kwargs})"
        keeps_batch = mistakes["sentence_keeps_batch_dim"] if weights.shape == (1, *shape) else None
        expect_shape(weights, shape, what, mistake=keeps_batch)
        sums = weights.sum(axis=-1)
        ensure(
            bool(np.all(weights >= 0)) and np.allclose(sums, 1.0, atol=1e-5),
            f"each row of {what} should be non-negative and sum to 1; the row sums range "
            f"from {sums.min():.4g} to {sums.max():.4g}",
        )


@check(points=0.5, grade_id="check_sentence_attention")
def test_sentence_attention_is_seeded(submission, mistakes, rng, seed):
    length, heads, d_model = sentence_sizes(rng)
    sentence, _, _ = plain_sentence(rng, length)
    chosen = seed % 10_000
    runs = []
    for global_seed, own_seed in ((seed + 1, chosen), (seed + 2, chosen), (seed + 3, chosen + 1)):
        submission.seed(global_seed)  # a different global RNG state before every call
        kwargs = {"d_model": d_model, "num_heads": heads, "seed": own_seed}
        runs.append(sentence_weights(submission, sentence, **kwargs)[1])
    first, again, other = runs
    ensure(
        first.shape == again.shape and np.allclose(first, again, atol=1e-7),
        f"sentence_attention(..., seed={chosen}) should return the same weights every time, "
        "whatever the global random state",
        mistake=mistakes["sentence_ignores_seed"],
    )
    ensure(
        first.shape != other.shape or not np.allclose(first, other, atol=1e-7),
        f"sentence_attention should return different weights for seeds {chosen} and {chosen + 1}",
    )


@check(points=0.25, grade_id="check_sentence_attention")
def test_sentence_attention_same_word_same_weights(submission, mistakes, rng, seed):
    length, heads, d_model = sentence_sizes(rng)
    sentence, first, second = plain_sentence(rng, length)
    tokens, weights = sentence_weights(
        submission, sentence, d_model=d_model, num_heads=heads, seed=seed % 1000
    )
    expect_shape(weights, (heads, length, length), "the weights of sentence_attention")
    same_row = np.allclose(weights[:, first], weights[:, second], atol=1e-6)
    same_column = np.allclose(weights[:, :, first], weights[:, :, second], atol=1e-6)
    ensure(
        same_row and same_column,
        f"{tokens[first]!r} appears at positions {first} and {second} of {tokens}: the same "
        "word has the same embedding, so its two rows (and its two columns) of weights "
        "should be equal in every head",
        mistake=mistakes["embedding_by_position"],
    )


# -- plot_attention ----------------------------------------------------------------------------
def heatmap_inputs(rng) -> tuple[np.ndarray, list[str]]:
    """A non-symmetric row-stochastic (L, L) matrix and L different tokens."""
    length = int(rng.integers(4, 9))
    logits = rng.normal(scale=1.5, size=(length, length))
    weights = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return weights, [str(w) for w in rng.choice(WORDS, size=length, replace=False)]


def figure_summary(submission, weights, tokens, **kwargs) -> dict:
    figure = submission.call("plot_attention", weights, tokens, **kwargs)
    return submission.probe("figure_summary", figure)


def heatmap_of(summary: dict) -> tuple[dict, dict]:
    """(axes, mappable) of the one heatmap outside any colorbar."""
    found = [
        (axes, mappable)
        for axes in summary["axes"]
        if not axes["is_colorbar"]
        for mappable in axes["mappables"]
    ]
    ensure(
        len(found) == 1,
        "plot_attention's figure should hold one heatmap (imshow, matshow "
        f"or pcolormesh) besides its colorbar; found {len(found)}",
    )
    return found[0]


def _levels(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values (up to rounding) and each value's index among them."""
    span = float(np.ptp(values)) or 1.0
    keys = np.round((values - values.min()) / span, 6)
    levels, index = np.unique(keys, return_inverse=True)
    return levels * span + values.min(), index.reshape(values.shape)


def cell_grid(mappable: dict, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cells as seen on screen: grid[r, c] is the value of the cell with the r-th smallest y
    centre and the c-th smallest x centre; also those x and y centres."""
    values = np.asarray(mappable["array"], dtype=float)
    if "coordinates" in mappable:  # pcolormesh: corners (rows + 1, cols + 1, xy)
        corners = np.asarray(mappable["coordinates"], dtype=float)
        centres = (corners[:-1, :-1] + corners[1:, 1:] + corners[:-1, 1:] + corners[1:, :-1]) / 4
        x_centres, y_centres = centres[..., 0], centres[..., 1]
    else:  # imshow / matshow: extent (left, right, bottom, top); row 0 at top or bottom
        left, right, bottom, top = mappable["extent"]
        rows, cols = values.shape[:2]
        xs = left + (np.arange(cols) + 0.5) * (right - left) / cols
        start, end = (top, bottom) if mappable.get("origin") == "upper" else (bottom, top)
        ys = start + (np.arange(rows) + 0.5) * (end - start) / rows
        x_centres, y_centres = np.meshgrid(xs, ys)
    if values.ndim == 1 and values.size == x_centres.size:
        values = values.reshape(x_centres.shape)
    ensure(
        values.shape == x_centres.shape,
        f"the heatmap should be a {length}×{length} grid of values, got an array of shape "
        f"{values.shape}",
    )
    xs, columns = _levels(x_centres)
    ys, rows = _levels(y_centres)
    ensure(
        len(xs) == len(ys) == length and values.size == length * length,
        f"the heatmap should be a {length}×{length} grid of cells for {length} tokens; its "
        f"cells sit in {len(ys)} rows and {len(xs)} columns",
    )
    grid = np.full((length, length), np.nan)
    grid[rows, columns] = values
    return grid, xs, ys


def orientation(grid: np.ndarray, matrix: np.ndarray) -> tuple[bool, bool] | None:
    """(rows flipped, columns flipped) under which the grid shows `matrix`, if any."""
    for flip_rows in (False, True):
        for flip_columns in (False, True):
            shown = matrix[::-1] if flip_rows else matrix
            shown = shown[:, ::-1] if flip_columns else shown
            if close(grid, shown, atol=1e-6, rtol=1e-5):
                return flip_rows, flip_columns
    return None


@check(points=0.5, grade_id="check_plot")
def test_plot_attention_cells_show_the_weights(submission, mistakes, rng):
    weights, tokens = heatmap_inputs(rng)
    _, mappable = heatmap_of(figure_summary(submission, weights, tokens))
    grid, _, _ = cell_grid(mappable, len(tokens))
    # Any origin/extent is allowed, so the screen may show the matrix flipped up-down (query 0
    # at the bottom, as pcolormesh or origin="lower" draw it) or left-right; the tick check then
    # holds the labels to that order. A transpose puts the queries along x: that is wrong.
    if orientation(grid, weights) is None:
        transposed = orientation(grid, weights.T) is not None
        fail(
            "the heatmap's cells should show the weights, with the keys (columns of the matrix) "
            "along the x axis and the queries (rows) along the y axis"
            + ("; it shows the transpose" if transposed else ""),
            mistake=mistakes["heatmap_transposed"] if transposed else None,
        )


def ticks_of(axes: dict, axis: str) -> list[tuple[float, str]]:
    """(position, label) of the major ticks of `axis` inside the axes' limits."""
    positions, labels = axes[f"{axis}ticks"], axes[f"{axis}ticklabels"]
    # bottom/left labels come first, then top/right ones (e.g. matshow's top labels only)
    labels = labels[: len(positions)] if len(labels) >= len(positions) else [""] * len(positions)
    low, high = sorted(axes[f"{axis}lim"])
    slack = 1e-9 * max(1.0, high - low)
    return sorted(
        (p, t) for p, t in zip(positions, labels, strict=True) if low - slack <= p <= high + slack
    )


@check(points=0.75, grade_id="check_plot")
def test_plot_attention_ticks_label_cell_centres(submission, mistakes, rng):
    weights, tokens = heatmap_inputs(rng)
    axes, mappable = heatmap_of(figure_summary(submission, weights, tokens))
    grid, xs, ys = cell_grid(mappable, len(tokens))
    flips = orientation(grid, weights) or orientation(grid, weights.T) or (False, False)
    for axis, centres, flipped, role in (("x", xs, flips[1], "key"), ("y", ys, flips[0], "query")):
        expected = tokens[::-1] if flipped else tokens
        ticks = ticks_of(axes, axis)
        positions = np.array([p for p, _ in ticks])
        labels = [t for _, t in ticks]
        width = abs(float(centres[1] - centres[0]))
        at_centres = len(ticks) == len(centres) and np.allclose(
            positions, centres, atol=1e-3 * width, rtol=0
        )
        if at_centres and labels == expected:
            continue
        named = None
        if (
            len(ticks) == len(centres)
            and labels == expected
            and (np.allclose(np.abs(positions - centres), width / 2, atol=1e-3 * width))
        ):
            named = mistakes["ticks_at_cell_edges"]
        elif axis == "y" and at_centres and labels == expected[::-1]:
            named = mistakes["query_labels_reversed"]
        fail(
            f"the {axis} axis should have one tick per {role} token at the centre of its cell: "
            f"ticks at {np.round(centres, 3).tolist()} labelled {expected}; got ticks at "
            f"{np.round(positions, 3).tolist()} labelled {labels}",
            mistake=named,
        )


@check(points=0.25, grade_id="check_plot")
def test_plot_attention_has_colorbar(submission, mistakes, rng):
    weights, tokens = heatmap_inputs(rng)
    summary = figure_summary(submission, weights, tokens, title="attention of one head")
    _, mappable = heatmap_of(summary)
    ensure(
        mappable["has_colorbar"] or any(axes["is_colorbar"] for axes in summary["axes"]),
        "the heatmap should have a colorbar",
        mistake=mistakes["no_colorbar"],
    )


# -- strongest_attention -----------------------------------------------------------------------
def strongest_inputs(rng, tie: bool = False) -> tuple[np.ndarray, list[str], str]:
    """Row-stochastic weights and tokens where `word` occurs at p < q, with the row of p, the
    column of p and the row of q peaking at three different tokens (with `tie`, the row of p
    has its largest weight twice, at a and at a fourth token d)."""
    length = int(rng.integers(7, 11))
    tokens = [str(w) for w in rng.choice(WORDS, size=length, replace=False)]
    positions = [int(i) for i in rng.choice(length, size=6, replace=False)]
    (p, q), (a, b, c, d) = sorted(positions[:2]), positions[2:]
    tokens[q] = tokens[p]
    weights = rng.uniform(0.01, 0.1, size=(length, length))
    weights[p, a], weights[b, p], weights[q, c] = 0.6, 5.0, 0.7
    if tie:
        weights[p, d] = weights[p, a]
    weights /= weights.sum(axis=1, keepdims=True)
    return weights, tokens, tokens[p]


def expect_strongest(submission, mistakes, weights, tokens, word, why: str) -> None:
    answer = call_checked(submission, mistakes, "strongest_attention", weights, tokens, word)
    expected = ref.strongest_attention(weights, tokens, word)
    if answer.value != expected:
        fail(
            f"strongest_attention(weights, {tokens}, {word!r}) should be {expected!r} ({why}), "
            f"got {answer.value!r}",
            mistake=same_as(answer.value, answer.candidates),
        )


@check(points=0.5, grade_id="check_strongest")
def test_strongest_attention_reads_the_query_row(submission, mistakes, rng):
    weights, tokens, word = strongest_inputs(rng)
    expect_strongest(
        submission,
        mistakes,
        weights,
        tokens,
        word,
        f"the largest weight in the row of the first {word!r}",
    )


@check(points=0.5, grade_id="check_strongest")
def test_strongest_attention_ties_and_missing_words(submission, mistakes, rng):
    weights, tokens, word = strongest_inputs(rng, tie=True)
    expect_strongest(
        submission, mistakes, weights, tokens, word, "the first of two equal largest weights"
    )
    absent = next(str(w) for w in rng.permutation(WORDS) if w not in tokens)
    for missing in (absent, word.upper(), word[:-1]):
        expect_raises(
            submission,
            mistakes,
            "strongest_attention",
            "ValueError",
            weights,
            tokens,
            missing,
            what=f"strongest_attention(weights, {tokens}, {missing!r})",
        )
