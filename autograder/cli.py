"""`attn-grade`: build the course, grade one notebook, autograde a course, run the demo."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autograder._speedups import skip_slow_optional_imports
from autograder.exercises import DEFAULT_COURSE_DIR, EXERCISES

EXIT_USAGE = 2
EXIT_INTERNAL = 3


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
    except (UnknownExercise, ValueError) as error:
        print(f"attn-grade grade: {error}", file=sys.stderr)
        return EXIT_USAGE
    except GraderError as error:
        print(f"attn-grade grade: internal error: {error}", file=sys.stderr)
        return EXIT_INTERNAL
    results = report.to_gradescope()
    if args.results:
        Path(args.results).write_text(json.dumps(results, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(results, indent=2))
    else:
        print(format_report(report))
    return 0


def cmd_autograde(args: argparse.Namespace) -> int:
    from autograder.nbgrader_bridge.batch import autograde_course

    return autograde_course(
        Path(args.course), _exercise_list(args.exercises) or list(EXERCISES), workers=args.workers
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from autograder.nbgrader_bridge.demo import run_demo

    return run_demo(
        Path(args.course), workers=args.workers, exercises=_exercise_list(args.exercises) or None
    )


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
    grade.add_argument("--exercise", help="default: from the notebook's metadata or file name")
    grade.add_argument("--results", help="write Gradescope-style results.json here")
    grade.add_argument("--format", choices=("text", "json"), default="text")
    grade.add_argument(
        "--student",
        default="anonymous",
        help="student id: hidden inputs are seeded from exercise, student, check",
    )
    grade.add_argument(
        "--seed", type=int, help="base seed (from a results file) to regrade exactly"
    )
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
    autograde.set_defaults(run=cmd_autograde)

    demo = commands.add_parser(
        "demo", **defaults, help="the whole course cycle on a fresh demo course"
    )
    demo.add_argument("exercises", nargs="*", metavar="EXERCISE", help="default: all five")
    demo.add_argument("--course", default="demo-course", help="where to build the demo course")
    demo.add_argument("--workers", type=int, default=2, help="parallel grading processes")
    demo.set_defaults(run=cmd_demo)
    return main


def main(argv: list[str] | None = None) -> int:
    skip_slow_optional_imports()
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as error:  # unknown exercise names and the like
        print(f"attn-grade {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
