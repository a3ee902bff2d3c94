"""What the `attn-grade` command modules share: exit codes, exercise names, the isolation option."""

from __future__ import annotations

import argparse

from autograder.sandbox.isolation import ENVIRONMENT_VARIABLE, LEVELS

EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_BELOW_THRESHOLD = 1  # `grade --fail-under`


def exercise_list(names: list[str]) -> list[str]:
    from autograder.exercises import resolve

    return [resolve(name) for name in names]


def isolation_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--isolation",
        choices=("auto", *LEVELS),
        help="sandbox isolation level (default: auto, the strongest the host offers; grading "
        "is refused when that cannot hide the hidden checks, unless a level is chosen "
        f"explicitly). Also ${ENVIRONMENT_VARIABLE}.",
    )
