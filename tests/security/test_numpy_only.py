"""ex1's "NumPy only" is decided by evidence ("Hidden means hidden", item 3): the function is
called with PyTorch out of reach (`sandbox/inside/numpy_only.py`), so that PyTorch reached
through any name scores no more than the honest notebook that imports it in the function's
body. Each attack below passed both the static scan and the "torch unimportable" call before
(8/8 graded whole, against the control's 7.25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

pytestmark = pytest.mark.ex1
EX1 = "ex1_numpy_attention"
CHECK = "test_sdpa_uses_numpy_only"
SDPA = "scaled_dot_product_attention"

# PyTorch's attention, written with `lib` for the torch module and `softmax` for its softmax.
BODY = """
    q, k, v = (lib.from_numpy(np.asarray(a)) for a in (Q, K, V))
    scores = q @ k.transpose(-2, -1) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~lib.from_numpy(np.asarray(mask)), float("-inf"))
    weights = softmax_(scores, dim=-1)
    return (weights @ v).numpy(), weights.numpy()
"""


def attention(header: str, signature: str = "Q, K, V, mask=None", before: str = "") -> str:
    return f"{header}\ndef {SDPA}({signature}):\n{before}" + BODY


ATTACKS = {
    # the issue's: an assignment, not an import alias
    "T-equals-torch": attention("T = torch", before="    lib, softmax_ = T, T.softmax\n"),
    "a-top-level-lambda": attention(
        "_softmax = lambda s, dim: torch.softmax(s, dim=dim)\n_lib = lambda: torch",
        before="    lib, softmax_ = _lib(), _softmax\n",
    ),
    "a-dict-of-torch-functions": attention(
        "OPS = {'lib': torch, 'softmax': torch.softmax}",
        before="    lib, softmax_ = OPS['lib'], OPS['softmax']\n",
    ),
    "a-default-argument": attention(
        "T = torch",
        signature="Q, K, V, mask=None, lib=T, softmax_=T.softmax",
    ),
    "a-partial": attention(
        "import functools\n_from = functools.partial(torch.from_numpy)\n"
        "_soft = functools.partial(torch.softmax)",
        before="    lib = type('lib', (), {'from_numpy': staticmethod(_from)})\n"
        "    softmax_ = _soft\n",
    ),
    "a-class-holding-torch": attention(
        "class Backend:\n    lib = torch\n    softmax = staticmethod(torch.softmax)",
        before="    lib, softmax_ = Backend.lib, Backend.softmax\n",
    ),
    "torch-found-through-gc": attention(
        "import gc",
        before="    lib = next(m for m in gc.get_objects() if getattr(m, '__name__', '') == "
        "'torch' and hasattr(m, 'softmax'))\n    softmax_ = lib.softmax\n",
    ),
    "a-tensor-held-at-the-top": (
        f"_ONE = torch.ones(())\ndef {SDPA}(Q, K, V, mask=None):\n"
        "    q, k, v = (_ONE.new_tensor(np.asarray(a)) for a in (Q, K, V))\n"
        "    scores = (q @ k.transpose(-2, -1) / np.sqrt(Q.shape[-1])).numpy()\n"
        "    if mask is not None:\n"
        "        scores = np.where(mask, scores, -np.inf)\n"
        "    weights = _ONE.new_tensor(scores).softmax(-1)\n"
        "    return (weights @ v).numpy(), weights.numpy()\n"
    ),
    # Answers that name no torch and use none while it is out of reach, but are not the
    # function's answer then: the evidence call's value is compared with the reference's.
    "uniform-weights-while-torch-is-hidden": attention(
        "import sys",
        before="    if sys.modules.get('torch') is None:\n"
        "        w = np.full(Q.shape[:-1] + (K.shape[-2],), 1.0 / K.shape[-2])\n"
        "        return w @ V, w\n"
        "    lib = sys.modules['torch']\n"
        "    softmax_ = lib.softmax\n",
    ),
    "unscaled-numpy-while-torch-cannot-be-found": attention(
        "import importlib.util, sys",
        before="    try:\n"
        "        hidden = importlib.util.find_spec('tor' + 'ch') is None\n"
        "    except Exception:\n"
        "        hidden = True\n"
        "    if hidden or 'torch' not in sys.modules:\n"
        "        s = Q @ np.swapaxes(K, -1, -2)\n"
        "        if mask is not None:\n"
        "            s = np.where(mask, s, -np.inf)\n"
        "        w = np.exp(s - s.max(-1, keepdims=True))\n"
        "        w = w / w.sum(-1, keepdims=True)\n"
        "        return w @ V, w\n"
        "    lib = sys.modules['torch']\n"
        "    softmax_ = lib.softmax\n",
    ),
    "answers-remembered-from-pytorch": (
        f"import sys\n_SEEN = {{}}\ndef {SDPA}(Q, K, V, mask=None):\n"
        "    key = np.asarray(Q).tobytes()\n"
        "    if key not in _SEEN:\n"
        "        _SEEN[key] = _with_lib(Q, K, V, mask)\n"
        "    return _SEEN[key]\n"
        "def _with_lib(Q, K, V, mask=None):\n"
        "    lib = sys.modules['torch']\n"
        "    softmax_ = lib.softmax\n" + BODY
    ),
}
# Wrong with PyTorch in reach too (its remembered answers ignore the mask): not paid, and no
# PyTorch mistake named, since PyTorch is not what makes it wrong then.
WRONG_EITHER_WAY = {"answers-remembered-from-pytorch"}
# Correct NumPy solutions in notebooks that use PyTorch elsewhere (max_abs_diff_vs_torch does).
HONEST = {
    "helpers-in-a-class": """
class _Attention:
    scale = staticmethod(lambda d: 1.0 / np.sqrt(d))

def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) * _Attention.scale(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights
""",
    "torch-names-elsewhere-in-the-cell": """
T = torch  # for the comparison further down

def scaled_dot_product_attention(Q, K, V, mask=None, *, _ops={"mm": np.matmul}):
    scores = _ops["mm"](Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return _ops["mm"](weights, V), weights

def _compare(Q, K, V):
    return T.from_numpy(scaled_dot_product_attention(Q, K, V)[0])
""",
}


def graded(cells: dict[str, str], tmp_path: Path, name: str, only=None):
    notebook = source_notebook(EX1, replace=cells)
    path = write_notebook(notebook, tmp_path / name / f"{EX1}.ipynb")
    report = grade_notebook(path, only=only)
    assert report.status == "ok", report.messages
    (result,) = [c for c in report.checks if c.name == CHECK]
    return report, result


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    """The honest notebook that uses PyTorch in the function's body (a catalogued mistake):
    its NumPy-only points (the check and those it requires)."""
    mistake = catalogue_for(EX1)["torch_inside_numpy"]
    report, result = graded(
        {SDPA: mistake.source}, tmp_path_factory.mktemp("control"), "c", only=[CHECK]
    )
    assert not result.passed
    return report.score


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_pytorch_reached_by_any_name_earns_no_numpy_only_points(attack, control, tmp_path):
    report, result = graded({SDPA: ATTACKS[attack]}, tmp_path, attack, only=[CHECK])
    assert not result.passed, result
    assert report.score <= control
    if attack in WRONG_EITHER_WAY:  # named by the checks its wrong answer fails
        return
    assert result.mistake in ("torch_inside_numpy", "torch_dynamic_import"), result


@pytest.mark.parametrize("solution", sorted(HONEST))
def test_numpy_solutions_beside_pytorch_keep_full_marks(solution, tmp_path):
    """Graded whole: the rest of the notebook (max_abs_diff_vs_torch) finds its torch again."""
    report, result = graded({SDPA: HONEST[solution]}, tmp_path, solution)
    assert result.passed and report.score == 8, result
