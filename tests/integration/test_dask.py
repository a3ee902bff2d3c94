"""`attn-grade autograde --scheduler`: the sandboxed grading runs on a real Dask cluster (a
LocalCluster: a scheduler and two worker processes) and the gradebook equals a serial run's."""

from __future__ import annotations

import shutil

import pytest

from autograder.audit import log as audit
from tests.integration.test_resume import gradebook_rows
from tests.support.nbgrader_helpers import attn_grade, submission_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EXERCISE = "ex1_numpy_attention"


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local:
        yield local


def test_dask_batch_equals_serial_batch(cluster, tmp_path):
    serial = tmp_path / "serial"
    built = attn_grade("build", EXERCISE, "--course", str(serial))
    assert built.returncode == 0, built.stderr
    release = serial / "release" / EXERCISE / f"{EXERCISE}.ipynb"
    for student in ("alice", "bob", "carol"):
        path = serial / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(submission_text(release, EXERCISE, student))
    on_dask = shutil.copytree(serial, tmp_path / "dask")

    done = attn_grade("autograde", "--course", str(serial), "--workers", "1")
    assert done.returncode == 0, done.stderr
    done = attn_grade(
        "autograde", "--course", str(on_dask), "--scheduler", cluster.scheduler_address
    )
    assert done.returncode == 0, done.stderr
    assert "graded locally" not in done.stderr  # no task fell back to this machine
    assert gradebook_rows(on_dask) == gradebook_rows(serial)
    assert (on_dask / "item_analysis.csv").read_text() == (serial / "item_analysis.csv").read_text()
    records = audit.read(on_dask).records
    assert sorted(r["student"] for r in records) == ["alice", "bob", "carol"]
    serial_records = {r["student"]: r for r in audit.read(serial).records}
    for record in records:
        same = serial_records[record["student"]]
        assert record["checks"] == same["checks"] and record["seed"] == same["seed"]
        assert record["isolation"] == same["isolation"]


def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    course = tmp_path / "course"
    built = attn_grade("build", EXERCISE, "--course", str(course), "--no-release")
    assert built.returncode == 0, built.stderr
    release = course / "source" / EXERCISE / f"{EXERCISE}.ipynb"
    path = course / "submitted" / "alice" / EXERCISE / f"{EXERCISE}.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(submission_text(release, EXERCISE, "alice"))
    done = attn_grade("autograde", "--course", str(course), "--scheduler", "tcp://127.0.0.1:9")
    assert done.returncode == 2, done.stderr
    assert "cannot reach the Dask scheduler" in done.stderr
    assert "Traceback" not in done.stderr
