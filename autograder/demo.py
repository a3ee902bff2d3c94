"""`attn-grade demo`: the whole course cycle on a fresh demo course with a sqlite gradebook.

Build and release every exercise; three simulated students per exercise fetch and submit
through nbgrader's exchange (alice: the reference solution, bob: the reference with one
catalogued mistake, carol: the blank release); collect, autograde (in parallel), generate and
release feedback, export grades.csv, write the batch report; print the scores and where the
feedback and the report are.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from autograder.authoring.catalogue import catalogue_for
from autograder.batch.engine import autograde_course
from autograder.core.registry import EXERCISES, declaration, reference_module
from autograder.course.api import nbgrader_api, require_success
from autograder.course.build import COURSE_ID, build_course, run_nbgrader
from autograder.notebooks import solutions
from autograder.notebooks.render import render_cells

MARKER = ".attn-grade-demo"
STUDENTS = ("alice", "bob", "carol")
# A companion chapter's exercise is demonstrated with fewer students, to keep the demo short:
# alice (the reference) and bob (its demo mistake).
COMPANION_STUDENTS = ("alice", "bob")


def students_of(exercise: str) -> tuple[str, ...]:
    return STUDENTS if declaration(exercise).core else COMPANION_STUDENTS


def prepare(course: Path) -> None:
    if course.exists():
        if not (course / MARKER).exists() and any(course.iterdir()):
            raise SystemExit(
                f"attn-grade demo: {course} exists and is not a demo course; "
                "choose another --course"
            )
        shutil.rmtree(course)
    (course / "exchange").mkdir(parents=True)
    (course / "exchange").chmod(0o777)
    (course / MARKER).write_text("made by attn-grade demo; removed by the next demo run\n")


def student_notebook(release: dict, exercise: str, student: str) -> dict:
    """What each simulated student submits, made from the released notebook."""
    if student == "carol":
        return release
    module = reference_module(exercise)
    mistake = (
        catalogue_for(exercise)[declaration(exercise).demo_mistake] if student == "bob" else None
    )
    answer = next(c.source for c in render_cells(exercise) if c.role == "answer")
    notebook = json.loads(json.dumps(release))
    for cell in notebook["cells"]:
        nbgrader = cell.get("metadata", {}).get("nbgrader", {})
        if not nbgrader.get("solution"):
            continue
        grade_id = nbgrader["grade_id"]
        if cell["cell_type"] == "markdown":
            cell["source"] = answer
        elif mistake is not None and grade_id == mistake.target:
            cell["source"] = mistake.source
        else:
            cell["source"] = solutions.student_source(module, grade_id)
    return notebook


def submit_as(course: Path, exercise: str, student: str) -> None:
    """Fetch the release into the student's folder, do the work, submit: nbgrader's exchange."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeSubmit
    from traitlets.config import Config

    home = course / "students" / student
    home.mkdir(parents=True, exist_ok=True)
    config = Config()
    config.Exchange.root = str(course / "exchange")
    config.Exchange.assignment_dir = str(home)
    config.CourseDirectory.course_id = COURSE_ID
    coursedir = CourseDirectory(config=config, root=str(home))
    coursedir.assignment_id = exercise
    authenticator = Authenticator(config=config)
    fetch = ExchangeFetchAssignment(coursedir=coursedir, authenticator=authenticator, config=config)
    fetch.start()
    path = home / exercise / f"{exercise}.ipynb"
    path.write_text(
        json.dumps(student_notebook(json.loads(path.read_text()), exercise, student), indent=1)
    )
    coursedir.student_id = student
    ExchangeSubmit(coursedir=coursedir, authenticator=authenticator, config=config).start()


def step(text: str) -> None:
    print(f"== {text}", file=sys.stderr, flush=True)


def run_demo(course: Path, workers: int = 2, exercises: list[str] | None = None) -> int:
    started = time.monotonic()
    exercises = exercises or list(EXERCISES)
    course = Path(course).resolve()
    prepare(course)
    step(f"building the course in {course}")
    build_course(course, exercises, release=False, exchange_root=str(course / "exchange"))
    api = nbgrader_api(course)
    for exercise in exercises:
        require_success(
            api.generate_assignment(exercise, force=True, create=True),
            f"generate_assignment {exercise}",
        )
        require_success(api.release_assignment(exercise), f"release_assignment {exercise}")
    step("students fetch, work and submit through the exchange")
    for exercise in exercises:
        for student in students_of(exercise):
            submit_as(course, exercise, student)
        require_success(api.collect(exercise), f"collect {exercise}")
    count = sum(len(students_of(exercise)) for exercise in exercises)
    step(f"autograding {count} notebooks ({workers} workers)")
    autograde_course(course, exercises, workers=workers)
    step("feedback and export")
    for exercise in exercises:
        require_success(api.generate_feedback(exercise), f"generate_feedback {exercise}")
        require_success(api.release_feedback(exercise), f"release_feedback {exercise}")
    run_nbgrader(course, "export", "--to", "grades.csv")
    step("batch report")
    from autograder.report.html import write_report

    report = write_report(course)
    print(f"\ngrades:   {course / 'grades.csv'}")
    print(f"feedback: {course / 'feedback'}/<student>/<exercise>/<exercise>.html, e.g.")
    for student in STUDENTS:
        print(
            f"          {course / 'feedback' / student / exercises[0] / (exercises[0] + '.html')}"
        )
    print(f"report:   {report}")
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    return 0
