"""Hidden checks of ex8_additive_attention (8 points).

Each module is run on the student's own weights and compared with the formula of the contract
(the reference class holding the same weights, in float64); the weights must be a softmax over
the S annotations that gives blocked annotations exactly 0, and the context their weighted sum,
recomputed here from what the student's module returned. Training is judged by the accuracy of
the student's trained module, measured here on a held-out task.
"""

import numpy as np
import pytest
import torch

from autograder._reference import ex8_additive_attention as ref
from autograder.authoring import (
    UNUSABLE,
    CheckFailed,
    StudentError,
    as_array,
    call_checked,
    call_evaluating,
    check,
    close,
    distinct_sizes,
    ensure,
    expect_batches,
    expect_close,
    expect_equal,
    expect_evaluated,
    expect_shape,
    expect_tuple,
    fail,
    is_int,
    is_real,
    load_into,
    matching_mistake,
    module_output,
    module_outputs,
    parameter_count,
    set_aside,
    trained_in_batches,
    weights_of,
)

pytestmark = pytest.mark.ex8

ATOL = RTOL = 1e-4  # float32 in the child against float64 here
LAYOUT = {  # the contract's parameters: name -> shape from (enc_dim, dec_dim, attn_dim)
    "AdditiveAttention": {
        "W_h.weight": lambda e, d, a: (a, e),
        "W_s.weight": lambda e, d, a: (a, d),
        "W_s.bias": lambda e, d, a: (a,),
        "v.weight": lambda e, d, a: (1, a),
    },
    "MultiplicativeAttention": {"W_a.weight": lambda e, d, a: (d, e)},
    "ScaledDotAttention": {},
}


def sizes(rng: np.random.Generator) -> tuple[int, int, int, int, int]:
    """(B, S, enc_dim, dec_dim, attn_dim), all different."""
    return tuple(distinct_sizes(rng, 5, 2, 14))  # type: ignore[return-value]


def init_args(name: str, enc: int, dec: int, attn: int) -> tuple[int, ...]:
    return {"AdditiveAttention": (enc, dec, attn), "MultiplicativeAttention": (enc, dec)}.get(
        name, (enc,)
    )


def seeded_weights(rng, name: str, enc: int, dec: int, attn: int) -> dict[str, torch.Tensor]:
    """Weights that give scores of order 1-3 (the default init gives nearly uniform weights)."""
    return {
        key: torch.from_numpy(
            rng.normal(scale=1.5 / np.sqrt(shape(enc, dec, attn)[-1]), size=shape(enc, dec, attn))
        ).float()
        for key, shape in LAYOUT[name].items()
    }


def inputs(rng, batch: int, length: int, enc: int, dec: int):
    annotations = torch.from_numpy(rng.normal(size=(batch, length, enc))).float()
    state = torch.from_numpy(rng.normal(size=(batch, dec))).float()
    mask = rng.random((batch, length)) < 0.6
    rows = np.arange(batch)
    kept = rng.integers(0, length, size=batch)
    mask[rows, kept] = True  # no row fully blocked,
    mask[rows, (kept + rng.integers(1, length, size=batch)) % length] = False  # nor fully open
    return annotations, state, torch.from_numpy(mask)


def run_student(module, name: str, annotations, state, mask, mistakes, candidates) -> tuple:
    """(context, weights) from the student's module as arrays of the contract's shapes."""
    what = f"{name}.forward(annotations {tuple(annotations.shape)}, state {tuple(state.shape)})"
    try:
        value = module(annotations, state, mask=mask)
    except StudentError as error:
        raised = next(
            (m for m, out in candidates if getattr(out, "type", None) == error.type), None
        )
        fail(str(error), mistake=raised)
    context, weights = expect_tuple(value, 2, what)
    context = as_array(context, f"the context of {what}", allow=("tensor",))
    weights = as_array(weights, f"the weights of {what}", allow=("tensor",))
    batch, length, enc = annotations.shape
    named = matching_mistake(
        weights, [(m, out[1]) for m, out in candidates if isinstance(out, tuple)]
    )
    expect_shape(weights, (batch, length), f"the weights of {what}", mistake=named)
    expect_shape(context, (batch, enc), f"the context of {what}")
    return context, weights


def check_module(submission, mistakes, rng, name: str) -> tuple:
    """The student's `name` on its own weights against the reference on the same weights, with
    and without a mask. Returns the last (annotations, mask, context, weights)."""
    batch, length, enc, dec, attn = sizes(rng)
    if name == "ScaledDotAttention":
        dec = enc
    args = init_args(name, enc, dec, attn)
    module = submission.call(name, *args)
    state_dict = module.call("state_dict")
    missing = sorted(set(LAYOUT[name]) - set(state_dict))
    ensure(
        not missing,
        f"{name}{args} should have the parameters {sorted(LAYOUT[name])}; it has "
        f"{sorted(state_dict)}",
    )
    weights = load_into(module, seeded_weights(rng, name, enc, dec, attn)) if LAYOUT[name] else {}
    annotations, state, mask = inputs(rng, batch, length, enc, dec)
    # one sample alone (decoding one sentence), all of them, all of them with a mask (last: the
    # caller checks the softmax and the context on it)
    cases = (
        (annotations[:1], state[:1], None),
        (annotations, state, None),
        (annotations, state, mask),
    )
    for h, s, used in cases:

        def run(reference_module, h=h, s=s, used=used):
            context, attn_weights = reference_module(h.double(), s.double(), mask=used)
            return context.numpy(), attn_weights.numpy()

        candidates = module_outputs(mistakes, name, args, weights, run)
        context, got = run_student(module, name, h, s, used, mistakes, candidates)
        expected = module_output(getattr(ref, name), args, weights, run)
        masked = (" with a mask" if used is not None else "") + (
            " on one sample (B = 1)" if len(h) == 1 else ""
        )
        pairs = [(m, out) for m, out in candidates if isinstance(out, tuple)]
        expect_close(
            got,
            expected[1],
            f"the attention weights of {name}{args}{masked} on its own weights",
            atol=ATOL,
            rtol=RTOL,
            mistakes=[(m, out[1]) for m, out in pairs],
        )
        expect_close(
            context,
            expected[0],
            f"the context of {name}{args}{masked} on its own weights",
            atol=ATOL,
            rtol=RTOL,
            mistakes=[(m, out[0]) for m, out in pairs],
        )
    return annotations.numpy(), mask.numpy(), context, got


def check_softmax_and_context(annotations, mask, context, weights, name: str) -> None:
    """From the student's own outputs: weights >= 0 summing to 1 over the S annotations,
    blocked annotations exactly 0, context = the weighted sum of the annotations."""
    ensure(bool(np.all(weights >= 0)), f"{name}'s weights should be non-negative")
    expect_close(
        weights.sum(axis=1),
        np.ones(len(weights)),
        f"the sum of {name}'s weights over the S annotations of each sample",
        atol=1e-5,
    )
    ensure(
        bool(np.all(weights[~mask] == 0)),
        f"{name}'s weights of blocked annotations (mask False) should be exactly 0",
    )
    expect_close(
        context,
        np.einsum("bs,bse->be", weights, annotations),
        f"{name}'s context against the sum of the annotations weighted by its own weights",
        atol=1e-5,
        rtol=1e-5,
    )


# -- the three modules ---------------------------------------------------------------------------
@check(points=1.25, grade_id="check_additive")
def test_additive_matches_the_reference_on_its_weights(submission, mistakes, rng):
    check_module(submission, mistakes, rng, "AdditiveAttention")


@check(
    points=0.5,
    grade_id="check_additive",
    requires=("test_additive_matches_the_reference_on_its_weights",),
)
def test_additive_weights_are_a_softmax_over_the_annotations(submission, mistakes, rng):
    check_softmax_and_context(
        *check_module(submission, mistakes, rng, "AdditiveAttention"), "AdditiveAttention"
    )


@check(
    points=0.25,
    grade_id="check_additive",
    requires=("test_additive_matches_the_reference_on_its_weights",),
)
def test_additive_parameters(submission, mistakes, rng):
    _, _, enc, dec, attn = sizes(rng)
    state = submission.call("AdditiveAttention", enc, dec, attn).call("state_dict")
    ensure(
        sorted(state) == sorted(LAYOUT["AdditiveAttention"]),
        "the parameters of AdditiveAttention (W_h and v without bias, W_s with) should be "
        f"{sorted(LAYOUT['AdditiveAttention'])}, got {sorted(state)}",
        mistake=mistakes["additive_W_h_with_bias"] if "W_h.bias" in state else None,
    )
    for key, shape in LAYOUT["AdditiveAttention"].items():
        held = as_array(state[key], key)
        expect_shape(
            held,
            shape(enc, dec, attn),
            key,
            mistake=mistakes["attn_dim_ignored"] if held.shape == shape(enc, dec, enc) else None,
        )


@check(points=1.0, grade_id="check_multiplicative")
def test_multiplicative_matches_the_reference_on_its_weights(submission, mistakes, rng):
    check_module(submission, mistakes, rng, "MultiplicativeAttention")


@check(
    points=0.5,
    grade_id="check_multiplicative",
    requires=("test_multiplicative_matches_the_reference_on_its_weights",),
)
def test_multiplicative_weights_and_parameters(submission, mistakes, rng):
    name = "MultiplicativeAttention"
    check_softmax_and_context(*check_module(submission, mistakes, rng, name), name)
    _, _, enc, dec, _ = sizes(rng)
    state = submission.call(name, enc, dec).call("state_dict")
    ensure(
        sorted(state) == ["W_a.weight"],
        f"the parameters of MultiplicativeAttention should be ['W_a.weight'], got {sorted(state)}",
        mistake=mistakes["W_a_with_bias"] if "W_a.bias" in state else None,
    )
    expect_shape(as_array(state["W_a.weight"], "W_a.weight"), (dec, enc), "W_a.weight")


@check(points=0.5, grade_id="check_scaled_dot")
def test_scaled_dot_matches_the_formula(submission, mistakes, rng):
    check_module(submission, mistakes, rng, "ScaledDotAttention")


@check(
    points=0.25,
    grade_id="check_scaled_dot",
    requires=("test_scaled_dot_matches_the_formula",),
)
def test_scaled_dot_weights_and_no_parameters(submission, mistakes, rng):
    name = "ScaledDotAttention"
    check_softmax_and_context(*check_module(submission, mistakes, rng, name), name)
    dim = int(rng.integers(3, 30))
    module = submission.call(name, dim)
    # counted after a forward pass as well: a parameter made on the first call is one too
    annotations = torch.from_numpy(rng.normal(size=(2, 3, dim))).float()
    module(annotations, torch.from_numpy(rng.normal(size=(2, dim))).float())
    count = parameter_count(submission, module, trainable=False)
    # no parameters, trainable or not: a buffer (a persistent scale, say) is no parameter
    ensure(
        count == 0,
        f"ScaledDotAttention({dim}) should have no parameters, has {count}",
        mistake=mistakes["dot_with_a_learned_scale"] if count == 1 else None,
    )


# -- parameter counts ----------------------------------------------------------------------------
@check(points=1.0, grade_id="check_parameter_counts")
def test_parameter_counts_match_the_modules(submission, mistakes, rng):
    """The counts equal the formula and the parameters of the student's own modules."""
    for _ in range(2):
        _, _, enc, dec, attn = sizes(rng)
        what = f"attention_parameter_counts({enc}, {dec}, {attn})"
        answer = call_checked(submission, mistakes, "attention_parameter_counts", enc, dec, attn)
        expected = ref.attention_parameter_counts(enc, dec, attn)
        ensure(
            isinstance(answer.value, dict)
            and sorted(answer.value) == sorted(expected)
            and all(is_int(v) for v in answer.value.values()),
            f"{what} should be a dict of ints with the keys {sorted(expected)}, got "
            f"{answer.value!r}"[:300],
        )
        expect_equal(answer.value, expected, what, answer.candidates)
        for name, key in (
            ("AdditiveAttention", "additive"),
            ("MultiplicativeAttention", "multiplicative"),
        ):
            state = submission.call(name, *init_args(name, enc, dec, attn)).call("state_dict")
            own = sum(int(np.prod(as_array(v, k).shape)) for k, v in state.items())
            ensure(
                own == answer.value[key],
                f"{what}[{key!r}] is {answer.value[key]}, but your {name} has {own} parameters",
            )


# -- the pointer task ----------------------------------------------------------------------------
@check(points=0.75, grade_id="check_pointer_task")
def test_pointer_task_data(submission, mistakes, rng):
    n, length, dim = distinct_sizes(rng, 3, 3, 40)
    seed = int(rng.integers(0, 10_000))
    what = f"make_pointer_task({n}, seq_len={length}, dim={dim}, seed={seed})"

    def data(seed: int):
        value = expect_tuple(
            submission.call("make_pointer_task", n, seq_len=length, dim=dim, seed=seed), 3, what
        )
        return [as_array(v, f"{what}[{i}]", allow=("tensor",)) for i, v in enumerate(value)]

    annotations, states, targets = data(seed)
    expect_shape(
        annotations,
        (n, length, dim),
        f"the annotations of {what}",
        mistake=mistakes["pointer_task_ignores_seq_len"]
        if annotations.shape == (n, 8, dim)
        else mistakes["pointer_task_ignores_dim"]
        if annotations.shape == (n, length, 16)
        else None,
    )
    expect_shape(states, (n, dim), f"the states of {what}")
    expect_shape(targets, (n,), f"the targets of {what}")
    ensure(
        annotations.dtype == states.dtype == np.float32 and targets.dtype == np.int64,
        f"{what}: annotations and states should be float32, targets int64 (long); got "
        f"{annotations.dtype}, {states.dtype}, {targets.dtype}",
        mistake=mistakes["pointer_task_float64"]
        if annotations.dtype == states.dtype == np.float64
        else None,
    )
    scores = np.einsum("nsd,nd->ns", annotations.astype(np.float64), states.astype(np.float64))
    named = mistakes["targets_argmin"] if np.array_equal(targets, scores.argmin(1)) else None
    ensure(
        np.array_equal(targets, scores.argmax(1)),
        f"{what}: each target should be the annotation the state points to "
        "(the largest dot product annotations[j, i] . states[j])",
        mistake=named,
    )
    values = np.concatenate([annotations.ravel(), states.ravel()])
    ensure(
        abs(values.mean()) < 0.1 and abs(values.std() - 1) < 0.1,
        f"{what}: annotations and states should be standard normal; got mean "
        f"{values.mean():.3f}, std {values.std():.3f}",
    )
    again, other = data(seed), data(seed + 1)
    ensure(
        all(
            np.array_equal(a, b) for a, b in zip(again, (annotations, states, targets), strict=True)
        ),
        f"{what} should return the same data for the same seed",
        mistake=mistakes["pointer_task_ignores_seed"],
    )
    ensure(not np.array_equal(other[0], annotations), "a different seed should give other data")


def same_tensor(value, expected: torch.Tensor) -> bool:
    """Whether `value` (what the child's state_dict() sent back) is exactly `expected`."""
    return isinstance(value, torch.Tensor) and torch.equal(value, expected.to(value.dtype))


# -- training ------------------------------------------------------------------------------------
TRAIN_TASK = (2000, 0)  # n_samples and seed of the training task, as in the contract
HELD_OUT = ref.make_pointer_task(500, seed=1)
# Thresholds below what correct solutions reach (reference over 10 seeds: multiplicative
# 0.908-0.924, additive 0.422-0.512 on the held-out task; the contract says 0.85 and 0.35).
THRESHOLDS = {"MultiplicativeAttention": 0.85, "AdditiveAttention": 0.35}


def trained(submission, name: str, args: tuple, seed: int, start: dict | None = None):
    """The student's module (holding `start`'s weights, if given) trained by the student's
    train_pointer on the training task."""
    module = submission.call(name, *args)
    if start is not None:
        load_into(module, start)
    return module, train_on_the_task(submission, module, seed)


def train_on_the_task(submission, module, seed: int):
    """The student's train_pointer on the training task, with its defaults: the history."""
    annotations, states, targets = ref.make_pointer_task(TRAIN_TASK[0], seed=TRAIN_TASK[1])
    return submission.call(
        "train_pointer", module, annotations, states, targets, seed=seed, timeout=120
    )


def parent_copy(module, name: str, args: tuple) -> torch.nn.Module:
    """The reference class holding the student's (trained) weights, here in the parent."""
    state = {k: torch.as_tensor(as_array(v, k)) for k, v in module.call("state_dict").items()}
    copy = getattr(ref, name)(*args)
    try:
        copy.load_state_dict(state, strict=False)
    except RuntimeError as error:  # weights of other shapes than the contract's
        fail(f"the weights of {name}{args} do not have the contract's shapes: {error}"[:400])
    return copy.eval()


def pointing_accuracy(reference_module) -> float:
    """The held-out accuracy of a reference module: the fraction of samples whose largest
    weight is on the target (in float64)."""
    annotations, states, targets = HELD_OUT
    weights = reference_module(annotations.double(), states.double())[1]
    return float((weights.argmax(-1) == targets).double().mean())


def held_out_accuracy(module, name: str, args: tuple) -> float:
    """The accuracy of the student's trained weights, measured here by the reference class."""
    with torch.no_grad():
        return pointing_accuracy(parent_copy(module, name, args).double())


# One fault, charged once. A student's module is trusted only on inputs where it gives the
# reference's answer (`agrees_with_the_reference`, asked after the student's function has
# answered): the loss and accuracy checks judge train_pointer and pointer_accuracy on the other
# module where the first one does not. A learn half is excused, where its module's value check
# fails (`upstream`), when the student's train_pointer trains the other module to its threshold.
VALUE_CHECK = {
    "AdditiveAttention": "test_additive_matches_the_reference_on_its_weights",
    "MultiplicativeAttention": "test_multiplicative_matches_the_reference_on_its_weights",
}
LEARNS = "test_train_pointer_learns_the_task_with_multiplicative"
TRAINED_ON = {"MultiplicativeAttention": (16, 16), "AdditiveAttention": (16, 16, 64)}


def agrees_with_the_reference(module, name: str, annotations, states) -> bool:
    """Whether the student's module gives, in eval mode on these inputs, the weights the
    reference class gives with the same weights."""
    try:
        module.call("eval")
        value = module(annotations, states)
        weights = as_array(expect_tuple(value, 2, "the module's output")[1], "weights")
        copy = parent_copy(module, name, TRAINED_ON[name]).double()
    except UNUSABLE:
        return False
    with torch.no_grad():
        expected = copy(annotations.double(), states.double())[1].numpy()
    return weights.shape == expected.shape and close(weights, expected, atol=ATOL, rtol=RTOL)


def on_a_module_that_agrees(submission, expect, inputs: tuple) -> None:
    """`expect(module, name)` on a new MultiplicativeAttention of the student's, then, where that
    fails and the module does not agree with the reference on the check's `inputs`
    (annotations, states), on a new AdditiveAttention of theirs. The verdict stands where the
    module agrees with the reference (the fault is the function's), and the first one stands
    where neither module does."""
    first: Exception | None = None
    for name in TRAINED_ON:
        module = submission.call(name, *TRAINED_ON[name])
        try:
            expect(module, name)
            return
        except (CheckFailed, StudentError) as verdict:
            if agrees_with_the_reference(module, name, *inputs):
                raise
            first = first or verdict
    assert first is not None
    raise first


def reaches_threshold(submission, name: str, seed: int) -> bool:
    """Whether the student's train_pointer trains their `name` to the contract's threshold
    (measured by the reference class on their weights)."""
    try:
        module, _ = trained(submission, name, TRAINED_ON[name], seed)
        return held_out_accuracy(module, name, TRAINED_ON[name]) >= THRESHOLDS[name]
    except UNUSABLE:
        return False


def expect_learned(submission, name: str, seed: int, mistakes=None) -> None:
    """The student's `name` trained by their train_pointer reaches the contract's threshold,
    measured by the reference class on their weights. Where it does not, and the module is their
    own fault (its checks fail, see `upstream`), the verdict is set aside when their
    train_pointer trains their other module to that module's threshold: a train_pointer that
    works, on a module that cannot learn (weights that ignore the state, say)."""
    args = TRAINED_ON[name]
    (other,) = set(TRAINED_ON) - {name}
    try:
        module = submission.call(name, *args)
        before = weights_of(module)
        train_on_the_task(submission, module, seed)
        accuracy = held_out_accuracy(module, name, args)
        after = weights_of(module)
        unchanged = bool(before) and all(same_tensor(after.get(k), v) for k, v in before.items())
        ensure(
            accuracy >= THRESHOLDS[name],
            f"{name}{args} trained with train_pointer's defaults on make_pointer_task(2000, "
            f"seed=0) should point to the target in at least {THRESHOLDS[name]:.0%} of a "
            f"held-out task; it reached {accuracy:.1%}"
            + (" (its weights did not change)" if unchanged else ""),
            mistake=mistakes["pointer_optimizer_never_steps"]
            if mistakes is not None and unchanged
            else None,
        )
    except (StudentError, CheckFailed) as error:
        if not reaches_threshold(submission, other, seed):  # asked only after the answer
            raise
        set_aside(error if isinstance(error, CheckFailed) else CheckFailed(str(error)))


@check(points=0.5, grade_id="check_training", upstream=(VALUE_CHECK["MultiplicativeAttention"],))
def test_train_pointer_learns_the_task_with_multiplicative(submission, mistakes, seed):
    expect_learned(submission, "MultiplicativeAttention", seed % 1000, mistakes)


@check(points=0.5, grade_id="check_training", upstream=(VALUE_CHECK["AdditiveAttention"],))
def test_train_pointer_learns_the_task_with_additive(submission, mistakes, seed):
    expect_learned(submission, "AdditiveAttention", seed % 1000, mistakes)


@check(points=0.5, grade_id="check_training", requires=(LEARNS,))
def test_train_pointer_reports_the_sample_weighted_loss(submission, mistakes, rng):
    """At lr=0 nothing changes, so every epoch's sample-weighted mean loss is the negative
    log-likelihood of the untrained module, computed here (n not divisible by batch_size, which
    is not the default: the module records the batches it is fed)."""
    n = 150
    batch_size = int(rng.choice([b for b in range(20, 50) if n % b >= 5]))
    task = ref.make_pointer_task(n, seed=int(rng.integers(0, 10_000)))
    settings = {"epochs": 3, "batch_size": batch_size, "lr": 0.0}
    # small weights: scores of order 1, no weight near 0, so that every formulation the
    # contract allows (clamped log, log + eps, log-softmax of the scores) gives the same loss
    small = {
        name: {k: 0.15 * v for k, v in seeded_weights(rng, name, 16, 16, 64).items()}
        for name in TRAINED_ON
    }

    def expect(module, name: str) -> None:
        expect_losses(submission, mistakes, module, name, small[name], task, settings)

    on_a_module_that_agrees(submission, expect, task[:2])


def expect_losses(submission, mistakes, module, name, small, task, settings) -> None:
    annotations, states, targets = task
    weights = load_into(module, small)
    history, sizes = trained_in_batches(submission, "train_pointer", module, *task, **settings)
    parent = getattr(ref, name)(*TRAINED_ON[name])
    parent.load_state_dict(weights)
    candidates = mistakes.outputs("train_pointer", parent, *task, **settings)
    ensure(
        isinstance(history, list) and len(history) == 3 and all(is_real(v) for v in history),
        f"train_pointer(..., epochs=3) should return a list of 3 losses, got {history!r}"[:300],
        mistake=mistakes["epochs_ignored"]
        if isinstance(history, list) and len(history) == 30
        else None,
    )

    def run(reference_module):
        picked = reference_module(annotations.double(), states.double())[1]
        return -np.log(picked.gather(1, targets.unsqueeze(1)).clamp_min(1e-12).numpy()).mean()

    expected = module_output(getattr(ref, name), TRAINED_ON[name], weights, run)
    expect_close(
        np.array(history),
        np.full(3, expected),
        f"the losses per epoch of {name} at lr=0 (each the sample-weighted mean negative "
        "log-likelihood)",
        atol=1e-4,
        rtol=1e-4,
        mistakes=[(m, out) for m, out in candidates if isinstance(out, list)],
    )
    expect_losses_before_each_update(submission, mistakes, module, name, weights, task)
    expect_batches(
        sizes,
        len(targets),
        settings["batch_size"],
        3,
        f"train_pointer(..., epochs=3, batch_size={settings['batch_size']})",
        mistakes["batch_size_ignored"],
    )


def expect_losses_before_each_update(submission, mistakes, module, name, weights, task) -> None:
    """One batch of every sample per epoch (so the order drawn from the seed changes nothing):
    epoch 1 reports the loss of the weights it starts from, epoch 2 that of the weights after
    one Adam step (the loss computed before each update, the contract)."""
    annotations, states, targets = task
    settings = {"epochs": 2, "batch_size": len(targets), "lr": 0.05}
    load_into(module, weights)
    history = submission.call("train_pointer", module, *task, **settings)
    parent = getattr(ref, name)(*TRAINED_ON[name]).double()
    parent.load_state_dict(weights)
    optimizer = torch.optim.Adam(parent.parameters(), lr=settings["lr"])
    expected = []
    for _ in range(2):
        picked = parent(annotations.double(), states.double())[1].gather(1, targets[:, None])
        loss = -torch.log(picked.clamp_min(1e-12)).mean()
        expected.append(float(loss))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    copy = getattr(ref, name)(*TRAINED_ON[name])
    copy.load_state_dict(weights)
    candidates = mistakes.outputs("train_pointer", copy, *task, **settings)
    ensure(
        isinstance(history, list) and len(history) == 2 and all(is_real(v) for v in history),
        f"train_pointer(..., epochs=2) should return a list of 2 losses, got {history!r}"[:300],
    )
    expect_close(
        np.array(history),
        np.array(expected),
        f"the losses of {name} trained for 2 epochs of one batch of all {len(targets)} samples "
        "(lr=0.05): the loss before the first update, then the loss before the second",
        atol=1e-4,
        rtol=1e-3,
        mistakes=[(m, out) for m, out in candidates if isinstance(out, list)],
    )


@check(
    points=0.25,
    grade_id="check_training",
    requires=(LEARNS,),
)
def test_train_pointer_is_deterministic_for_a_seed(submission, mistakes, rng, seed):
    """From the same initial weights, the same seed gives the same losses (at a tolerance, the
    contract), whatever the global random state; another seed, another order of the batches,
    and so other losses."""
    start = seeded_weights(rng, "MultiplicativeAttention", 16, 16, 0)
    chosen = seed % 1000
    runs = []
    for global_seed, own in ((seed + 1, chosen), (seed + 2, chosen), (seed + 3, chosen + 1)):
        submission.seed(global_seed)
        runs.append(trained(submission, "MultiplicativeAttention", (16, 16), own, start)[1])
    same = [
        isinstance(run, list)
        and len(run) == len(runs[0])
        and close(run, runs[0], atol=1e-6, rtol=1e-5)
        for run in runs
    ]
    ensure(
        same[1],
        f"train_pointer(..., seed={chosen}) should give the same losses every time, whatever the "
        "global random state",
        mistake=mistakes["train_pointer_ignores_seed"],
    )
    ensure(
        not same[2],
        f"train_pointer gave the same losses for seeds {chosen} and {chosen + 1}: the order of "
        "the mini-batches should be drawn from the seed",
        mistake=mistakes["pointer_batches_in_order"],
    )


def pointing_weights(rng) -> dict[str, torch.Tensor]:
    """W_a = I + noise: sᵀ W_a h is the dot product the target is defined by, blurred, so the
    accuracy on the held-out task is an exact fraction well above chance and below 1."""
    noise = rng.normal(scale=0.12, size=(16, 16))  # about 65-75% of the held-out task
    return {"W_a.weight": torch.from_numpy(np.eye(16) + noise).float()}


@check(points=0.25, grade_id="check_training")
def test_pointer_accuracy_of_a_pointing_module(submission, mistakes, rng):
    """The value, computed in eval mode without gradients (the contract's constraint gates these
    points: the module has no dropout, so only a hook sees the mode)."""
    start = {
        "MultiplicativeAttention": pointing_weights(rng),
        "AdditiveAttention": seeded_weights(rng, "AdditiveAttention", 16, 16, 64),
    }

    def expect(module, name: str) -> None:
        expect_pointer_accuracy(submission, mistakes, module, name, start[name])

    on_a_module_that_agrees(submission, expect, HELD_OUT[:2])


def expect_pointer_accuracy(submission, mistakes, module, name: str, start: dict) -> None:
    """pointer_accuracy of the student's module holding `start`, against the accuracy of those
    weights measured here before the call (the function may not change the weights it is
    judged on: it is measured, and the module checked to hold them still, afterwards)."""
    held = load_into(module, start)
    expected = module_output(getattr(ref, name), TRAINED_ON[name], held, pointing_accuracy)
    module.call("train")  # pointer_accuracy must switch to eval mode itself
    value, modes = call_evaluating(submission, "pointer_accuracy", module, *HELD_OUT)
    after = weights_of(module)
    ensure(
        all(same_tensor(after.get(k), v) for k, v in held.items()),
        "pointer_accuracy changed the module's weights; it should only measure them",
    )
    parent = getattr(ref, name)(*TRAINED_ON[name])
    parent.load_state_dict(held)
    candidates = mistakes.outputs("pointer_accuracy", parent.eval(), *HELD_OUT)
    named = next(
        (m for m, out in candidates if is_real(out) and is_real(value) and abs(out - value) < 1e-6),
        None,
    )
    ensure(
        is_real(value) and abs(float(value) - expected) < 1e-6,
        f"pointer_accuracy of a {name} that points to the target of {expected:.1%} of the "
        f"samples should be {expected:.4f} (the fraction of samples whose largest weight is "
        f"on the target), got {value!r}",
        mistake=named,
    )
    expect_evaluated(
        modes,
        "pointer_accuracy(module, annotations, states, targets)",
        with_gradients=mistakes["pointer_accuracy_with_gradients"],
        in_training=mistakes["pointer_accuracy_in_training_mode"],
        samples=len(HELD_OUT[2]),
    )
    # weights of zero: every score ties, every weight is 1/S, and the first maximum (the
    # contract, as argmax gives it) is annotation 0
    load_into(module, {key: torch.zeros_like(value) for key, value in held.items()})
    part = tuple(t[:300] for t in HELD_OUT)  # another number of samples than the call above
    value = submission.call("pointer_accuracy", module, *part)
    targets = part[2]
    expected = float((targets == 0).double().mean())
    last = float((targets == part[0].shape[1] - 1).double().mean())
    ensure(
        is_real(value) and abs(float(value) - expected) < 1e-6,
        f"pointer_accuracy of a {name} whose weights are all zero (every weight 1/S: a tie), "
        f"on {len(targets)} samples, "
        f"should be {expected:.4f}, the fraction of targets at the first annotation (the first "
        f"maximum on ties), got {value!r}",
        mistake=mistakes["pointer_last_maximum_on_ties"]
        if is_real(value) and abs(float(value) - last) < 1e-6
        else None,
    )
