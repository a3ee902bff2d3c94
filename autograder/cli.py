"""`attn-grade`: build the course, grade one notebook, autograde a course, report on it, run
the demo, verify grades from the audit log."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from autograder._speedups import skip_slow_optional_imports
from autograder.errors import AttnGradeError, UsageError
from autograder.exercises import DEFAULT_COURSE_DIR, EXERCISES
from autograder.grading.text import clean_text
from autograder.sandbox.isolation import ENVIRONMENT_VARIABLE, LEVELS

EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_BELOW_THRESHOLD = 1  # `grade --fail-under`


def _exercise_list(names: list[str]) -> list[str]:
    from autograder.exercises import resolve

    return [resolve(name) for name in names]


def cmd_build(args: argparse.Namespace) -> int:
    from autograder.build.course import build_course

    built = build_course(
        Path(args.course),
        _exercise_list(args.exercises) or None,
        lang=args.lang,
        release=not args.no_release,
        exchange_root=args.exchange,
        course_id=args.course_id,
    )
    for path in built:
        print(path)
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from autograder.grading.runner import GraderError, UnknownExercise, grade_notebook
    from autograder.grading.text import format_report

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
    return _ci_outputs(args, report)


# --- CI outputs of `grade` (issue 10): JUnit XML and a red/green exit status -------------


def _ci_outputs(args: argparse.Namespace, report) -> int:
    """Write --junit-xml; exit 1 when the score is below --fail-under, else 0."""
    if args.junit_xml:
        from autograder.ci.junit import write_junit

        write_junit(report, args.junit_xml)
    if args.fail_under is not None and report.score < args.fail_under:
        print(
            f"attn-grade grade: score {report.score:g} is below --fail-under {args.fail_under:g}",
            file=sys.stderr,
        )
        return EXIT_BELOW_THRESHOLD
    return 0


def add_ci_grade_options(grade: argparse.ArgumentParser) -> None:
    grade.add_argument("--junit-xml", metavar="FILE", help="also write JUnit XML here")
    grade.add_argument(
        "--fail-under",
        type=float,
        metavar="POINTS",
        help="exit 1 when the auto-graded score is below POINTS (a red CI job)",
    )


# --- GitHub Classroom and Gradescope commands (issue 10) ----------------------------------


def cmd_classroom_init(args: argparse.Namespace) -> int:
    from autograder.ci.classroom_repos import init_repo

    for path in init_repo(args.exercise, Path(args.dir), lang=args.lang):
        print(path)
    return 0


def cmd_classroom_collect(args: argparse.Namespace) -> int:
    from autograder.ci.classroom_repos import CollectError, collect, read_roster

    try:
        roster = read_roster(Path(args.roster))
    except (OSError, CollectError) as error:
        print(f"attn-grade classroom collect: {error}", file=sys.stderr)
        return EXIT_USAGE
    outcome = collect(roster, args.exercise, Path(args.course))
    for student, what in outcome.items():
        print(f"{student}: {what}")
    return 0


def cmd_classroom_feedback(args: argparse.Namespace) -> int:
    from autograder.ci.classroom_repos import CollectError, push_feedback, read_roster

    try:
        outcome = push_feedback(read_roster(Path(args.roster)), args.exercise, Path(args.course))
    except (OSError, CollectError) as error:
        print(f"attn-grade classroom feedback: {error}", file=sys.stderr)
        return EXIT_USAGE
    for student, what in outcome.items():
        print(f"{student}: {what}")
    return 0


def cmd_gradescope(args: argparse.Namespace) -> int:
    from autograder.ci.gradescope import build_bundle
    from autograder.ci.wheel import WheelError, wheel_for_bundle

    try:
        with wheel_for_bundle(Path(args.wheel) if args.wheel else None) as wheel:
            print(build_bundle(args.exercise, Path(args.out), wheel, args.visibility))
    except WheelError as error:
        print(f"attn-grade gradescope: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def cmd_gradescope_run(args: argparse.Namespace) -> int:
    from autograder.ci.gradescope import run

    results = run(Path(args.root) if args.root else None)
    print(f"{results['score']:g} / {sum(t['max_score'] for t in results['tests']):g}")
    return 0


def add_ci_commands(commands) -> None:
    classroom = commands.add_parser("classroom", help="GitHub Classroom: student repos, collect")
    steps = classroom.add_subparsers(dest="step", required=True)
    init = steps.add_parser("init", help="write a student repo template (visible checks only)")
    init.add_argument("exercise", metavar="EXERCISE")
    init.add_argument("dir", metavar="DIR")
    init.add_argument("--lang", choices=("en", "ko"), default="en")
    init.set_defaults(run=cmd_classroom_init)
    for name, run, text in (
        ("collect", cmd_classroom_collect, "clone/fetch student repos into submitted/"),
        ("feedback", cmd_classroom_feedback, "push feedback HTML to each repo's feedback branch"),
    ):
        step = steps.add_parser(name, help=text)
        step.add_argument("exercise", metavar="EXERCISE")
        step.add_argument("--roster", required=True, help="CSV: student,git-url per line")
        step.add_argument("--course", default=str(DEFAULT_COURSE_DIR))
        step.set_defaults(run=run)

    gradescope = commands.add_parser("gradescope", help="build a Gradescope autograder zip")
    gradescope.add_argument("exercise", metavar="EXERCISE")
    gradescope.add_argument("--out", default="autograder.zip")
    gradescope.add_argument("--wheel", help="attn-grade wheel to bundle (default: build it)")
    gradescope.add_argument(
        "--visibility",
        default="visible",
        choices=("visible", "hidden", "after_due_date", "after_published"),
        help="visibility of the hidden checks' results to students",
    )
    gradescope.set_defaults(run=cmd_gradescope)
    inside = commands.add_parser(
        "gradescope-run", help="(inside Gradescope) grade and write results"
    )
    inside.add_argument("--root", help="default: $ATTN_GRADE_AUTOGRADER_ROOT or /autograder")
    _isolation_option(inside)
    inside.set_defaults(run=cmd_gradescope_run)


# --- end of issue 10 blocks ----------------------------------------------------------------


# --- audit log commands (issue 11): verify, regrade --diff ----------------------------------


def cmd_verify(args: argparse.Namespace) -> int:
    from autograder.verify import verify_course

    return verify_course(
        Path(args.course),
        _exercise_list(args.exercises),
        student=args.student,
        every=args.all,
        workers=args.workers,
    )


def cmd_regrade(args: argparse.Namespace) -> int:
    from autograder.regrade import regrade_diff

    if not args.diff:
        raise UsageError(
            "regrade only shows changes (--diff) and writes nothing; "
            "`attn-grade autograde` regrades and writes the grades"
        )
    return regrade_diff(
        Path(args.course),
        _exercise_list(args.exercises) or list(EXERCISES),
        workers=args.workers,
        db_url=args.db,
    )


def add_audit_commands(commands, defaults: dict) -> None:
    verify = commands.add_parser(
        "verify", **defaults, help="regrade from the audit log and report any difference"
    )
    regrade = commands.add_parser(
        "regrade", **defaults, help="after a check change, show each score change (--diff)"
    )
    for command in (verify, regrade):
        command.add_argument("exercises", nargs="*", metavar="EXERCISE")
        command.add_argument(
            "--course",
            default=str(DEFAULT_COURSE_DIR),
            help="nbgrader course root, relative to the current directory",
        )
        command.add_argument("--workers", type=int, default=2, help="parallel grading processes")
        _isolation_option(command)
    verify.add_argument("--student", help="only this student's records")
    verify.add_argument(
        "--all", action="store_true", help="every record, not only the latest per submission"
    )
    verify.set_defaults(run=cmd_verify)
    regrade.add_argument(
        "--diff",
        action="store_true",
        help="required: grade with the current checks and show old -> new; writes nothing",
    )
    regrade.add_argument(
        "--db", help="gradebook as an SQLAlchemy URL, read for submissions without audit record"
    )
    regrade.set_defaults(run=cmd_regrade)


# --- end of issue 11 blocks ----------------------------------------------------------------


def cmd_autograde(args: argparse.Namespace) -> int:
    from autograder.nbgrader_bridge.batch import autograde_course

    return autograde_course(
        Path(args.course),
        _exercise_list(args.exercises) or list(EXERCISES),
        workers=args.workers,
        db_url=args.db,
        scheduler=args.scheduler,
        force=args.force,
    )


def cmd_report(args: argparse.Namespace) -> int:
    from autograder.nbgrader_bridge.course_api import CourseError
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
    from autograder.nbgrader_bridge.demo import run_demo

    return run_demo(
        Path(args.course), workers=args.workers, exercises=_exercise_list(args.exercises) or None
    )


def _version_text() -> str:
    from autograder.versions import CHECKS_VERSION, grader_version

    return f"attn-grade {grader_version()} (checks {CHECKS_VERSION})"


def _isolation_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--isolation",
        choices=("auto", *LEVELS),
        help="sandbox isolation level (default: auto, the strongest the host offers; grading "
        "is refused when that cannot hide the hidden checks, unless a level is chosen "
        f"explicitly). Also ${ENVIRONMENT_VARIABLE}.",
    )


def _apply_isolation(args: argparse.Namespace) -> None:
    """Make the chosen level the process's (and its workers' and nbgrader's) and fail early,
    before any work, when it cannot be used."""
    from autograder.sandbox import isolation

    level = getattr(args, "isolation", None)
    if level and level != "auto":
        os.environ[ENVIRONMENT_VARIABLE] = level
    if args.command in ("grade", "autograde", "demo", "gradescope-run", "verify", "regrade"):
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
    defaults = {"formatter_class": _ShowDefaults}

    build = commands.add_parser(
        "build", **defaults, help="render the notebooks and release them with nbgrader"
    )
    build.add_argument(
        "exercises", nargs="*", metavar="EXERCISE", help="ids or ex1..ex5 (default: all)"
    )
    build.add_argument(
        "--course",
        default=str(DEFAULT_COURSE_DIR),
        help="nbgrader course root, relative to the current directory",
    )
    build.add_argument("--lang", choices=("en", "ko"), default="en", help="prose language")
    build.add_argument("--no-release", action="store_true", help="write source notebooks only")
    build.add_argument(
        "--exchange", help="nbgrader exchange root (kept for later builds; default: nbgrader's)"
    )
    build.add_argument(
        "--course-id",
        help="nbgrader course id (kept for later builds; default: attention-transformers)",
    )
    build.set_defaults(run=cmd_build)

    grade = commands.add_parser(
        "grade", **defaults, help="grade one notebook (no course, no server)"
    )
    grade.add_argument("notebook")
    grade.add_argument(
        "--exercise", help="default: from the file name (never from the notebook's metadata)"
    )
    grade.add_argument("--results", help="write Gradescope-style results.json here")
    grade.add_argument("--format", choices=("text", "json", "github-classroom"), default="text")
    grade.add_argument(
        "--student",
        default="anonymous",
        help="student id: hidden inputs are seeded from exercise, student, the code, check",
    )
    grade.add_argument(
        "--seed", type=int, help="base seed (from a results file) to regrade exactly"
    )
    _isolation_option(grade)
    add_ci_grade_options(grade)
    grade.set_defaults(run=cmd_grade)

    autograde = commands.add_parser(
        "autograde", **defaults, help="autograde submitted notebooks of a course"
    )
    autograde.add_argument("exercises", nargs="*", metavar="EXERCISE")
    autograde.add_argument(
        "--course",
        default=str(DEFAULT_COURSE_DIR),
        help="nbgrader course root, relative to the current directory",
    )
    autograde.add_argument("--workers", type=int, default=2, help="parallel grading processes")
    autograde.add_argument(
        "--db",
        help="gradebook as an SQLAlchemy URL (default: the course's nbgrader_config.py, else "
        "COURSE/gradebook.db), e.g. postgresql+psycopg://grader@/course?host=/run/postgresql",
    )
    autograde.add_argument(
        "--scheduler",
        help="grade on a Dask cluster: the scheduler's address (tcp://host:8786) or scheduler "
        "file; --workers then counts the local processes that run nbgrader's part",
    )
    autograde.add_argument(
        "--force",
        action="store_true",
        help="regrade every submission, even those the audit log shows graded from the same "
        "notebook, checks, grader and isolation level",
    )
    _isolation_option(autograde)
    autograde.set_defaults(run=cmd_autograde)

    report = commands.add_parser(
        "report",
        **defaults,
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
        "demo", **defaults, help="the whole course cycle on a fresh demo course"
    )
    demo.add_argument("exercises", nargs="*", metavar="EXERCISE", help="default: all five")
    demo.add_argument("--course", default="demo-course", help="where to build the demo course")
    demo.add_argument("--workers", type=int, default=2, help="parallel grading processes")
    _isolation_option(demo)
    demo.set_defaults(run=cmd_demo)
    add_ci_commands(commands)
    add_audit_commands(commands, defaults)
    return main


def main(argv: list[str] | None = None) -> int:
    skip_slow_optional_imports()
    args = parser().parse_args(argv)
    try:
        _apply_isolation(args)
        return args.run(args)
    except AttnGradeError as error:
        print(f"attn-grade {args.command}: {clean_text(error)}", file=sys.stderr)
        return error.exit_code
    except ValueError as error:  # unknown exercise names and the like
        print(f"attn-grade {args.command}: {clean_text(error)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as error:  # noqa: BLE001 - never a traceback or a misleading exit code
        print(
            f"attn-grade {args.command}: internal error: {type(error).__name__}: "
            f"{clean_text(error, 2000)}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
