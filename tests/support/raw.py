"""Raw files for the broken-notebook entries: each builder returns the bytes of the file."""

from __future__ import annotations

import json

import nbformat

from autograder.core.registry import EXERCISES
from tests.conftest import source_notebook


def _reference(exercise: str) -> dict:
    return json.loads(nbformat.writes(source_notebook(exercise)))


def cell_metadata_string_and_list(exercise: str) -> bytes:
    """Two cells whose metadata is not an object (nbformat says it must be): still graded."""
    notebook = _reference(exercise)
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    code[-1]["metadata"] = "a string"
    notebook["cells"].append({"cell_type": "code", "metadata": ["a", "list"], "source": "z = 1"})
    notebook["cells"].append({"cell_type": "markdown", "metadata": "text", "source": "*hi*"})
    return json.dumps(notebook).encode()


def claims_ex1_named_ex4(exercise: str) -> bytes:
    """A solved ex1 notebook in a file named for `exercise` (another exercise)."""
    other = next(e for e in EXERCISES if e != exercise and e.startswith("ex1"))
    return json.dumps(_reference(other)).encode()


def not_json(exercise: str) -> bytes:
    return b'{ "cells": [ this is not JSON'


def deep_json(exercise: str) -> bytes:
    return b'{"cells": ' + b"[" * 200_000 + b"]" * 200_000 + b', "nbformat": 4}'


def too_large(exercise: str) -> bytes:
    notebook = _reference(exercise)
    notebook["cells"].append({"cell_type": "raw", "metadata": {}, "source": "x" * (17 << 20)})
    return json.dumps(notebook).encode()


def invalid_utf8(exercise: str) -> bytes:
    return json.dumps(_reference(exercise)).encode().replace(b"import", b"imp\xff\xfeort", 1)


def source_not_text(exercise: str) -> bytes:
    notebook = _reference(exercise)
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "source": [1, 2, {"a": 3}]})
    return json.dumps(notebook).encode()


def nbformat_3(exercise: str) -> bytes:
    notebook = _reference(exercise)
    notebook["nbformat"] = 3
    return json.dumps(notebook).encode()


BUILDERS = {
    name: function
    for name, function in globals().items()
    if callable(function) and not name.startswith("_") and function.__module__ == __name__
}
