"""What every grading process pays before its first line of work: nbformat (read by the batch,
every `attn-grade` command that opens a notebook, and every nbgrader command) must not pull in
a parser that is built at import time. jsonschema 4.25 made `import nbformat` import
rfc3987-syntax, which builds an Earley parser of RFC 3987 (1.0 s of CPU here, in every one of
those processes, for an `iri` format that no notebook schema uses); pyproject.toml keeps
jsonschema below 4.25."""

from __future__ import annotations

import subprocess
import sys


def modules_after(statement: str) -> set[str]:
    """The modules a fresh interpreter has loaded after `statement`."""
    done = subprocess.run(
        [sys.executable, "-c", f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


def test_reading_notebooks_builds_no_iri_parser():
    loaded = modules_after("import nbformat\nimport nbgrader.apps")
    assert "nbformat" in loaded and "jsonschema" in loaded  # what it meant to load
    assert not {m for m in loaded if m.startswith(("rfc3987_syntax", "lark"))}


def test_a_notebook_is_still_validated_against_its_schema():
    """The pin changes what loads, not what nbformat checks: a cell without its source is
    still refused."""
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.validate(notebook)
    del notebook.cells[0]["source"]
    try:
        nbformat.validate(notebook)
    except nbformat.ValidationError:
        return
    raise AssertionError("a cell without source passed validation")
