"""Running nn.Module classes in the parent on the student's own weights.

A student's module starts from random weights, so its output can only be compared with a module
that holds the same weights: the checks read the student's state_dict back and build the
reference class, or each catalogued wrong class, around it (in float64 by default).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from autograder.authoring.catalogue import Catalogue, Mistake, Raised
from autograder.authoring.expect import as_array, close, ensure, expect_shape, fail
from autograder.grading.submission import Handle


def load_into(
    module: Handle,
    weights: dict[str, torch.Tensor],
    may_tie: Sequence[tuple[str, str]] = (),
    submission: Any = None,
) -> dict[str, torch.Tensor]:
    """Load `weights` into the student's module (strict=False), put it in eval mode and return
    what it then holds under those names: the weights loaded, in the module's own dtype.

    What the module holds must be what was loaded (cast to its dtype, as load_state_dict casts):
    the reference runs on these weights, so a module that changed them while loading (zeroed
    its output projection, say) would otherwise be compared with a reference of its choosing.
    The one exception is a pair in `may_tie` (keys of the same shape that a correct module may
    share, as tied input and output embeddings do): where the module holds one Parameter under
    both names (the `module_summary` probe of `submission`), both are loaded with one value
    (and the reference runs on it). A module that copies one onto the other while loading
    shares nothing and is failed as before (an independent attacker hid swapped matrices that
    way)."""
    if may_tie:
        if submission is None:
            raise TypeError("load_into(may_tie=...) needs the submission (its module_summary)")
        weights = _tied(module, weights, may_tie, submission)
    module.call("load_state_dict", weights, strict=False)
    module.call("eval")
    state = module.call("state_dict")
    held: dict[str, torch.Tensor] = {}
    for key, loaded in weights.items():
        value = state.get(key) if isinstance(state, dict) else None
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(loaded.shape):
            fail(
                f"after load_state_dict, state_dict() should hold {key!r} as a tensor of shape "
                f"{tuple(loaded.shape)}, got {_what(value)}"
            )
        ensure(
            value.is_floating_point() and torch.equal(value, loaded.to(value.dtype)),
            f"after load_state_dict, state_dict()[{key!r}] should be the weights just loaded; "
            "the module holds other values (load_state_dict must load them as given)",
        )
        held[key] = value
    return held


def _tied(
    module: Handle,
    weights: dict[str, torch.Tensor],
    pairs: Sequence[tuple[str, str]],
    submission: Any,
) -> dict[str, torch.Tensor]:
    """`weights`, with each pair of `pairs` that the module holds as one Parameter under both
    names (`shared_parameters` of the `module_summary` probe) given the first one's value:
    loading both into one Parameter could leave only one of them anyway. `load_into` then
    checks that the module holds what was loaded, as for any other weight."""
    shared = _summary(submission, module).get("shared_parameters")
    held_together = (
        {tuple(names) for names in shared if isinstance(names, list)}
        if isinstance(shared, list)
        else set()
    )
    tied = dict(weights)
    for first, second in pairs:
        if (
            tuple(sorted((first, second))) in held_together
            and first in weights
            and second in weights
            and weights[first].shape == weights[second].shape
        ):
            tied[second] = weights[first]
    return tied


def _what(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return "nothing" if value is None else type(value).__name__


def student_output(module: Handle, x: torch.Tensor, what: str, **kwargs: Any) -> np.ndarray:
    """The student's module's output on x as an array; fail unless it is a tensor of x's
    shape."""
    out = as_array(module(x, **kwargs), what, allow=("tensor",))
    expect_shape(out, tuple(x.shape), what)
    return out


def module_output(
    cls: Callable,
    init_args: Sequence,
    state_dict: dict[str, torch.Tensor],
    run: Callable,
    *,
    dtype: torch.dtype = torch.float64,
) -> Any:
    """`run(module)` without gradients, for `module = cls(*init_args)` cast to `dtype`, in eval
    mode, holding the entries of `state_dict` (names it lacks are ignored; an entry of another
    shape raises)."""
    module = cls(*init_args).to(dtype)
    module.load_state_dict(state_dict, strict=False)
    module.eval()
    with torch.no_grad():
        return run(module)


def module_outputs(
    catalogue: Catalogue,
    target: str,
    init_args: Sequence,
    state_dict: dict[str, torch.Tensor],
    run: Callable,
    *,
    dtype: torch.dtype = torch.float64,
) -> list[tuple[Mistake, object]]:
    """(mistake, `module_output` of it) for every catalogued wrong class `target`, or `Raised`
    when building it, loading the weights or `run` raises: candidates for naming a wrong
    answer, like `Catalogue.outputs` gives for functions. A mistake that gives the reference's
    own answer here (a wrong default when the argument is given, say) explains no wrong answer
    and is left out."""
    from autograder.core.registry import reference_module

    try:
        reference = getattr(reference_module(catalogue.exercise), target)
        right = module_output(reference, init_args, state_dict, run, dtype=dtype)
    except Exception:  # noqa: BLE001 - then no mistake is left out
        right = Raised("reference")
    found: list[tuple[Mistake, object]] = []
    for mistake in catalogue.for_target(target):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                cls = mistake.bound(catalogue.exercise)
                output = module_output(cls, init_args, state_dict, run, dtype=dtype)
        except Exception as error:  # noqa: BLE001 - raising is this mistake's outcome
            found.append((mistake, Raised(type(error).__name__, str(error)[:2000])))
            continue
        if isinstance(right, Raised) or not _same_answer(output, right):
            found.append((mistake, output))
    return found


def _same_answer(a: Any, b: Any) -> bool:
    """Equal outputs (arrays, tensors, numbers, or tuples and lists of them), to rounding."""
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same_answer(x, y) for x, y in zip(a, b, strict=True))
    try:
        return close(a, b, atol=1e-12, rtol=1e-9, allow_inf=True)
    except (TypeError, ValueError):  # not an array (a ragged list, an object)
        return False


def without_raised(candidates: list[tuple[Mistake, object]]) -> list[tuple[Mistake, object]]:
    """The candidates whose mistake returned (not `Raised`)."""
    return [(mistake, output) for mistake, output in candidates if not isinstance(output, Raised)]


def call_evaluating(submission: Any, name: str, model: Handle, *args: Any) -> tuple[Any, dict]:
    """The student's function `name` called as name(model, *args) through the `forward_modes`
    probe: (what it returned, {"calls", "training", "with_gradients"}) for the calls of `model`
    and its submodules it made (see `expect_evaluated`)."""
    function = submission.module_getattr(name)
    value, modes = submission.probe("forward_modes", function, model, *args)
    return value, modes


def expect_evaluated(
    modes: Any,
    what: str,
    *,
    with_gradients: Mistake | None,
    in_training: Mistake | None = None,
    samples: int | None = None,
) -> None:
    """Fail unless every call of the model that `call_evaluating` saw ran without gradients
    (torch.no_grad() or torch.inference_mode(); an output that carries an autograd graph counts
    as computed with gradients) and, when `in_training` is given (the contract says "eval
    mode"), in eval mode. Each of these functions runs the model, and a global hook sees every
    module call that nn.Module's own dispatcher makes, however the module is called, so no call
    seen fails too: the model's output was computed some other way (by hand from its weights,
    or around the dispatcher), or the hook was switched off. With
    `samples`, the model must also have evaluated that many rows without gradients (in eval
    mode where `in_training` is given; a single small call so seen, beside the real ones made
    with the hook switched off, is no evidence of an evaluation of all the samples)."""
    counts = modes if isinstance(modes, dict) else {}
    calls, training, gradients, rows = (
        value if isinstance(value := counts.get(key), int) else 0
        for key in (
            "calls",
            "training",
            "with_gradients",
            "rows_without_gradients" if in_training is None else "rows_evaluated",
        )
    )
    ensure(
        calls > 0,
        f"{what} never called the model (model(...) or model.forward(...)): evaluate it with "
        "the model itself, in eval mode, without gradients",
    )
    if in_training is not None:
        ensure(
            training == 0,
            f"{what} ran the model in training mode ({training} of {calls} module calls); call "
            "model.eval() before the forward passes (restoring the previous mode afterwards is "
            "fine)",
            mistake=in_training,
        )
    ensure(
        gradients == 0,
        f"{what} ran the model with gradients on ({gradients} of {calls} module calls); run it "
        "under torch.no_grad() (or torch.inference_mode())",
        mistake=with_gradients,
    )
    if samples is not None:
        mode = "" if in_training is None else " in eval mode"
        ensure(
            rows >= samples,
            f"{what} evaluated {rows} of the {samples} samples{mode} without gradients; "
            "each sample's prediction should come from such a forward pass",
            mistake=with_gradients,
        )


TRAINING_SECONDS = 120.0  # a training function's call (the checks' default is 30 s)


def trained_in_batches(
    submission: Any, name: str, model: Handle, *args: Any, **kwargs: Any
) -> tuple[Any, Any]:
    """The student's training function `name` called as name(model, *args, **kwargs) through
    the `training_batches` probe: (what it returned, the size of every batch the model was fed
    in training mode), with a training call's timeout (a 30 s one cost an honest notebook 0.25
    on a machine loaded 13 deep)."""
    function = submission.module_getattr(name)
    value, sizes = submission.probe(
        "training_batches", function, model, list(args), kwargs, timeout=TRAINING_SECONDS
    )
    return value, sizes


def expect_batches(
    sizes: Any, samples: int, batch_size: int, epochs: int, what: str, mistake: Mistake
) -> None:
    """Fail unless the model was fed each epoch's `samples` in batches of at most `batch_size`,
    at least ceil(samples / batch_size) of them (smaller ones are fine: micro-batches whose
    gradients are accumulated into one step, a smaller last batch)."""
    ok = isinstance(sizes, list) and all(isinstance(size, int) for size in sizes)
    batches = -(-samples // batch_size)
    ensure(
        ok and sum(sizes) == epochs * samples,
        f"{what} should feed the model every one of the {samples} samples once per epoch "
        f"({epochs} epochs); the model was fed batches of {sizes}"[:400],
    )
    ensure(
        max(sizes) <= batch_size and len(sizes) >= epochs * batches,
        f"{what} should feed each epoch's {samples} samples in mini-batches of at most "
        f"{batch_size}; the model was fed batches of {sizes}"[:400],
        mistake=mistake if max(sizes) > batch_size else None,
    )


def _summary(submission: Any, module: Handle) -> dict:
    """The `module_summary` probe of the student's module ({} where it answers otherwise)."""
    summary = submission.probe("module_summary", module)
    return summary if isinstance(summary, dict) else {}


def parameter_count(submission: Any, module: Handle, *, trainable: bool) -> int | None:
    """The (trainable) parameter count of the student's module, each shared Parameter once (the
    `module_summary` probe; None where it gives no count)."""
    count = _summary(submission, module).get("trainable_parameters" if trainable else "parameters")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def trainable_parameters(submission: Any, module: Handle) -> int | None:
    """The trainable parameter count of the student's module (None where the probe gives none)."""
    return parameter_count(submission, module, trainable=True)


def weights_of(module: Handle) -> dict[str, torch.Tensor]:
    """The student's module's state_dict as sent back (tensors only)."""
    state = module.call("state_dict")
    if not isinstance(state, dict):
        return {}
    return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}


def expect_weights_changed(
    before: dict[str, torch.Tensor],
    after: dict[str, torch.Tensor],
    what: str,
    mistake: Mistake | None = None,
) -> None:
    """Fail unless a training function changed at least one of the model's floating weights:
    a model that only looks trained (it computes the answer some other way in eval mode) must
    not earn a training check for a function that never stepped its optimizer."""
    changed = any(
        key in after
        and value.is_floating_point()
        and (after[key].shape != value.shape or not torch.equal(after[key], value))
        for key, value in before.items()
    )
    ensure(
        changed,
        f"{what} left every weight of the model as it was: it should take optimizer steps "
        "(optimizer.step() after loss.backward())",
        mistake=mistake,
    )
