"""Versions that every result records: the grader's and the checks'.

`CHECKS_VERSION` changes whenever a check, a threshold or a point value changes (CHANGELOG.md
says what changed); `checks_digest()` is the sha256 over the check modules, the mistake
catalogues and the reference, so a regrade can be matched to the exact checks it used.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

CHECKS_VERSION = "4"
_PACKAGE = Path(__file__).resolve().parent


@cache
def grader_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("attn-grade")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@cache
def checks_digest() -> str:
    """sha256 over the hidden parts that decide points (checks, catalogues, reference)."""
    import reference

    digest = hashlib.sha256()
    folders = [_PACKAGE / "checks", _PACKAGE / "mistakes", Path(reference.__file__).parent]
    for folder in folders:
        for path in sorted(folder.glob("*.py")):
            digest.update(f"{folder.name}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()
