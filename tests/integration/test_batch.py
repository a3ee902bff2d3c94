"""Batches: broken notebooks never stop the others, and parallel grading equals serial."""

from __future__ import annotations

import copy
import csv
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.nbgrader_helpers import attn_grade, nbgrader, scores, submission_text
from tests.support.pages import page_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EXERCISE = "ex1_numpy_attention"


def tampered(reference: dict) -> dict[str, str]:
    """Submissions that are broken in the ways students break notebooks."""
    schema = copy.deepcopy(reference)
    cells = [c for c in schema["cells"] if "nbgrader" in c["metadata"]]
    cells[0]["metadata"]["nbgrader"]["schema_version"] = 99
    check = next(c for c in cells if c["metadata"]["nbgrader"].get("grade"))
    check["metadata"]["nbgrader"]["points"] = 100
    duplicated = copy.deepcopy(reference)
    index = next(
        i
        for i, c in enumerate(duplicated["cells"])
        if c["metadata"].get("nbgrader", {}).get("grade")
    )
    duplicated["cells"].insert(index, copy.deepcopy(duplicated["cells"][index]))
    deleted = copy.deepcopy(reference)
    deleted["cells"] = [
        c
        for c in deleted["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id")
        not in ("check_softmax", "demo_attention")
    ]
    reordered = copy.deepcopy(reference)
    reordered["cells"].reverse()
    return {
        "deleted": json.dumps(deleted),
        "reordered": json.dumps(reordered),
        "notjson": "{ this is not a notebook",
        "schema99": json.dumps(schema),
        "duplicated": json.dumps(duplicated),
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("batch") / "course"
    built = attn_grade("build", EXERCISE, "--course", str(course))
    assert built.returncode == 0, built.stderr
    release = course / "release" / EXERCISE / f"{EXERCISE}.ipynb"
    submissions = {s: submission_text(release, EXERCISE, s) for s in ("alice", "bob", "carol")}
    submissions.update(tampered(json.loads(submissions["alice"])))
    for student, text in submissions.items():
        path = course / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(text)
    return course


def totals(course) -> dict[str, float]:
    return {
        student: sum(v or 0 for gid, v in cells.items() if not gid.startswith("answer"))
        for student, cells in scores(course / "gradebook.db", EXERCISE).items()
    }


def test_nbgrader_autograde_keeps_going_past_broken_notebooks(course):
    done = nbgrader(course, "autograde", EXERCISE, check=False, plain=True)
    graded = totals(course)
    assert graded["alice"] == graded["schema99"] == graded["duplicated"] == 8, done.stderr
    assert graded["deleted"] == graded["reordered"] == 8, done.stderr
    assert 0 < graded["bob"] < 8
    assert graded["carol"] == 0


def test_attn_grade_autograde_grades_everyone_alike_with_1_and_2_workers(course):
    graded = {}
    for workers in (1, 2):
        # the batch's own TMPDIR, short (the fork server's socket goes there): what the batch
        # and its workers leave there shows
        private_tmp = Path(tempfile.mkdtemp(prefix="ag-", dir="/tmp"))
        try:
            graded[workers] = autograde_everyone(course, workers, private_tmp)
        finally:
            shutil.rmtree(private_tmp, ignore_errors=True)
    assert graded[2] == graded[1]


def edited(course: Path, student: str, cell_type: str, edit) -> None:
    """The student's submitted notebook with the source of its first solution cell of
    `cell_type` replaced by `edit(source)`: a new hand-in."""
    path = course / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
    notebook = json.loads(path.read_text())
    cell = next(
        c
        for c in notebook["cells"]
        if c["cell_type"] == cell_type and c["metadata"].get("nbgrader", {}).get("solution")
    )
    source = cell["source"]
    cell["source"] = edit("".join(source) if isinstance(source, list) else source)
    path.write_text(json.dumps(notebook))


def manual_column(stdout: str) -> dict[str, str]:
    """The batch table's `manual` column of alice, bob and carol."""
    rows = [line.split() for line in stdout.splitlines()[1:]]
    return {row[0]: row[3] for row in rows if row and row[0] in ("alice", "bob", "carol")}


def test_one_student_is_regraded_with_an_audit_line_and_the_table(course):
    """Issue 21: `attn-grade autograde --student ID` regrades one student (up to date or not)
    with an audit line; the table's manual column tells a hand score from a blank answer.
    Issue 38: a regrade after the student's code changed keeps the hand grade final (no review,
    no "changed" on the feedback page), the course's item analysis keeps every student, and the
    report's sentence says what is true of the written answer; a changed answer is reviewed."""
    from nbgrader.api import Gradebook

    first = attn_grade("autograde", EXERCISE, "--course", str(course))
    assert first.returncode == 0, first.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(EXERCISE, EXERCISE, "alice")
        answer = next(g for g in notebook.grades if g.cell_type == "markdown")
        answer.manual_score, answer.needs_manual_grade = 1.5, False  # as formgrader does
        gradebook.db.commit()
    items = (course / "item_analysis.csv").read_text()
    audit = course / "audit.jsonl"
    before = audit.read_text().count("\n")
    edited(course, "alice", "code", lambda source: source + "\n# tidied after the hand grade\n")
    done = attn_grade("autograde", EXERCISE, "--course", str(course), "--student", "alice")
    assert done.returncode == 0, done.stderr
    new_lines = audit.read_text().splitlines()[before:]
    assert [json.loads(line)["student"] for line in new_lines] == ["alice"]
    assert manual_column(done.stdout) == {"alice": "1.5/2"}, "the table shows alice only, and "
    "her hand grade stays final: her answer did not change"
    assert (course / "item_analysis.csv").read_text() == items, "the whole course's (F8)"

    nbgrader(course, "generate_feedback", EXERCISE, "--student", "[abc]*", "--force")
    pages = {
        student: page_text(course / "feedback" / student / EXERCISE / f"{EXERCISE}.html")
        for student in ("alice", "bob", "carol")
    }
    assert "under review" not in pages["alice"] and "changed since" not in pages["alice"]
    assert "Score: 9.5 / 10.0)" in pages["alice"]
    said = {
        "alice": "the written answer, graded by your instructor: 1.5 of 2 points.",
        "bob": "the written answer (2 points) is graded by your instructor.",
        "carol": "the written answer (2 points) was left blank: 0 points.",
    }
    for student, sentence in said.items():
        assert f"from automatic checks; {sentence}" in pages[student], (student, sentence)
    assert "is graded by your instructor" not in pages["alice"] + pages["carol"]

    edited(course, "alice", "markdown", lambda source: "A new answer, written after grading.")
    done = attn_grade("autograde", EXERCISE, "--course", str(course), "--student", "alice")
    assert done.returncode == 0, done.stderr
    assert manual_column(done.stdout) == {"alice": "review"}, "her new answer waits for a look"
    everyone = attn_grade("autograde", EXERCISE, "--course", str(course))
    assert manual_column(everyone.stdout) == {"alice": "review", "bob": "pending", "carol": "blank"}
    unknown = attn_grade("autograde", EXERCISE, "--course", str(course), "--student", "zed")
    assert unknown.returncode == 2 and "zed" in unknown.stderr
    nothing_starts_a_worker(course)
    one_submission_is_graded_in_the_batchs_process(course)


def one_submission_is_graded_in_the_batchs_process(course) -> None:
    """Without --workers, a regrade of one submission opens no pool (a fork server and a
    worker that import torch and start a template, for one notebook): pool.worker_count."""
    from autograder.batch import engine

    class Opened(Exception):
        pass

    counts = []

    def pool(count, *args, **kwargs):
        counts.append(count)
        raise Opened  # the count is all this test needs: nothing is graded

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "worker_pool", pool)
        for workers in (None, 2):
            with pytest.raises(Opened):
                engine.autograde_course(course, [EXERCISE], workers=workers, student="alice")
    assert counts == [1, 2], "left out: in this process; asked for: as asked"


def nothing_starts_a_worker(course) -> None:
    """A batch with nothing to grade (all up to date, or an unknown student) starts no worker
    and no sandbox template: the pool's fork server would load torch and nbgrader (about 2.5
    CPU-s) for nothing, a template torch, NumPy and matplotlib (about 1.5)."""
    import contextlib

    from autograder.batch import engine
    from autograder.core.errors import UsageError
    from autograder.sandbox import warm

    opened = []

    def pool(*args, **kwargs):
        opened.append(args)
        return contextlib.nullcontext(None)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "worker_pool", pool)
        patch.setattr(warm, "start_early", opened.append)
        assert engine.autograde_course(course, [EXERCISE]) == 0
        with pytest.raises(UsageError, match="zed"):
            engine.autograde_course(course, [EXERCISE], student="zed")
    assert opened == []


def test_the_pool_falls_back_to_spawn_where_tmpdir_is_too_long_for_a_socket(monkeypatch):
    from autograder.batch.pool import pool_context

    assert pool_context(["json"]).get_start_method() == "forkserver"
    monkeypatch.setattr(tempfile, "tempdir", "/tmp/" + "x" * 80)
    assert pool_context(["json"]).get_start_method() == "spawn"


def autograde_everyone(course, workers: int, private_tmp: Path) -> dict:
    done = attn_grade(
        "autograde",
        EXERCISE,
        "--course",
        str(course),
        "--workers",
        str(workers),
        "--force",
        env={"TMPDIR": str(private_tmp)},
    )
    assert done.returncode == 0, done.stderr
    # the workers end without tearing down their interpreters, but after their exit handlers:
    # no sandbox runtime copy (or anything else) is left behind
    left = [p.name for p in private_tmp.iterdir() if not p.name.startswith("attn-grade-mplcache")]
    assert left == [], "left in TMPDIR (the font cache is kept on purpose)"
    graded = scores(course / "gradebook.db", EXERCISE)
    assert totals(course) == {
        "alice": 8,
        "bob": totals(course)["bob"],
        "carol": 0,
        "notjson": 0,
        "schema99": 8,
        "duplicated": 8,
        "deleted": 8,
        "reordered": 8,
    }
    assert 0 < totals(course)["bob"] < 8
    assert all(score == 0 for score in graded["notjson"].values())
    assert "notjson" in done.stdout and "not valid JSON" in done.stdout
    items = list(csv.DictReader((course / "item_analysis.csv").open()))
    sdpa = next(row for row in items if row["check"] == "test_sdpa_single_head_matches_reference")
    assert sdpa["graded"] == "7" and sdpa["passed"] == "5", sdpa  # not carol, not bob
    assert sdpa["mistakes"] == "no_sqrt_scaling x1"
    feedback = (course / "autograded" / "deleted" / EXERCISE / f"{EXERCISE}.ipynb").read_text()
    assert "cells missing from the submission: check_softmax, demo_attention" in feedback
    tampered_one = course / "autograded" / "schema99" / EXERCISE / f"{EXERCISE}.ipynb"
    assert "was edited (points)" in tampered_one.read_text()
    return graded


def test_score_table_names_abnormal_statuses(tmp_path, monkeypatch):
    """A submission that timed out, crashed or tampered with the grader says so in the table."""
    from types import SimpleNamespace

    from nbgrader.api import Gradebook

    from autograder.batch.engine import Outcome, Submitted, score_table, table_notes

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        gradebook.add_assignment("ex1_numpy_attention")
        for student in ("mallory", "alice"):
            gradebook.add_student(student)
            gradebook.add_submission("ex1_numpy_attention", student)
    api = SimpleNamespace(coursedir=SimpleNamespace(db_url=url, course_id="default_course"))
    batch = [
        Submitted("ex1_numpy_attention", s, tmp_path / "x.ipynb") for s in ("mallory", "alice")
    ]
    outcomes = {
        batch[0]: Outcome(report={"status": "tampered"}),
        batch[1]: Outcome(report={"status": "ok"}),
    }
    notes = table_notes(batch, {}, outcomes)
    _header, mallory, alice = score_table(api, batch, notes).splitlines()
    assert mallory.startswith("mallory") and mallory.endswith("status tampered")
    assert "status" not in alice


def test_a_failed_worker_is_named_not_graded_and_never_stops_the_others(tmp_path, capsys):
    from concurrent.futures import Future

    from autograder.batch.dispatch import Dispatcher
    from autograder.batch.engine import Batch, Progress, Submitted, table_notes

    class Pool:
        count, generation = 2, 0

        def submit(self, call, *args):
            failing = Future()
            failing.set_exception(RuntimeError("boom") if args[0] == "alice" else KeyError(1))
            return failing

    batch = Batch(api=None, course=tmp_path, level="jail")
    items = [Submitted(EXERCISE, s, tmp_path / f"{s}.ipynb") for s in ("alice", "worker failed")]
    progress = Progress(2, "test")
    dispatcher = Dispatcher(
        Pool(), None, None, lambda item, why, env: batch.not_graded(item, why, progress, env)
    )
    for item in items:
        dispatcher.add(item, item.student)
    dispatcher.drain()
    assert all(batch.outcomes[item].failed == "grader" for item in items)
    notes = table_notes(items, {}, batch.outcomes)
    assert notes[(EXERCISE, "alice")] == "not graded, the grader failed (said above)"
    err = capsys.readouterr().err
    assert "2/2" in err and "alice/ex1_numpy_attention: not graded, the grader failed: " in err
    assert "worker failed (RuntimeError: boom)" in err


def test_a_grading_that_fails_in_the_batchs_own_process_never_stops_the_others(
    tmp_path, capsys, monkeypatch
):
    """One worker (or a small batch left at the default --workers) grades in the batch's own
    process: a grading that raises is named, not graded, as a pool worker's failure is, and
    the submissions after it are still graded (it used to end the whole batch)."""
    from types import SimpleNamespace

    from autograder.batch import recorder
    from autograder.batch.engine import Batch, Submitted, table_notes

    graded = []

    class Recorder:
        def __init__(self, *args):
            pass

        def record(self, exercise, student, path, handed=None):
            assert handed is None, "no cluster graded it"
            if student == "alice":
                raise RuntimeError("boom")
            graded.append(student)
            return "recorded"

    monkeypatch.setattr(recorder, "Recorder", Recorder)
    batch = Batch(api=None, course=tmp_path, level="jail")
    batch.api = SimpleNamespace(coursedir=SimpleNamespace(db_url="sqlite://"))
    monkeypatch.setattr(batch, "finish", lambda item, result, progress: graded.append(result))
    items = [Submitted(EXERCISE, s, tmp_path / f"{s}.ipynb") for s in ("alice", "bob")]
    batch.run(items, None, tmp_path, None)
    assert graded == ["bob", "recorded"], "bob is graded after alice's failure"
    assert batch.outcomes[items[0]].failed == "grader" and items[1] not in batch.outcomes
    notes = table_notes(items, {}, batch.outcomes)
    assert notes[(EXERCISE, "alice")] == "not graded, the grader failed (said above)"
    assert "the grading failed (RuntimeError: boom)" in capsys.readouterr().err


def test_with_a_cluster_the_batchs_own_process_records_each_answer(tmp_path, capsys, monkeypatch):
    """--scheduler without --workers: each answer is recorded in the batch's own process as it
    comes in; a refused answer is graded here (no report handed over); a recording that raises
    is named and the others go on; the client is closed on every path, also when the batch
    fails before the first answer."""
    from types import SimpleNamespace

    distributed = pytest.importorskip("distributed")
    from autograder.batch import dask_client, dask_cluster, dask_results, recorder
    from autograder.batch.engine import Batch, Submitted
    from autograder.core.errors import EnvironmentFailure

    recorded: list[tuple[str, object]] = []
    closed: list[bool] = []

    class Recorder:
        fails = False

        def __init__(self, *args):
            if Recorder.fails:
                raise EnvironmentFailure("the disk is gone")

        def record(self, exercise, student, path, graded=None):
            recorded.append((student, graded))
            if student == "alice":
                raise RuntimeError("boom")
            return f"recorded {student}"

    class Future:  # a Dask future as far as the batch uses one (a dict key, a result)
        def __init__(self, student: str) -> None:
            self.student = student

        def result(self) -> str:
            return f"answer of {self.student}"

    class Client:
        def submit(self, function, exercise, student, *args, pure):
            return Future(student)

        def close(self):
            closed.append(True)

    def decode(answer, exercise, key, level):
        if "carol" in answer:
            raise dask_results.InvalidResult("a score above 8")
        return answer

    monkeypatch.setattr(recorder, "Recorder", Recorder)
    monkeypatch.setattr(dask_cluster, "connect", lambda plan: Client())
    monkeypatch.setattr(distributed, "as_completed", iter)
    monkeypatch.setattr(dask_results, "decode", decode)
    monkeypatch.setattr(dask_client, "workers_of", lambda client, future: "tls://worker:1")
    monkeypatch.setattr(Batch, "level_name", "jail")
    batch = Batch(api=None, course=tmp_path, level="jail")
    batch.api = SimpleNamespace(coursedir=SimpleNamespace(db_url="sqlite://"))
    finished: list[str] = []
    monkeypatch.setattr(batch, "finish", lambda item, result, progress: finished.append(result))
    items = []
    for student in ("alice", "bob", "carol"):
        path = tmp_path / f"{student}.ipynb"
        path.write_text("{}")
        items.append(Submitted(EXERCISE, student, path))
    cluster = dask_cluster.Plan("tls://scheduler:8786", None)

    batch.run(items, None, tmp_path, cluster)
    assert recorded == [("alice", "answer of alice"), ("bob", "answer of bob"), ("carol", None)]
    assert finished == ["recorded bob", "recorded carol"]
    assert batch.outcomes[items[0]].failed == "grader"
    err = capsys.readouterr().err
    assert "carol/ex1_numpy_attention: the Dask task on worker tls://worker:1" in err
    assert "graded locally" in err and "the grading failed (RuntimeError: boom)" in err
    assert closed == [True]

    Recorder.fails = True
    with pytest.raises(EnvironmentFailure):
        batch.run(items, None, tmp_path, cluster)
    assert closed == [True, True], "the client is closed when the batch fails"


def test_the_batch_s_report_reaches_nbgrader_through_the_app_it_builds(
    course, tmp_path, monkeypatch
):
    """The worker grades once, in the sandbox, and hands the report to the nbgrader app it
    builds (issue 42: no process-global channel): GradeWithChecks takes it and grades nothing
    again; the report written is the one offered."""
    from autograder.batch.recorder import Recorder
    from autograder.core.status import Status
    from autograder.nbgrader_plugins import preprocessors

    def again(*args, **kwargs):
        raise AssertionError("GradeWithChecks graded the notebook again")

    monkeypatch.setattr(preprocessors, "grade_loaded", again)
    path = course / "submitted" / "bob" / EXERCISE / f"{EXERCISE}.ipynb"
    recorded = Recorder(course, None, tmp_path).record(EXERCISE, "bob", str(path))
    assert recorded.reason is None and recorded.report is not None
    assert recorded.report["status"] == Status.OK, recorded.report.get("messages")
    assert any(c["passed"] for c in recorded.report["checks"])
