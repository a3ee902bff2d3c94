"""The contract's stand-ins run in the grader (`grading/stand_ins.py`); the child holds proxies
made by its runtime (`sandbox/inside/remote.py`) whose calls cross the pipe as plain data. They
answer as the references do (functions, a plain class, nn.Modules whose layers live in the
child), and what a notebook sends through them is bounded and checked."""

from __future__ import annotations

import importlib
from contextlib import contextmanager

import numpy as np
import pytest
import torch

from autograder._reference import ex5_causal_mask as ex5
from autograder._reference import ex6_rope as ex6
from autograder._reference import ex7_kv_cache as ex7
from autograder.core.errors import StudentError
from autograder.core.registry import EXERCISES, declaration
from autograder.grading import stand_ins
from autograder.grading.stand_ins import kind_of
from autograder.grading.submission import ProgramCell, Submission

SETUP = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport math\n"


@pytest.fixture
def rng():
    return np.random.default_rng(int(np.random.default_rng().integers(2**31)))


@contextmanager
def program(shared_sandbox, *sources: str):
    cells = [ProgramCell(f"cell {i}", s) for i, s in enumerate([SETUP, *sources], start=1)]
    with Submission(cells, shared=shared_sandbox.get()) as submission:
        yield submission


@contextmanager
def swapped(submission: Submission, name: str, stand_in):
    """As `on_the_contracts` does it."""
    original = submission.module_getattr(name)
    number = submission.stand_ins.swap_in(name, stand_in)
    try:
        proxy = submission.probe("stand_in", kind_of(stand_in), name, number)
        submission.module_setattr(name, proxy)
        yield
    finally:
        submission.module_setattr(name, original)
        submission.stand_ins.swap_out(number)


RAISING = """
def causal_mask(seq_len):
    raise NotImplementedError
def apply_rope(x, offset=0, base=10000.0):
    raise NotImplementedError
def masked(seq_len):
    return causal_mask(seq_len)
def rotated(x, offset):
    return apply_rope(x, offset=offset)
"""


@pytest.mark.ex5
@pytest.mark.ex6
def test_a_function_stand_in_answers_as_the_reference(shared_sandbox, rng):
    length = int(rng.integers(2, 30))
    x = torch.from_numpy(rng.normal(size=(2, 3, int(rng.integers(2, 9)), 6))).float()
    offset = int(rng.integers(0, 3000))
    with program(shared_sandbox, RAISING) as submission:
        with pytest.raises(StudentError):
            submission.call("masked", length)
        with swapped(submission, "causal_mask", ex5.causal_mask):
            got = submission.call("masked", length)
            assert got.dtype == torch.float32
            assert torch.equal(got, ex5.causal_mask(length))
            with pytest.raises(StudentError, match="refused"):
                submission.call("masked", 20000)  # 1.6 GB the notebook chose: refused
        with swapped(submission, "apply_rope", ex6.apply_rope):
            got = submission.call("rotated", x, offset)
            assert got.dtype == x.dtype
            assert torch.equal(got, ex6.apply_rope(x, offset=offset))
        with pytest.raises(StudentError):  # swapped out: the notebook's own again
            submission.call("rotated", x, offset)


CACHE_USER = """
class KVCache:
    def __init__(self):
        raise NotImplementedError

def filled(chunks):
    cache = KVCache()
    empty = (cache.k is None, cache.v is None, len(cache), bool(cache))
    for k, v in chunks:
        cache.append(k, v)
    return empty, cache.k, cache.v, len(cache), type(cache).__name__
"""


@pytest.mark.ex7
def test_a_class_stand_in_keeps_its_state_in_the_grader(shared_sandbox, rng):
    chunks = [
        tuple(torch.from_numpy(rng.normal(size=(2, 3, steps, 4))) for _ in "kv")
        for steps in (2, 1, 3)
    ]
    expected = ex7.KVCache()
    for k, v in chunks:
        expected.append(k, v)
    with program(shared_sandbox, CACHE_USER) as submission:
        with swapped(submission, "KVCache", ex7.KVCache):
            empty, k, v, length, name = submission.call("filled", chunks)
    assert empty == (True, True, 0, False)
    assert torch.equal(k, expected.k) and torch.equal(v, expected.v)
    assert (length, name) == (6, "KVCache")


MODEL_USER = """
class TinyLM(nn.Module):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError

class KVCache:  # the notebook's own, right: the stand-in's attention appends to it
    def __init__(self):
        self.k = self.v = None
    def append(self, k, v):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]

def built(sizes):
    return TinyLM(*sizes)

def run(model, tokens, chunks):
    seen = []
    hook = model.attn.W_k.register_forward_pre_hook(lambda m, i: seen.append(i[0].shape[-2]))
    with torch.no_grad():
        whole = model(tokens)
        cache = KVCache()
        pieces = torch.cat([model(tokens[:, a:b], cache) for a, b in chunks], dim=1)
    hook.remove()
    return whole, pieces, seen, len(cache), isinstance(model, nn.Module)
"""


@pytest.mark.ex7
def test_a_module_stand_in_runs_its_forward_in_the_grader_on_the_childs_layers(shared_sandbox, rng):
    sizes = (23, 16, 4, 2)
    tokens = torch.from_numpy(rng.integers(0, sizes[0], size=(2, 7)))
    chunks = [(0, 4), (4, 5), (5, 7)]
    with program(shared_sandbox, MODEL_USER) as submission:
        with swapped(submission, "TinyLM", ex7.TinyLM):
            model = submission.call("built", sizes)
            state = model.call("state_dict")
            reference = ex7.TinyLM(*sizes)
            assert sorted(state) == sorted(reference.state_dict())
            weights = {
                key: torch.from_numpy(rng.normal(size=value.shape)).float()
                for key, value in state.items()
            }
            model.call("load_state_dict", weights)
            reference.load_state_dict(weights)
            summary = submission.probe("module_summary", model)
            whole, pieces, seen, length, is_module = submission.call("run", model, tokens, chunks)
    with torch.no_grad():
        expected = reference(tokens)
    # float32 logits near 100 (unit-normal weights): a cached decode in pieces sums in another
    # order than the whole pass, a few 1e-4 apart (it failed one run in several at 1e-5)
    assert torch.allclose(whole, expected, atol=1e-3, rtol=1e-4) and torch.allclose(
        pieces, expected, atol=1e-3, rtol=1e-4
    )
    # the layers are the child's: its hooks see them, its weights are used
    assert seen == [7, 4, 1, 2] and length == 7 and is_module
    assert summary["trainable_parameters"] == sum(p.numel() for p in reference.parameters())


HOSTILE = """
import sys
def forged(kind, target, *args):
    return sys.modules["remote"].CHANNEL.call(kind, target, args=args)
def causal_mask(seq_len):
    raise NotImplementedError
def masked(x):
    return causal_mask(x)
"""


@pytest.mark.ex5
def test_callbacks_a_notebook_forges_are_refused(shared_sandbox):
    """The notebook can write callback frames itself: only a stand-in swapped in now is served,
    as what it is, within the limits."""
    with program(shared_sandbox, HOSTILE) as submission:
        for target in (1, 999, -1):  # nothing swapped in
            with pytest.raises(StudentError, match="refused"):
                submission.call("forged", "call", target, 5)
        with swapped(submission, "causal_mask", ex5.causal_mask):
            number = max(submission.stand_ins._stand_ins)
            with pytest.raises(StudentError, match="refused"):
                submission.call("forged", "construct", number, 5)  # a function is no class
            with pytest.raises(StudentError, match="refused"):
                submission.call("forged", "forward", number, 5)  # no such object
            with pytest.raises(StudentError, match="refused"):
                submission.call("masked", np.zeros((2048, 2)))  # an axis over the limit
            with pytest.raises(StudentError, match="refused"):
                submission.call("masked", np.zeros((1 << 21,), dtype=np.uint8))
            assert torch.equal(submission.call("forged", "call", number, 3), ex5.causal_mask(3))


BUSY = """
def causal_mask(seq_len):
    raise NotImplementedError
def busy(n):
    for _ in range(n):
        causal_mask(2)
    return n
"""


@pytest.mark.ex5
def test_callbacks_are_counted(shared_sandbox, monkeypatch):
    monkeypatch.setattr(stand_ins, "MAX_CALLBACKS", 50)
    with program(shared_sandbox, BUSY) as submission:
        with swapped(submission, "causal_mask", ex5.causal_mask):
            assert submission.call("busy", 40) == 40
            with pytest.raises(StudentError, match="more than 50 calls"):
                submission.call("busy", 40)


@pytest.mark.ex7
def test_a_module_stand_in_takes_no_memory_in_the_grader(shared_sandbox):
    """Built on the meta device: a notebook's TinyLM(10**6, 4096) costs the grader nothing (the
    layers it asks for are made, or refused, in the child under its own limits)."""
    with program(shared_sandbox, MODEL_USER) as submission:
        with swapped(submission, "TinyLM", ex7.TinyLM):
            with pytest.raises(StudentError):
                submission.call("built", (10**7, 8192, 4, 2))
            assert submission.call("built", (23, 16, 4, 2)) is not None


def _stand_ins_of(exercise):
    module = importlib.import_module(f"autograder.exercises.{exercise}.checks")
    return [
        function
        for name, function in vars(module).items()
        if name.startswith("test_") and callable(function)
    ]


def _reachable(name: str, stand_in) -> set[str]:
    """The notebook names whose behaviour a swap of `name` lends: its own and, for a class,
    those of the reference's classes it builds (TinyLM's attention)."""
    names = {name}
    if kind_of(stand_in) != "function":
        home = importlib.import_module(stand_in.__module__)
        for used in stand_in.__init__.__code__.co_names:
            if isinstance(getattr(home, used, None), type):
                names |= _reachable(used, getattr(home, used))
    return names


@pytest.mark.parametrize(
    "exercise", [e for e in EXERCISES if any(getattr(f, "swaps", ()) for f in _stand_ins_of(e))]
)
def test_a_swap_lends_nothing_whose_checks_are_still_to_come(exercise):
    """While a swap lasts, the notebook's code can use the stand-in (its behaviour is the
    contract, which is public): every check of what a swap lends comes before the check that
    swaps (the checks run in file order), so no check, this one included, can be passed with
    answers recorded from a stand-in."""
    checks = _stand_ins_of(exercise)
    order = [function.__name__ for function in checks]
    for function in [f for f in checks if getattr(f, "swaps", ())]:
        here = order.index(function.__name__)
        for name, stand_in in function.swaps:
            assert stand_in.__name__ == name, f"{stand_in.__name__} stands in for {name}"
            for lent in _reachable(name, stand_in):
                prefixes = declaration(exercise).checks_of.get(lent, ())
                later = [check for check in order[here:] if check.startswith(prefixes)]
                assert not prefixes or not later, f"{function.__name__} lends {lent}: {later}"


COSTLY = """
import sys
import numpy as np
def causal_mask(seq_len):
    raise NotImplementedError
class KVCache:
    def __init__(self):
        raise NotImplementedError
class TinyLM(nn.Module):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError
def mask_of(size):
    return causal_mask(size)
def text_mask():
    return causal_mask("a" * 1000)
def listed_mask():
    return causal_mask([4] * 1000)
def growing(chunk, times):
    cache = KVCache()
    for _ in range(times):
        cache.append(torch.zeros(chunk), torch.zeros(chunk))
    return len(cache)
def set_on(name):
    cache = KVCache()
    setattr(cache, name, torch.zeros(3))
def missing():
    return KVCache().no_such_attribute
class Huge(nn.Module):
    def forward(self, x):
        return torch.zeros(4, 600, 600)
def huge_layer(sizes, tokens):
    model = TinyLM(*sizes)
    model.attn.W_q = Huge()
    return model(tokens)
"""


@pytest.mark.ex5
@pytest.mark.parametrize(
    ("call", "args"),
    [
        pytest.param("mask_of", (16384,), id="int"),  # 1 GiB of float32
        pytest.param("mask_of", (np.int64(16384),), id="numpy-int"),
        pytest.param("mask_of", (torch.tensor(16384),), id="0-d-tensor"),
        pytest.param("text_mask", (), id="str"),
        pytest.param("listed_mask", (), id="list"),
    ],
)
def test_what_a_stand_in_would_make_is_bounded(shared_sandbox, call, args):
    """The grader's process has no sandbox limits: a stand-in is refused what would make it
    allocate past the call's budget, whatever the argument's type (an independent attacker
    made the grader hold 3.45 GB through np.int64(16384) and 6.12 GB through a string)."""
    with program(shared_sandbox, COSTLY) as submission:
        with swapped(submission, "causal_mask", ex5.causal_mask):
            with pytest.raises(StudentError, match="refused"):
                submission.call(call, *args)
            assert torch.equal(submission.call("mask_of", np.int64(5)), ex5.causal_mask(5))


@pytest.mark.ex7
def test_what_the_stand_ins_keep_is_bounded(shared_sandbox, monkeypatch):
    monkeypatch.setattr(stand_ins, "RETAINED_BYTES", 8 << 20)  # as imported there
    with program(shared_sandbox, COSTLY) as submission:
        with swapped(submission, "KVCache", ex7.KVCache):
            assert submission.call("growing", (1, 1, 2, 4), 3) == 6
            with pytest.raises(StudentError, match="refused: its objects keep"):
                submission.call("growing", (1, 4, 256, 256), 40)  # 2 x 1 MiB a call


@pytest.mark.ex7
def test_what_a_stand_in_takes_back_from_the_child_is_bounded(shared_sandbox):
    """A layer the notebook replaced answers the stand-in's forward with a tensor past the
    bounds: refused before the grader computes with it (1 x 2.99 GB in the attack)."""
    tokens = torch.zeros((2, 5), dtype=torch.long)
    with program(shared_sandbox, COSTLY) as submission:
        with swapped(submission, "TinyLM", ex7.TinyLM):
            with pytest.raises(StudentError, match="refused"):
                submission.call("huge_layer", (23, 16, 4, 2), tokens)


@pytest.mark.ex7
@pytest.mark.parametrize(
    ("call", "args", "error"),
    [
        pytest.param("set_on", ("k",), "refused", id="setattr-property"),
        pytest.param("set_on", ("head_dim",), "refused", id="setattr-new"),
        pytest.param("missing", (), "AttributeError", id="missing-attribute"),
    ],
)
def test_a_stand_ins_errors_reach_the_child_as_errors(shared_sandbox, call, args, error):
    """No callback sets a stand-in's attribute, and any error of the stand-in (AttributeError,
    MemoryError, ...) is the child's error, never the grader's (one escaped the handler and
    left the child waiting on its reply)."""
    with program(shared_sandbox, COSTLY) as submission:
        with swapped(submission, "KVCache", ex7.KVCache):
            with pytest.raises(StudentError, match=error):
                submission.call(call, *args)
            assert submission.call("growing", (1, 1, 2, 4), 2) == 4  # still served
