"""Hidden checks of ex7_kv_cache (8 points).

Cached decoding must equal full recomputation in every split of a sequence (all at once, one
token at a time, a prefill then chunks and single tokens), with grouped K/V heads, on the
student's own weights and the student's own cache; the cache must hold K after RoPE; the number
of token positions a hook on W_k sees during the student's own `generate` must equal the
student's formula and the contract's.
"""

from collections.abc import Mapping

import numpy as np
import pytest
import torch

from autograder._reference import ex7_kv_cache as ref
from autograder.authoring import (
    UNUSABLE,
    StudentError,
    as_array,
    call_checked,
    call_evaluating,
    check,
    close,
    distinct_sizes,
    ensure,
    expect_close,
    expect_equal,
    expect_evaluated,
    expect_shape,
    fail,
    is_int,
    load_into,
    module_output,
    module_outputs,
    on_the_contracts,
    without_raised,
)

pytestmark = pytest.mark.ex7

ATOL = 1e-5  # the contract's tolerance in float32
TARGET = "CachedSelfAttention"


def attention_sizes(rng: np.random.Generator) -> tuple[int, int, int, int, int]:
    """(B, L, d_model, n_heads, n_kv_heads): g = n_heads / n_kv_heads >= 2 and n_kv_heads >= 2
    (so that repeat and repeat_interleave differ), head_dim even, B, L, heads all different."""
    while True:
        n_kv, group = (int(v) for v in rng.choice([2, 3], size=2, replace=False))
        head_dim = 2 * int(rng.integers(2, 5))
        batch, length = distinct_sizes(rng, 2, 2, 9)
        n_heads = n_kv * group
        if len({batch, length + 3, n_heads, n_kv, head_dim}) == 5:
            return batch, length + 3, n_heads * head_dim, n_heads, n_kv


def shapes(d_model: int, n_heads: int, n_kv_heads: int) -> dict[str, tuple[int, int]]:
    head_dim = d_model // n_heads
    return {
        "W_q.weight": (n_heads * head_dim, d_model),
        "W_k.weight": (n_kv_heads * head_dim, d_model),
        "W_v.weight": (n_kv_heads * head_dim, d_model),
        "W_o.weight": (d_model, n_heads * head_dim),
    }


def seeded(rng, layout: Mapping[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """Weights that give scores of order 1 (nn.Linear's init gives nearly uniform attention)."""
    return {
        key: torch.from_numpy(rng.normal(scale=1.2 / np.sqrt(shape[-1]), size=shape)).float()
        for key, shape in layout.items()
    }


def splits(rng, length: int) -> dict[str, list[int]]:
    """Ways to feed `length` tokens: chunk sizes that add up to it."""
    prefill = int(rng.integers(2, length - 1))
    chunk = int(rng.integers(2, length - prefill + 1)) if length - prefill >= 2 else 1
    rest = length - prefill - chunk
    return {
        "all at once": [length],
        "one token at a time": [1] * length,
        f"a prefill of {prefill} then single tokens": [prefill] + [1] * (length - prefill),
        f"a prefill of {prefill}, a chunk of {chunk}, then single tokens": [prefill, chunk]
        + [1] * rest,
    }


def student_module(submission, rng, sizes) -> tuple:
    """The student's module built with `sizes` (d_model, n_heads, n_kv_heads[, base]), holding
    seeded weights, and those weights."""
    module = submission.call(TARGET, *sizes)
    state = module.call("state_dict")
    layout = shapes(*sizes[:3])
    missing = sorted(set(layout) - set(state if isinstance(state, dict) else {}))
    ensure(
        not missing,
        f"{TARGET}{sizes} should have the submodules W_q, W_k, W_v, W_o (bias=False); its "
        f"state_dict lacks {missing}",
    )
    return module, load_into(module, seeded(rng, layout))


def fed_in_pieces(module, x: torch.Tensor, pieces: list[int], cache) -> np.ndarray:
    """The outputs of `module` fed x in consecutive chunks of the given sizes, one cache."""
    outputs, start = [], 0
    for size in pieces:
        out = module(x[:, start : start + size], cache)
        outputs.append(as_array(out, f"the output for tokens {start}..{start + size - 1}"))
        start += size
    return np.concatenate(outputs, axis=1)


def student_pieces(submission, module, x, pieces: list[int], what: str) -> np.ndarray:
    cache = submission.call("KVCache")
    outputs, start = [], 0
    for size in pieces:
        out = as_array(
            module(x[:, start : start + size], cache=cache),
            f"{what}: the output for tokens {start}..{start + size - 1}",
            allow=("tensor",),
        )
        expect_shape(out, (x.shape[0], size, x.shape[2]), f"{what}: the output of a chunk")
        outputs.append(out)
        start += size
    return np.concatenate(outputs, axis=1)


# -- KVCache -------------------------------------------------------------------------------------
def wrong_cache(submission) -> bool:
    """Whether the notebook's KVCache raises or answers other than the contract: k, v None and
    len 0 while empty; after each of three appends (float32 chunks as the attention appends
    them, and float64 ones) k and v the chunks concatenated along time, in their dtype, exactly,
    and len = T. At least as strict as KVCache's own check: a fault it missed would be charged
    again to the attention built on it, unless a notebook bought the swap by failing on these
    inputs only."""
    rng = np.random.default_rng(9)
    chunks = [
        tuple(torch.from_numpy(rng.normal(size=(2, 3, steps, 4))).float() for _ in "kv")
        for steps in (2, 1, 3)
    ]
    wide = [tuple(t.double() for t in chunk) for chunk in chunks]
    return any(sequence_is_wrong(submission, sequence) for sequence in (chunks, wide))


def sequence_is_wrong(submission, chunks: list) -> bool:
    try:
        cache = submission.call("KVCache")
        if cache.getattr("k") is not None or cache.getattr("v") is not None:
            return True
        if cache.call("__len__") != 0:
            return True
        for done, (k, v) in enumerate(chunks, start=1):
            cache.call("append", k, v)
            held_k, held_v = cache.getattr("k"), cache.getattr("v")
            whole_k = torch.cat([k for k, _ in chunks[:done]], dim=-2)
            whole_v = torch.cat([v for _, v in chunks[:done]], dim=-2)
            right = (
                isinstance(held_k, torch.Tensor)
                and isinstance(held_v, torch.Tensor)
                and held_k.dtype == whole_k.dtype
                and held_v.dtype == whole_v.dtype
                and held_k.shape == whole_k.shape
                and held_v.shape == whole_v.shape
                and torch.equal(held_k, whole_k)
                and torch.equal(held_v, whole_v)
                and cache.call("__len__") == whole_k.shape[-2]
            )
            if not right:
                return True
    except StudentError:
        return True
    return False


# The checks of an attention that keeps its keys and values in the notebook's KVCache run on the
# contract's KVCache where the notebook's is wrong: a fault of KVCache is charged to its own check
# only (an independent review found a __len__ of the heads axis charged 2.0 points more there).
on_the_contracts_cache = on_the_contracts("KVCache", ref.KVCache, wrong_cache)


@check(points=1.0, grade_id="check_kv_cache")
def test_kv_cache_appends_along_time(submission, mistakes, rng):
    while True:  # no axis but time as long as the two appends together (len names the axis)
        batch, heads, first, second, head_dim = distinct_sizes(rng, 5, 2, 9)
        if first + second not in (batch, heads, head_dim):
            break
    k1, v1 = (torch.from_numpy(rng.normal(size=(batch, heads, first, head_dim))) for _ in "kv")
    k2, v2 = (torch.from_numpy(rng.normal(size=(batch, heads, second, head_dim))) for _ in "kv")
    cache = submission.call("KVCache")
    empty_k, empty_v = cache.getattr("k"), cache.getattr("v")
    ensure(
        empty_k is None and empty_v is None and cache.call("__len__") == 0,
        "an empty KVCache should have k = v = None and len 0",
        mistake=mistakes["empty_cache_holds_tensors"]
        if all(isinstance(t, torch.Tensor) and t.numel() == 0 for t in (empty_k, empty_v))
        else None,
    )
    candidates: list = []
    for mistake in mistakes.for_target("KVCache"):
        wrong = mistake.bound("ex7_kv_cache")()
        try:
            wrong.append(k1, v1)
            wrong.append(k2, v2)
            candidates.append((mistake, (wrong.k, len(wrong), wrong.v)))
        except Exception as error:  # noqa: BLE001 - raising is this mistake's outcome
            candidates.append((mistake, type(error).__name__))
    try:
        cache.call("append", k1, v1)
        cache.call("append", k2, v2)
    except StudentError as error:
        raised = next((m for m, out in candidates if out == error.type), None)
        fail(f"appending keys of {first} then {second} positions: {error}", mistake=raised)
    candidates = [(m, out) for m, out in candidates if isinstance(out, tuple)]
    expected_k, expected_v = torch.cat([k1, k2], dim=2), torch.cat([v1, v2], dim=2)
    what = f"cache.k after appending keys of {first} then {second} positions"
    expect_close(
        as_array(cache.getattr("k"), what, allow=("tensor",)),
        expected_k,
        what,
        atol=0,
        rtol=0,
        mistakes=[(m, out[0]) for m, out in candidates],
    )
    expect_close(
        as_array(cache.getattr("v"), "cache.v", allow=("tensor",)),
        expected_v,
        "cache.v",
        mistakes=[(m, out[2]) for m, out in candidates],
    )
    length = cache.call("__len__")
    named = next(
        (m for m, out in candidates if out[1] == length and out[1] != first + second), None
    )
    ensure(
        length == first + second,
        f"len(cache) should be the number of cached positions, {first + second}; got {length}",
        mistake=named,
    )


# -- CachedSelfAttention -------------------------------------------------------------------------
@check(points=1.0, grade_id="check_cached_attention")
def test_cached_attention_matches_the_reference_without_a_cache(submission, mistakes, rng):
    batch, length, d_model, n_heads, n_kv = attention_sizes(rng)
    head_dim = d_model // n_heads
    base = float(rng.uniform(50, 500))
    for sizes in (
        (d_model, n_heads, n_kv),  # grouped (g >= 2, n_kv_heads >= 2)
        (d_model, n_heads, 1),  # one K/V head for every query head (MQA)
        (head_dim, 1, 1),  # one head: head_dim = d_model
        (d_model, n_heads, n_kv, base),  # RoPE of another base (the module must pass it on)
    ):
        compare_without_a_cache(submission, mistakes, rng, batch, length, sizes)


def compare_without_a_cache(
    submission, mistakes, rng: np.random.Generator, batch: int, length: int, sizes: tuple
) -> None:
    module, weights = student_module(submission, rng, tuple(sizes))
    x = torch.from_numpy(rng.normal(size=(batch, length, sizes[0]))).float()

    def run(reference_module):
        return reference_module(x.double()).numpy()

    what = f"{TARGET}{tuple(sizes)}(x) without a cache on its own weights, x {tuple(x.shape)}"
    out = as_array(module(x), what, allow=("tensor",))
    expect_close(
        out,
        module_output(ref.CachedSelfAttention, tuple(sizes), weights, run),
        what,
        atol=1e-4,
        rtol=1e-4,
        mistakes=without_raised(module_outputs(mistakes, TARGET, tuple(sizes), weights, run)),
    )


@check(
    points=1.5,
    grade_id="check_cached_attention",
    requires=("test_cached_attention_matches_the_reference_without_a_cache",),
)
@on_the_contracts_cache
def test_cached_attention_every_split_equals_the_whole(submission, mistakes, rng):
    batch, length, d_model, n_heads, n_kv = attention_sizes(rng)
    base = float(rng.uniform(50, 500))
    # grouped, MQA, then RoPE of another base (the module must pass it on with a cache too)
    for sizes in ((d_model, n_heads, n_kv), (d_model, n_heads, 1), (d_model, n_heads, n_kv, base)):
        compare_splits(submission, mistakes, rng, batch, length, sizes)


def compare_splits(
    submission, mistakes, rng: np.random.Generator, batch: int, length: int, sizes: tuple
) -> None:
    module, weights = student_module(submission, rng, tuple(sizes))
    x = torch.from_numpy(rng.normal(size=(batch, length, sizes[0]))).float()
    whole = as_array(module(x), "the output without a cache", allow=("tensor",))
    for name, pieces in splits(rng, length).items():

        def run(reference_module, pieces=pieces):
            return fed_in_pieces(reference_module, x.double(), pieces, ref.KVCache())

        what = f"{TARGET}{tuple(sizes)} fed {name} with a KVCache"
        try:
            got = student_pieces(submission, module, x, pieces, what)
        except StudentError as error:
            fail(f"{what}: {error}")
        expect_close(
            got,
            whole,
            f"{what}, against the same sequence without a cache",
            atol=ATOL,
            rtol=ATOL,
            mistakes=without_raised(module_outputs(mistakes, TARGET, tuple(sizes), weights, run)),
        )


@check(
    points=0.5,
    grade_id="check_cached_attention",
    requires=("test_cached_attention_matches_the_reference_without_a_cache",),
)
@on_the_contracts_cache
def test_cached_attention_fills_the_cache(submission, mistakes, rng):
    """After a prefill the cache holds every position's K after RoPE (and V), for the K/V
    heads only."""
    batch, length, *sizes = attention_sizes(rng)
    module, weights = student_module(submission, rng, tuple(sizes))
    x = torch.from_numpy(rng.normal(size=(batch, length, sizes[0]))).float()
    cache = submission.call("KVCache")
    module(x[:, :-1], cache=cache)
    module(x[:, -1:], cache=cache)
    ensure(
        cache.call("__len__") == length,
        f"after {length} tokens len(cache) should be {length}, got {cache.call('__len__')!r}",
    )

    def cached(reference_module):
        store = ref.KVCache()
        reference_module(x[:, :-1].double(), store)
        reference_module(x[:, -1:].double(), store)
        return store.k.numpy()

    expected = module_output(ref.CachedSelfAttention, tuple(sizes), weights, cached)
    what = "cache.k after feeding a sequence (the keys of the K/V heads, after RoPE)"
    expect_close(
        as_array(cache.getattr("k"), what, allow=("tensor",)),
        expected,
        what,
        atol=1e-4,
        rtol=1e-4,
        mistakes=without_raised(module_outputs(mistakes, TARGET, tuple(sizes), weights, cached)),
    )


@check(
    points=0.5,
    grade_id="check_cached_attention",
    requires=("test_cached_attention_matches_the_reference_without_a_cache",),
)
def test_cached_attention_projections_and_sizes(submission, mistakes, rng):
    _, _, d_model, n_heads, n_kv = attention_sizes(rng)
    for given, kv in ((n_kv, n_kv), (None, n_heads)):
        state = submission.call(TARGET, d_model, n_heads, given).call("state_dict")
        for key, shape in shapes(d_model, n_heads, kv).items():
            weight = as_array(state[key], key)
            named = None
            if given is None and key == "W_k.weight":
                named = mistakes["default_is_one_kv_head"]
            elif key == "W_k.weight" and weight.shape == (d_model, d_model):
                named = mistakes["n_kv_heads_ignored"]
            expect_shape(
                weight,
                shape,
                f"{key} of {TARGET}({d_model}, {n_heads}, n_kv_heads={given})",
                mistake=named,
            )
        ensure(
            not [k for k in state if k.endswith("bias")],
            "the projections should have no bias",
            mistake=mistakes["cached_projections_with_bias"],
        )
    # Sizes that do not divide are not checked: unlike ex4 and ex6, the contract of ex7 names no
    # error for them (an assert, a ValueError or no check at all are all within it).


# -- TinyLM --------------------------------------------------------------------------------------
# TinyLM's embedding and output layer have the same shape (vocab, d_model): a correct TinyLM may
# tie them (head.weight = embed.weight); it is then loaded with one matrix for both.
TIED = (("embed.weight", "head.weight"),)


def tinylm_layout(vocab: int, d_model: int, n_heads: int, n_kv: int) -> dict:
    layout: dict[str, tuple[int, ...]] = {
        f"attn.{k}": v for k, v in shapes(d_model, n_heads, n_kv).items()
    }
    layout.update(
        {"embed.weight": (vocab, d_model), "head.weight": (vocab, d_model), "head.bias": (vocab,)}
    )
    return layout


def tinylm_sizes(rng) -> tuple[int, int, int, int]:
    _, _, d_model, n_heads, n_kv = attention_sizes(rng)
    vocab = int(rng.integers(20, 40))
    return vocab, d_model, n_heads, n_kv


def wrong_attention(submission) -> bool:
    """Whether the notebook's CachedSelfAttention raises or answers other than the contract on
    seeded weights: all at once, and in pieces with one KVCache (the contract's where the
    notebook's is wrong: `on_the_contracts_cache` is applied first)."""
    rng = np.random.default_rng(7)
    sizes = (16, 4, 2)  # grouped: repeat and repeat_interleave differ
    x = torch.from_numpy(rng.normal(size=(2, 6, 16))).float()
    try:
        module, weights = student_module(submission, rng, sizes)
        expected = module_output(
            ref.CachedSelfAttention, sizes, weights, lambda m: m(x.double()).numpy()
        )
        whole = as_array(module(x), "the output", allow=("tensor",))
        pieces = fed_in_pieces(module, x, [3, 1, 2], submission.call("KVCache"))
    except UNUSABLE:
        return True
    return not (
        close(whole, expected, atol=1e-4, rtol=1e-4)
        and close(pieces, expected, atol=1e-4, rtol=1e-4)
    )


def wrong_model(submission) -> bool:
    """Whether the notebook's TinyLM raises or answers other than the contract on seeded
    weights: all at once, and a prefill then single tokens with one KVCache."""
    rng = np.random.default_rng(8)
    sizes = (23, 16, 4, 2)
    tokens = torch.from_numpy(rng.integers(0, sizes[0], size=(2, 6)))
    try:
        model = submission.call("TinyLM", *sizes)
        layout = seeded(rng, tinylm_layout(*sizes))
        weights = load_into(model, layout, may_tie=TIED, submission=submission)
        expected = module_output(ref.TinyLM, sizes, weights, lambda m: m(tokens).numpy())
        whole = as_array(model(tokens), "the logits", allow=("tensor",))
        cache = submission.call("KVCache")
        pieces = np.concatenate(
            [
                as_array(model(tokens[:, start:stop], cache), "the logits", allow=("tensor",))
                for start, stop in ((0, 4), (4, 5), (5, 6))
            ],
            axis=1,
        )
    except UNUSABLE:
        return True
    return not (
        close(whole, expected, atol=1e-4, rtol=1e-4)
        and close(pieces, expected, atol=1e-4, rtol=1e-4)
    )


# One fault, charged once: TinyLM is built on CachedSelfAttention and KVCache, and generate on
# TinyLM and KVCache. Where the notebook's raises or answers other than its contract, the
# contract's own is swapped in while the checks of what is built on it run (`on_the_contracts`):
# what is built on it is judged, against the reference, on parts that work. The notebook's own
# parts play no part in that judgement (an independent attacker's attention told the grader's
# calls from its own generate's by the call stack, and made a wrong generate "match" the
# grader's decoding of the notebook's own model).
on_contract_attention = on_the_contracts(
    "CachedSelfAttention", ref.CachedSelfAttention, wrong_attention
)
on_contract_model = on_the_contracts("TinyLM", ref.TinyLM, wrong_model)


def on_working_parts(check_function):
    """TinyLM's check: the cache first (an attention right on the contract's cache is then
    judged as it is), then the attention."""
    return on_the_contracts_cache(on_contract_attention(check_function))


def on_a_working_model(check_function):
    """generate's checks: the cache first, then the model."""
    return on_the_contracts_cache(on_contract_model(check_function))


@check(points=1.0, grade_id="check_tinylm")
@on_working_parts
def test_tinylm_matches_the_reference_on_its_weights(submission, mistakes, rng):
    """TinyLM on its weights, the whole sequence without a cache and a prefill then the rest
    with a KVCache: the reference's logits (on the contract's attention and cache where the
    notebook's are wrong: `on_working_parts`)."""
    sizes = tinylm_sizes(rng)
    model = submission.call("TinyLM", *sizes)
    state = model.call("state_dict")
    missing = sorted(set(tinylm_layout(*sizes)) - set(state))
    ensure(
        not missing,
        f"TinyLM{sizes} lacks {missing} (embed, attn, head of the contract)",
        mistake=mistakes["head_without_bias"] if missing == ["head.bias"] else None,
    )
    for key, shape in tinylm_layout(*sizes).items():
        held = as_array(state[key], key)
        expect_shape(
            held,
            shape,
            f"{key} of TinyLM{sizes}",
            mistake=mistakes["tinylm_ignores_n_kv_heads"]
            if key == "attn.W_k.weight" and held.shape == (sizes[1], sizes[1])
            else None,
        )
    weights = load_into(
        model, seeded(rng, tinylm_layout(*sizes)), may_tie=TIED, submission=submission
    )
    tokens = torch.from_numpy(rng.integers(0, sizes[0], size=(3, 7)))
    prefill = int(rng.integers(2, 6))
    chunks = [tokens[:, :prefill], tokens[:, prefill:]]

    def run(reference_model):
        return reference_model(tokens).numpy()

    def run_cached(reference_model):
        cache = ref.KVCache()
        return torch.cat([reference_model(chunk, cache) for chunk in chunks], dim=1).numpy()

    what = f"TinyLM{sizes}(tokens) on its own weights"
    expect_close(
        as_array(model(tokens), what, allow=("tensor",)),
        module_output(ref.TinyLM, sizes, weights, run),
        what,
        atol=1e-4,
        rtol=1e-4,
        mistakes=without_raised(module_outputs(mistakes, "TinyLM", sizes, weights, run)),
    )
    what = f"TinyLM{sizes} fed {prefill} tokens and then {7 - prefill} more with one KVCache"
    cache = submission.call("KVCache")
    expect_close(
        np.concatenate(
            [as_array(model(chunk, cache), what, allow=("tensor",)) for chunk in chunks], axis=1
        ),
        module_output(ref.TinyLM, sizes, weights, run_cached),
        f"{what} (the cache goes on to attn)",
        atol=1e-4,
        rtol=1e-4,
        mistakes=without_raised(module_outputs(mistakes, "TinyLM", sizes, weights, run_cached)),
    )


# -- generate ------------------------------------------------------------------------------------
def decoding_setup(submission, rng):
    sizes = tinylm_sizes(rng)
    model = submission.call("TinyLM", *sizes)
    weights = load_into(
        model, seeded(rng, tinylm_layout(*sizes)), may_tie=TIED, submission=submission
    )
    prompt = torch.from_numpy(rng.integers(0, sizes[0], size=(2, int(rng.integers(3, 7)))))
    return sizes, model, weights, prompt


@check(points=0.75, grade_id="check_generate")
@on_a_working_model
def test_generate_matches_the_reference(submission, mistakes, rng):
    sizes, model, weights, prompt = decoding_setup(submission, rng)
    n_new = int(rng.integers(4, 9))
    answers = []
    for use_cache in (True, False):

        def run(reference_model, use_cache=use_cache):
            return ref.generate(reference_model, prompt, n_new, use_cache=use_cache).numpy()

        expected = module_output(ref.TinyLM, sizes, weights, run, dtype=torch.float32)
        what = f"generate(model, prompt {tuple(prompt.shape)}, {n_new}, use_cache={use_cache})"
        got = as_array(
            submission.call("generate", model, prompt, n_new, use_cache=use_cache),
            what,
            allow=("tensor",),
        )
        candidates = []
        for mistake in mistakes.for_target("generate"):
            wrong_generate = mistake.bound("ex7_kv_cache")

            def wrong(reference_model, g=wrong_generate, use_cache=use_cache):
                return g(reference_model, prompt, n_new, use_cache).numpy()

            try:
                output = module_output(ref.TinyLM, sizes, weights, wrong, dtype=torch.float32)
            except Exception:  # noqa: BLE001 - a mistake that raises names nothing here
                continue
            candidates.append((mistake, output))
        expect_close(
            got,
            expected,
            what,
            atol=0,
            rtol=0,
            mistakes=candidates,
        )
        answers.append((use_cache, got))
    # The same calls again: generate keeps no state between calls, so the same call gives the
    # same tokens; then another prompt (another batch size and length)
    for use_cache, first in answers:
        again = as_array(
            submission.call("generate", model, prompt, n_new, use_cache=use_cache),
            "generate called again",
            allow=("tensor",),
        )
        ensure(
            again.shape == first.shape and np.array_equal(again, first),
            f"generate(model, prompt, {n_new}, use_cache={use_cache}) called again, after "
            "another call, gave other tokens than the first time: something was kept between "
            "calls",
            mistake=mistakes["generate_keeps_a_cache_between_calls"],
        )
    other = torch.from_numpy(rng.integers(0, sizes[0], size=(prompt.shape[0] + 1, 2)))

    def run_other(reference_model):
        return ref.generate(reference_model, other, 3).numpy()

    what = f"generate(model, prompt {tuple(other.shape)}, 3) after the calls above"
    expect_close(
        as_array(submission.call("generate", model, other, 3), what, allow=("tensor",)),
        module_output(ref.TinyLM, sizes, weights, run_other, dtype=torch.float32),
        what,
        atol=0,
        rtol=0,
    )
    expect_first_maximum_on_ties(submission, mistakes, rng, sizes, model, prompt)


def expect_first_maximum_on_ties(submission, mistakes, rng, sizes, model, prompt) -> None:
    """A head of zeros (and the embedding too, which a correct TinyLM may tie to it): every
    logit is exactly 0 at every step, so greedy decoding takes token 0 each time (the first
    maximum, as torch.argmax does)."""
    layout = seeded(rng, tinylm_layout(*sizes))
    for key in ("embed.weight", "head.weight", "head.bias"):
        layout[key] = torch.zeros_like(layout[key])
    load_into(model, layout, may_tie=TIED, submission=submission)
    n_new = int(rng.integers(2, 5))
    what = f"generate(model, prompt, {n_new}) when every logit ties (a head of zeros)"
    got = as_array(submission.call("generate", model, prompt, n_new), what, allow=("tensor",))
    expected = torch.cat([prompt, torch.zeros(prompt.shape[0], n_new, dtype=prompt.dtype)], 1)
    last = torch.cat([prompt, torch.full((prompt.shape[0], n_new), sizes[0] - 1)], 1)
    expect_close(
        got,
        expected.numpy(),
        f"{what}: the first maximum, token 0, each time",
        atol=0,
        rtol=0,
        mistakes=[(mistakes["generate_last_maximum_on_ties"], last.numpy())],
    )


@check(
    points=0.5,
    grade_id="check_generate",
    requires=("test_generate_matches_the_reference",),
)
@on_a_working_model
def test_generate_with_and_without_the_cache_agree(submission, rng):
    """Both give the same tokens (on the contract's model and cache where the notebook's are
    wrong: `on_a_working_model`)."""
    _, model, _, prompt = decoding_setup(submission, rng)
    n_new = int(rng.integers(6, 12))
    cached = as_array(
        submission.call("generate", model, prompt, n_new, use_cache=True),
        "generate with the cache",
        allow=("tensor",),
    )
    recomputed = as_array(
        submission.call("generate", model, prompt, n_new, use_cache=False),
        "generate without",
        allow=("tensor",),
    )
    expect_close(
        cached,
        recomputed,
        f"generate(..., {n_new}) with the cache against without it",
        atol=0,
        rtol=0,
    )


@check(
    points=0.25,
    grade_id="check_generate",
    requires=("test_generate_matches_the_reference",),
)
@on_a_working_model
def test_generate_runs_without_gradients(submission, mistakes, rng):
    """The contract's "No gradients" gates these points; only a hook sees it (the tokens are
    the same either way)."""
    _, model, _, prompt = decoding_setup(submission, rng)
    n_new = int(rng.integers(3, 7))
    for use_cache in (True, False):
        _, modes = call_evaluating(submission, "generate", model, prompt, n_new, use_cache)
        expect_evaluated(
            modes,
            f"generate(model, prompt, {n_new}, use_cache={use_cache})",
            with_gradients=mistakes["generate_with_gradients"],
            samples=len(prompt) * n_new,  # every new token of every row needs a forward pass
        )


# -- kv_projections ------------------------------------------------------------------------------
@check(points=0.5, grade_id="check_kv_projections")
def test_kv_projections_match_the_formula(submission, mistakes, rng):
    for prompt_len, n_new in ((int(rng.integers(3, 50)), int(rng.integers(2, 40))), (7, 1)):
        for use_cache in (True, False):
            what = f"kv_projections({prompt_len}, {n_new}, use_cache={use_cache})"
            answer = call_checked(
                submission, mistakes, "kv_projections", prompt_len, n_new, use_cache
            )
            ensure(is_int(answer.value), f"{what} should be an int, got {answer.value!r}")
            expect_equal(
                answer.value,
                ref.kv_projections(prompt_len, n_new, use_cache),
                what,
                answer.candidates,
            )


@check(
    points=0.5,
    grade_id="check_kv_projections",
    requires=("test_kv_projections_match_the_formula", "test_generate_matches_the_reference"),
)
@on_a_working_model
def test_kv_projections_match_a_hook_on_W_k(submission, mistakes, rng):
    _, model, _, prompt = decoding_setup(submission, rng)
    generate = submission.module_getattr("generate")
    n_new = int(rng.integers(4, 10))
    for use_cache in (True, False):
        _, seen = submission.probe(
            "positions_through", generate, model, "attn.W_k", prompt, n_new, use_cache
        )
        formula = submission.call("kv_projections", prompt.shape[1], n_new, use_cache)
        expected = ref.kv_projections(prompt.shape[1], n_new, use_cache)
        wrong_generate = next(
            (
                m
                for m in mistakes.for_target("generate")
                if m.id == "whole_sequence_fed_with_the_cache"
            ),
            None,
        )
        fed_whole = sum(prompt.shape[1] + step for step in range(n_new))
        cached = ref.kv_projections(prompt.shape[1], n_new, True)
        named = wrong_generate if use_cache and seen == fed_whole else None
        if not use_cache and seen == cached:
            named = mistakes["use_cache_ignored"]
        ensure(
            seen == formula == expected,
            f"generate(..., {n_new}, use_cache={use_cache}) sent {seen} token positions through "
            f"W_k; your kv_projections says {formula}, the contract {expected}",
            mistake=named,
        )
