"""`attn-grade feedback-zip` and `lms-grades`: feedback pages and scores back to an LMS
(autograder/nbgrader_plugins/lms_return.py has the layouts)."""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path

from autograder.cli.common import EXIT_UNFINISHED
from autograder.core.errors import UsageError
from autograder.core.registry import DEFAULT_COURSE_DIR
from autograder.core.text import clean_text


def cmd_feedback_zip(args: argparse.Namespace) -> int:
    from autograder.nbgrader_plugins.lms_return import downloaded_prefixes, feedback_zip

    exercise, api, extracted = _course_and_download(args)
    coursedir = api.coursedir
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

    from autograder.course.grades import exercise_grades, unfinished
    from autograder.nbgrader_plugins.lms_return import (
        canvas_column,
        downloaded_names,
        downloaded_prefixes,
        lms_gradebook,
        points,
    )

    if args.column is not None and args.lms != "canvas":
        raise UsageError("--column names Canvas's assignment column (Moodle's worksheet is one "
                         "assignment's)")  # fmt: skip
    if args.out_of is not None and not 0 < args.out_of < float("inf"):
        raise UsageError(f"--out-of is the LMS assignment's maximum, above 0, not {args.out_of}")
    exercise, api, extracted = _course_and_download(args)
    try:
        matched = canvas_column(args.column or exercise) if args.lms == "canvas" else None
    except ValueError as error:
        raise UsageError(f"--column: {error}") from None
    coursedir = api.coursedir
    names = downloaded_names(downloaded_prefixes(extracted.parent, extracted, args.lms))
    if not names:
        raise UsageError(f"no {args.lms} file names in {extracted}")
    with Gradebook(coursedir.db_url, course_id=coursedir.course_id) as gradebook:
        try:
            max_score = gradebook.find_assignment(exercise).max_score
        except MissingEntry:
            raise UsageError(f"{exercise} is not in the gradebook: run attn-grade build") from None
        grades = exercise_grades(gradebook, api.config, exercise)
        waiting = unfinished(gradebook, coursedir, exercise, names)
    listed = "\n".join(f"  {s} {clean_text(names[s], 100)}: {why}" for s, why in waiting.items())
    if waiting and not args.partial:
        print(f"attn-grade lms-grades: {len(waiting)} of {len(names)} grade(s) of {exercise} are "
              f"not final; nothing written:\n{listed}\nFinish them (formgrader; attn-grade "
              "autograde for a notebook handed in since), or add --partial to write the final "
              "grades only (the others get no row, so the LMS keeps what it has for them).",
              file=sys.stderr)  # fmt: skip
        return EXIT_UNFINISHED
    kept = {s: name for s, name in names.items() if s not in waiting}
    scores = {s: (g.score, str(g.timestamp or "")) for s, g in grades.items() if s in kept}
    default = Path(coursedir.root) / f"grades_{exercise}_{args.lms}.csv"
    out = Path(args.out) if args.out else default
    lms_gradebook(args.lms, exercise, kept, scores, max_score, out, column=args.column,
                  out_of=args.out_of)  # fmt: skip
    scale = points(args.out_of or max_score)
    print(f"{out}: {len(scores)} of {len(names)} {args.lms} student(s) graded (late penalty of "
          f"the final score), out of {scale}, for its import")  # fmt: skip
    if matched:
        print(f"column {args.column or exercise!r}: {matched}")
    if waiting:
        print(f"left out, not final (--partial; the LMS keeps what it has for them):\n{listed}")
    return 0


def _course_and_download(args: argparse.Namespace):
    """(exercise, nbgrader's API with its CourseDirectory set to it, the extracted LMS
    download)."""
    from nbgrader.apps.zipcollectapp import ZipCollectApp

    from autograder.core.registry import resolve
    from autograder.course.api import nbgrader_api

    exercise = resolve(args.exercise)
    api = nbgrader_api(Path(args.course))
    api.coursedir.assignment_id = exercise
    collect = ZipCollectApp(config=api.config, coursedir=api.coursedir)
    extracted = Path(collect._format_collect_path(collect.extracted_directory))
    if not extracted.is_dir():
        raise UsageError(f"no extracted download at {extracted}: run nbgrader zip_collect first")
    return exercise, api, extracted


def add_lms_commands(commands, formatter: type[argparse.HelpFormatter]) -> None:
    for name, run, text, default in (
        ("feedback-zip", cmd_feedback_zip, "one zip of an exercise's feedback pages for the "
         "LMS's bulk feedback upload", "COURSE/feedback_EXERCISE_LMS.zip"),
        ("lms-grades", cmd_lms_grades, "a CSV of an exercise's final scores (hand grades and "
         "the late penalty of that total included) that the LMS gradebook imports; exit 1, "
         "nothing written, while a grade is not final", "COURSE/grades_EXERCISE_LMS.csv"),
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
        if name == "lms-grades":
            _grade_options(command)
        command.set_defaults(run=run)


def _grade_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--partial",
        action="store_true",
        help="write the final grades while some are not (an answer not graded by hand yet, a "
        "hand grade under review, a notebook not autograded since it was handed in): those "
        "students get no row, so the LMS keeps what it has for them; they are listed",
    )
    command.add_argument(
        "--column",
        metavar="HEADER",
        help="Canvas: the assignment's column header as Canvas's own gradebook export writes "
        "it, 'Name (id)', e.g. '연습 1: 어텐션 직접 구현 (123456)'; Canvas matches the id in "
        "parentheses, else the exact name (default: the exercise id, which Canvas offers to "
        "create as a new assignment)",
    )
    command.add_argument(
        "--out-of",
        type=float,
        metavar="POINTS",
        help="scale the scores to the LMS assignment's maximum grade, e.g. 100 (default: the "
        "exercise's points, 10); Moodle skips a grade above its maximum",
    )
