"""A fault of ex8's attention modules is charged to their own checks only: train_pointer and
pointer_accuracy, correct in the same notebook, keep every point (their checks also accept what
the student's own module does, where the module's checks fail)."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook
from tests.exercises.test_fake_stubs import checks_of
from tests.support.cascades import failed_downstream

pytestmark = pytest.mark.ex8
EXERCISE = "ex8_additive_attention"
UPSTREAM = ("AdditiveAttention", "MultiplicativeAttention")
DOWNSTREAM = ("train_pointer", "pointer_accuracy")
# The mistakes whose fault still costs a downstream check (none since checks 10).
STILL_COSTS: dict[str, set[str]] = {}


def downstream_checks() -> list[str]:
    return [check for name in DOWNSTREAM for check in checks_of(EXERCISE, name)]


@pytest.mark.parametrize(
    "mistake_id",
    [m.id for m in catalogue_for(EXERCISE) if m.target in UPSTREAM],
)
def test_a_module_fault_costs_the_training_nothing(mistake_id, tmp_path, shared_sandbox):
    checks = downstream_checks()
    failed = failed_downstream(EXERCISE, mistake_id, checks, tmp_path, shared_sandbox)
    assert len(checks) >= 5 and set(failed) == STILL_COSTS.get(mistake_id, set()), failed


NEVER_STEPS = """
def train_pointer(module, annotations, states, targets, epochs=30, batch_size=64, lr=1e-2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    history, n = [], len(targets)
    for _ in range(epochs):
        order, total = torch.randperm(n, generator=generator), 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            _, weights = module(annotations[rows], states[rows])
            picked = weights.gather(1, targets[rows].unsqueeze(1)).squeeze(1)
            total += -torch.log(picked.clamp_min(1e-12)).mean().item() * len(rows)
        history.append(total / n)
    return history
"""


def test_a_faulty_module_excuses_no_train_pointer_that_never_learns(tmp_path, shared_sandbox):
    """The excuse needs evidence: their train_pointer must train their other module."""
    mistake = catalogue_for(EXERCISE)["softmax_over_the_singleton_axis"]
    cells = {mistake.target: mistake.source, "train_pointer": NEVER_STEPS}
    notebook = source_notebook(EXERCISE, replace=cells)
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    learns = [c for c in checks_of(EXERCISE, "train_pointer") if "learns" in c]
    report = grade_notebook(path, only=learns, shared=shared_sandbox.get())
    assert len(report.checks) == 2 and not any(c.passed for c in report.checks), report.checks
