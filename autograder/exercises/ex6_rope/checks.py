"""Hidden checks of ex6_rope (8 points).

The properties that make RoPE what it is are checked on the student's own outputs, not only
against the reference: a rotation keeps every pair's norm, an offset of p is the same as rows
p, p+1, ... of a longer sequence, and the score of a rotated query and key depends only on the
distance m - n.
"""

from collections.abc import Callable, Sequence

import numpy as np
import pytest
import torch

from autograder._reference import ex6_rope as ref
from autograder.authoring import (
    CheckFailed,
    StudentError,
    as_array,
    call_checked,
    check,
    close,
    distinct_sizes,
    ensure,
    expect_close,
    expect_raises,
    expect_shape,
    load_into,
    module_output,
    module_outputs,
    on_the_contracts,
    student_output,
    without_raised,
)

pytestmark = pytest.mark.ex6

ATOL64, ATOL32 = 1e-9, 1e-5  # the contract's tolerances for float64 and float32 inputs
PROJECTIONS = ("W_q", "W_k", "W_v", "W_o")


def tensor(rng: np.random.Generator, *shape: int, dtype=torch.float64) -> torch.Tensor:
    return torch.from_numpy(rng.normal(size=shape)).to(dtype)


def even_sizes(rng: np.random.Generator, count: int, low: int = 2, high: int = 13) -> list[int]:
    """`count` different even numbers in [2*low, 2*high)."""
    return [2 * size for size in distinct_sizes(rng, count, low, high)]


def rope_input(rng: np.random.Generator, dtype=torch.float64) -> torch.Tensor:
    """x (B, H, T, head_dim), every dimension distinct, head_dim even and >= 6 (so that split
    halves and interleaved pairs differ)."""
    while True:
        batch, heads, length = distinct_sizes(rng, 3, 2, 9)
        head_dim = even_sizes(rng, 1, 3, 9)[0]
        if len({batch, heads, length, head_dim}) == 4:
            return tensor(rng, batch, heads, length, head_dim, dtype=dtype)


def rotated(
    submission, mistakes, x: torch.Tensor, what: str, **kwargs
) -> tuple[np.ndarray, Sequence]:
    """The student's apply_rope(x, **kwargs) as an array of x's shape, and the catalogue's."""
    answer = call_checked(submission, mistakes, "apply_rope", x, **kwargs)
    observed = as_array(answer.value, what, allow=("tensor",))
    expect_shape(observed, tuple(x.shape), what)
    return observed, answer.candidates


def rotation_is_wrong(submission, x: torch.Tensor, **kwargs) -> bool:
    """Whether the notebook's apply_rope(x, **kwargs) raises or answers other than the contract:
    a new tensor of x's shape and dtype (x left as it was), within the contract's tolerance for
    that dtype."""
    try:
        value = submission.call("apply_rope", x, **kwargs)
        observed = as_array(value, "apply_rope(x)", allow=("tensor",))
        function = submission.module_getattr("apply_rope")
        _, after = submission.probe("inputs_after", function, [x], kwargs)
    except (StudentError, CheckFailed):
        return True
    if not (isinstance(after, list) and len(after) == 1 and torch.equal(after[0], x)):
        return True  # x changed in place
    if not isinstance(value, torch.Tensor) or value.dtype != x.dtype:
        return True
    expected = ref.apply_rope(x.double(), **kwargs).numpy()
    atol = ATOL64 if x.dtype == torch.float64 else ATOL32
    return observed.shape != expected.shape or not close(observed, expected, atol=atol, rtol=0)


def wrong_frequencies(submission) -> bool:
    """Whether the notebook's rope_frequencies raises or misses the formula where its own check
    would (rtol 1e-6: float32 frequencies pass, and then keeping float64 precision is
    apply_rope's to do, named `float32_frequencies`)."""
    for head_dim, base in ((6, 10000.0), (10, 137.5), (16, 10000.0)):
        try:
            value = submission.call("rope_frequencies", head_dim, base=base)
            theta = as_array(value, "rope_frequencies", allow=("tensor",))
        except (StudentError, CheckFailed):
            return True
        expected = ref.rope_frequencies(head_dim, base).numpy()
        if theta.shape != expected.shape or not close(theta, expected, atol=0.0, rtol=1e-6):
            return True
    return False


def wrong_rotation(submission) -> bool:
    """Whether the notebook's apply_rope raises or answers other than the contract on what the
    checks built on it feed it: (B, H, T, head_dim) heads in float64 and float32 (RoPEAttention
    runs in float32), at offset 0 and at an offset, with the default base and another, and the
    2-D (positions, head_dim) rows of relative_scores. A predicate that missed a fault that
    code built on apply_rope trips over would let a notebook buy the swap by failing on the
    predicate's inputs only, while an honest notebook with the fault paid it twice (an
    independent attacker did, with float32 heads returned as float64)."""
    rng = np.random.default_rng(6)
    heads = torch.from_numpy(rng.normal(size=(2, 3, 5, 8)))
    rows = torch.from_numpy(rng.normal(size=(6, 10)))
    return any(
        rotation_is_wrong(submission, x, **kwargs)
        for x, kwargs in (
            (heads, {}),
            (heads, {"offset": 7, "base": 137.5}),
            (heads.float(), {"base": 137.5}),
            (heads.float(), {"offset": 3}),
            (rows, {"base": 61.0}),
        )
    )


# One fault, charged once: apply_rope is built on rope_frequencies, and RoPEAttention and
# relative_scores on apply_rope. Where the notebook's upstream function raises or answers other
# than its contract, the contract's own is swapped in while the checks of what is built on it
# run (`on_the_contracts`): a fault is charged to its own checks, and what is built on it is
# judged, against the reference, on an upstream function that works. The notebook's upstream
# code then plays no part in that judgement, so it cannot buy a pass for code built on it (an
# independent attacker's apply_rope recognised the grader's reference computations "with your
# own apply_rope" and answered them to match a wrong attention).
on_contract_frequencies = on_the_contracts(
    "rope_frequencies", ref.rope_frequencies, wrong_frequencies
)
on_a_contract_rotation = on_the_contracts("apply_rope", ref.apply_rope, wrong_rotation)


def on_a_working_rope(check_function: Callable) -> Callable:
    """Frequencies first: an apply_rope that is right on the contract's frequencies is then
    judged as it is."""
    return on_contract_frequencies(on_a_contract_rotation(check_function))


def expect_rotation(
    observed, x: torch.Tensor, what: str, candidates, atol: float = ATOL64, **kwargs
) -> None:
    """The student's apply_rope(x, **kwargs) against the reference's (on x as float64)."""
    expect_close(
        observed,
        ref.apply_rope(x.double(), **kwargs),
        what,
        atol=atol,
        rtol=0,
        mistakes=candidates,
    )


# -- rope_frequencies ----------------------------------------------------------------------------
@check(points=0.75, grade_id="check_rope_frequencies")
def test_rope_frequencies_match_the_formula(submission, mistakes, rng):
    for head_dim, base in zip(
        even_sizes(rng, 3, 2, 40), (10000.0, float(rng.uniform(50, 500)), 10000.0), strict=True
    ):
        what = f"rope_frequencies({head_dim}, base={base:g})"
        answer = call_checked(submission, mistakes, "rope_frequencies", head_dim, base=base)
        observed = as_array(answer.value, what, allow=("tensor",))
        expect_close(
            observed,
            ref.rope_frequencies(head_dim, base),
            what,
            atol=0.0,
            rtol=1e-6,  # float32 frequencies are accepted
            mistakes=answer.candidates,
        )


@check(
    points=0.25,
    grade_id="check_rope_frequencies",
    requires=("test_rope_frequencies_match_the_formula",),
)
def test_rope_frequencies_rejects_an_odd_head_dim(submission, mistakes, rng):
    odd = 2 * int(rng.integers(2, 20)) + 1
    expect_raises(
        submission,
        mistakes,
        "rope_frequencies",
        "ValueError",
        odd,
        what=f"rope_frequencies({odd})",
        why="an odd head_dim cannot be split into pairs",
    )


# -- apply_rope ----------------------------------------------------------------------------------
@check(points=1.0, grade_id="check_apply_rope")
@on_contract_frequencies
def test_apply_rope_matches_the_formula(submission, mistakes, rng):
    x = rope_input(rng)
    what = f"apply_rope(x) for x of shape {tuple(x.shape)} (float64)"
    observed, candidates = rotated(submission, mistakes, x, what)
    expect_rotation(observed, x, what, candidates)
    base = float(rng.uniform(100, 1000))
    what = f"apply_rope(x, base={base:g})"
    observed, candidates = rotated(submission, mistakes, x, what, base=base)
    expect_rotation(observed, x, what, candidates, base=base)


@check(
    points=0.5,
    grade_id="check_apply_rope",
    requires=("test_apply_rope_matches_the_formula",),
)
@on_contract_frequencies
def test_apply_rope_offset_continues_the_positions(submission, mistakes, rng):
    """apply_rope(x, offset=p) equals rows p, p+1, ... of the rotation of a sequence that has
    p rows in front: the property a KV cache relies on."""
    x = rope_input(rng)
    offset = int(rng.integers(3, 40))
    what = f"apply_rope(x, offset={offset})"
    observed, candidates = rotated(submission, mistakes, x, what, offset=offset)
    expect_rotation(observed, x, what, candidates, offset=offset)
    longer = torch.cat([tensor(rng, *x.shape[:-2], offset, x.shape[-1]), x], dim=-2)
    whole, _ = rotated(submission, mistakes, longer, "apply_rope of the longer sequence")
    expect_close(
        observed,
        whole[..., offset:, :],
        f"{what} against rows {offset}... of apply_rope of a sequence with {offset} rows before x",
        atol=ATOL64,
        rtol=0,
        mistakes=candidates,
    )
    # Positions past 2**24 are integers float32 cannot hold (2**24 + 1 rounds to 2**24). With
    # head_dim 2 the only frequency is theta_0 = 1, exact in every dtype and every way of
    # computing it, so any float64 implementation agrees with the reference to 1e-15 here.
    far = 2**24 + 2 * int(rng.integers(0, 1000)) + 1
    pair = tensor(rng, x.shape[0], int(rng.integers(3, 7)), 2)
    what = f"apply_rope(x, offset={far}) for float64 x of shape {tuple(pair.shape)}"
    observed, candidates = rotated(submission, mistakes, pair, what, offset=far)
    expect_rotation(
        observed,
        pair,
        f"{what} (positions past 2**24 need float64 or integer positions)",
        candidates,
        offset=far,
    )


@check(
    points=0.5,
    grade_id="check_apply_rope",
    requires=("test_apply_rope_matches_the_formula",),
)
@on_contract_frequencies
def test_apply_rope_float32_in_float32_out(submission, mistakes, rng):
    x = rope_input(rng, dtype=torch.float32)
    # Positions far enough that angles rounded to float32 (ulp >= 1.2e-4 rad) miss the
    # contract's 1e-5 for every seed; angles in float64 stay within 1e-6 at any position.
    offset = int(rng.integers(2000, 5000))
    what = f"apply_rope(x, offset={offset}) for float32 x"
    answer = call_checked(submission, mistakes, "apply_rope", x, offset=offset)
    ensure(
        isinstance(answer.value, torch.Tensor) and answer.value.dtype == torch.float32,
        f"{what} should return a float32 tensor (x's dtype), got "
        f"{getattr(answer.value, 'dtype', type(answer.value).__name__)}",
        mistake=mistakes["rope_returns_float64"]
        if getattr(answer.value, "dtype", None) == torch.float64
        else None,
    )
    observed = as_array(answer.value, what, allow=("tensor",))
    expect_rotation(observed, x, what, answer.candidates, ATOL32, offset=offset)
    # "Returns a new tensor ...; x is not modified": x as it is in the notebook after the call.
    function = submission.module_getattr("apply_rope")
    _, after = submission.probe("inputs_after", function, [x], {"offset": offset})
    ensure(
        isinstance(after, list) and len(after) == 1 and torch.equal(after[0], x),
        f"{what} changed x: apply_rope should return a new tensor and leave x as it was",
        mistake=mistakes["rope_in_place"],
    )


@check(
    points=0.5,
    grade_id="check_apply_rope",
    requires=("test_apply_rope_matches_the_formula",),
)
@on_contract_frequencies
def test_apply_rope_keeps_every_pair_norm(submission, mistakes, rng):
    """A rotation: |(x'_i, x'_i+h)| = |(x_i, x_i+h)| for every pair, at any position."""
    x = rope_input(rng)
    offset = int(rng.integers(1000, 100_000))
    observed, _ = rotated(submission, mistakes, x, f"apply_rope(x, offset={offset})", offset=offset)
    half = x.shape[-1] // 2
    before = np.hypot(x[..., :half].numpy(), x[..., half:].numpy())
    after = np.hypot(observed[..., :half], observed[..., half:])
    expect_close(
        after,
        before,
        "the norm of each pair (x_i, x_i+h) after apply_rope (a rotation keeps it)",
        atol=1e-8,
        rtol=0,
    )


@check(
    points=0.5,
    grade_id="check_apply_rope",
    requires=("test_apply_rope_matches_the_formula",),
)
@on_contract_frequencies
def test_apply_rope_scores_depend_only_on_the_distance(submission, mistakes, rng):
    """rope(q at m) . rope(k at n) = rope(q at m + s) . rope(k at n + s), from the student's own
    rotations."""
    head_dim = even_sizes(rng, 1, 4, 17)[0]
    q, k = tensor(rng, 1, head_dim), tensor(rng, 1, head_dim)
    m, n, shift = (int(v) for v in rng.integers(0, 300, size=3))
    pairs = ((m, n), (m + shift, n + shift))
    scores = []
    for at_q, at_k in pairs:
        rq, _ = rotated(submission, mistakes, q, f"apply_rope(q, offset={at_q})", offset=at_q)
        rk, _ = rotated(submission, mistakes, k, f"apply_rope(k, offset={at_k})", offset=at_k)
        scores.append(float(rq[0] @ rk[0]))
    expect_close(
        np.array(scores[1]),
        np.array(scores[0]),
        f"the score of q at {m + shift} and k at {n + shift} against q at {m} and k at {n} "
        "(the same distance)",
        atol=1e-8,
        rtol=1e-8,
    )


# -- RoPEAttention -------------------------------------------------------------------------------
def attention_sizes(rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(B, L, d_model, num_heads), head_dim even; B, L, num_heads, head_dim all different."""
    while True:
        batch, length, heads = distinct_sizes(rng, 3, 2, 9)
        head_dim = even_sizes(rng, 1, 2, 6)[0]
        if len({batch, length, heads, head_dim}) == 4:
            return batch, length, heads * head_dim, heads


def seeded_weights(rng: np.random.Generator, d_model: int) -> dict[str, torch.Tensor]:
    """Weights that give scores of order 1 (the default init gives nearly uniform attention,
    under which a missing scale or a rotation of V hardly shows)."""
    return {
        f"{name}.weight": torch.from_numpy(
            rng.normal(scale=1.5 * d_model**-0.5, size=(d_model, d_model)).astype(np.float32)
        )
        for name in PROJECTIONS
    }


@check(points=1.5, grade_id="check_rope_attention")
@on_a_working_rope
def test_rope_attention_matches_the_reference_on_its_weights(submission, mistakes, rng):
    batch, length, d_model, heads = attention_sizes(rng)
    compare_on_seeded_weights(submission, mistakes, rng, batch, length, (d_model, heads))
    # RoPE of another base: the module must pass its base on to the rotation.
    base = float(rng.uniform(50, 500))
    compare_on_seeded_weights(submission, mistakes, rng, batch, length, (d_model, heads, base))
    # One head (head_dim = d_model) is a model the contract admits and that a split can get wrong.
    head_dim = even_sizes(rng, 1, 2, 6)[0]
    compare_on_seeded_weights(submission, mistakes, rng, batch, length, (head_dim, 1))


def compare_on_seeded_weights(
    submission, mistakes, rng: np.random.Generator, batch: int, length: int, sizes: tuple
) -> None:
    d_model = sizes[0]
    module = submission.call("RoPEAttention", *sizes)
    state = module.call("state_dict")
    ensure(
        isinstance(state, dict) and all(f"{name}.weight" in state for name in PROJECTIONS),
        f"RoPEAttention{sizes} should have the submodules {', '.join(PROJECTIONS)} "
        f"(nn.Linear(d_model, d_model, bias=False)); its state_dict has "
        f"{sorted(state) if isinstance(state, dict) else state!r}",
    )
    weights = load_into(module, seeded_weights(rng, d_model))
    x = torch.from_numpy(rng.normal(size=(batch, length, d_model)).astype(np.float32))
    # the same module on another batch size and length between two calls on x (causal, then
    # not): an answer that depends on an earlier call shows
    other_batch, other_length = (
        int(v) for v in rng.choice([s for s in range(2, 9) if s not in (batch, length)], 2, False)
    )
    other = torch.from_numpy(
        rng.normal(size=(other_batch, other_length, d_model)).astype(np.float32)
    )
    for case, causal in ((x, True), (other, True), (x, False), (other, False)):

        def run(reference_module, case=case, causal=causal):
            return reference_module(case.double(), causal=causal).numpy()

        what = f"RoPEAttention{sizes}(x, causal={causal}) on its own weights, x {tuple(case.shape)}"
        expect_close(
            student_output(module, case, what, causal=causal),
            module_output(ref.RoPEAttention, sizes, weights, run),
            what,
            atol=1e-4,
            rtol=1e-4,
            mistakes=without_raised(module_outputs(mistakes, "RoPEAttention", sizes, weights, run)),
        )


@check(
    points=0.5,
    grade_id="check_rope_attention",
    requires=("test_rope_attention_matches_the_reference_on_its_weights",),
)
@on_a_working_rope
def test_rope_attention_projections_and_sizes(submission, mistakes, rng):
    _, _, d_model, heads = attention_sizes(rng)
    state = submission.call("RoPEAttention", d_model, heads).call("state_dict")
    for name in PROJECTIONS:
        expect_shape(
            as_array(state[f"{name}.weight"], f"{name}.weight"),
            (d_model, d_model),
            f"the weight of {name}",
        )
    biases = sorted(key for key in state if key.endswith("bias"))
    ensure(
        not biases,
        f"the projections should have no bias (bias=False), found {biases}",
        mistake=mistakes["rope_projections_with_bias"],
    )
    # other parameter-free submodules are allowed, but the state_dict holds exactly these
    extra = sorted(key for key in state if key not in {f"{n}.weight" for n in PROJECTIONS})
    ensure(
        not extra,
        f"RoPEAttention's state_dict should hold exactly {', '.join(PROJECTIONS)}'s weights; it "
        f"also holds {extra} (a buffer of the frequencies? register it with persistent=False)",
        mistake=mistakes["frequencies_in_the_state_dict"],
    )
    odd_head = 2 * int(rng.integers(2, 5)) + 1
    for args, why in (
        ((heads * 2 * odd_head + 1, heads), "d_model is not divisible by num_heads"),
        ((heads * odd_head, heads), "head_dim is odd"),
    ):
        expect_raises(
            submission,
            mistakes,
            "RoPEAttention",
            "ValueError",
            *args,
            what=f"RoPEAttention{args}",
            why=why,
        )


@check(
    points=0.5,
    grade_id="check_rope_attention",
    requires=("test_rope_attention_matches_the_reference_on_its_weights",),
)
@on_a_working_rope
def test_rope_attention_is_causal_and_sees_order(submission, rng):
    """Causal: changing the last token changes no earlier output. Positions: unlike attention
    without positions, reversing the order of the tokens does not just reverse the outputs."""
    batch, length, d_model, heads = attention_sizes(rng)
    module = submission.call("RoPEAttention", d_model, heads)
    load_into(module, seeded_weights(rng, d_model))
    x = torch.from_numpy(rng.normal(size=(batch, length, d_model)).astype(np.float32))
    changed = x.clone()
    changed[:, -1] += 1.0
    before = student_output(module, x, "the output", causal=True)
    after = student_output(module, changed, "the output with the last token changed", causal=True)
    expect_close(
        after[:, :-1],
        before[:, :-1],
        "causal outputs before the last position when only the last token changes",
        atol=1e-5,
        rtol=1e-5,
    )
    plain = student_output(module, x, "the output", causal=False)
    reverse = student_output(module, x.flip(1), "the output of the reversed tokens", causal=False)
    ensure(
        not np.allclose(reverse[:, ::-1], plain, atol=1e-4),
        "with causal=False, reversing the tokens only reversed the outputs: the positions "
        "(RoPE on Q and K) have no effect",
    )


# -- relative_scores -----------------------------------------------------------------------------
@check(points=1.0, grade_id="check_relative_scores")
@on_a_working_rope
def test_relative_scores_match_the_formula(submission, mistakes, rng):
    """In float64 and in float32: q's dtype comes back, and the values are compared at the
    apply_rope tolerance of that dtype times |q|·|k| (the contract)."""
    head_dim, positions = even_sizes(rng, 2, 3, 12)
    for dtype, atol in ((torch.float64, ATOL64), (torch.float32, ATOL32)):
        q, k = tensor(rng, head_dim, dtype=dtype), tensor(rng, head_dim, dtype=dtype)
        base = float(rng.uniform(20, 200))
        what = (
            f"relative_scores(q, k, positions={positions}, base={base:g}) for {dtype} q and k "
            f"of head_dim {head_dim}"
        )
        answer = call_checked(submission, mistakes, "relative_scores", q, k, positions, base=base)
        ensure(
            isinstance(answer.value, torch.Tensor) and answer.value.dtype == dtype,
            f"{what} should return a tensor of q's dtype, {dtype}; got "
            f"{getattr(answer.value, 'dtype', type(answer.value).__name__)}",
            mistake=mistakes["relative_scores_in_float64"]
            if getattr(answer.value, "dtype", None) == torch.float64
            else None,
        )
        scale = float(q.double().norm() * k.double().norm())
        expect_close(
            as_array(answer.value, what, allow=("tensor",)),
            ref.relative_scores(q.double(), k.double(), positions, base=base),
            what,
            atol=atol * scale,
            rtol=0,
            mistakes=answer.candidates,
        )


@check(
    points=0.5,
    grade_id="check_relative_scores",
    requires=("test_relative_scores_match_the_formula",),
)
@on_a_working_rope
def test_relative_scores_depend_only_on_m_minus_n(submission, rng):
    head_dim = even_sizes(rng, 1, 3, 12)[0]
    positions = int(rng.integers(9, 20))
    q, k = tensor(rng, head_dim), tensor(rng, head_dim)
    what = f"relative_scores(q, k, {positions})"
    scores = as_array(submission.call("relative_scores", q, k, positions), what, allow=("tensor",))
    expect_shape(scores, (positions, positions), what)
    atol = 2 * ATOL64 * float(q.norm() * k.norm())  # each within the contract's tolerance
    expect_close(
        scores[1:, 1:],
        scores[:-1, :-1],
        f"{what}: S[m+1, n+1] against S[m, n] (the score depends only on m - n)",
        atol=atol,
        rtol=0,
    )
    expect_close(
        np.diag(scores),
        np.full(positions, float(q @ k)),
        f"the diagonal of {what} (m = n: the rotations cancel, q . k)",
        atol=atol,
        rtol=0,
    )
