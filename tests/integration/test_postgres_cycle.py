"""The nbgrader cycle with the gradebook on a real PostgreSQL server (tests/support/postgres.py):
release, autograde with 2 workers, feedback, export; the grades equal the same batch on sqlite."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.support.batch_faults import Batch, assert_converged, graded, run
from tests.support.nbgrader_helpers import attn_grade, nbgrader, scores, submission_text
from tests.support.postgres import postgres  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EXERCISE = "ex1_numpy_attention"
STUDENTS = ("alice", "bob", "carol")  # the reference, a catalogued mistake, the blank notebook


def course_with_submissions(course: Path, db_url: str | None) -> Path:
    """A course of one exercise whose gradebook is `db_url` (None: nbgrader's sqlite default)
    from the release on, with one submission per student in submitted/."""
    built = attn_grade("build", EXERCISE, "--course", str(course), "--no-release")
    assert built.returncode == 0, built.stderr
    if db_url:  # what an instructor adds to the course's nbgrader_config.py
        with (course / "nbgrader_config.py").open("a") as config:
            config.write(f"c.CourseDirectory.db_url = {db_url!r}\n")
    nbgrader(course, "generate_assignment", EXERCISE)  # writes the assignment into the gradebook
    release = course / "release" / EXERCISE / f"{EXERCISE}.ipynb"
    for student in STUDENTS:
        path = course / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(submission_text(release, EXERCISE, student))
    return course


def grade_and_export(course: Path, *db: str) -> dict[str, tuple[str, str, str]]:
    """autograde (2 workers), feedback, export: student -> (raw score, score, max score)."""
    done = attn_grade("autograde", EXERCISE, "--course", str(course), "--workers", "2", *db)
    assert done.returncode == 0, done.stdout + done.stderr
    nbgrader(course, "generate_feedback", EXERCISE)
    nbgrader(course, "export", "--to", "grades.csv")
    rows = csv.DictReader((course / "grades.csv").open())
    return {r["student_id"]: (r["raw_score"], r["score"], r["max_score"]) for r in rows}


def test_postgres_server_serves_a_fresh_database_on_its_socket_only(postgres):  # noqa: F811
    import psycopg

    url = postgres.create_database("fixture_check")
    assert url.startswith("postgresql+psycopg://") and f"host={postgres.socket_dir}" in url
    with psycopg.connect(
        host=str(postgres.socket_dir), user="postgres", dbname="fixture_check"
    ) as db:
        assert db.execute("SHOW listen_addresses").fetchone() == ("",), "no TCP"
        assert db.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)


@pytest.fixture(scope="module")
def on_sqlite(tmp_path_factory) -> tuple[Path, dict]:
    """The same course on nbgrader's sqlite gradebook, graded and exported."""
    course = course_with_submissions(tmp_path_factory.mktemp("on-sqlite") / "sqlite", None)
    return course, grade_and_export(course)


def test_cycle_on_postgresql_grades_as_on_sqlite(postgres, tmp_path, on_sqlite):  # noqa: F811
    url = postgres.create_database("gradebook")
    on_postgres = course_with_submissions(tmp_path / "postgres", url)

    exported = grade_and_export(on_postgres, "--db", url)
    assert exported == on_sqlite[1]
    graded = scores(url, EXERCISE)
    assert graded == scores(on_sqlite[0] / "gradebook.db", EXERCISE)
    totals = {
        student: sum(v or 0 for grade_id, v in cells.items() if not grade_id.startswith("answer"))
        for student, cells in graded.items()
    }
    assert totals["alice"] == 8 and totals["carol"] == 0 and 0 < totals["bob"] < 8, totals
    assert float(exported["alice"][0]) == 8  # the written answer waits for a hand grade

    for student in STUDENTS:
        feedback = on_postgres / "feedback" / student / EXERCISE / f"{EXERCISE}.html"
        assert "Autograder report" in feedback.read_text(), student
    assert not list(on_postgres.rglob("*.db")), "no sqlite gradebook beside the PostgreSQL one"


def test_a_gradebook_server_that_goes_away_and_comes_back(postgres, tmp_path, on_sqlite):  # noqa: F811
    """Reliability round 1, finding 4: the server crashes (`pg_ctl stop -m immediate`) after
    the first result; the batch retries with a bounded backoff, says so, and once the server is
    back it grades everyone in the same run: the grades of the unfaulted sqlite run, one audit
    record each, no duplicate row."""
    url = postgres.create_database("outage")
    course = course_with_submissions(tmp_path / "outage", url)
    batch = Batch.start(course, "--db", url, stop_at="merge:2")
    batch.wait_stopped()
    postgres.stop()
    try:
        batch.go_on()
        line = batch.read_until("retrying in")
        assert "gradebook" in line and str(postgres.socket_dir) in line, line
    finally:
        postgres.start()
    code = batch.finish()
    assert code == 0, batch.err
    assert "Traceback" not in batch.err
    unfaulted = graded(on_sqlite[0])
    assert_converged(course, unfaulted, url)
    code, err = run(course, "--db", url)
    assert code == 0 and "3 of 3 submissions are already graded" in err, err
