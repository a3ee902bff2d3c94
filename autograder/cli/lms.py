"""`attn-grade feedback-zip` and `lms-grades`: feedback pages and scores back to an LMS
(autograder/nbgrader_plugins/lms_return.py has the layouts)."""

from __future__ import annotations

import argparse
import glob
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.exercises import DEFAULT_COURSE_DIR


def cmd_feedback_zip(args: argparse.Namespace) -> int:
    from autograder.nbgrader_plugins.lms_return import downloaded_prefixes, feedback_zip

    exercise, coursedir, extracted = _course_and_download(args)
    pattern = coursedir.format_path(coursedir.feedback_directory, "*", exercise)
    pages = [
        (Path(folder).relative_to(coursedir.root).parts[1], page)
        for folder in sorted(glob.glob(pattern))
        for page in sorted(Path(folder).glob("*.html"))
    ]
    if not pages:
        raise UsageError(f"no feedback pages for {exercise}: run nbgrader generate_feedback first")
    default = Path(coursedir.root) / f"feedback_{exercise}_{args.lms}.zip"
    out = Path(args.out) if args.out else default
    prefixes = downloaded_prefixes(extracted.parent, extracted, args.lms)
    included, missing = feedback_zip(pages, prefixes, out)
    print(f"{out}: feedback of {len(included)} student(s) for {args.lms}'s bulk upload")
    if missing:
        print(f"not in the {args.lms} download (return their feedback otherwise): "
              + ", ".join(missing))  # fmt: skip
    return 0


def cmd_lms_grades(args: argparse.Namespace) -> int:
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.nbgrader_plugins.lms_return import (
        downloaded_names,
        downloaded_prefixes,
        lms_gradebook,
    )

    exercise, coursedir, extracted = _course_and_download(args)
    names = downloaded_names(downloaded_prefixes(extracted.parent, extracted, args.lms))
    if not names:
        raise UsageError(f"no {args.lms} file names in {extracted}")
    scores = {}
    with Gradebook(coursedir.db_url, course_id=coursedir.course_id) as gradebook:
        try:
            max_score = gradebook.find_assignment(exercise).max_score
        except MissingEntry:
            raise UsageError(f"{exercise} is not in the gradebook: run attn-grade build") from None
        for student in names:
            try:
                found = gradebook.find_submission(exercise, student)
            except MissingEntry:
                continue
            penalty = found.late_submission_penalty or 0.0
            scores[student] = (max(0.0, found.score - penalty), str(found.timestamp or ""))
    default = Path(coursedir.root) / f"grades_{exercise}_{args.lms}.csv"
    out = Path(args.out) if args.out else default
    lms_gradebook(args.lms, exercise, names, scores, max_score, out)
    print(f"{out}: {len(scores)} of {len(names)} {args.lms} student(s) graded, for its import")
    return 0


def _course_and_download(args: argparse.Namespace):
    """(exercise, nbgrader's CourseDirectory set to it, the extracted LMS download)."""
    from nbgrader.apps.zipcollectapp import ZipCollectApp

    from autograder.course.api import nbgrader_api
    from autograder.exercises import resolve

    exercise = resolve(args.exercise)
    api = nbgrader_api(Path(args.course))
    api.coursedir.assignment_id = exercise
    collect = ZipCollectApp(config=api.config, coursedir=api.coursedir)
    extracted = Path(collect._format_collect_path(collect.extracted_directory))
    if not extracted.is_dir():
        raise UsageError(f"no extracted download at {extracted}: run nbgrader zip_collect first")
    return exercise, api.coursedir, extracted


def add_lms_commands(commands, formatter: type[argparse.HelpFormatter]) -> None:
    for name, run, text, default in (
        ("feedback-zip", cmd_feedback_zip, "one zip of an exercise's feedback pages for the "
         "LMS's bulk feedback upload", "COURSE/feedback_EXERCISE_LMS.zip"),
        ("lms-grades", cmd_lms_grades, "a CSV of an exercise's scores (late penalty applied) "
         "that the LMS gradebook imports", "COURSE/grades_EXERCISE_LMS.csv"),
    ):  # fmt: skip
        command = commands.add_parser(name, formatter_class=formatter, help=text)
        command.add_argument("exercise", metavar="EXERCISE", help="the exercise (id or ex1..ex8)")
        command.add_argument(
            "--lms", required=True, choices=("canvas", "moodle"), help="whose layout to write"
        )
        command.add_argument(
            "--course",
            default=str(DEFAULT_COURSE_DIR),
            help="nbgrader course root, relative to the current directory",
        )
        command.add_argument("--out", help=f"the file to write (default: {default})")
        command.set_defaults(run=run)
