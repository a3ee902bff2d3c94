"""`attn-grade autograde --scheduler`: the sandboxed grading runs on a real Dask cluster (a
LocalCluster with TLS certificates: a scheduler and two worker processes) and the gradebook
equals a serial run's; a scheduler without authentication is refused; and a worker that turned
rogue gets no code run in the batch and no answer trusted (tests/support/rogue_dask.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.audit import log as audit
from autograder.course.build import tool_env
from tests.integration.test_resume import gradebook_rows
from tests.support.nbgrader_helpers import attn_grade, submission_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EXERCISE = "ex1_numpy_attention"
BATCH_SECONDS = 900  # a guard against a batch that waits forever, far above a normal run


@pytest.fixture(scope="module")
def security():
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("cryptography")  # Security.temporary: a self-signed CA and certificate
    return distributed.Security.temporary()


@pytest.fixture(scope="module")
def credentials(security, tmp_path_factory) -> list[str]:
    """The --tls-* options of a client of the cluster, as files."""
    folder = tmp_path_factory.mktemp("dask-tls")
    options = []
    for option, text in (
        ("--tls-ca-file", security.tls_ca_file),
        ("--tls-cert", security.tls_client_cert),
        ("--tls-key", security.tls_client_key),
    ):
        path = folder / f"{option.removeprefix('--')}.pem"
        path.write_text(text)
        options += [option, str(path)]
    return options


@pytest.fixture(scope="module")
def cluster(security):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        security=security,
        preload=["autograder.batch.dask_worker"],  # as docs/instructors.md starts workers
    ) as local:
        assert local.scheduler_address.startswith("tls://")
        yield local


@pytest.fixture(scope="module")
def open_scheduler():
    """A scheduler without TLS (no workers: nothing may reach it anyway)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp://", dashboard_address=None
    ) as local:
        yield local


def course_with(folder: Path, students: dict[str, str]) -> Path:
    """A built course where each student submitted the notebook of the demo's `students[name]`
    (alice: the reference; bob: a mistake; carol: the blank release)."""
    built = attn_grade("build", EXERCISE, "--course", str(folder))
    assert built.returncode == 0, built.stderr
    release = folder / "release" / EXERCISE / f"{EXERCISE}.ipynb"
    for student, like in students.items():
        path = folder / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(submission_text(release, EXERCISE, like))
    return folder


def autograde(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli.app", "autograde", *args],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=BATCH_SECONDS,
    )


def test_dask_batch_equals_serial_batch(cluster, credentials, tmp_path):
    serial = course_with(tmp_path / "serial", {name: name for name in ("alice", "bob", "carol")})
    on_dask = shutil.copytree(serial, tmp_path / "dask")

    done = autograde("--course", str(serial), "--workers", "1")
    assert done.returncode == 0, done.stderr
    done = autograde(
        "--course", str(on_dask), "--scheduler", cluster.scheduler_address, *credentials
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


@pytest.mark.parametrize("form", ["tcp", "scheduler-file", "no-scheme", "tls-without-certificates"])
def test_a_scheduler_without_authentication_is_refused(open_scheduler, form, tmp_path):
    """Refused (exit 2, with what to do) before the batch reads the course or connects."""
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    address = open_scheduler.scheduler_address
    given = {
        "tcp": address,
        "scheduler-file": str(tmp_path / "scheduler.json"),
        "no-scheme": address.removeprefix("tcp://"),  # Dask's default scheme: tcp
        "tls-without-certificates": address.replace("tcp://", "tls://"),
    }[form]
    (tmp_path / "scheduler.json").write_text(json.dumps({"type": "Scheduler", "address": address}))

    done = autograde("--course", str(course), "--scheduler", given)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    if form == "tls-without-certificates":
        assert "--tls-ca-file" in message and "--tls-cert" in message
    else:
        assert "not authenticated" in message and "--insecure-scheduler" in message
        assert "tls://" in message and "--tls-ca-file" in message  # what to do instead
    assert not open_scheduler.scheduler.tasks
    assert set(open_scheduler.scheduler.clients) <= {"fire-and-forget"}  # it never connected


def test_the_instructor_may_opt_out_of_authentication_and_is_warned(open_scheduler, tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    address = open_scheduler.scheduler_address
    done = autograde("--course", str(course), "--scheduler", address, "--insecure-scheduler")
    assert done.returncode == 0, done.stderr  # nothing submitted: nothing to send
    assert "not authenticated (--insecure-scheduler)" in " ".join(done.stderr.split())


@pytest.mark.parametrize("case", ["another-ca", "nothing-listens"])
def test_a_cluster_the_batch_cannot_join_is_a_clear_error(cluster, credentials, case, tmp_path):
    """another-ca: mutual TLS, a client whose certificate the cluster's CA did not sign cannot
    connect (nor could such a worker: Dask uses one TLS context for both directions)."""
    from distributed import Security

    options, address = credentials, cluster.scheduler_address
    if case == "another-ca":
        other = Security.temporary()
        options = []
        for option, text in (
            ("--tls-ca-file", other.tls_ca_file),
            ("--tls-cert", other.tls_client_cert),
            ("--tls-key", other.tls_client_key),
        ):
            (tmp_path / option).write_text(text)
            options += [option, str(tmp_path / option)]
    else:
        address = "tls://127.0.0.1:9"
    course = tmp_path / "course"
    built = attn_grade("build", EXERCISE, "--course", str(course), "--no-release")
    assert built.returncode == 0, built.stderr
    release = course / "source" / EXERCISE / f"{EXERCISE}.ipynb"
    path = course / "submitted" / "alice" / EXERCISE / f"{EXERCISE}.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(submission_text(release, EXERCISE, "alice"))
    done = autograde("--course", str(course), "--scheduler", address, *options)
    assert done.returncode == 2, done.stderr
    assert "cannot reach the Dask scheduler" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("local", [[], ["--workers", "2"]], ids=["in-process", "2-workers"])
def test_a_rogue_worker_s_answers_are_data_and_checked(security, credentials, local, tmp_path):
    """A worker of the cluster answers as an attacker (one way per student, each on a blank
    notebook): no pickle it sends runs in the batch, no bad answer is used, each is graded on
    the batch's machine with a warning that names the worker; a sound answer is used whatever
    pickles came with it. Whether nbgrader's part (and a refused answer's grading) runs in the
    batch's own process (the default) or in local workers (`--workers 2`)."""
    distributed = pytest.importorskip("distributed")
    from tests.support.rogue_dask import REFUSED, ROGUE, RogueWorker

    marker = tmp_path / "unpickled-by"
    course = course_with(tmp_path / "course", dict.fromkeys(ROGUE, "carol"))
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, security=security
    ) as rogue:
        # this test's own client is a plain Dask client: it is gone before the worker turns
        with distributed.Client(rogue, security=security) as client:
            client.register_plugin(RogueWorker(str(marker)))
            (worker,) = client.scheduler_info()["workers"]
        done = autograde(
            "--course", str(course), "--scheduler", rogue.scheduler_address, *credentials, *local
        )

    assert done.returncode == 0, done.stderr
    assert not marker.exists(), f"pickles ran in processes {marker.read_text().split()}"
    for student in ROGUE:
        warning = [
            line
            for line in done.stderr.splitlines()
            if f" {student}/{EXERCISE}: the Dask task" in line
        ]
        if student in REFUSED:
            assert len(warning) == 1 and "graded locally" in warning[0], done.stderr
            assert worker in warning[0]
        else:  # the answer itself was sound: it is used
            assert not warning, done.stderr
    scores = {record["student"]: record["score"] for record in audit.read(course).records}
    assert scores == dict.fromkeys(ROGUE, 0.0)  # a blank release's score: nothing forged counted
