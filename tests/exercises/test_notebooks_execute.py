"""Notebooks run in a real Jupyter kernel: the source (reference filled in) without any error or
stderr output; the release with only the stubs' NotImplementedError."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import exercise_params, source_notebook

pytestmark = pytest.mark.slow


def execute(notebook, tmp_path, allow_errors=False):
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    return notebook


def outputs(notebook, kind):
    return [
        (cell.get("id"), out)
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.output_type == kind
    ]


@pytest.mark.parametrize("exercise", exercise_params())
def test_source_notebook_runs_clean(exercise, tmp_path):
    notebook = execute(source_notebook(exercise), tmp_path)
    stderr = [
        (cell_id, out.text) for cell_id, out in outputs(notebook, "stream") if out.name == "stderr"
    ]
    assert stderr == []


@pytest.mark.parametrize("exercise", exercise_params())
def test_release_notebook_fails_only_on_stubs(exercise, tmp_path, release_of):
    notebook = execute(
        nbformat.read(release_of(exercise), as_version=4), tmp_path, allow_errors=True
    )
    errors = outputs(notebook, "error")
    assert errors, "the blank notebook's checks should fail"
    unexpected = [
        (cell_id, out.ename, out.evalue)
        for cell_id, out in errors
        if out.ename != "NotImplementedError"
    ]
    assert unexpected == []
