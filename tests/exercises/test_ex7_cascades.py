"""A fault of ex7's KVCache or CachedSelfAttention is charged to their own checks only: TinyLM
and generate, correct in the same notebook, keep every point (they are checked on what the
student's own attention and cache do, besides the reference)."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook
from tests.exercises.test_fake_stubs import checks_of
from tests.support.cascades import failed_downstream
from tests.support.student_cells import tinylm

pytestmark = pytest.mark.ex7
EXERCISE = "ex7_kv_cache"
UPSTREAM = ("KVCache", "CachedSelfAttention")
DOWNSTREAM = ("TinyLM", "generate")
# A cache that concatenates on the wrong axis makes the model raise in its second cached pass:
# generate has nothing to return then, and a generate that crashes earns nothing.
MODEL_RAISES = {"cache_concatenated_on_the_wrong_axis"}


def downstream_checks() -> list[str]:
    return [check for name in DOWNSTREAM for check in checks_of(EXERCISE, name)]


@pytest.mark.parametrize(
    "mistake_id",
    [m.id for m in catalogue_for(EXERCISE) if m.target in UPSTREAM and m.id not in MODEL_RAISES],
)
def test_an_upstream_fault_costs_tinylm_and_generate_nothing(mistake_id, tmp_path, shared_sandbox):
    checks = downstream_checks()
    failed = failed_downstream(EXERCISE, mistake_id, checks, tmp_path, shared_sandbox)
    assert len(checks) >= 4 and not failed, failed


def test_the_upstream_fault_is_still_caught_where_it_belongs(tmp_path, shared_sandbox):
    """The de-cascade moves no points: the attention's own check still fails."""
    mistake = catalogue_for(EXERCISE)["new_tokens_rotated_from_position_0"]
    notebook = source_notebook(EXERCISE, replace={mistake.target: mistake.source})
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    report = grade_notebook(path, shared=shared_sandbox.get())
    failed = {c.name for c in report.checks if not c.passed}
    assert mistake.check in failed


ZERO_ATTENTION = """
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        kv = n_heads if n_kv_heads is None else n_kv_heads
        hd = d_model // n_heads
        self.W_q = nn.Linear(d_model, n_heads * hd, bias=False)
        self.W_k = nn.Linear(d_model, kv * hd, bias=False)
        self.W_v = nn.Linear(d_model, kv * hd, bias=False)
        self.W_o = nn.Linear(n_heads * hd, d_model, bias=False)

    def forward(self, x, cache=None):
        return torch.zeros_like(x)
"""
TINYLM_WITHOUT_ATTENTION = tinylm("return self.head(self.embed(tokens))")


def test_an_attention_that_adds_nothing_forgives_nothing(tmp_path, shared_sandbox):
    """With an attention that returns zeros, head(x + attn(x)) is head(x): a TinyLM that never
    calls attn must still lose its point."""
    cells = {"CachedSelfAttention": ZERO_ATTENTION, "TinyLM": TINYLM_WITHOUT_ATTENTION}
    notebook = source_notebook(EXERCISE, replace=cells)
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    check = "test_tinylm_matches_the_reference_on_its_weights"
    report = grade_notebook(path, only=[check], shared=shared_sandbox.get())
    (result,) = report.checks
    assert not result.passed and "wrong values for TinyLM" in result.message, result


# The attention's cached checks run on the contract's KVCache where the notebook's is wrong (an
# independent review found a __len__ of the heads axis charged 2.0 points more there).
CACHED_ATTENTION = (
    "test_cached_attention_every_split_equals_the_whole",
    "test_cached_attention_fills_the_cache",
)
LEN_OF_THE_HEADS = """
class KVCache:
    def __init__(self):
        self._k = self._v = None

    def append(self, k, v):
        self._k = k if self._k is None else torch.cat([self._k, k], dim=-2)
        self._v = v if self._v is None else torch.cat([self._v, v], dim=-2)

    @property
    def k(self):
        return self._k

    @property
    def v(self):
        return self._v

    def __len__(self):
        return 0 if self._k is None else self._k.shape[1]
"""


@pytest.mark.parametrize(
    "cache",
    ["len_of_the_heads", *(m.id for m in catalogue_for(EXERCISE) if m.target == "KVCache")],
)
def test_a_cache_fault_costs_the_attention_nothing(cache, tmp_path, shared_sandbox):
    if cache == "len_of_the_heads":
        notebook = source_notebook(EXERCISE, replace={"KVCache": LEN_OF_THE_HEADS})
        path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
        checks = [*CACHED_ATTENTION, "test_kv_cache_appends_along_time"]
        report = grade_notebook(path, only=checks, shared=shared_sandbox.get())
        failed = {c.name: c.message for c in report.checks if not c.passed}
        assert set(failed) == {"test_kv_cache_appends_along_time"}, failed
    else:
        failed = failed_downstream(
            EXERCISE, cache, list(CACHED_ATTENTION), tmp_path, shared_sandbox
        )
        assert not failed, failed
