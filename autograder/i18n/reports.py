"""A grade report as a student reads it: its check messages and notes in the notebook's
language, for the outputs a student sees outside nbgrader (`attn-grade grade`'s report, GitHub
Classroom's runners, Gradescope's results.json, JUnit). nbgrader's feedback translates as it
writes the notebook (nbgrader_plugins/preprocessors.py); the gradebook keeps English."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

from autograder.core.results import GradeReport
from autograder.i18n.catalogues import SOURCE_LANGUAGE, languages, message

MAX_NOTEBOOK_BYTES = 64 << 20  # a larger file is not graded either; it reads as English


def language_of(metadata: object) -> str:
    """The notebook's language from its metadata (`attn_grade.lang`, written by `attn-grade
    build`). A value that is not one of ours reads as English: a student who edits it can only
    switch between our languages."""
    ours = metadata.get("attn_grade") if isinstance(metadata, Mapping) else None
    found = ours.get("lang") if isinstance(ours, Mapping) else None
    return found if isinstance(found, str) and found in languages() else SOURCE_LANGUAGE


def notebook_language(path: Path | None) -> str:
    """The language of the notebook file at `path` (English when it cannot be read)."""
    try:
        if path is None or path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return SOURCE_LANGUAGE
        notebook = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return SOURCE_LANGUAGE
    return language_of(notebook.get("metadata") if isinstance(notebook, dict) else None)


def in_language(report: GradeReport, lang: str) -> GradeReport:
    """A copy of `report` with its check messages and notes in `lang`."""
    if lang == SOURCE_LANGUAGE:
        return report
    checks = [dataclasses.replace(c, message=message(c.message, lang)) for c in report.checks]
    notes = [message(note, lang) for note in report.messages]
    return dataclasses.replace(report, checks=checks, messages=notes)
