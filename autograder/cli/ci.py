"""`attn-grade` commands and options for CI systems: JUnit XML and --fail-under on `grade`,
GitHub Classroom (init, collect, feedback) and Gradescope (bundle, run inside)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.ci.gradescope import DEFAULT_TORCH_INDEX, VISIBILITIES
from autograder.cli.common import (
    EXIT_BELOW_THRESHOLD,
    EXIT_INTERNAL,
    EXIT_USAGE,
    isolation_option,
)
from autograder.core.registry import DEFAULT_COURSE_DIR


def ci_outputs(args: argparse.Namespace, report) -> int:
    """Write --junit-xml; exit 1 when the score is below --fail-under, else 0."""
    if args.junit_xml:
        from autograder.ci.junit import write_junit

        write_junit(report, args.junit_xml, student=args.student)
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
            out = build_bundle(args.exercise, Path(args.out), wheel, args.visibility,
                               args.torch_index)  # fmt: skip
            print(out)
    except WheelError as error:
        print(f"attn-grade gradescope: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0


REFUSED = (
    "**Not graded.** The autograder refused to run the notebook here, because it could not "
    "keep student code away from the hidden checks; nothing in the submission caused this. "
    "Please tell your instructor. What is missing:"
)
FAILED = (
    "**Not graded.** The autograder itself failed (an internal error, exit code {code}); "
    "nothing in the submission caused this. Please tell your instructor: the autograder "
    "output, which instructors see, has the details."
)


def cmd_gradescope_run(args: argparse.Namespace) -> int:
    """Grade, and write results.json whatever happens: a refusal (exit 4) or a failure of the
    grader (exit 3) is a results.json at score 0 that says so (else Gradescope shows only
    "autograder failed"), and the details go to the instructor-only output."""
    from autograder.ci.gradescope import autograder_root, md_literal, not_graded, run, write_results
    from autograder.core.errors import IsolationError
    from autograder.core.text import clean_text

    root = Path(args.root) if args.root else autograder_root()
    try:
        results = run(root)
    except IsolationError as error:
        detail = clean_text(error, 4000)
        print(f"attn-grade gradescope-run: {detail}", file=sys.stderr)
        results = not_graded("not_graded", f"{REFUSED}\n\n{md_literal(detail)}", detail, 4)
        code = error.exit_code
    except Exception as error:  # noqa: BLE001 - a results.json and a clear message, always
        detail = f"{type(error).__name__}: {clean_text(error, 2000)}"
        print(f"attn-grade gradescope-run: internal error: {detail}", file=sys.stderr)
        results = not_graded("grader_error", FAILED.format(code=EXIT_INTERNAL), detail, 3)
        code = EXIT_INTERNAL
    else:
        possible = sum(test.get("max_score", 0) for test in results["tests"])
        print(f"{results['score']:g} / {possible:g}")
        return 0
    try:
        write_results(root, results)
    except OSError as error:
        print(f"attn-grade gradescope-run: cannot write results.json: {error}", file=sys.stderr)
    return code


def add_ci_commands(commands) -> None:
    classroom = commands.add_parser("classroom", help="GitHub Classroom: student repos, collect")
    steps = classroom.add_subparsers(dest="step", required=True)
    init = steps.add_parser("init", help="write a student repo template (visible checks only)")
    init.add_argument("exercise", metavar="EXERCISE", help="the exercise (id or ex1..ex8)")
    init.add_argument("dir", metavar="DIR", help="where to write the repo template")
    init.add_argument("--lang", choices=("en", "ko"), default="en", help="the notebook's language")
    init.set_defaults(run=cmd_classroom_init)
    for name, run, text in (
        ("collect", cmd_classroom_collect, "clone/fetch student repos into submitted/"),
        ("feedback", cmd_classroom_feedback, "push feedback HTML to each repo's feedback branch"),
    ):
        step = steps.add_parser(name, help=text)
        step.add_argument("exercise", metavar="EXERCISE", help="the exercise (id or ex1..ex8)")
        step.add_argument("--roster", required=True, help="CSV: student,git-url per line")
        step.add_argument(
            "--course",
            default=str(DEFAULT_COURSE_DIR),
            help="nbgrader course root, relative to the current directory",
        )
        step.set_defaults(run=run)

    gradescope = commands.add_parser("gradescope", help="build a Gradescope autograder zip")
    gradescope.add_argument("exercise", metavar="EXERCISE", help="the exercise (id or ex1..ex8)")
    gradescope.add_argument(
        "--out",
        default="autograder.zip",
        help="the zip to write, for the assignment's Configure Autograder page",
    )
    gradescope.add_argument("--wheel", help="attn-grade wheel to bundle (default: build it)")
    gradescope.add_argument(
        "--visibility",
        default="visible",
        choices=VISIBILITIES,
        help="when students see the hidden checks' results and the score (visible: at once; "
        "otherwise a visible line says only whether the notebook was graded)",
    )
    gradescope.add_argument(
        "--torch-index",
        default=DEFAULT_TORCH_INDEX,
        metavar="URL",
        help="extra package index setup.sh installs CPU PyTorch from, used only if it answers "
        "(none: no extra index; ATTN_GRADE_TORCH_INDEX at setup time overrides it)",
    )
    gradescope.set_defaults(run=cmd_gradescope)
    inside = commands.add_parser(
        "gradescope-run", help="(inside Gradescope) grade and write results"
    )
    inside.add_argument("--root", help="default: $ATTN_GRADE_AUTOGRADER_ROOT or /autograder")
    isolation_option(inside)
    inside.set_defaults(run=cmd_gradescope_run)
