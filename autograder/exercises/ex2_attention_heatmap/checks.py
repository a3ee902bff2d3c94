"""Hidden checks of ex2_attention_heatmap (8 points)."""

import math
import string

import numpy as np
import pytest
import torch

from autograder._reference import ex2_attention_heatmap as ref
from autograder.authoring import (
    StudentError,
    as_array,
    call_checked,
    check,
    distinct_sizes,
    ensure,
    expect_close,
    expect_equal,
    expect_raises,
    expect_rows_sum_to_one,
    expect_shape,
    expect_tuple,
    fail,
    figures,
    is_int,
    is_tensor,
    matching_mistake,
    module_output,
    module_outputs,
    random_bool_mask,
    without_raised,
)

pytestmark = pytest.mark.ex2

# Lowercase words, none a prefix of another (the missing-word check uses prefixes).
WORDS = tuple(
    "river lamp quiet orbit maple violin harbor pencil tiger velvet cobalt meadow puzzle"
    " lantern walnut glacier saddle thunder ember falcon mosaic nectar oyster quartz raven spruce"
    " tundra umbra wisp yonder zephyr basil cinder dune fable gravel hollow ivory jasper".split()
)
# Spaces, tabs and newlines only (the contract: checks use ASCII sentences of letters, digits,
# string.punctuation, spaces, tabs and newlines): every whitespace-aware split agrees on these.
SEPARATORS = (" ", "  ", "\t", "\n", " \t ", "\t\n", "   \n  ")
# float32 module in the child against a float64 reference in the parent
ATOL, RTOL = 2e-5, 1e-4
LINEARS = ("W_q", "W_k", "W_v", "W_o")


# -- tokenize and build_vocab ------------------------------------------------------------------
def punctuated_sentence(rng) -> str:
    """Capitals, punctuation inside and around words and lone punctuation, in ASCII (the
    contract): every rule of tokenize that ASCII can show shows in each sentence. One word always
    holds the characters a hand-written regex character class gets wrong (a backslash, ], ^
    and -)."""
    words = [str(w) for w in rng.choice(WORDS, size=8, replace=False)]
    marks = [str(c) for c in rng.choice(list(string.punctuation), size=6)]
    pieces = [
        words[0].capitalize(),
        words[1][:2] + "'" + words[1][2:],
        words[2][:3] + marks[0] + words[2][3:].upper(),
        marks[1] + words[3] + marks[2] + marks[3],
        words[4].title(),
        marks[4] + marks[5],
        words[5],
        words[6].upper() + ".",
        "^" + words[7][:2] + "\\" + words[7][2:] + "]-",
    ]
    return " ".join(pieces[i] for i in rng.permutation(len(pieces)))


def expect_tokens(submission, mistakes, sentence: str) -> None:
    answer = call_checked(submission, mistakes, "tokenize", sentence)
    value = answer.value
    ensure(
        isinstance(value, list) and all(isinstance(token, str) for token in value),
        f"tokenize should return a list of strings, got {type(value).__name__}",
    )
    expect_equal(value, ref.tokenize(sentence), f"tokenize({sentence!r})", answer.candidates)


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
        ensure(all(is_int(i) for i in value.values()), "build_vocab's ids should be integers")
        expect_equal(value, expected, f"build_vocab({case})", answer.candidates)


# -- MultiHeadAttention ------------------------------------------------------------------------
def mha_case(submission, rng, one_head: bool = False, mistakes=None):
    """The student's module (in eval mode) for fresh sizes (B, L, num_heads and d_model all
    different; `one_head`: num_heads = 1, which the contract admits), its projections' weights
    and biases as a float64 state dict (zero biases where it has none), the head count, an
    input x and a description of the call."""
    while True:
        batch, length, heads = distinct_sizes(rng, 3, 2, 8)
        heads = 1 if one_head else heads
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
            mistake=mistakes["projections_not_named"] if mistakes is not None else None,
        )
        expect_shape(weight, (d_model, d_model), f"{name}.weight for d_model={d_model}")
        if bias is not None:  # nn.Linear(..., bias=False) is allowed
            expect_shape(bias, (d_model,), f"{name}.bias for d_model={d_model}")
        params[f"{name}.weight"] = weight.double()
        params[f"{name}.bias"] = torch.zeros(d_model).double() if bias is None else bias.double()
    x = rng.normal(size=(batch, length, d_model)).astype(np.float32)
    what = f"MultiHeadAttention(d_model={d_model}, num_heads={heads}) on x of shape {x.shape}"
    return module, params, heads, x, what


def mha_expected(mistakes, params, heads, x, mask=None):
    """The reference's (output, attention weights) in float64 with the student's weights, and
    the catalogued wrong classes' ones."""
    kwargs = {} if mask is None else {"mask": torch.from_numpy(mask)}

    def run(module):
        output, attention = module(torch.from_numpy(x).double(), return_attention=True, **kwargs)
        return output.numpy(), attention.numpy()

    sizes = (x.shape[-1], heads)
    candidates = module_outputs(mistakes, "MultiHeadAttention", sizes, params, run)
    return module_output(ref.MultiHeadAttention, sizes, params, run), without_raised(candidates)


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


@check(
    points=0.5,
    grade_id="check_mha",
    requires=("test_mha_matches_reference_with_its_own_weights",),
)
def test_mha_output_and_weight_shapes(submission, mistakes, rng):
    module, params, heads, x, what = mha_case(submission, rng, mistakes=mistakes)
    batch, length, _ = x.shape
    value = module(torch.from_numpy(x))
    ensure(
        not isinstance(value, tuple | list),
        f"{what} without return_attention (False by default) should return the output alone, "
        f"got a {type(value).__name__}",
        mistake=mistakes["return_attention_ignored"],
    )
    plain = as_array(value, f"the output of {what}", allow=("tensor",))
    expect_shape(plain, x.shape, f"the output of {what}")
    output, weights = student_attention(module, x, None, what)
    _, candidates = mha_expected(mistakes, params, heads, x)
    named = matching_mistake(weights, candidates, lambda r: r[1], atol=ATOL, rtol=RTOL)
    expect_shape(output, x.shape, f"the output of {what}")
    shape = (batch, heads, length, length)
    expect_shape(weights, shape, f"the attention weights of {what}", mistake=named)
    expect_rows_sum_to_one(
        weights, "the attention weights (one query over all keys)", mistake=named
    )
    ensure(
        np.allclose(plain, output, atol=1e-6), "return_attention=True should not change the output"
    )


@check(
    points=0.25,
    grade_id="check_mha",
    requires=("test_mha_matches_reference_with_its_own_weights",),
)
def test_mha_rejects_indivisible_d_model(submission, mistakes, rng):
    for _ in range(2):
        heads = int(rng.integers(3, 7))
        d_model = heads * int(rng.integers(2, 5)) + int(rng.integers(1, heads))
        what = f"MultiHeadAttention(d_model={d_model}, num_heads={heads})"
        expect_raises(
            submission, mistakes, "MultiHeadAttention", "ValueError", d_model, heads, what=what
        )


@check(points=1.0, grade_id="check_mha")
def test_mha_matches_reference_with_its_own_weights(submission, mistakes, rng):
    for one_head in (False, True):  # one head: a model the contract admits
        module, params, heads, x, what = mha_case(submission, rng, one_head, mistakes)
        # the same module again on another batch size and length, then on x again: an answer
        # that depends on an earlier call shows
        other = other_input(rng, x)
        for case in (x, other, x):
            shown = what.replace(str(x.shape), str(case.shape))
            output, weights = student_attention(module, case, None, shown)
            expected, candidates = mha_expected(mistakes, params, heads, case)
            expect_attention(output, weights, expected, candidates, shown)


def other_input(rng, x: np.ndarray) -> np.ndarray:
    """An input of another batch size and another length than x's (the same d_model)."""
    batch, length, d_model = x.shape
    sizes = [size for size in range(2, 9) if size not in (batch, length, d_model)]
    other_batch, other_length = (int(v) for v in rng.choice(sizes, size=2, replace=False))
    return rng.normal(size=(other_batch, other_length, d_model)).astype(np.float32)


@check(points=0.75, grade_id="check_mha")
def test_mha_bool_mask_blocks_positions(submission, mistakes, rng):
    module, params, heads, x, what = mha_case(submission, rng, mistakes=mistakes)
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
    # then without a mask, on another input: every position may attend again
    other = other_input(rng, x)
    shown = f"{what.replace(str(x.shape), str(other.shape))} without a mask, after masked calls"
    output, weights = student_attention(module, other, None, shown)
    expected, candidates = mha_expected(mistakes, params, heads, other)
    expect_attention(output, weights, expected, candidates, shown)


# -- sentence_attention ------------------------------------------------------------------------
def sentence_sizes(rng) -> tuple[int, int, int]:
    """(L, num_heads, d_model), all different; num_heads is never the default 4 (a hard-coded 4
    would pass for some students only), and d_model is a multiple of 4 as well as of num_heads
    (so that a hard-coded 4 builds, and its weights name the mistake instead of raising)."""
    while True:
        length, heads = distinct_sizes(rng, 2, 3, 9)
        d_model = math.lcm(heads, 4) * int(rng.integers(1, 3))
        if heads != 4 and d_model not in (length, heads):
            return length, heads, d_model


def plain_sentence(rng, length: int) -> tuple[str, int, int]:
    """Lowercase words without punctuation, single spaces (so any tokenize agrees), with one
    word at positions i < j repeated; returns (sentence, i, j)."""
    words = [str(w) for w in rng.choice(WORDS, size=length - 1, replace=False)]
    first, second = sorted(int(p) for p in rng.choice(length, size=2, replace=False))
    words.insert(second, words[first])
    return " ".join(words), first, second


def on_own_inputs(submission, sentence: str, call):
    """`call()` with the notebook's tokenize and build_vocab answering as the contract says for
    this sentence: sentence_attention is graded on its own, and a wrong vocabulary costs only
    the vocabulary's checks."""
    tokens = ref.tokenize(sentence)
    answers = {"tokenize": tokens, "build_vocab": ref.build_vocab(tokens)}
    originals = {}
    for name, answer in answers.items():
        try:
            originals[name] = submission.module_getattr(name)
        except StudentError:
            continue  # not defined: sentence_attention does not rely on it
        submission.module_setattr(name, submission.probe("returns", answer))
    try:
        return call()
    finally:
        for name, original in originals.items():
            submission.module_setattr(name, original)


def sentence_weights(submission, sentence, mistakes=None, **kwargs) -> tuple[list, np.ndarray]:
    value = on_own_inputs(
        submission, sentence, lambda: submission.call("sentence_attention", sentence, **kwargs)
    )
    value = expect_tuple(value, 2, "sentence_attention")
    tokens = value[0]  # the contract says list[str]; a tuple is not worth a failed check here
    words = list(dict.fromkeys(sentence.split()))
    ensure(
        isinstance(tokens, list | tuple) and list(tokens) == sentence.split(),
        f"the tokens of sentence_attention({sentence!r}) should be {sentence.split()}, got "
        f"{tokens!r}",
        mistake=mistakes["sentence_returns_the_vocabulary"]
        if mistakes is not None and isinstance(tokens, list | tuple) and list(tokens) == words
        else None,
    )
    return list(tokens), as_array(value[1], "the weights of sentence_attention", allow=("ndarray",))


@check(
    points=0.5,
    grade_id="check_sentence_attention",
    requires=(
        "test_sentence_attention_is_seeded",
        "test_sentence_attention_same_word_same_weights",
    ),
)
def test_sentence_attention_shapes_and_rows(submission, mistakes, rng, seed):
    length, heads, d_model = sentence_sizes(rng)
    sentence, _, _ = plain_sentence(rng, length)
    cases = ({"d_model": d_model, "num_heads": heads, "seed": seed % 1000}, {})
    for kwargs, shape in zip(cases, ((heads, length, length), (4, length, length)), strict=True):
        _, weights = sentence_weights(submission, sentence, mistakes, **kwargs)
        what = f"the weights of sentence_attention({sentence!r}, {kwargs})"
        named = {
            (1, *shape): mistakes["sentence_keeps_batch_dim"],
            (4, *shape[1:]): mistakes["sentence_ignores_num_heads"],
        }
        expect_shape(weights, shape, what, mistake=named.get(weights.shape))
        columns = np.allclose(weights.sum(axis=-2), 1.0, atol=1e-5)
        expect_rows_sum_to_one(
            weights, what, mistake=mistakes["sentence_weights_transposed"] if columns else None
        )


@check(points=0.5, grade_id="check_sentence_attention")
def test_sentence_attention_is_seeded(submission, mistakes, rng, seed):
    length, heads, d_model = sentence_sizes(rng)
    sentence, _, _ = plain_sentence(rng, length)
    chosen = seed % 10_000
    # first, d_model reaches the embedding and the module: two of its values, the same seed and two
    # heads (which divide the default 32 too, so that a default put in its place still runs)
    sized_runs = []
    for size in (int(v) for v in rng.choice([8, 12, 16, 20, 24], size=2, replace=False)):
        sized = {"d_model": size, "num_heads": 2, "seed": chosen}
        sized_runs.append(sentence_weights(submission, sentence, mistakes, **sized)[1])
    ensure(
        sized_runs[0].shape != sized_runs[1].shape
        or not np.allclose(sized_runs[0], sized_runs[1], atol=1e-7),
        "sentence_attention returned the same weights for two values of d_model (the same "
        "seed): `d_model` made no difference, so it seems to be ignored in favour of a default",
        mistake=mistakes["sentence_ignores_d_model"],
    )
    runs = []
    for global_seed, own_seed in ((seed + 1, chosen), (seed + 2, chosen), (seed + 3, chosen + 1)):
        submission.seed(global_seed)  # a different global RNG state before every call
        kwargs = {"d_model": d_model, "num_heads": heads, "seed": own_seed}
        runs.append(sentence_weights(submission, sentence, mistakes, **kwargs)[1])
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
    expect_built_on_the_notebooks_attention(submission, mistakes, sentence, kwargs)


def expect_built_on_the_notebooks_attention(submission, mistakes, sentence, kwargs) -> None:
    """The weights come from the notebook's own MultiHeadAttention (the contract: a seeded
    embedding + the module above): with a stand-in whose weights are all 1/L, sentence_attention
    returns exactly those. A made-up row-stochastic matrix does not."""
    try:
        original = submission.module_getattr("MultiHeadAttention")
    except StudentError:
        fail("sentence_attention should use the notebook's MultiHeadAttention, which is missing")
    submission.module_setattr("MultiHeadAttention", submission.probe("uniform_attention_class"))
    try:
        _, weights = sentence_weights(submission, sentence, **kwargs)
    finally:
        submission.module_setattr("MultiHeadAttention", original)
    length = len(sentence.split())
    ensure(
        weights.size > 0 and np.allclose(weights, 1.0 / length, atol=1e-6),
        "sentence_attention should return the attention weights of the notebook's "
        "MultiHeadAttention: with a MultiHeadAttention whose weights are all "
        f"1/{length}, it returned others",
        mistake=mistakes["sentence_weights_not_from_attention"],
    )


@check(
    points=0.25,
    grade_id="check_sentence_attention",
    requires=("test_sentence_attention_is_seeded",),
)
def test_sentence_attention_same_word_same_weights(submission, mistakes, rng, seed):
    length, heads, d_model = sentence_sizes(rng)
    sentence, first, second = plain_sentence(rng, length)
    kwargs = {"d_model": d_model, "num_heads": heads, "seed": seed % 1000}
    tokens, weights = sentence_weights(submission, sentence, mistakes, **kwargs)
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
    """A non-symmetric row-stochastic (L, L) matrix and L tokens in which one word occurs
    twice, not next to itself (as in the lesson's "the cat sat on the mat"): the contract gives
    each token its own tick, so labels drawn from a vocabulary (one per distinct word) show."""
    length = int(rng.integers(5, 9))
    logits = rng.normal(scale=1.5, size=(length, length))
    weights = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    tokens = [str(w) for w in rng.choice(WORDS, size=length, replace=False)]
    first = int(rng.integers(0, length - 2))
    second = int(rng.integers(first + 2, length))
    tokens[second] = tokens[first]
    return weights, tokens


def one_label_per_word(labels: list[str], tokens: list[str]) -> bool:
    """The labels are the distinct words of `tokens` (a vocabulary), one each, in any order."""
    return len(labels) == len(set(labels)) == len(set(tokens)) < len(tokens) and set(labels) == set(
        tokens
    )


def plotted_heatmap(submission, weights, tokens, **kwargs) -> tuple[dict, dict, dict]:
    """(figure summary, axes, mappable) of the one heatmap of plot_attention's figure."""
    figure = submission.call("plot_attention", weights, tokens, **kwargs)
    summary = submission.probe("figure_summary", figure)
    return summary, *figures.heatmap_of(summary, "plot_attention's figure")


@check(points=0.5, grade_id="check_plot")
def test_plot_attention_cells_show_the_weights(submission, mistakes, rng):
    weights, tokens = heatmap_inputs(rng)
    _, _, mappable = plotted_heatmap(submission, weights, tokens)
    grid, _, _ = figures.cell_grid(mappable, len(tokens))
    # Any origin/extent is allowed, so the screen may show the matrix flipped up-down (query 0
    # at the bottom, as pcolormesh or origin="lower" draw it) or left-right; the tick check then
    # holds the labels to that order. A transpose puts the queries along x: that is wrong.
    if figures.orientation(grid, weights) is None:
        transposed = figures.orientation(grid, weights.T) is not None
        fail(
            "the heatmap's cells should show the weights, with the keys (columns of the matrix) "
            "along the x axis and the queries (rows) along the y axis"
            + ("; it shows the transpose" if transposed else ""),
            mistake=mistakes["heatmap_transposed"] if transposed else None,
        )


@check(
    points=0.75,
    grade_id="check_plot",
    requires=("test_plot_attention_cells_show_the_weights",),
)
def test_plot_attention_ticks_label_cell_centres(submission, mistakes, rng):
    weights, tokens = heatmap_inputs(rng)
    _, axes, mappable = plotted_heatmap(submission, weights, tokens)
    grid, xs, ys = figures.cell_grid(mappable, len(tokens))
    flips = (
        figures.orientation(grid, weights) or figures.orientation(grid, weights.T) or (False, False)
    )
    for axis, centres, flipped, role in (("x", xs, flips[1], "key"), ("y", ys, flips[0], "query")):
        expected = tokens[::-1] if flipped else tokens
        ticks = figures.ticks_of(axes, axis)
        placement, labels = figures.tick_placement(ticks, centres), [label for _, label in ticks]
        if placement == "centres" and labels == expected:
            continue
        named = None
        if placement == "edges" and labels == expected:
            named = mistakes["ticks_at_cell_edges"]
        elif one_label_per_word(labels, tokens):
            named = mistakes["ticks_from_vocabulary"]
        elif axis == "y" and placement == "centres" and labels == expected[::-1]:
            named = mistakes["query_labels_reversed"]
        fail(
            f"the {axis} axis should have one tick per {role} token at the centre of its cell: "
            f"ticks at {np.round(centres, 3).tolist()} labelled {expected}; got ticks at "
            f"{np.round([location for location, _ in ticks], 3).tolist()} labelled {labels}",
            mistake=named,
        )


@check(
    points=0.25,
    grade_id="check_plot",
    requires=("test_plot_attention_cells_show_the_weights",),
)
def test_plot_attention_has_colorbar_and_title(submission, mistakes, rng):
    weights, tokens = heatmap_inputs(rng)
    title = f"head {int(rng.integers(1, 9))} of layer {int(rng.integers(1, 7))}"
    summary, axes, mappable = plotted_heatmap(submission, weights, tokens, title=title)
    ensure(
        figures.has_colorbar(summary, mappable),
        "the heatmap should have a colorbar",
        mistake=mistakes["no_colorbar"],
    )
    titles = axes.get("titles")  # centre, left and right (set_title's loc)
    ensure(
        isinstance(titles, list) and title in titles,
        f"plot_attention(..., title={title!r}) should put the title on the heatmap's axes "
        f"(axes.set_title); the axes' titles are {titles!r}",
        mistake=mistakes["title_not_on_the_axes"],
    )


# -- strongest_attention -----------------------------------------------------------------------
def strongest_inputs(
    rng, tie: bool = False, itself: bool = False
) -> tuple[np.ndarray, list[str], str]:
    """Row-stochastic weights and tokens where `word` occurs at p < q, with the row of p, the
    column of p and the row of q peaking at three different tokens (with `tie`, the row of p
    has its largest weight twice, at a and at a fourth token d; with `itself`, the row of p
    peaks on the diagonal: the word attends most to itself, and the answer is the word)."""
    length = int(rng.integers(7, 11))
    tokens = [str(w) for w in rng.choice(WORDS, size=length, replace=False)]
    positions = [int(i) for i in rng.choice(length, size=6, replace=False)]
    (p, q), (a, b, c, d) = sorted(positions[:2]), positions[2:]
    tokens[q] = tokens[p]
    weights = rng.uniform(0.01, 0.1, size=(length, length))
    weights[p, a], weights[b, p], weights[q, c] = 0.6, 5.0, 0.7
    if tie:
        weights[p, d] = weights[p, a]
    if itself:
        weights[p, p] = 0.9
    weights /= weights.sum(axis=1, keepdims=True)
    return weights, tokens, tokens[p]


def expect_strongest(submission, mistakes, weights, tokens, word, why: str) -> None:
    answer = call_checked(submission, mistakes, "strongest_attention", weights, tokens, word)
    expected = ref.strongest_attention(weights, tokens, word)
    what = f"strongest_attention(weights, {tokens}, {word!r})"
    expect_equal(answer.value, expected, what, answer.candidates, why=why)


@check(points=0.5, grade_id="check_strongest")
def test_strongest_attention_reads_the_query_row(submission, mistakes, rng):
    weights, tokens, word = strongest_inputs(rng)
    why = f"the largest weight in the row of the first {word!r}"
    expect_strongest(submission, mistakes, weights, tokens, word, why)
    weights, tokens, word = strongest_inputs(rng, itself=True)
    why = f"the largest weight in the row of the first {word!r} is on the diagonal: {word!r} itself"
    expect_strongest(submission, mistakes, weights, tokens, word, why)


@check(
    points=0.5,
    grade_id="check_strongest",
    requires=("test_strongest_attention_reads_the_query_row",),
)
def test_strongest_attention_ties_and_missing_words(submission, mistakes, rng):
    weights, tokens, word = strongest_inputs(rng, tie=True)
    expect_strongest(
        submission, mistakes, weights, tokens, word, "the first of two equal largest weights"
    )
    absent = next(str(w) for w in rng.permutation(WORDS) if w not in tokens)
    for missing in (absent, word.upper(), word[:-1]):
        what = f"strongest_attention(weights, {tokens}, {missing!r})"
        args = (weights, tokens, missing)
        expect_raises(submission, mistakes, "strongest_attention", "ValueError", *args, what=what)
