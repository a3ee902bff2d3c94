"""Cell specs: what a rendered student template is made of, before it becomes a notebook.

A rendered template is plain text; a line `#%% <role> [grade_id] [points=N]` starts a cell.
Roles: markdown (narrative), setup (imports, locked), solution (student code), check (visible
checks: an nbgrader grade cell that our hidden checks score), demo (runs the student's code on
the example sizes, locked) and answer (manually graded markdown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROLES = ("markdown", "setup", "solution", "check", "demo", "answer")
MARKER = re.compile(
    r"^#%% (?P<role>\w+)(?: (?P<grade_id>[A-Za-z0-9_-]+))?(?: points=(?P<points>[\d.]+))?\s*$"
)


class TemplateError(ValueError):
    """A rendered template that does not follow the cell format."""


@dataclass(frozen=True)
class CellSpec:
    role: str
    source: str
    grade_id: str | None = None
    points: float | None = None

    @property
    def is_code(self) -> bool:
        return self.role in ("setup", "solution", "check", "demo")


def parse_cells(text: str) -> list[CellSpec]:
    """Split rendered template text into cells; validate roles, ids and points."""
    cells: list[CellSpec] = []
    header: re.Match[str] | None = None
    body: list[str] = []

    def close() -> None:
        if header is None:
            if any(line.strip() for line in body):
                raise TemplateError("text before the first '#%%' cell marker")
            return
        role, grade_id, points = header["role"], header["grade_id"], header["points"]
        if role not in ROLES:
            raise TemplateError(f"unknown cell role {role!r}")
        if role != "markdown" and not grade_id:
            raise TemplateError(f"a {role} cell needs a grade id")
        if (role in ("check", "answer")) != (points is not None):
            raise TemplateError(f"points belong on check and answer cells only ({grade_id})")
        cells.append(
            CellSpec(role, "\n".join(body).strip("\n"), grade_id, float(points) if points else None)
        )

    for line in text.splitlines():
        if line.startswith("#%%"):
            match = MARKER.match(line)
            if match is None:
                raise TemplateError(f"malformed cell marker: {line!r}")
            close()
            header, body = match, []
        else:
            body.append(line)
    close()
    ids = [cell.grade_id for cell in cells if cell.grade_id]
    duplicates = sorted({grade_id for grade_id in ids if ids.count(grade_id) > 1})
    if duplicates:
        raise TemplateError(f"duplicate grade ids: {duplicates}")
    return cells
