"""Cell specs -> an nbformat v4 notebook carrying nbgrader (schema 3) cell metadata."""

from __future__ import annotations

import nbformat
from nbformat.notebooknode import NotebookNode

from autograder.notebooks.cells import CellSpec

NBGRADER_SCHEMA = 3
FORMAT_VERSION = 1  # of our own notebook-level metadata, `metadata.attn_grade`
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

# role -> (grade, solution, locked) in nbgrader's terms
_NBGRADER_FLAGS = {
    "setup": (False, False, True),
    "solution": (False, True, False),
    "check": (True, False, True),
    "demo": (False, False, True),
    "answer": (True, True, False),
}


def nbgrader_metadata(cell: CellSpec) -> dict | None:
    if cell.role == "markdown":
        return None
    grade, solution, locked = _NBGRADER_FLAGS[cell.role]
    metadata: dict[str, object] = {
        "grade": grade,
        "grade_id": cell.grade_id,
        "locked": locked,
        "schema_version": NBGRADER_SCHEMA,
        "solution": solution,
        "task": False,
    }
    if grade:
        metadata["points"] = cell.points
    return metadata


def to_notebook(
    cells: list[CellSpec] | tuple[CellSpec, ...], exercise: str, lang: str
) -> NotebookNode:
    """A validated notebook; cell ids are deterministic so rebuilds do not churn."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
        "attn_grade": {"exercise": exercise, "lang": lang, "format": FORMAT_VERSION},
    }
    markdown_count = 0
    for cell in cells:
        metadata = {}
        nbgrader = nbgrader_metadata(cell)
        if nbgrader:
            metadata["nbgrader"] = nbgrader
        if cell.grade_id:
            cell_id = cell.grade_id
        else:
            markdown_count += 1
            cell_id = f"md-{markdown_count:02d}"
        factory = nbformat.v4.new_code_cell if cell.is_code else nbformat.v4.new_markdown_cell
        notebook.cells.append(factory(cell.source, id=cell_id, metadata=metadata))
    nbformat.validate(notebook)
    return notebook
