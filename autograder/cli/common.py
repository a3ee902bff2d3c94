"""What the `attn-grade` command modules share: exit codes, exercise names, the isolation option."""

from __future__ import annotations

import argparse
from pathlib import Path

from autograder.sandbox.isolation import ENVIRONMENT_VARIABLE, LEVELS

EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_ENVIRONMENT = 5  # a file could not be written or read, the database was away: not a bug
EXIT_STOPPED = 130  # Ctrl-C (128 + SIGINT), as a shell reports it
EXIT_BELOW_THRESHOLD = 1  # `grade --fail-under`
EXIT_UNFINISHED = 1  # `lms-grades`: a grade is not final (nothing written without --partial)


def course_path(given: str) -> str:
    """--course as given; when that is the default, does not exist, and the current directory
    is a course (it has nbgrader_config.py), the current directory: a command run inside the
    course finds it (and `build` there rebuilds it instead of nesting a new course)."""
    from autograder.core.registry import DEFAULT_COURSE_DIR

    inside = Path("nbgrader_config.py").is_file()
    if given == str(DEFAULT_COURSE_DIR) and not Path(given).exists() and inside:
        return str(Path.cwd())
    return given


def exercise_list(names: list[str]) -> list[str]:
    from autograder.core.registry import resolve

    return [resolve(name) for name in names]


def isolation_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--isolation",
        choices=("auto", *LEVELS),
        help="sandbox isolation level (default: auto, the strongest the host offers; grading "
        "is refused when that cannot hide the hidden checks, unless a level is chosen "
        f"explicitly). Also ${ENVIRONMENT_VARIABLE}.",
    )


def course_batch_options(command: argparse.ArgumentParser) -> None:
    """EXERCISE..., --course and --workers: what every command over a course's batch takes."""
    from autograder.core.registry import DEFAULT_COURSE_DIR

    command.add_argument(
        "exercises", nargs="*", metavar="EXERCISE", help="exercise ids or ex1..ex8 (default: all)"
    )
    command.add_argument(
        "--course",
        default=str(DEFAULT_COURSE_DIR),
        help="nbgrader course root, relative to the current directory",
    )
    command.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel grading processes (default: 2; autograde starts none, and works in its "
        "own process, for a batch too small to repay starting them, one submission or a few "
        "quick ones, and with --scheduler, where they would only record what the cluster "
        "graded)",
    )


def scheduler_options(command: argparse.ArgumentParser) -> None:
    """--scheduler and how to authenticate to it (`autograde`)."""
    command.add_argument(
        "--scheduler",
        help="grade on a Dask cluster: the scheduler's address (tls://host:8786) or scheduler "
        "file; nbgrader's part then runs in this process, or in --workers N (2 or more) local "
        "processes",
    )
    tls = "(default: Dask's config distributed.comm.tls.%s)"
    command.add_argument(
        "--tls-ca-file", metavar="FILE", help="the cluster's CA certificate " + tls % "ca-file"
    )
    command.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="this client's certificate, signed by that CA " + tls % "client.cert",
    )
    command.add_argument(
        "--tls-key", metavar="FILE", help="that certificate's key " + tls % "client.key"
    )
    command.add_argument(
        "--insecure-scheduler",
        action="store_true",
        help="accept a scheduler without TLS (tcp://): whoever can reach it can attach a "
        "worker, read every notebook, return any score and run code here",
    )


def scheduler_access(args: argparse.Namespace):
    """The SchedulerAccess of --scheduler and its options (None without --scheduler)."""
    from autograder.batch.dask_cluster import SchedulerAccess
    from autograder.core.errors import UsageError

    options = (args.tls_ca_file, args.tls_cert, args.tls_key, args.insecure_scheduler)
    if args.scheduler is None:
        if any(options):
            raise UsageError("--tls-* and --insecure-scheduler go with --scheduler")
        return None
    return SchedulerAccess(args.scheduler, *options)
