"""Render a student template (jinja2) for one exercise and language into cell specs."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import jinja2

from autograder.core.errors import GraderError, UsageError
from autograder.core.registry import TEMPLATES_DIR, declaration, reference_source, resolve
from autograder.notebooks import solutions
from autograder.notebooks.cells import CellSpec, parse_cells

LANGUAGES = ("en", "ko")


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_text(exercise: str, lang: str = "en", *, with_code: bool = True) -> str:
    """The template of `exercise` rendered in `lang`, with reference code filled in (or, with
    `with_code=False`, placeholders: enough for the cell structure, without importing the
    reference and torch)."""
    exercise = resolve(exercise)
    if lang not in LANGUAGES:
        raise UsageError(f"unknown language {lang!r}; choose from {', '.join(LANGUAGES)}")
    template = _environment().get_template(f"{exercise}.ipynb.j2")
    if with_code:
        module = reference_source(exercise)
        setup = lambda: solutions.setup_source(module)  # noqa: E731
        solution = lambda name: solutions.solution_source(module, name)  # noqa: E731
        given = lambda name: solutions.given_source(module, name)  # noqa: E731
    else:
        setup, solution = (lambda: "pass"), (lambda name: f"{name} = None")
        given = solution
    return template.render(
        exercise=exercise,
        lang=lang,
        ko=lang == "ko",
        setup=setup,
        solution=solution,
        given=given,
    )


@cache
def render_cells(exercise: str, lang: str = "en", small_demo: bool = False) -> tuple[CellSpec, ...]:
    """The exercise's cells; `small_demo`: with the declaration's `small_demo` edits made to its
    demo cells (less data, fewer epochs: a course for trying the cycle quickly)."""
    cells = tuple(parse_cells(render_text(exercise, lang)))
    return with_small_demo(cells, exercise) if small_demo else cells


def with_small_demo(cells: tuple[CellSpec, ...], exercise: str) -> tuple[CellSpec, ...]:
    """`cells` with each `small_demo` edit of the exercise made where its text is, in the demo
    cells, found exactly once (an edit that no longer fits the template is an error)."""
    edited = list(cells)
    for text, replacement in declaration(exercise).small_demo.items():
        places = [i for i, cell in enumerate(edited) if cell.role == "demo" and text in cell.source]
        count = sum(edited[i].source.count(text) for i in places)
        if count != 1:
            raise GraderError(
                f"{exercise}: small_demo's {text!r} is in the demo cells {count} times, not once"
            )
        cell = edited[places[0]]
        edited[places[0]] = replace(cell, source=cell.source.replace(text, replacement))
    return tuple(edited)


@cache
def cell_roles(exercise: str) -> dict[str, str]:
    """grade_id -> role for the exercise's template cells (trusted: from our own template)."""
    cells = parse_cells(render_text(exercise, with_code=False))
    return {cell.grade_id: cell.role for cell in cells if cell.grade_id}
