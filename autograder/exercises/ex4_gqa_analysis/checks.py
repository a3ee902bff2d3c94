"""Hidden checks of ex4_gqa_analysis (8 points).

The student's module runs in the child in float32 on weights the parent chose (loaded with
`load_state_dict`, then read back: "the student's own weights"); the reference runs here in
float64 on those same weights. Heads are the usual split: query head i owns rows
i*head_dim .. (i+1)*head_dim-1 of W_q's weight, K/V head j the same rows of W_k and W_v, and
head i's context feeds columns i*head_dim .. of W_o (what `.view(B, L, heads, head_dim)` gives).
"""

import numpy as np
import pytest
import torch

from autograder._reference import ex4_gqa_analysis as ref
from autograder.authoring import (
    StudentError,
    as_array,
    call_checked,
    check,
    close,
    distinct_sizes,
    ensure,
    equal_mistake,
    expect_close,
    expect_number,
    expect_raises,
    expect_shape,
    fail,
    is_int,
    is_real,
    load_into,
    mask_hiding,
    module_output,
    module_outputs,
    on_the_contracts,
    student_output,
    without_raised,
)

pytestmark = pytest.mark.ex4

PROJECTIONS = ("W_q", "W_k", "W_v", "W_o")
REPORT_KEYS = ("name", "n_kv_heads", "kv_params", "kv_cache_mib", "output_shape")
ATOL = RTOL = 1e-4  # float32 in the child against float64 here, outputs of order 1


# -- sizes and weights ---------------------------------------------------------------------------
def gqa_sizes(rng: np.random.Generator) -> tuple[int, int, int, int, int]:
    """(B, L, d_model, n_heads, n_kv_heads) with n_kv_heads >= 2 K/V heads serving g >= 2 query
    heads each (so `repeat` and `repeat_interleave` differ), and B, L, d_model, n_heads,
    n_kv_heads, g, head_dim all different."""
    while True:
        n_kv, group = (int(v) for v in rng.choice([2, 3, 4], size=2, replace=False))
        head_dim = int(rng.integers(3, 10))
        batch, length = distinct_sizes(rng, 2, 2, 12)
        n_heads = n_kv * group
        sizes = (batch, length, n_heads * head_dim, n_heads, n_kv, group, head_dim)
        if len(set(sizes)) == len(sizes):
            return batch, length, n_heads * head_dim, n_heads, n_kv


def expected_shapes(d_model: int, n_heads: int, n_kv_heads: int) -> dict[str, tuple[int, int]]:
    """nn.Linear weight shapes (out_features, in_features) of the contract."""
    head_dim = d_model // n_heads
    return {
        "W_q": (n_heads * head_dim, d_model),
        "W_k": (n_kv_heads * head_dim, d_model),
        "W_v": (n_kv_heads * head_dim, d_model),
        "W_o": (d_model, n_heads * head_dim),
    }


def seeded_weights(rng, d_model, n_heads, n_kv_heads, *, identity_out=False) -> dict:
    """Weights scaled so that q, k, v entries and the scores are of order 1 (nn.Linear's default
    init gives nearly uniform attention, under which a missing scale hardly shows)."""
    weights = {
        f"{name}.weight": torch.from_numpy(
            rng.normal(scale=d_model**-0.5, size=shape).astype(np.float32)
        )
        for name, shape in expected_shapes(d_model, n_heads, n_kv_heads).items()
    }
    if identity_out:  # the output is then the head contexts side by side
        weights["W_o.weight"] = torch.eye(d_model)
    return weights


def random_input(rng, *shape) -> torch.Tensor:
    return torch.from_numpy(rng.normal(size=shape).astype(np.float32))


# -- the student's module ------------------------------------------------------------------------
def build(submission, d_model: int, n_heads: int, n_kv_heads: int):
    return submission.call("GroupedQueryAttention", d_model, n_heads, n_kv_heads)


def check_projections(module, sizes, mistakes=None) -> None:
    """W_q, W_k, W_v and W_o are bias-free projections of the contract's shapes."""
    what = f"GroupedQueryAttention{sizes}"
    state = module.call("state_dict")
    ensure(isinstance(state, dict), f"{what}.state_dict() should be a dict")
    for name, shape in expected_shapes(*sizes).items():
        ensure(
            f"{name}.weight" in state,
            f"{what} should have a submodule {name} "
            f"(nn.Linear(..., bias=False)); its state_dict has {sorted(state)}",
        )
        weight = as_array(state[f"{name}.weight"], f"{name}.weight")
        named = None
        if mistakes is not None and name in ("W_k", "W_v") and weight.shape == (sizes[0], sizes[0]):
            named = mistakes["kv_projections_use_query_heads"]
        expect_shape(
            weight,
            shape,
            f"{what}: the weight of {name} (out_features, in_features)",
            mistake=named,
        )
    biases = [f"{name}.bias" for name in PROJECTIONS if f"{name}.bias" in state]
    ensure(
        not biases,
        f"{what}'s projections should have no bias (bias=False), found {', '.join(biases)}",
        mistake=None if mistakes is None else mistakes["projections_with_bias"],
    )


def gqa_expected(mistakes, sizes, weights, x, mask=None) -> tuple[np.ndarray, list]:
    """The reference's output in float64 on the student's weights, and the (mistake, output)
    pairs of the catalogued wrong classes on those weights."""
    mask = None if mask is None else torch.as_tensor(mask)

    def run(module):
        return module(x.double(), mask=mask).numpy()

    candidates = module_outputs(mistakes, "GroupedQueryAttention", sizes, weights, run)
    return module_output(ref.GroupedQueryAttention, sizes, weights, run), without_raised(candidates)


# -- GroupedQueryAttention: structure ----------------------------------------------------------
@check(
    points=0.5,
    grade_id="check_gqa_structure",
    requires=("test_gqa_matches_reference_with_its_own_weights",),
)
def test_gqa_projection_shapes_without_bias(submission, mistakes, rng):
    _, _, d_model, n_heads, n_kv = gqa_sizes(rng)
    module = build(submission, d_model, n_heads, n_kv)
    check_projections(module, (d_model, n_heads, n_kv), mistakes)


@check(
    points=0.5,
    grade_id="check_gqa_structure",
    requires=("test_gqa_matches_reference_with_its_own_weights",),
)
def test_gqa_output_shape(submission, mistakes, rng):
    batch, length, d_model, n_heads, n_kv = gqa_sizes(rng)
    module = build(submission, d_model, n_heads, n_kv)
    x = random_input(rng, batch, length, d_model)
    sizes = (d_model, n_heads, n_kv)
    what = f"the output of GroupedQueryAttention{sizes} on x of shape {x.shape}"
    out = as_array(module(x), what, allow=("tensor",))
    unmerged = (batch, n_heads, length, d_model // n_heads)
    expect_shape(
        out,
        tuple(x.shape),
        what,
        mistake=mistakes["heads_not_merged"] if out.shape == unmerged else None,
    )
    ensure(bool(np.all(np.isfinite(out))), "the output should be finite (no NaN or inf)")


@check(
    points=0.5,
    grade_id="check_gqa_structure",
    requires=("test_gqa_matches_reference_with_its_own_weights",),
)
def test_gqa_rejects_indivisible_sizes(submission, mistakes, rng):
    n_heads = int(rng.choice([6, 8, 9, 10]))
    head_dim = int(rng.integers(3, 9))
    bad_kv = int(rng.choice([k for k in range(2, n_heads) if n_heads % k]))
    cases = (
        (
            (n_heads * head_dim + int(rng.integers(1, n_heads)), n_heads, 1),
            "d_model is not divisible by n_heads",
        ),
        ((n_heads * head_dim, n_heads, bad_kv), "n_heads is not divisible by n_kv_heads"),
    )
    for sizes, why in cases:
        what = f"GroupedQueryAttention{sizes}"
        expect_raises(
            submission, mistakes, "GroupedQueryAttention", "ValueError", *sizes, what=what, why=why
        )


# -- GroupedQueryAttention: what it computes -----------------------------------------------------
@check(points=1.0, grade_id="check_gqa_attention")
def test_gqa_matches_reference_with_its_own_weights(submission, mistakes, rng):
    batch, length, d_model, n_heads, n_kv = gqa_sizes(rng)
    for kv_heads, kind in ((n_kv, "GQA"), (1, "MQA"), (n_heads, "MHA")):
        sizes = (d_model, n_heads, kv_heads)
        module = build(submission, *sizes)
        check_projections(module, sizes)
        weights = load_into(module, seeded_weights(rng, *sizes))
        x = random_input(rng, batch, length, d_model)
        # the same module again on another batch size and length, then on x again: an answer
        # that depends on an earlier call shows
        for case in (x, other_input(rng, x), x):
            expected, candidates = gqa_expected(mistakes, sizes, weights, case)
            what = f"the output of GroupedQueryAttention{sizes} ({kind}) on x of shape "
            expect_close(
                student_output(module, case, "the output"),
                expected,
                what + str(tuple(case.shape)),
                atol=ATOL,
                rtol=RTOL,
                mistakes=candidates,
            )


def other_input(rng, x: torch.Tensor) -> torch.Tensor:
    """An input of another batch size and another length than x's (the same d_model)."""
    batch, length, d_model = x.shape
    sizes = [size for size in range(2, 12) if size not in (batch, length, d_model)]
    other_batch, other_length = (int(v) for v in rng.choice(sizes, size=2, replace=False))
    return random_input(rng, other_batch, other_length, d_model)


@check(points=1.0, grade_id="check_gqa_attention")
def test_gqa_kv_head_serves_its_group(submission, mistakes, rng):
    """With W_o = I the output is the head contexts side by side. Perturbing only K/V head j's
    rows of W_k and W_v must change exactly the contexts of query heads j*g .. j*g+g-1."""
    batch, length, d_model, n_heads, n_kv = gqa_sizes(rng)
    sizes, group, head_dim = (d_model, n_heads, n_kv), n_heads // n_kv, d_model // n_heads
    module = build(submission, *sizes)
    check_projections(module, sizes)
    weights = seeded_weights(rng, *sizes, identity_out=True)
    load_into(module, weights)
    x = random_input(rng, batch, length, d_model)
    before = student_output(module, x, "the output").reshape(batch, length, n_heads, head_dim)
    for j in range(n_kv):
        rows = slice(j * head_dim, (j + 1) * head_dim)
        moved = dict(weights)
        for key in ("W_k.weight", "W_v.weight"):
            moved[key] = weights[key].clone()
            moved[key][rows] += random_input(rng, head_dim, d_model)
        load_into(module, moved)
        after = student_output(module, x, "the output").reshape(batch, length, n_heads, head_dim)
        change = np.abs(after - before).max(axis=(0, 1, 3))
        changed = [h for h in range(n_heads) if change[h] > 1e-3]
        expected = list(range(j * group, (j + 1) * group))
        named = (
            mistakes["kv_repeat_not_interleave"]
            if changed == list(range(j, n_heads, n_kv))
            else None
        )
        ensure(
            changed == expected,
            f"with n_heads={n_heads}, n_kv_heads={n_kv} (g={group}), changing only K/V head "
            f"{j} (rows {rows.start}..{rows.stop - 1} of W_k and W_v) should change the "
            f"contexts of query heads {expected}, but it changed those of heads {changed}",
            mistake=named,
        )


@check(points=0.5, grade_id="check_gqa_attention")
def test_gqa_bool_mask_blocks_positions(submission, mistakes, rng):
    batch, length, d_model, n_heads, n_kv = gqa_sizes(rng)
    while length < 4:  # room for a mask whose heads all differ
        batch, length, d_model, n_heads, n_kv = gqa_sizes(rng)
    sizes = (d_model, n_heads, n_kv)
    module = build(submission, *sizes)
    check_projections(module, sizes)
    weights = load_into(module, seeded_weights(rng, *sizes))
    x = random_input(rng, batch, length, d_model)
    hidden = int(rng.integers(length))  # a key that only its own query may attend to
    others = [r for r in range(length) if r != hidden]
    # a mask's heads axis is the query heads' (one slice per query head, in their order)
    for shape in ((length, length), (batch, 1, length, length), (1, n_heads, length, length)):
        keep = mask_hiding(rng, shape, hidden)
        while shape[1] == n_heads and len({keep[0, h].tobytes() for h in range(n_heads)}) < n_heads:
            keep = mask_hiding(rng, shape, hidden)  # every head its own slice
        mask = torch.from_numpy(keep)
        what = f"the output with a boolean mask of shape {shape} (True = may attend)"
        out = student_output(module, x, what, mask=mask)
        expected, candidates = gqa_expected(mistakes, sizes, weights, x, keep)
        expect_close(out, expected, what, atol=ATOL, rtol=RTOL, mistakes=candidates)
        altered = x.clone()
        altered[:, hidden] = random_input(rng, batch, d_model)
        again = student_output(module, altered, what, mask=mask)
        ensure(
            np.allclose(again[:, others], out[:, others], atol=1e-5),
            f"position {hidden} is blocked for every other query by the mask, yet changing the "
            f"input there changed other positions' outputs (mask of shape {shape})",
        )
    # then without a mask, on another input: every position may attend again
    other = other_input(rng, x)
    expected, candidates = gqa_expected(mistakes, sizes, weights, other)
    what = f"the output without a mask on x of shape {tuple(other.shape)}, after masked calls"
    out = student_output(module, other, what)
    expect_close(out, expected, what, atol=ATOL, rtol=RTOL, mistakes=candidates)


# -- parameters and cache --------------------------------------------------------------------------
@check(points=0.75, grade_id="check_kv_params")
def test_kv_projection_params(submission, mistakes, rng):
    _, _, d_model, n_heads, n_kv = gqa_sizes(rng)
    for args in ((d_model, n_heads, n_kv), (d_model, n_heads, 1), (d_model, n_heads, n_heads)):
        answer = call_checked(submission, mistakes, "kv_projection_params", *args)
        expected = ref.kv_projection_params(*args)
        expect_number(answer.value, expected, f"kv_projection_params{args}", answer.candidates)


def cache_arguments(rng) -> tuple[int, int, int]:
    seq_len = int(rng.integers(100, 5000))
    n_kv, head_dim = distinct_sizes(rng, 2, 3, 40)
    return seq_len, n_kv, head_dim


@check(points=0.5, grade_id="check_kv_cache")
def test_kv_cache_bytes_defaults(submission, mistakes, rng):
    args = cache_arguments(rng)
    answer = call_checked(submission, mistakes, "kv_cache_bytes", *args)
    what = f"kv_cache_bytes{args} (one layer, one sequence, 2 bytes per element)"
    expect_number(answer.value, ref.kv_cache_bytes(*args), what, answer.candidates)


@check(points=0.75, grade_id="check_kv_cache")
def test_kv_cache_bytes_uses_every_argument(submission, mistakes, rng):
    # n_layers and batch_size differ from each other and from 2 (so that an ignored argument
    # never looks like a missing factor 2); 1 byte per element first, then 4.
    for bytes_per_element in (1, 4):
        n_layers, batch_size = distinct_sizes(rng, 2, 3, 40)
        args = cache_arguments(rng)
        kwargs = dict(n_layers=n_layers, batch_size=batch_size, bytes_per_element=bytes_per_element)
        answer = call_checked(submission, mistakes, "kv_cache_bytes", *args, **kwargs)
        what = f"kv_cache_bytes{args[:3]} with " + ", ".join(f"{k}={v}" for k, v in kwargs.items())
        expect_number(answer.value, ref.kv_cache_bytes(*args, **kwargs), what, answer.candidates)


# One fault, charged once: kv_cache_mib is built on kv_cache_bytes, and gqa_report on
# kv_projection_params and kv_cache_mib. Where the notebook's helper raises or answers other
# than its contract, the contract's own is swapped in while the checks of what is built on it
# run (`on_the_contracts`): its fault is charged to its own checks, and what is built on it is
# judged, against the reference, on a helper that works. The notebook's helper plays no part in
# that judgement (an independent attacker's helpers told the grader's reference computation "with
# your own helpers" from the notebook's calls, by positional against keyword arguments).
Calls = tuple[tuple[tuple[int, ...], dict[str, int]], ...]
# every argument used, 2 and 4 bytes per element
PROBE_CALLS: Calls = (
    ((1000, 3, 16), {}),
    ((777, 5, 24), {"n_layers": 3, "batch_size": 7}),
    ((777, 5, 24), {"n_layers": 3, "batch_size": 7, "bytes_per_element": 4}),
)


def answers_otherwise(
    submission, name: str, calls: Calls, expected, *, integer: bool = False
) -> bool:
    """Whether the notebook's `name` raises, or answers other than `expected(*args, **kwargs)`
    (to 1e-9; an int where its checks ask for one, `integer`), on any of `calls`. At least as
    strict as the checks of `name`: a fault they charge that the predicate missed would be
    charged again to what is built on it, unless the notebook bought the swap by failing on
    the predicate's inputs only (an independent attacker did so in ex6)."""
    for args, kwargs in calls:
        try:
            value = submission.call(name, *args, **kwargs)
        except StudentError:
            return True
        want = expected(*args, **kwargs)
        if not (is_int(value) if integer else is_real(value)):
            return True
        if not close(value, want, atol=0, rtol=1e-9):
            return True
    return False


def wrong_bytes(submission) -> bool:
    return answers_otherwise(
        submission, "kv_cache_bytes", PROBE_CALLS, ref.kv_cache_bytes, integer=True
    )


def wrong_mib(submission) -> bool:
    return answers_otherwise(submission, "kv_cache_mib", PROBE_CALLS, ref.kv_cache_mib)


def wrong_params(submission) -> bool:
    calls: Calls = (((48, 6, 2), {}), ((40, 8, 8), {}), ((36, 4, 1), {}))
    return answers_otherwise(
        submission, "kv_projection_params", calls, ref.kv_projection_params, integer=True
    )


on_contract_bytes = on_the_contracts("kv_cache_bytes", ref.kv_cache_bytes, wrong_bytes)
on_contract_mib = on_the_contracts("kv_cache_mib", ref.kv_cache_mib, wrong_mib)
on_contract_params = on_the_contracts(
    "kv_projection_params", ref.kv_projection_params, wrong_params
)


def on_the_contract_helpers(check_function):
    """gqa_report's checks: kv_cache_bytes first (a kv_cache_mib right on the contract's bytes
    is then judged as it is), then kv_cache_mib and kv_projection_params."""
    return on_contract_params(on_contract_bytes(on_contract_mib(check_function)))


@check(points=0.5, grade_id="check_kv_cache")
@on_contract_bytes
def test_kv_cache_mib(submission, mistakes, rng):
    args = cache_arguments(rng)
    n_layers, batch_size = distinct_sizes(rng, 2, 3, 40)
    kwargs = {"n_layers": n_layers, "batch_size": batch_size, "bytes_per_element": 4}
    answer = call_checked(submission, mistakes, "kv_cache_mib", *args, **kwargs)
    expected = ref.kv_cache_mib(*args, **kwargs)
    what = f"kv_cache_mib{args[:3]} with n_layers={n_layers}, batch_size={batch_size}, 4 bytes"
    expect_number(answer.value, expected, what, answer.candidates, integer=False)


# -- the report ----------------------------------------------------------------------------------
def report_arguments(rng) -> dict:
    n_heads = int(rng.choice([6, 10, 12]))
    options = [
        int(k) for k in rng.permutation([k for k in range(1, n_heads + 1) if n_heads % k == 0])
    ]
    if options == sorted(options):  # never in order: rows sorted by n_kv_heads show
        options.reverse()
    return {
        "d_model": n_heads * int(rng.choice([4, 5, 8])),
        "n_heads": n_heads,
        "kv_head_options": tuple(options),
        "seq_len": int(rng.integers(100, 5000)),
        "batch_shape": tuple(  # no size n_heads: a cache for batch_shape[0] sequences shows
            int(v) for v in rng.choice([b for b in range(2, 9) if b != n_heads], 2, replace=False)
        ),
    }


def report_rows(value, kwargs: dict) -> list[dict]:
    options = kwargs["kv_head_options"]
    ensure(
        isinstance(value, list) and len(value) == len(options),
        f"gqa_report should return a list of {len(options)} rows (one per option of "
        f"kv_head_options={options}), got {type(value).__name__}"
        + (f" of length {len(value)}" if isinstance(value, list | tuple) else ""),
    )
    for index, row in enumerate(value):
        ensure(
            isinstance(row, dict),
            f"row {index} of gqa_report should be a dict, got {type(row).__name__}",
        )
        missing = [key for key in REPORT_KEYS if key not in row]
        ensure(not missing, f"row {index} of gqa_report lacks the key(s) {missing}")
    return value


def call_report(submission, mistakes, rng, kwargs: dict | None = None):
    """(arguments, rows, what the catalogued mistakes return, a description of the call)."""
    kwargs = kwargs or report_arguments(rng)
    answer = call_checked(submission, mistakes, "gqa_report", **kwargs)
    shown = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    return kwargs, report_rows(answer.value, kwargs), answer.candidates, f"gqa_report({shown})"


def named_by(observed: list, candidates, key: str):
    """The first catalogued mistake whose report has exactly these values under `key`."""
    return equal_mistake(observed, candidates, lambda rows: [row[key] for row in rows])


def shape_tuple(value) -> bool:
    return isinstance(value, tuple) and all(is_int(size) for size in value)


@check(points=0.5, grade_id="check_gqa_report")
@on_the_contract_helpers
def test_gqa_report_names(submission, mistakes, rng):
    # Then a one-head model, whose single K/V head is both "every head" and "one head": the
    # contract names it "MHA" (n_kv_heads == n_heads is decided first).
    one_head = {
        "d_model": int(rng.choice([6, 10, 12])),
        "n_heads": 1,
        "kv_head_options": (1,),
        "seq_len": int(rng.integers(100, 5000)),
        "batch_shape": tuple(distinct_sizes(rng, 2, 2, 8)),
    }
    # And options without n_heads itself: no row is "MHA" (the largest option is not MHA).
    without_mha = report_arguments(rng)
    without_mha["kv_head_options"] = tuple(
        k for k in without_mha["kv_head_options"] if k != without_mha["n_heads"]
    )
    for arguments in (None, one_head, without_mha):
        kwargs, rows, candidates, what = call_report(submission, mistakes, rng, arguments)
        names = [row["name"] for row in rows]
        ensure(
            all(isinstance(name, str) for name in names),
            f"{what}: every name should be a str, got {names!r}",
        )
        expected = [row["name"] for row in ref.gqa_report(**kwargs)]
        ensure(
            names == expected,
            f"{what} should name its rows {expected}, got {names}",
            mistake=named_by(names, candidates, "name"),
        )


@check(points=0.5, grade_id="check_gqa_report")
@on_the_contract_helpers
def test_gqa_report_values(submission, mistakes, rng):
    """kv_params and kv_cache_mib of the rows: the reference's (on the contract's helpers where
    the notebook's are wrong: `on_contract_params`, `on_contract_bytes`, `on_contract_mib`)."""
    kwargs = report_arguments(rng)
    kwargs, rows, candidates, what = call_report(submission, mistakes, rng, kwargs)

    expected = ref.gqa_report(**kwargs)
    observed = [row["n_kv_heads"] for row in rows]
    ensure(
        all(is_int(v) for v in observed) and observed == list(kwargs["kv_head_options"]),
        f"{what}: the n_kv_heads of the rows should be {list(kwargs['kv_head_options'])}, "
        f"got {observed!r}",
        mistake=named_by(observed, candidates, "n_kv_heads"),
    )
    for key, integer in (("kv_params", True), ("kv_cache_mib", False)):
        observed = [row[key] for row in rows]
        ensure(
            all(is_int(v) if integer else is_real(v) for v in observed),
            f"{what}: every {key} should be {'an int' if integer else 'a number'}, got "
            f"{observed!r}",
        )
        expect_close(
            np.array(observed, dtype=float),
            [row[key] for row in expected],
            f"{what}: the {key} of the rows",
            atol=0,
            rtol=1e-9,
            mistakes=candidates,
            pick=lambda result, key=key: [row[key] for row in result],
        )


@check(points=0.5, grade_id="check_gqa_report")
@on_the_contract_helpers
def test_gqa_report_output_shape_from_forward_pass(submission, mistakes, rng):
    kwargs, rows, candidates, what = call_report(submission, mistakes, rng)
    d_model, n_heads = kwargs["d_model"], kwargs["n_heads"]
    wanted = (*kwargs["batch_shape"], d_model)
    shapes = [row["output_shape"] for row in rows]
    ensure(
        all(shape_tuple(s) for s in shapes),
        f"{what}: every output_shape should be a tuple of ints, got {shapes!r}",
    )
    ensure(
        all(s == wanted for s in shapes),
        f"{what}: every output_shape should be {wanted}, got {shapes}",
        mistake=named_by(shapes, candidates, "output_shape"),
    )
    # Swap the class for a stub that returns one of the student's modules whose output a forward
    # hook widens by 3 features (its own forward runs as written): a shape measured on a forward
    # pass shows the extra width. A report that raises on the stub (e.g. it asserts a hard-coded
    # shape) has not measured it: it fails too.
    widened = (*kwargs["batch_shape"], d_model + 3)
    module = submission.probe("widened", build(submission, d_model, n_heads, n_heads), 3)
    original = submission.module_getattr("GroupedQueryAttention")
    submission.module_setattr("GroupedQueryAttention", submission.probe("returns", module))
    try:
        stubbed = submission.call("gqa_report", **kwargs)
    except StudentError as error:
        fail(
            f"{what}: with GroupedQueryAttention replaced by a module whose output has "
            f"{d_model + 3} features, gqa_report should report output_shape {widened} from a "
            f"forward pass; it raised instead ({error})"
        )
    finally:
        submission.module_setattr("GroupedQueryAttention", original)
    shapes = [row["output_shape"] for row in report_rows(stubbed, kwargs)]
    ensure(
        all(shape_tuple(s) and s == widened for s in shapes),
        f"{what}: output_shape should be read from the output of a forward pass: with "
        f"GroupedQueryAttention replaced by a module whose output has {d_model + 3} features "
        f"it should be {widened}, got {shapes}",
        mistake=mistakes["report_shape_not_measured"]
        if all(shape_tuple(s) and s == wanted for s in shapes)
        else None,
    )
