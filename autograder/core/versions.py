"""Versions that every result records: the grader's, the checks', and a digest of both.

`CHECKS_VERSION` changes whenever a check, a threshold or a point value changes; the package
version (pyproject.toml) on every release of the grader. CHANGELOG.md says what changed in each.
`checks_digest()` is a sha256 over the contents of every file that decides points: each
exercise's folder (checks, catalogue), reference and template and the shared code that grades
(the check-author API, the pytest plugin and gating, the notebook reader, the cell format and
the child's runtime with its probes). A change to any of them makes the next `autograde` grade
again and `verify` report the difference; a file that only moves changes nothing (the digest
is over contents, not paths).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

CHECKS_VERSION = "14"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # autograder/
# Relative to the package: every file below these decides points.
POINTS_DECIDED_BY = (
    "exercises",
    "_reference",  # reference/<id>.py (a link in a checkout, files in a wheel)
    "_student_templates",  # student_templates/<id>.ipynb.j2
    "authoring",
    "grading",
    "notebooks",
    "sandbox/inside",
    "core/results.py",
    "core/status.py",
)
_SUFFIXES = (".py", ".j2")


@cache
def grader_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("attn-grade")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def points_files(package_dir: Path) -> list[Path]:
    """Every file that decides points, below `package_dir` (an `autograder/` directory)."""
    found: list[Path] = []
    for part in POINTS_DECIDED_BY:
        path = package_dir / part
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        found += [p for p in candidates if p.is_file() and p.suffix in _SUFFIXES]
    return found


def digest_of(files: list[Path]) -> str:
    """sha256 over the sorted content digests of `files`: their names and places do not count."""
    contents = sorted(hashlib.sha256(path.read_bytes()).hexdigest() for path in files)
    return hashlib.sha256("\n".join(contents).encode()).hexdigest()


@cache
def checks_digest() -> str:
    """The digest of this installation's checks and everything else that decides points."""
    return digest_of(points_files(PACKAGE_DIR))
