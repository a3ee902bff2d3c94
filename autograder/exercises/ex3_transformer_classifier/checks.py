"""Hidden checks of ex3_transformer_classifier (8 points).

The student's modules stay in the child: the parent reads back logits, losses and parameter
counts (module_summary) and computes every expected value itself. Where a property needs known
weights (loss bookkeeping, determinism, no gradients), a small torch.nn model is built in the
child from weights drawn here; nothing relies on attribute names beyond the contract's `encoder`.
"""

import math
import numbers

import numpy as np
import pytest
import torch

from autograder._reference import ex3_transformer_classifier as ref
from autograder.authoring import (
    Handle,
    StudentError,
    as_array,
    check,
    distinct_sizes,
    distinguish,
    ensure,
    expect_batches,
    expect_close,
    expect_shape,
    expect_tuple,
    expect_weights_changed,
    fail,
    module_outputs,
    trainable_parameters,
    trained_in_batches,
    weights_of,
    without_raised,
)

pytestmark = pytest.mark.ex3

TRAIN_TIMEOUT = 120.0
# float32 in the child against float64 here: sinusoids up to position ~700 computed in float32
# (exp/log or pow, either order) are off by < 2e-5; every catalogued PE mistake by > 0.1.
PE_ATOL = 1e-4
# Logits of one sample alone or inside another batch differ by float32 rounding only (~1e-7).
SAME_ATOL = 1e-5
# With the positional encoding, reversing the tokens moves the logits of untrained models of
# these sizes by >= 5e-3 (80 models, reference and an independent implementation); without it
# mean pooling makes them equal up to rounding (~1e-7).
ORDER_ATOL = 1e-4
# Learning: vocab 20, seq_len 12, 1500 training and 2000 test sequences (test seed 10000 +
# seed), 4 epochs, batch 50, lr 1e-3, TransformerClassifier(vocab_size=20) built after seeding.
# Held-out accuracy over 30 seeds (1 thread): reference >= 0.927, an independent implementation
# (exp/log PE, sqrt(d) scaling, norm_first GELU layers, sum/len pooling, AdamW) >= 0.941; a
# constant predictor ~0.5. 1.3-2.3 s per training.
LEARN = {"n_train": 1500, "n_test": 2000, "seq_len": 12, "vocab_size": 20}
LEARN_TRAINING = {"epochs": 4, "batch_size": 50, "lr": 1e-3}
MIN_ACCURACY = 0.85
ENCODER = "torch.nn.modules.transformer.TransformerEncoder"


# -- helpers -------------------------------------------------------------------------------------
def kind(value) -> str:
    return value.type.rsplit(".", 1)[-1] if isinstance(value, Handle) else type(value).__name__


def shown(kwargs: dict) -> str:
    return ", ".join(f"{key}={value}" for key, value in kwargs.items())


def largest_change(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)))


def build(submission, name: str, seed: int, **kwargs) -> Handle:
    """A fresh `name(**kwargs)`, built after seeding the child's global RNGs."""
    submission.seed(seed)
    model = submission.call(name, **kwargs)
    ensure(isinstance(model, Handle), f"{name}({shown(kwargs)}) should build an nn.Module")
    return model


def logits_of(model: Handle, x, what: str) -> np.ndarray:
    logits = as_array(model(torch.as_tensor(x)), f"the output of {what}", allow=("tensor",))
    ensure(
        logits.dtype.kind == "f" and bool(np.all(np.isfinite(logits))),
        f"the logits of {what} should be finite floats, got dtype {logits.dtype}",
    )
    return logits


def torch_nn(submission) -> Handle:
    """torch.nn as the notebook imported it (its setup cell imports torch)."""
    return submission.module_getattr("torch").getattr("nn")


def classifier_case(rng) -> tuple[int, int, dict]:
    """(batch, length, constructor arguments), all sizes different."""
    while True:
        nhead, layers = int(rng.choice([2, 4])), int(rng.choice([1, 3]))
        batch, length = distinct_sizes(rng, 2, 5, 14)
        config = {
            "vocab_size": int(rng.integers(15, 40)),
            "d_model": nhead * int(rng.integers(3, 7)),
        }
        config |= {"nhead": nhead, "num_layers": layers, "num_classes": int(rng.choice([3, 5]))}
        config["dim_feedforward"] = int(rng.integers(30, 60))
        sizes = (batch, length, *config.values())
        if len(set(sizes)) == len(sizes):
            return batch, length, config


def tokens(rng, vocab: int, batch: int, length: int) -> torch.Tensor:
    return torch.from_numpy(rng.integers(0, vocab, size=(batch, length)))


# -- make_mean_dataset ---------------------------------------------------------------------------
def dataset(submission, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    what = f"make_mean_dataset({shown(kwargs)})"
    X, y = expect_tuple(submission.call("make_mean_dataset", **kwargs), 2, what)
    for name, value in (("X", X), ("y", y)):
        ensure(torch.is_tensor(value), f"{what}: {name} should be a tensor, got {kind(value)}")
    return X, y


@check(
    points=0.75,
    grade_id="check_make_mean_dataset",
    requires=("test_mean_dataset_seeded",),
)
def test_mean_dataset_shapes_and_labels(submission, mistakes, rng):
    # A small vocab and seq_len with an even product: many rows have a mean of exactly
    # vocab / 2, where `>` and `>=` disagree; an odd vocab too, where `> vocab // 2` differs.
    for top in (int(rng.choice([7, 9, 11])), int(rng.choice([8, 10]))):
        n, length = int(rng.integers(300, 400)), 2 * int(rng.integers(2, 4))
        kwargs = {"n_samples": n, "seq_len": length, "vocab_size": top}
        kwargs["seed"] = int(rng.integers(999))
        expect_mean_labels(submission, mistakes, kwargs)


def expect_mean_labels(submission, mistakes, kwargs: dict) -> None:
    n, length, top = kwargs["n_samples"], kwargs["seq_len"], kwargs["vocab_size"]
    what = f"make_mean_dataset({shown(kwargs)})"
    X, y = dataset(submission, **kwargs)
    expect_shape(
        X.numpy(),
        (n, length),
        f"X of {what}",
        mistake=mistakes["dataset_ignores_seq_len"] if tuple(X.shape) == (n, 20) else None,
    )
    expect_shape(y.numpy(), (n,), f"y of {what}")
    for name, value in (("X", X), ("y", y)):
        ensure(
            value.dtype == torch.int64,
            f"{name} should have dtype torch.long (int64), got {value.dtype}",
            mistake=mistakes["labels_not_long"] if value.dtype.is_floating_point else None,
        )
    ensure(
        0 <= int(X.min()) and int(X.max()) < top,
        f"X of {what} should lie in [0, {top})",
        mistake=mistakes["dataset_ignores_vocab_size"] if 0 <= int(X.max()) < 100 else None,
    )
    totals = X.numpy().sum(axis=1)
    expected, at_half = 2 * totals > length * top, 2 * totals == length * top  # exact
    floored = totals > length * (top // 2)
    observed = y.numpy()
    wrong = np.flatnonzero(observed != expected)
    first = int(wrong[0]) if wrong.size else 0
    named = None
    if at_half.any() and np.array_equal(observed, expected | at_half):
        named = mistakes["labels_greater_or_equal"]
    elif top % 2 and np.array_equal(observed, floored):
        named = mistakes["labels_floor_half_vocab"]
    ensure(
        wrong.size == 0,
        f"{what}: y should be 1 exactly where the row's mean is strictly greater than "
        f"vocab_size / 2 = {top / 2:g}; {wrong.size} of {n} labels differ (the first in row "
        f"{first}, of mean {totals[first] / length:g})",
        mistake=named,
    )


@check(points=0.25, grade_id="check_make_mean_dataset")
def test_mean_dataset_seeded(submission, mistakes, rng, seed):
    n, own = int(rng.integers(40, 80)), int(rng.integers(0, 10_000))
    runs = []
    for global_seed, own_seed in ((seed, own), (seed + 1, own), (seed + 1, own + 1)):
        submission.seed(global_seed)  # another global random state before the second call
        runs.append(dataset(submission, n_samples=n, seed=own_seed)[0])
    ensure(
        runs[0].shape == (n, 20) and int(runs[0].max()) < 100,
        f"make_mean_dataset({n}) should use the defaults seq_len=20 and vocab_size=100, got X "
        f"of shape {tuple(runs[0].shape)} with values up to {int(runs[0].max())}",
    )
    ignores = mistakes["dataset_ignores_seed"]
    ensure(
        torch.equal(runs[0], runs[1]),
        f"make_mean_dataset({n}, seed={own}) should return the same X every time, whatever the "
        "global random state",
        mistake=ignores,
    )
    ensure(
        not torch.equal(runs[0], runs[2]),
        f"make_mean_dataset gave the same X for seeds {own} and {own + 1}",
        mistake=ignores,
    )


# -- PositionalEncoding --------------------------------------------------------------------------
def expect_encoding(submission, mistakes, args: tuple, x: torch.Tensor, what: str) -> None:
    """PositionalEncoding(*args)(x) (as built: training mode) against the reference's x + PE."""
    observed = as_array(submission.call("PositionalEncoding", *args)(x), what, allow=("tensor",))
    run = lambda module: module(x.double())  # noqa: E731
    expect_close(
        observed,
        run(ref.PositionalEncoding(*args).double()).numpy(),
        what,
        atol=PE_ATOL,
        rtol=1e-5,
        mistakes=without_raised(module_outputs(mistakes, "PositionalEncoding", args, {}, run)),
    )


@check(points=0.5, grade_id="check_positional_encoding")
def test_positional_encoding_values(submission, mistakes, rng):
    batch, d_model, max_len = int(rng.integers(2, 5)), 2 * int(rng.integers(3, 9)), 600  # > 512
    zeros = torch.zeros(batch, max_len, d_model)
    what = (
        f"the output of PositionalEncoding({d_model}, max_len={max_len}) on zeros of shape "
        f"{tuple(zeros.shape)}: PE[p, 2i] = sin(p / 10000^(2i/d_model)), PE[p, 2i+1] = cos(...)"
    )
    try:
        expect_encoding(submission, mistakes, (d_model, max_len), zeros, what)
    except StudentError as error:  # a table of the default 512 positions cannot reach 600
        fail(
            f"{what}: {error} (sequences may be as long as max_len)",
            mistake=mistakes["pe_ignores_max_len"] if "512" in error.message else None,
        )


@check(points=0.5, grade_id="check_positional_encoding")
def test_positional_encoding_forward_adds(submission, mistakes, rng):
    batch, length = distinct_sizes(rng, 2, 3, 12)
    d_model = 2 * int(rng.integers(7, 12))
    x = torch.from_numpy(rng.normal(size=(batch, length, d_model)).astype(np.float32))
    what = f"PositionalEncoding({d_model}) on x of shape {tuple(x.shape)}: x + PE[:{length}]"
    expect_encoding(submission, mistakes, (d_model,), x, f"{what} (no scaling, no dropout)")
    # one module, called again on another batch size and length: x + PE[:L] each time
    module = submission.call("PositionalEncoding", d_model)
    for case in (x, torch.from_numpy(rng.normal(size=(batch + 1, length + 3, d_model))).float(), x):
        shape = tuple(case.shape)
        expect_close(
            as_array(module(case), f"PositionalEncoding({d_model}) on x of shape {shape}"),
            ref.PositionalEncoding(d_model).double()(case.double()).numpy(),
            f"PositionalEncoding({d_model}) called again, on x of shape {shape}",
            atol=PE_ATOL,
            rtol=1e-5,
        )
    # PE is fixed by the formula: a trainable table would drift from it during training
    trainable = trainable_parameters(submission, submission.call("PositionalEncoding", d_model))
    ensure(
        trainable == 0,
        f"PositionalEncoding({d_model}) should have no trainable parameters (PE is fixed by the "
        f"formula; keep it in a buffer), it has {trainable}",
        mistake=mistakes["encoding_is_trainable"],
    )


# -- TransformerClassifier -----------------------------------------------------------------------
def classifier(submission, rng, seed, name="TransformerClassifier", **extra):
    """(model in eval mode, tokens x (batch, length), its constructor arguments, a description)."""
    batch, length, config = classifier_case(rng)
    if name == "LSTMClassifier":
        config = {"vocab_size": config["vocab_size"], "num_classes": config["num_classes"]}
    model = build(submission, name, seed, **config, **extra)
    model.call("eval")
    x = tokens(rng, config["vocab_size"], batch, length)
    return model, x, config, f"{name}({shown({**config, **extra})})"


@check(
    points=0.5,
    grade_id="check_transformer_classifier",
    requires=("test_transformer_classifier_logits_per_sample",),
)
def test_transformer_classifier_structure(submission, mistakes, rng, seed):
    model, x, config, what = classifier(submission, rng, seed)
    parts = {s["name"]: s for s in submission.probe("module_summary", model)["submodules"]}
    encoder = parts.get("encoder", {"class": "missing"})
    ensure(
        encoder["class"] == "torch.nn.modules.transformer.TransformerEncoder",
        f"{what}.encoder should be an nn.TransformerEncoder, got {encoder['class']}",
    )
    layers = [name for name in parts if name.count(".") == 2 and "encoder.layers." in name]
    ensure(
        encoder["num_layers"] == config["num_layers"] == len(layers),
        f"{what}.encoder should have num_layers={config['num_layers']} layers, got {len(layers)}",
        mistake=mistakes["num_layers_ignored"] if len(layers) == 2 else None,
    )
    flags = [s["batch_first"] for n, s in parts.items() if n.startswith("encoder.")]
    flags = [flag for flag in flags if flag is not None]
    ensure(
        flags and all(flag is True for flag in flags),
        f"{what}.encoder's layers should be built with batch_first=True (inputs are "
        f"(B, L, d_model)); their attention has batch_first={flags}",
    )
    # The structure must also do the work: a forward hook on `encoder` sees forward(x) run it.
    ran = submission.probe("runs_through", model, "encoder", x)
    ensure(
        isinstance(ran, int) and ran > 0,
        f"{what}: forward(x) never ran self.encoder (a forward hook on it saw nothing); the "
        "logits must come from the encoder's output, mean-pooled",
    )
    expect_arguments_reach_the_layers(submission, mistakes, rng, seed)


# Arguments that set the size of some layer: two values of one (the defaults for the others,
# whatever they are: the LSTM's are the student's), two parameter counts.
SIZED = {
    "TransformerClassifier": {
        "vocab_size": ((37, 53), "classifier_ignores_vocab_size"),
        "d_model": ((24, 32), "classifier_ignores_d_model"),
        "dim_feedforward": ((40, 56), "classifier_ignores_dim_feedforward"),
    },
    "LSTMClassifier": {
        "vocab_size": ((37, 53), "lstm_ignores_vocab_size"),
        "embed_dim": ((24, 36), "lstm_ignores_embed_dim"),
        "hidden_dim": ((44, 56), "lstm_ignores_hidden_dim"),
    },
}


def expect_sized_arguments(submission, mistakes, seed: int, name: str) -> None:
    """Every constructor argument that sets a layer's size reaches it: built with two values of
    it, the model has two numbers of trainable parameters."""
    for argument, (values, mistake) in SIZED[name].items():
        counts = [
            trainable_parameters(submission, build(submission, name, seed, **{argument: value}))
            for value in values
        ]
        ensure(
            None not in counts and counts[0] != counts[1],
            f"{name}({argument}={values[0]}) and {name}({argument}={values[1]}) have as many "
            f"trainable parameters ({counts[0]}): `{argument}` made no difference, so it seems "
            "to be ignored in favour of its default",
            mistake=mistakes[mistake],
        )


def expect_arguments_reach_the_layers(submission, mistakes, rng, seed: int) -> None:
    """vocab_size, d_model and dim_feedforward size layers; nhead splits d_model into heads
    (the same weights, other heads: other logits); dropout is on in training mode."""
    expect_sized_arguments(submission, mistakes, seed, "TransformerClassifier")
    x = tokens(rng, 30, *distinct_sizes(rng, 2, 3, 9))
    heads = [build(submission, "TransformerClassifier", seed, d_model=16, nhead=n) for n in (2, 8)]
    for model in heads:
        model.call("eval")
    outputs = [
        logits_of(model, x, f"TransformerClassifier(d_model=16, nhead={n})")
        for model, n in zip(heads, (2, 8), strict=True)
    ]
    ensure(
        largest_change(outputs[0], outputs[1]) > 1e-6,
        "TransformerClassifier(d_model=16) gave the same logits with nhead=2 and nhead=8 (the "
        "same seed, so the same weights): `nhead` made no difference, so it seems to be ignored "
        "in favour of its default",
        mistake=mistakes["nhead_ignored"],
    )
    model = build(submission, "TransformerClassifier", seed, dropout=0.5)
    model.call("train")
    first, second = (logits_of(model, x, "TransformerClassifier(dropout=0.5)") for _ in (0, 1))
    ensure(
        largest_change(first, second) > 1e-6,
        "TransformerClassifier(dropout=0.5) in training mode gave the same logits twice: "
        "`dropout` made no difference, so it seems to be ignored in favour of its default",
        mistake=mistakes["classifier_ignores_dropout"],
    )


def expect_classes(model: Handle, x, classes: int, what: str, mistake) -> None:
    """One logit per class: the default 2 where other num_classes were asked for names the
    argument ignored."""
    logits = logits_of(model, x, what)
    ensure(
        logits.ndim == 2 and logits.shape[1] == classes,
        f"the logits of {what} should have {classes} columns (num_classes), got shape "
        f"{logits.shape}",
        mistake=mistake if logits.ndim == 2 and logits.shape[1] == 2 != classes else None,
    )


def expect_per_sample_logits(model: Handle, x, classes: int, rng, what: str, mistake) -> None:
    """Logits (batch, classes); sample i's stay the same when the other samples change and when
    it is classified alone."""
    (batch, length), keep = x.shape, int(rng.integers(0, len(x)))
    what = f"{what} in eval mode on x of shape {(batch, length)}"
    logits = logits_of(model, x, what)
    expect_shape(
        logits,
        (batch, classes),
        f"the logits of {what}",
        mistake=mistake if len(logits) == length else None,
    )
    spread = float(np.max(np.ptp(logits, axis=0)))
    ensure(
        spread > 1e-6,
        f"{what}: every sample got the same logits (they differ by at most {spread:.3g} over "
        f"{batch} different sequences); the logits should depend on the input",
    )
    others = x.clone()
    rows = [i for i in range(batch) if i != keep]
    others[rows] = tokens(rng, int(x.max()) + 1, batch - 1, length)
    for inputs, row, how in (
        (others, keep, "the other samples of the batch changed"),
        (x[keep : keep + 1], 0, "it was classified alone (a batch of one)"),
    ):
        change = largest_change(logits_of(model, inputs, what)[row], logits[keep])
        ensure(
            change <= SAME_ATOL,
            f"{what}: the logits of sample {keep} changed by {change:.3g} when {how}; each "
            "sample's logits must depend on that sample only",
            mistake=mistake,
        )


@check(points=0.75, grade_id="check_transformer_classifier")
def test_transformer_classifier_logits_per_sample(submission, mistakes, rng, seed):
    model, x, config, what = classifier(submission, rng, seed)
    try:
        logits_of(model, x, what)
    except StudentError as error:  # nn.Linear(d_model, ...) on a mean over the features: (B, L)
        wrong_axis = error.type == "RuntimeError" and "cannot be multiplied" in error.message
        fail(str(error), mistake=mistakes["pooled_over_features"] if wrong_axis else None)
    classes, seq_first = config["num_classes"], mistakes["batch_first_forgotten"]
    expect_classes(model, x, classes, what, mistakes["classifier_ignores_num_classes"])
    expect_per_sample_logits(model, x, classes, rng, what, seq_first)
    # Every check of the classifier requires this one: none pays for logits that come from
    # something other than a real nn.TransformerEncoder (module_summary names real classes only).
    parts = submission.probe("module_summary", model)["submodules"]
    encoder = next((part["class"] for part in parts if part["name"] == "encoder"), "nothing")
    ensure(
        encoder == "torch.nn.modules.transformer.TransformerEncoder",
        f"{what}.encoder should be an nn.TransformerEncoder (the contract), got {encoder}",
    )


@check(
    points=0.25,
    grade_id="check_transformer_classifier",
    requires=("test_transformer_classifier_logits_per_sample",),
)
def test_transformer_classifier_mean_pools_encoder_output(submission, mistakes, rng, seed):
    """A forward hook replaces the output of `encoder` by states chosen here: the logits must
    depend on them only through their mean over the sequence."""
    model, x, config, what = classifier(submission, rng, seed)
    encoder, (batch, length) = model.getattr("encoder"), x.shape
    # An encoder without batch_first (checked by the structure check) returns (L, B, d_model).
    parts = submission.probe("module_summary", model)["submodules"]
    seq_first = any(s["batch_first"] is False for s in parts if s["name"].startswith("encoder."))

    def logits_with(states: np.ndarray, inputs: torch.Tensor = x) -> np.ndarray:
        states = np.ascontiguousarray(states.swapaxes(0, 1)) if seq_first else states
        stub = submission.probe("returns", torch.from_numpy(states))
        hook = encoder.call("register_forward_hook", stub)
        try:
            return logits_of(model, inputs, what)
        finally:
            hook.call("remove")

    H = rng.normal(size=(batch, length, config["d_model"])).astype(np.float32)
    base, noise = logits_with(H), rng.normal(size=H.shape).astype(np.float32)
    shuffled = H[
        np.arange(batch)[:, None], rng.permuted(np.tile(np.arange(length), (batch, 1)), axis=1)
    ]
    same_mean, twice = H + noise - noise.mean(axis=1, keepdims=True), np.concatenate([H, H], 1)
    for how, states, inputs, mistake in (
        ("its positions were shuffled", shuffled, x, "first_token_pooling"),
        ("values with zero mean over the sequence were added to it", same_mean, x, "max_pooling"),
        ("it was repeated along a twice longer input (same mean)", twice, x.repeat(1, 2), None),
    ):
        change = largest_change(logits_with(states, inputs), base)
        ensure(
            change <= 1e-4,
            f"{what}: the logits changed by {change:.3g} when the encoder's output was replaced "
            f"by one in which {how}; mean-pool `self.encoder`'s output over the sequence (dim=1)",
            mistake=mistakes[mistake] if mistake and not seq_first else None,
        )
    # ... and through it: another mean of the encoder's output must change the logits.
    moved = H + rng.normal(size=(batch, 1, H.shape[2])).astype(np.float32)
    change = largest_change(logits_with(moved), base)
    ensure(
        change > 1e-4,
        f"{what}: the logits changed by only {change:.3g} when the encoder's output was replaced "
        "by one with another mean over the sequence; they must come from `self.encoder`'s "
        "output, mean-pooled",
    )


@check(points=0.25, grade_id="check_transformer_classifier")
def test_transformer_classifier_uses_positions(submission, mistakes, rng, seed):
    """Reversing the tokens changes the logits, and the order reaches the encoder: the input of
    `encoder` (an nn.TransformerEncoder that forward runs, seen by a hook) for the reversed
    tokens is not the reversed input for the tokens (positions are added before it). What
    changes the logits must be positions the encoder sees, not another order-dependent path."""
    model, x, config, what = classifier(submission, rng, seed)
    rows = [rng.permutation(config["vocab_size"])[: x.shape[1]] for _ in range(len(x))]
    x = torch.from_numpy(np.stack(rows))  # distinct tokens within each row
    change = largest_change(logits_of(model, x.flip(1), what), logits_of(model, x, what))
    ensure(
        change > ORDER_ATOL,
        f"{what}: reversing the order of the tokens changed the logits by only {change:.3g}; "
        "add the positional encoding to the embeddings so the encoder can tell positions apart",
        mistake=mistakes["no_positional_encoding"],
    )
    inputs = [encoder_input(submission, model, tokens, what) for tokens in (x, x.flip(1))]
    batch, length = x.shape
    axis = 1 if inputs[0].shape[:2] == (batch, length) else 0  # (L, B, d) without batch_first
    moved = largest_change(np.flip(inputs[0], axis=axis), inputs[1])
    ensure(
        moved > ORDER_ATOL,
        f"{what}: the encoder's input for the reversed tokens is the reversed input for the "
        f"tokens (they differ by {moved:.3g}): no position information reaches the encoder; "
        "add the positional encoding to the embeddings before the encoder",
        mistake=mistakes["no_positional_encoding"],
    )


def encoder_input(submission, model: Handle, x: torch.Tensor, what: str) -> np.ndarray:
    """What `model.encoder` (a real nn.TransformerEncoder) received when forward(x) ran it."""
    seen = submission.probe("inputs_through", model, "encoder", x)
    seen = seen if isinstance(seen, dict) else {}
    kind, runs = seen.get("class"), seen.get("runs")
    ensure(
        runs == ENCODER,
        f"{what}.encoder should be an nn.TransformerEncoder running its own forward, got "
        f"{kind}" + (" with a forward of its own" if kind == ENCODER else ""),
    )
    inputs = seen.get("inputs")
    inputs = inputs if isinstance(inputs, list) else []
    ensure(
        len(inputs) > 0,
        f"{what}: forward(x) never ran self.encoder (a hook on it saw nothing); the positions "
        "must reach the logits through the encoder",
    )
    first = as_array(inputs[0], f"the input of {what}.encoder", allow=("tensor",))
    ensure(
        first.ndim == 3 and sorted(first.shape[:2]) == sorted(x.shape),
        f"{what}: self.encoder received an input of shape {first.shape} for tokens of shape "
        f"{tuple(x.shape)}; it should get the embedded tokens with their positions",
    )
    return first


@check(
    points=0.25,
    grade_id="check_transformer_classifier",
    requires=("test_transformer_classifier_logits_per_sample",),
)
def test_transformer_classifier_runs_without_warnings(submission, mistakes, rng):
    """A warning goes to stderr, and nbgrader gives no points to a cell that writes there."""
    model, warned = submission.call_recording_warnings("TransformerClassifier")
    ensure(isinstance(model, Handle), "TransformerClassifier() should build an nn.Module")
    model.call("eval")
    x = tokens(rng, 100, *distinct_sizes(rng, 2, 3, 12))
    warned = warned + model.call_recording_warnings(None, x)[1]
    ensure(
        not warned,
        f"TransformerClassifier() or its forward pass raised {len(warned)} warning(s), which "
        f"print to stderr: {warned[:1]}"[:400],
        mistake=mistakes["encoder_warns"] if any("nested" in w for w in warned) else None,
    )


# -- LSTMClassifier and count_parameters ---------------------------------------------------------
@check(points=0.25, grade_id="check_lstm_classifier")
def test_lstm_classifier_structure_and_logits(submission, mistakes, rng, seed):
    model, x, config, what = classifier(submission, rng, seed, "LSTMClassifier")
    classes = {s["class"] for s in submission.probe("module_summary", model)["submodules"]}
    ensure("torch.nn.modules.rnn.LSTM" in classes, f"{what} should be built on nn.LSTM")
    seq_first = mistakes["lstm_batch_first_forgotten"]
    expect_classes(model, x, config["num_classes"], what, mistakes["lstm_ignores_num_classes"])
    expect_per_sample_logits(model, x, config["num_classes"], rng, what, seq_first)
    expect_sized_arguments(submission, mistakes, seed, "LSTMClassifier")


@check(
    points=0.25,
    grade_id="check_lstm_classifier",
    requires=("test_lstm_classifier_structure_and_logits",),
)
def test_lstm_classifier_reads_the_whole_sequence(submission, mistakes, rng, seed):
    """Changing only the last token, or only the first, must change an LSTM's logits: the
    classifier reads the state after the whole sequence."""
    model, x, config, what = classifier(submission, rng, seed, "LSTMClassifier")
    vocab = config["vocab_size"]
    what = f"{what} in eval mode on x of shape {tuple(x.shape)}"
    logits = logits_of(model, x, what)
    for position, name in ((-1, "last"), (0, "first")):
        changed = x.clone()
        changed[:, position] = (
            x[:, position] + torch.from_numpy(rng.integers(1, vocab, len(x)))
        ) % vocab
        change = largest_change(logits_of(model, changed, what), logits)
        ensure(
            change > 1e-6,
            f"{what}: changing only the {name} token of every sequence changed the logits by "
            f"{change:.3g}; the classifier should read the LSTM's state after the whole "
            "sequence",
            mistake=mistakes["lstm_first_token_state"] if position == -1 else None,
        )


@check(
    points=0.25,
    grade_id="check_lstm_classifier",
    requires=("test_lstm_classifier_structure_and_logits",),
)
def test_lstm_parameter_count_comparable(submission, mistakes, seed):
    transformer, lstm = (
        submission.probe("module_summary", build(submission, name, seed))["trainable_parameters"]
        for name in ("TransformerClassifier", "LSTMClassifier")
    )
    ensure(
        abs(lstm - transformer) <= 0.2 * transformer,
        f"LSTMClassifier() has {lstm:,} trainable parameters and TransformerClassifier() "
        f"{transformer:,}; choose the LSTM's default sizes to bring its count within 20% "
        f"({math.ceil(0.8 * transformer):,} to {math.floor(1.2 * transformer):,})",
        mistake=mistakes["lstm_too_small"] if lstm < transformer else None,
    )


@check(points=0.5, grade_id="check_count_parameters")
def test_count_parameters_counts_trainable_only(submission, mistakes, rng):
    """An nn.Sequential built in the child, two of its four modules frozen."""
    a, b, c, d, e = distinct_sizes(rng, 5, 3, 30)
    nn_child = torch_nn(submission)
    frozen = [nn_child.call("Embedding", a, b), nn_child.call("Linear", d, e)]
    parts = [frozen[0], nn_child.call("Linear", b, c), nn_child.call("LSTM", c, d), frozen[1]]
    for part in frozen:
        part.call("requires_grad_", False)
    value = submission.call("count_parameters", nn_child.call("Sequential", *parts))
    expected = b * c + c + 4 * d * (c + d) + 8 * d  # the Linear and the LSTM (4 gates, 2 biases)
    total = expected + a * b + d * e + e
    wrong = {total: "counts_frozen_parameters", 6: "counts_parameter_tensors"}
    named = wrong.get(value) if isinstance(value, numbers.Integral) else None
    ensure(
        isinstance(value, numbers.Integral) and value == expected,
        f"count_parameters on a model with {expected:,} trainable and {total - expected:,} "
        f"frozen parameters should return the int {expected}, got {value!r}",
        mistake=mistakes[named] if named else None,
    )
    # then another model: each count is that model's own
    value = submission.call("count_parameters", nn_child.call("Linear", a, c))
    ensure(
        isinstance(value, numbers.Integral) and value == a * c + c,
        f"count_parameters on an nn.Linear({a}, {c}) afterwards should return {a * c + c}, got "
        f"{value!r}",
    )


# -- train_classifier ----------------------------------------------------------------------------
def linear_model(submission, rng, vocab: int, length: int, scale: float):
    """Embedding(vocab, 3) -> Flatten -> Linear(3 * length, 2), with weights drawn here: (the
    weights, a function that builds a fresh copy in the child)."""
    shapes = {"0.weight": (vocab, 3), "2.weight": (2, 3 * length), "2.bias": (2,)}
    weights = {k: rng.normal(scale=scale, size=v).astype(np.float32) for k, v in shapes.items()}

    def fresh() -> Handle:
        nn_child = torch_nn(submission)
        parts = [nn_child.call("Embedding", vocab, 3), nn_child.call("Flatten")]
        model = nn_child.call("Sequential", *parts, nn_child.call("Linear", 3 * length, 2))
        model.call("load_state_dict", {k: torch.from_numpy(w) for k, w in weights.items()})
        return model

    return weights, fresh


def train(
    submission, model, X, y, what: str, *, strict: bool = True, mistakes=None, **kwargs
) -> list[float]:
    """The student's train_classifier, checked to return one Python float per epoch. Not
    `strict`: 0-d tensors count as numbers too (the checks of the history's form deduct that
    slip; a check of what the training achieves does not deduct it again)."""
    value = submission.call("train_classifier", model, X, y, **kwargs, timeout=TRAIN_TIMEOUT)
    if not strict and isinstance(value, list):
        value = [float(v) if torch.is_tensor(v) and v.numel() == 1 else v for v in value]
    return checked_history(value, what, kwargs["epochs"], mistakes)


def checked_history(value, what: str, epochs: int, mistakes=None) -> list[float]:
    """One finite non-negative Python float per epoch (30, the default, where `epochs` asked
    for another number, names that argument ignored)."""
    ensure(
        isinstance(value, list) and len(value) == epochs,
        f"{what} should return a list of {epochs} losses (one per epoch), got {kind(value)}"
        + (f" of length {len(value)}" if isinstance(value, list | tuple) else ""),
        mistake=mistakes["train_ignores_epochs"]
        if mistakes is not None and isinstance(value, list) and len(value) == 30 != epochs
        else None,
    )
    ensure(
        all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in value),
        f"{what} should return finite non-negative Python floats, got {value!r}"[:300],
    )
    return value


@check(points=0.5, grade_id="check_train_classifier")
def test_train_classifier_returns_sample_weighted_epoch_losses(submission, mistakes, rng):
    """With lr=0 the weights never move, so every epoch's sample-weighted mean loss is the mean
    cross-entropy of the fixed model over all samples, whatever the order of the batches."""
    (vocab, length), batch_size = distinct_sizes(rng, 2, 4, 9), int(rng.integers(6, 11))
    n = 4 * batch_size + int(rng.integers(1, 3))  # a small last batch
    X, y = rng.integers(0, vocab, size=(n, length)), rng.integers(0, 2, size=n)
    w, fresh = linear_model(submission, rng, vocab, length, scale=1.0)
    kwargs = {"epochs": 5, "batch_size": batch_size, "lr": 0.0, "seed": int(rng.integers(99))}
    what = f"train_classifier(model, X, y, {shown(kwargs)}) on {n} samples"
    model = fresh()
    data = torch.from_numpy(X), torch.from_numpy(y)
    value, sizes = trained_in_batches(submission, "train_classifier", model, *data, **kwargs)
    history = checked_history(value, what, kwargs["epochs"], mistakes)
    ensure(
        same_weights(weights_of(model), {k: torch.from_numpy(v) for k, v in w.items()}),
        f"{what} changed the model's weights: with lr=0 Adam leaves them as they are (is lr "
        "passed on?)",
        mistake=mistakes["train_ignores_lr"],
    )
    expect_batches(sizes, n, batch_size, 5, what, mistakes["train_ignores_batch_size"])
    w = {key: weight.astype(np.float64) for key, weight in w.items()}
    logits = w["0.weight"][X].reshape(n, -1) @ w["2.weight"].T + w["2.bias"]
    logits -= logits.max(axis=1, keepdims=True)
    expected = float(np.mean(np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(n), y]))
    order_dependent = np.ptp(history) > 1e-5 * expected and history != sorted(history, reverse=True)
    ensure(
        np.allclose(history, expected, rtol=1e-4, atol=1e-6),
        f"{what}: with lr=0 the model never changes, so every epoch's loss should be the mean "
        f"cross-entropy over all {n} samples, {expected:.6f}; got {[round(v, 6) for v in history]}",
        mistake=mistakes["loss_mean_of_batch_means"] if order_dependent else None,
    )


@check(points=0.5, grade_id="check_train_classifier")
def test_train_classifier_seeded(submission, mistakes, rng, seed):
    """Judged on what the training does, not only on what it reports: with the same starting
    weights, the same seed feeds the model the same batches in the same order (a recording
    wrapper sees them) and ends with the same weights whatever the global random state, and
    another seed feeds another order; the returned histories agree with that."""
    vocab, length = distinct_sizes(rng, 2, 4, 9)
    n, own = int(rng.integers(50, 70)), int(rng.integers(0, 10_000))
    X = torch.from_numpy(rng.integers(0, vocab, size=(n, length)))
    y = torch.from_numpy(rng.integers(0, 2, size=n))
    fresh = linear_model(submission, rng, vocab, length, scale=0.5)[1]
    kwargs = {"epochs": 3, "batch_size": int(rng.integers(5, 9)), "lr": 0.05}
    what = f"train_classifier(model, X, y, {shown(kwargs)}, seed=...)"
    runs, seen, trained = [], [], []
    # The same starting weights every time; before each run the child's global RNGs are put in
    # another state, which a train_classifier seeded by its own `seed` does not notice.
    for global_seed, own_seed in ((seed, own), (seed + 1, own), (seed + 2, own + 1)):
        recorder = submission.probe("batch_recorder", fresh())
        submission.seed(global_seed)
        runs.append(train(submission, recorder, X, y, what, **kwargs, seed=own_seed))
        fed = recorder.getattr("seen")
        seen.append(fed if isinstance(fed, list) else [])
        trained.append(weights_of(recorder))
    ignores = mistakes["train_ignores_seed"]
    ensure(
        len(seen[0]) >= n * kwargs["epochs"],
        f"{what} fed the model {len(seen[0])} samples in training mode; it should train it on "
        f"each of the {n} samples once per epoch ({kwargs['epochs']} epochs)",
    )
    # (whether the samples are shuffled again every epoch the contract leaves open)
    ensure(
        seen[0] == seen[1],
        f"{what} fed the samples in another order for the same seed after the global random "
        "state changed: shuffle with a generator seeded by `seed`",
        mistake=ignores,
    )
    ensure(
        np.allclose(runs[0], runs[1], rtol=1e-6, atol=1e-9),
        f"{what} should return the same losses for the same seed and starting weights whatever "
        f"the global random state; got {runs[0]} and then {runs[1]}",
        mistake=ignores,
    )
    ensure(
        same_weights(trained[0], trained[1]),
        f"{what} left other weights for the same seed and starting weights after the global "
        "random state changed: everything random in the training should come from `seed`",
        mistake=ignores,
    )
    ensure(
        seen[0] != seen[2] and runs[0] != runs[2],
        f"{what} should shuffle differently for another seed, but seeds {own} and {own + 1} "
        f"gave the same {'order' if seen[0] == seen[2] else 'losses'}",
        mistake=ignores,
    )


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return (
        bool(a)
        and a.keys() == b.keys()
        and all(
            a[key].shape == b[key].shape and torch.allclose(a[key], b[key], rtol=1e-6, atol=1e-8)
            for key in a
        )
    )


@check(points=1.0, grade_id="check_train_classifier")
def test_train_classifier_learns_mean_task(submission, mistakes, rng, seed):
    data_seed = seed % 10_000
    n_train, n_test, seq_len, vocab = LEARN.values()
    X, y = ref.make_mean_dataset(n_train, seq_len, vocab, seed=data_seed)
    X_test, y_test = ref.make_mean_dataset(n_test, seq_len, vocab, seed=10_000 + data_seed)
    model = build(submission, "TransformerClassifier", seed, vocab_size=vocab)
    what = f"train_classifier(model, X, y, {shown(LEARN_TRAINING)})"
    before = weights_of(model)
    history = train(submission, model, X, y, what, strict=False, **LEARN_TRAINING, seed=data_seed)
    expect_weights_changed(before, weights_of(model), what, mistakes["optimizer_never_steps"])
    model.call("eval")
    logits = logits_of(model, X_test, "the trained TransformerClassifier")
    expect_shape(logits, (n_test, 2), "the logits of the trained TransformerClassifier")
    accuracy = float(np.mean(logits.argmax(axis=1) == y_test.numpy()))
    ensure(
        accuracy >= MIN_ACCURACY,
        f"after {what} on {n_train} sequences of {seq_len} tokens (vocab {vocab}), "
        f"TransformerClassifier(vocab_size={vocab}) classifies {accuracy:.1%} of {n_test} new "
        f"sequences correctly; correct implementations reach about 93%, at least "
        f"{MIN_ACCURACY:.0%} is required (losses per epoch: {[round(v, 4) for v in history]})",
        mistake=mistakes["optimizer_never_steps"]
        if np.ptp(history) < 1e-3
        else (mistakes["no_zero_grad"] if accumulates_gradients(submission, rng) else None),
    )
    ensure(history[-1] < history[0], f"the training loss should go down, got {history}")


def accumulates_gradients(submission, rng) -> bool:
    """Diagnosis: one epoch at lr=0 over k equal batches leaves, without zero_grad, the sum of
    the k batch gradients in .grad: k times the gradient of the mean loss over all samples."""
    (vocab, length), batch_size, k = distinct_sizes(rng, 2, 4, 9), 6, 3
    n = k * batch_size
    X, y = rng.integers(0, vocab, size=(n, length)), rng.integers(0, 2, size=n)
    w, fresh = linear_model(submission, rng, vocab, length, scale=1.0)
    model = fresh()
    try:
        kwargs = {"epochs": 1, "batch_size": batch_size, "lr": 0.0, "seed": 0}
        train(
            submission, model, torch.from_numpy(X), torch.from_numpy(y), "", strict=False, **kwargs
        )
        grads = submission.probe("gradients", model)
        grad = grads.get("2.bias") if isinstance(grads, dict) else None
    except (StudentError, AssertionError):
        return False
    if not torch.is_tensor(grad):
        return False
    logits = w["0.weight"][X].reshape(n, -1).astype(np.float64) @ w["2.weight"].T + w["2.bias"]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(n), y] -= 1.0
    return bool(np.allclose(grad.numpy(), k * p.mean(axis=0), rtol=1e-3, atol=1e-5))


# -- evaluate_accuracy ---------------------------------------------------------------------------
def targets(rng, predictions: np.ndarray, classes: int) -> tuple[np.ndarray, float]:
    """Labels that agree with `predictions` at about 60% of the samples, and that fraction."""
    hit = rng.random(predictions.shape) < 0.6
    hit[0], hit[-1] = True, False
    if hit.mean() == 0.5:  # a function returning the constant 0.5 must not pass
        hit[1] = not hit[1]
    wrong = (predictions + rng.integers(1, classes, size=predictions.shape)) % classes
    return np.where(hit, predictions, wrong), float(np.mean(hit))


def expect_accuracy(submission, mistakes, recorder: Handle, value, expected: float, what: str):
    """A Python float equal to `expected`, from forward passes in eval mode: `recorder` (a
    batch_recorder probe around the model) saw no input in training mode. The mode after the
    call is free (the contract allows restoring the previous one)."""
    ensure(
        isinstance(value, float),
        f"{what} should return a Python float, got {kind(value)}",
        mistake=mistakes["accuracy_returns_tensor"] if torch.is_tensor(value) else None,
    )
    in_training = len(recorder.getattr("seen")) > 0
    without_eval = mistakes["accuracy_without_eval"] if in_training else None
    ensure(
        abs(value - expected) <= 1e-6,
        f"{what} should be {distinguish(value, expected)[1]} (the fraction of samples whose argmax "
        f"logit is the label, in eval mode), got {distinguish(value, expected)[0]}",
        mistake=without_eval,
    )
    ensure(
        not in_training,
        f"{what} ran the model in training mode (dropout on); put it in eval mode for the "
        "forward passes",
        mistake=without_eval,
    )


@check(points=0.5, grade_id="check_evaluate_accuracy")
def test_evaluate_accuracy_matches_logits(submission, mistakes, rng, seed):
    batch, length, config = classifier_case(rng)
    n, classes = 10 * batch, config["num_classes"]
    model = build(submission, "TransformerClassifier", seed, **config, dropout=0.5)
    X = tokens(rng, config["vocab_size"], n, length)
    model.call("eval")
    y, expected = targets(rng, logits_of(model, X, "TransformerClassifier").argmax(axis=1), classes)
    recorder = submission.probe("batch_recorder", model)
    recorder.call("train")  # evaluate_accuracy must switch dropout off itself
    value = submission.call("evaluate_accuracy", recorder, X, torch.from_numpy(y))
    what = f"evaluate_accuracy(model, X, y) for {n} sequences"
    expect_accuracy(submission, mistakes, recorder, value, expected, what)


def clear_positive_maxima(rng, n: int, classes: int) -> np.ndarray:
    """Rows whose maximum is positive and at least 1 above every other entry: a ReLU in front
    keeps each row's argmax (a row of negatives would become zeros, whose argmax is 0)."""
    X = rng.normal(size=(n, classes))
    X[np.arange(n), rng.integers(0, classes, size=n)] = np.abs(X).max(axis=1) + 1.0
    return X.astype(np.float32)


@check(
    points=0.25,
    grade_id="check_evaluate_accuracy",
    requires=("test_evaluate_accuracy_matches_logits",),
)
def test_evaluate_accuracy_eval_mode_without_gradients(submission, mistakes, rng):
    """The model starts with an in-place ReLU and X is a leaf tensor that requires grad: PyTorch
    refuses that in-place update while it records gradients, and allows it under
    torch.no_grad() or torch.inference_mode()."""
    n, classes = int(rng.integers(30, 60)), int(rng.integers(3, 6))
    X = clear_positive_maxima(rng, n, classes)
    y, expected = targets(rng, X.argmax(axis=1), classes)
    nn_child = torch_nn(submission)
    linear = nn_child.call("Linear", classes, classes)
    linear.call("load_state_dict", {"weight": torch.eye(classes), "bias": torch.zeros(classes)})
    model = nn_child.call("Sequential", nn_child.call("ReLU", inplace=True), linear)
    model = submission.probe("batch_recorder", model)
    what = f"evaluate_accuracy(model, X, y) for {n} samples"
    try:
        X_leaf = torch.from_numpy(X).requires_grad_()
        value = submission.call(
            "evaluate_accuracy", model.call("train"), X_leaf, torch.from_numpy(y)
        )
    except StudentError as error:
        if "in-place operation" not in error.message:
            raise
        fail(
            f"{what} raised {error.type} ({error.message[:120]}): the model ran with gradients "
            "on; this model only runs under torch.no_grad() or torch.inference_mode()",
            mistake=mistakes["accuracy_with_gradients"],
        )
    expect_accuracy(submission, mistakes, model, value, expected, what)
