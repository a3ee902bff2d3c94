"""A fault of ex4's kv_projection_params, kv_cache_bytes or kv_cache_mib is charged to their
own checks: kv_cache_mib (on kv_cache_bytes) and gqa_report (on kv_projection_params and
kv_cache_mib), correct in the same notebook, keep their points."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook
from tests.support.cascades import failed_downstream

pytestmark = pytest.mark.ex4
EXERCISE = "ex4_gqa_analysis"
DOWNSTREAM = {
    "kv_projection_params": ("test_gqa_report_values",),
    "kv_cache_bytes": ("test_kv_cache_mib", "test_gqa_report_values"),
    "kv_cache_mib": ("test_gqa_report_values",),
}


@pytest.mark.parametrize(
    "mistake_id", [m.id for m in catalogue_for(EXERCISE) if m.target in DOWNSTREAM]
)
def test_an_upstream_fault_costs_the_functions_built_on_it_nothing(
    mistake_id, tmp_path, shared_sandbox
):
    checks = list(DOWNSTREAM[catalogue_for(EXERCISE)[mistake_id].target])
    failed = failed_downstream(EXERCISE, mistake_id, checks, tmp_path, shared_sandbox)
    assert not failed, failed


def test_the_upstream_fault_is_still_caught_where_it_belongs(tmp_path, shared_sandbox):
    mistake = catalogue_for(EXERCISE)["cache_missing_factor_two"]
    notebook = source_notebook(EXERCISE, replace={mistake.target: mistake.source})
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    report = grade_notebook(path, only=[mistake.check], shared=shared_sandbox.get())
    assert not report.checks[0].passed
