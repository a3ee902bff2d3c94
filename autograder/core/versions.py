"""Versions that every result records: the grader's, the checks', and a digest of both.

`CHECKS_VERSION` changes whenever a check, a threshold or a point value changes; the package
version (pyproject.toml) on every release of the grader. CHANGELOG.md says what changed in each.
Each record also carries its exercise's checks digest (`autograder/audit/digest.py`): a sha256
over the contents of that exercise's own parts and of the shared code that grades, listed here
(the check-author API, the pytest plugin and gating, the notebook reader, the cell format and
the child's runtime with its probes). A file that only moves changes nothing (the digest is
over contents, not paths).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

CHECKS_VERSION = "14"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # autograder/
# Relative to the package: every file below these decides the points of every exercise.
SHARED_POINTS_CODE = (
    "authoring",
    "grading",
    "notebooks",
    "sandbox/inside",
    "core/results.py",
    "core/status.py",
)
_SUFFIXES = (".py", ".j2", ".toml")


@cache
def grader_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("attn-grade")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def files_below(path: Path) -> list[Path]:
    """`path` itself or the files below it that can decide points (code, templates, tables)."""
    candidates = [path] if path.is_file() else sorted(path.rglob("*"))
    return [p for p in candidates if p.is_file() and p.suffix in _SUFFIXES]


def shared_points_files(package_dir: Path) -> list[Path]:
    """The shared grading code below `package_dir` (an `autograder/` directory)."""
    return [found for part in SHARED_POINTS_CODE for found in files_below(package_dir / part)]


def digest_of(files: list[Path]) -> str:
    """sha256 over the sorted content digests of `files`: their names and places do not count."""
    contents = sorted(hashlib.sha256(path.read_bytes()).hexdigest() for path in set(files))
    return hashlib.sha256("\n".join(contents).encode()).hexdigest()
