"""`attn-grade`: build the course, grade one notebook, autograde a course, report on it, run
the demo, verify grades from the audit log."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from autograder.cli.audit import add_audit_commands
from autograder.cli.ci import add_ci_commands, add_ci_grade_options, ci_outputs
from autograder.cli.common import (
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_STOPPED,
    EXIT_USAGE,
    course_batch_options,
    course_path,
    exercise_list,
    isolation_option,
    scheduler_access,
    scheduler_options,
)
from autograder.cli.lms import add_lms_commands
from autograder.core.errors import AttnGradeError, describe_failure, environment_cause
from autograder.core.registry import (
    DEFAULT_COURSE_DIR,
    EXERCISES,
    core_exercises,
    short_name,
    short_names,
)
from autograder.core.text import clean_text
from autograder.nbgrader_plugins.speedups import skip_slow_optional_imports
from autograder.sandbox.isolation import ENVIRONMENT_VARIABLE


def cmd_build(args: argparse.Namespace) -> int:
    from autograder.course.build import build_course

    built = build_course(
        Path(args.course),
        exercise_list(args.exercises) or (list(EXERCISES) if args.all else None),
        lang=args.lang,
        release=not args.no_release,
        exchange_root=args.exchange,
        course_id=args.course_id,
        force=args.force,
        small_demo=args.small_demo,
    )
    for path in built:
        print(path)
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from autograder.core.text import format_report
    from autograder.grading.runner import GraderError, UnknownExercise, grade_notebook
    from autograder.i18n.reports import in_language, notebook_language

    path = Path(args.notebook)
    if path.is_dir():
        print(f"attn-grade grade: {path} is a directory; pass one .ipynb file", file=sys.stderr)
        return EXIT_USAGE
    if not path.is_file():
        print(f"attn-grade grade: no such file: {path}", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = grade_notebook(path, exercise=args.exercise, student=args.student, seed=args.seed)
    except UnknownExercise as error:
        print(f"attn-grade grade: {error}", file=sys.stderr)
        return EXIT_USAGE
    except GraderError as error:
        print(f"attn-grade grade: internal error: {error}", file=sys.stderr)
        return EXIT_INTERNAL
    report = in_language(report, notebook_language(path))  # what the student reads
    results = report.to_gradescope()
    if args.results:
        from autograder.ci.gradescope import results_json

        Path(args.results).write_text(json.dumps(results_json(report), indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(results, indent=2))
    elif args.format == "github-classroom":
        from autograder.ci.classroom import environment_lines, runner_results

        print("\n".join(environment_lines(runner_results(report))))
    else:
        print(format_report(report))
    return ci_outputs(args, report)


def cmd_autograde(args: argparse.Namespace) -> int:
    from autograder.batch.engine import autograde_course

    return autograde_course(
        Path(args.course),
        exercise_list(args.exercises) or list(EXERCISES),
        workers=args.workers,
        db_url=args.db,
        scheduler=scheduler_access(args),
        force=args.force,
        student=args.student,
    )


def cmd_report(args: argparse.Namespace) -> int:
    from autograder.course.api import CourseError
    from autograder.report.html import csv_path, write_report

    try:
        out = write_report(Path(args.course), Path(args.out) if args.out else None)
    except CourseError as error:
        print(f"attn-grade report: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(f"report: {out}")
    print(f"checks: {csv_path(out)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from autograder.demo import run_demo

    return run_demo(
        Path(args.course), workers=args.workers, exercises=exercise_list(args.exercises) or None
    )


def _version_text() -> str:
    from autograder.core.versions import CHECKS_VERSION, grader_version

    return f"attn-grade {grader_version()} (checks {CHECKS_VERSION})"


def _apply_isolation(args: argparse.Namespace) -> None:
    """Make the chosen level the process's (and its workers' and nbgrader's) and fail early,
    before any work, when it cannot be used."""
    from autograder.sandbox import isolation

    level = getattr(args, "isolation", None)
    if level and level != "auto":
        os.environ[ENVIRONMENT_VARIABLE] = level
    # (gradescope-run chooses in its own command: a refusal there is a results.json too)
    if args.command in ("grade", "autograde", "demo", "verify", "regrade"):
        isolation.choose()


class _ShowDefaults(argparse.HelpFormatter):
    """--help shows each option's default (when it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
            return text
        if "default" in text:
            return text
        return f"{text} (default: %(default)s)".strip()


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="attn-grade", description=__doc__)
    main.add_argument("--version", action="version", version=_version_text())
    commands = main.add_subparsers(dest="command", required=True)

    build = commands.add_parser(
        "build",
        formatter_class=_ShowDefaults,
        help="render the notebooks and release them with nbgrader",
    )
    build.add_argument(
        "exercises",
        nargs="*",
        metavar="EXERCISE",
        help=f"ids or {short_names()} (default: the lesson's {len(core_exercises())}: "
        f"{', '.join(short_name(e) for e in core_exercises())})",
    )
    build.add_argument(
        "--all",
        action="store_true",
        help="every exercise, the companion chapters' too "
        f"({', '.join(short_name(e) for e in EXERCISES if e not in core_exercises())})",
    )
    build.add_argument(
        "--course",
        default=str(DEFAULT_COURSE_DIR),
        help="nbgrader course root, relative to the current directory",
    )
    build.add_argument(
        "--lang",
        choices=("en", "ko"),
        help="the notebooks' language (default: the one each exercise was last built in, else en)",
    )
    build.add_argument("--no-release", action="store_true", help="write source notebooks only")
    build.add_argument(
        "--exchange", help="nbgrader exchange root (kept for later builds; default: nbgrader's)"
    )
    build.add_argument(
        "--course-id",
        help="nbgrader course id (kept for later builds; default: attention-transformers)",
    )
    build.add_argument(
        "--force",
        action="store_true",
        help="rebuild an exercise that is already released and has submissions",
    )
    build.add_argument(
        "--small-demo",
        action="store_true",
        help="demo cells on less data and for fewer epochs: a course for trying the whole "
        "cycle quickly (not for students)",
    )
    build.set_defaults(run=cmd_build)

    grade = commands.add_parser(
        "grade", formatter_class=_ShowDefaults, help="grade one notebook (no course, no server)"
    )
    grade.add_argument("notebook", help="the student's .ipynb file")
    grade.add_argument(
        "--exercise", help="default: from the file name (never from the notebook's metadata)"
    )
    grade.add_argument("--results", help="write Gradescope-style results.json here")
    grade.add_argument(
        "--format",
        choices=("text", "json", "github-classroom"),
        default="text",
        help="how the report is printed: a table, JSON, or GitHub Classroom's autograding output",
    )
    grade.add_argument(
        "--student",
        default="anonymous",
        help="student id: hidden inputs are seeded from exercise, student, the code, check",
    )
    grade.add_argument(
        "--seed", type=int, help="base seed (from a results file) to regrade exactly"
    )
    isolation_option(grade)
    add_ci_grade_options(grade)
    grade.set_defaults(run=cmd_grade)

    autograde = commands.add_parser(
        "autograde", formatter_class=_ShowDefaults, help="autograde submitted notebooks of a course"
    )
    course_batch_options(autograde)
    autograde.add_argument(
        "--db",
        help="gradebook as an SQLAlchemy URL (default: the course's nbgrader_config.py, else "
        "COURSE/gradebook.db), e.g. postgresql+psycopg://grader@/course?host=/run/postgresql",
    )
    scheduler_options(autograde)
    autograde.add_argument(
        "--force",
        action="store_true",
        help="regrade every submission, even those the audit log shows graded from the same "
        "notebook, checks, grader and isolation level",
    )
    autograde.add_argument(
        "--student",
        help="regrade only this student's submissions (up to date or not), with the audit "
        "line and the table",
    )
    isolation_option(autograde)
    autograde.set_defaults(run=cmd_autograde)

    report = commands.add_parser(
        "report",
        formatter_class=_ShowDefaults,
        help="one HTML page on the last batch: items, mistakes, problems, similarity",
    )
    report.add_argument(
        "--course",
        default=str(DEFAULT_COURSE_DIR),
        help="nbgrader course root, relative to the current directory",
    )
    report.add_argument("--out", help="the page to write (default: COURSE/report.html)")
    report.set_defaults(run=cmd_report)

    demo = commands.add_parser(
        "demo", formatter_class=_ShowDefaults, help="the whole course cycle on a fresh demo course"
    )
    demo.add_argument(
        "exercises",
        nargs="*",
        metavar="EXERCISE",
        help=f"default: all {len(EXERCISES)} (the companion chapters' with two students)",
    )
    demo.add_argument("--course", default="demo-course", help="where to build the demo course")
    demo.add_argument("--workers", type=int, default=2, help="parallel grading processes")
    isolation_option(demo)
    demo.set_defaults(run=cmd_demo)
    add_ci_commands(commands)
    add_audit_commands(commands, _ShowDefaults)
    add_lms_commands(commands, _ShowDefaults)
    return main


def main(argv: list[str] | None = None) -> int:
    skip_slow_optional_imports()
    args = parser().parse_args(argv)
    if isinstance(getattr(args, "course", None), str) and args.command != "demo":
        args.course = course_path(args.course)
    try:
        _apply_isolation(args)
        return args.run(args)
    except AttnGradeError as error:
        print(f"attn-grade {args.command}: {clean_text(error)}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"attn-grade {args.command}: stopped by SIGINT", file=sys.stderr)
        return EXIT_STOPPED
    except Exception as error:  # noqa: BLE001 - never a traceback or a misleading exit code
        cause = environment_cause(error)
        if cause is not None:  # not the grader's bug: what failed, where, what to do
            print(
                f"attn-grade {args.command}: {clean_text(describe_failure(cause), 2000)}; "
                "fix it and run the same command again",
                file=sys.stderr,
            )
            return EXIT_ENVIRONMENT
        print(
            f"attn-grade {args.command}: internal error: {type(error).__name__}: "
            f"{clean_text(error, 2000)}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
