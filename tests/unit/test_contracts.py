"""The stand-ins that checks swap into a notebook (each exercise's hidden `contracts.py`,
`authoring.upstream.on_the_contracts`) are the contract: they answer as the references do, on
inputs drawn afresh, so that code judged on them is judged on a working upstream; and they are
never in the sandbox's runtime, where a notebook could take them."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder.authoring.upstream import sent_with
from autograder.exercises import EXERCISES, declaration, exercise_dir
from autograder.exercises.ex4_gqa_analysis import contracts as contracts4
from autograder.exercises.ex4_gqa_analysis import reference as ex4
from autograder.exercises.ex5_causal_mask import contracts as contracts5
from autograder.exercises.ex5_causal_mask import reference as ex5
from autograder.exercises.ex6_rope import contracts as contracts6
from autograder.exercises.ex6_rope import reference as ex6
from autograder.exercises.ex7_kv_cache import contracts as contracts7
from autograder.exercises.ex7_kv_cache import reference as ex7


@pytest.fixture
def rng():
    return np.random.default_rng(int(np.random.default_rng().integers(2**31)))


def test_no_stand_in_is_in_the_sandbox_runtime():
    from autograder.sandbox import plumbing
    from autograder.sandbox.inside import __file__ as inside

    runtime = Path(inside).parent
    for name in plumbing.RUNTIME_FILES:
        text = (runtime / name).read_text()
        assert "def contract_" not in text and "class KVCache" not in text, name


def test_causal_mask(rng):
    length = int(rng.integers(1, 12))
    assert torch.equal(contracts5.contract_causal_mask()(length), ex5.causal_mask(length))


def test_rope(rng):
    frequencies, rope = contracts6.contract_rope_frequencies(), contracts6.contract_apply_rope()
    head_dim = 2 * int(rng.integers(1, 10))
    base = float(rng.uniform(20, 20000))
    assert torch.equal(frequencies(head_dim, base), ex6.rope_frequencies(head_dim, base))
    with pytest.raises(ValueError):
        frequencies(head_dim + 1)
    for dtype in (torch.float64, torch.float32):
        x = torch.from_numpy(rng.normal(size=(2, 3, int(rng.integers(1, 9)), head_dim))).to(dtype)
        offset = int(rng.integers(0, 5000))
        got = rope(x, offset=offset, base=base)
        assert got.dtype == dtype
        assert torch.equal(got, ex6.apply_rope(x, offset=offset, base=base))


def test_kv_cache_attention_and_model(rng):
    cache, expected = contracts7.contract_kv_cache()(), ex7.KVCache()
    for steps in (2, 1, 3):
        k, v = (torch.from_numpy(rng.normal(size=(2, 3, steps, 4))) for _ in "kv")
        cache.append(k, v)
        expected.append(k, v)
    assert torch.equal(cache.k, expected.k) and torch.equal(cache.v, expected.v)
    assert len(cache) == len(expected) == 6

    sizes = (23, 16, 4, 2)
    mine, theirs = contracts7.contract_tinylm()(*sizes), ex7.TinyLM(*sizes)
    theirs.load_state_dict(mine.state_dict())
    tokens = torch.from_numpy(rng.integers(0, sizes[0], size=(2, 7)))
    caches = contracts7.contract_kv_cache()(), ex7.KVCache()
    with torch.no_grad():
        assert torch.equal(mine(tokens), theirs(tokens))
        for chunk in (tokens[:, :4], tokens[:, 4:5], tokens[:, 5:]):
            assert torch.equal(mine(chunk, caches[0]), theirs(chunk, caches[1]))
        for n_kv in (1, 2, 4):
            attention = contracts7.contract_cached_attention()(16, 4, n_kv, base=321.0)
            reference = ex7.CachedSelfAttention(16, 4, n_kv, base=321.0)
            reference.load_state_dict(attention.state_dict())
            x = torch.from_numpy(rng.normal(size=(2, 5, 16))).float()
            assert torch.equal(attention(x), reference(x))
    with pytest.raises(ValueError):
        contracts7.contract_cached_attention()(16, 4, 3)


def test_gqa_helpers(rng):
    d_model, n_heads = 8 * int(rng.integers(1, 9)), 8
    n_kv = int(rng.choice([1, 2, 4, 8]))
    params = contracts4.contract_kv_projection_params()
    assert params(d_model, n_heads, n_kv) == ex4.kv_projection_params(d_model, n_heads, n_kv)
    args = tuple(int(v) for v in rng.integers(1, 5000, size=3))
    names = ("n_layers", "batch_size", "bytes_per_element")
    drawn = {name: int(value) for name, value in zip(names, rng.integers(1, 9, 3), strict=True)}
    for call_kwargs in ({}, drawn):
        got = contracts4.contract_kv_cache_bytes()(*args, **call_kwargs)
        assert got == ex4.kv_cache_bytes(*args, **call_kwargs)
        mib = contracts4.contract_kv_cache_mib()(*args, **call_kwargs)
        assert mib == ex4.kv_cache_mib(*args, **call_kwargs)


WITH_STAND_INS = [e for e in EXERCISES if (exercise_dir(e) / "contracts.py").exists()]


@pytest.mark.parametrize("exercise", WITH_STAND_INS)
def test_a_swap_sends_nothing_whose_checks_are_still_to_come(exercise):
    """Notebook code that runs while a swap lasts can reach everything sent with the stand-in
    (`upstream.sent_with`): every check of what is sent comes before the check that swaps
    (the checks run in file order), so no check, this one included, can be passed with a
    borrowed working version."""
    checks = [
        function
        for name, function in vars(
            importlib.import_module(f"autograder.exercises.{exercise}.checks")
        ).items()
        if name.startswith("test_") and callable(function)
    ]
    order = [function.__name__ for function in checks]
    swapping = [function for function in checks if getattr(function, "swaps", ())]
    assert swapping, f"no check of {exercise} swaps anything"
    for function in swapping:
        here = order.index(function.__name__)
        for name, factory in function.swaps:
            assert factory().__name__ == name, f"{factory.__name__} stands in for {name}"
            for sent in sent_with(factory):
                target = sent().__name__  # the notebook's name its stand-in takes
                prefixes = declaration(exercise).checks_of.get(target, ())
                later = [name for name in order[here:] if name.startswith(prefixes)]
                if not prefixes:
                    continue  # given to students whole (ex7's rope): no check of it
                assert not later, f"{function.__name__} sends {target}, checked then by {later}"
