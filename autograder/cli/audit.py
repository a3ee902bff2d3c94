"""`attn-grade verify` and `attn-grade regrade --diff`: commands over the audit log."""

from __future__ import annotations

import argparse
from pathlib import Path

from autograder.cli.common import course_batch_options, exercise_list, isolation_option
from autograder.core.errors import UsageError
from autograder.core.registry import EXERCISES


def audit_workers(args: argparse.Namespace) -> int:
    """--workers for a regrade from the audit log: as given, else the batch's default (a
    regrade of one submission runs in this process: audit.replay)."""
    from autograder.batch.pool import AUTO_WORKERS

    return AUTO_WORKERS if args.workers is None else int(args.workers)


def cmd_verify(args: argparse.Namespace) -> int:
    from autograder.audit.verify import verify_course

    return verify_course(
        Path(args.course),
        exercise_list(args.exercises),
        student=args.student,
        every=args.all,
        workers=audit_workers(args),
        db_url=args.db,
    )


def cmd_regrade(args: argparse.Namespace) -> int:
    from autograder.audit.regrade import regrade_diff

    if not args.diff:
        raise UsageError(
            "regrade only shows changes (--diff) and writes nothing; "
            "`attn-grade autograde` regrades and writes the grades"
        )
    return regrade_diff(
        Path(args.course),
        exercise_list(args.exercises) or list(EXERCISES),
        workers=audit_workers(args),
        db_url=args.db,
    )


def add_audit_commands(commands, formatter: type[argparse.HelpFormatter]) -> None:
    verify = commands.add_parser(
        "verify",
        formatter_class=formatter,
        help="regrade from the audit log and report any difference",
    )
    regrade = commands.add_parser(
        "regrade",
        formatter_class=formatter,
        help="after a check change, show each score change (--diff)",
    )
    for command in (verify, regrade):
        course_batch_options(command)
        isolation_option(command)
    verify.add_argument("--student", help="only this student's records")
    verify.add_argument(
        "--all", action="store_true", help="every record, not only the latest per submission"
    )
    verify.add_argument(
        "--db",
        help="gradebook as an SQLAlchemy URL (default: the course's), checked against "
        "the latest record of each submission",
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
