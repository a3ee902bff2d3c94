"""A class mistake's source is cut from its module's source once per module
(`authoring.catalogue._class_segments`), exactly as `ast.get_source_segment(..., padded=True)`
cuts it: the mistake tests put that source in a notebook in place of the student's class."""

from __future__ import annotations

import ast
import inspect

import pytest

from autograder.authoring import catalogue
from autograder.core.registry import EXERCISES, mistakes_module


def _as_ast_cuts(source: str) -> list[tuple[str, str | None]]:
    return [
        (node.name, ast.get_source_segment(source, node, padded=True))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef)
    ]


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_catalogued_class_is_cut_as_ast_cuts_it(exercise):
    module = mistakes_module(exercise)
    found = [(name, segment) for name, _, _, segment in catalogue._class_segments(module)]
    assert found == _as_ast_cuts(inspect.getsource(module))


SHAPES = {
    "nested, indented": "class A:\n    class B:\n        x = 1\n\n    def f(self):\n"
    "        class C: pass\n        return C\n",
    "windows line ends": "class A:\r\n    x = 1\r\n\r\nclass B(A):\r\n    y = 2\r\n",
    "old mac line ends": "class A:\r    x = 1\rclass B: y = 2\r",
    "tab before, no final newline": "if True:\n\tclass A:\n\t\tx = 'é'\n\tclass B: pass",
    "one line, text after": "class A: x = 1; y = 2  # done\nz = 3\n",
    "form feed kept inside": "class A:\n    x = 1\n\x0c\n    y = 2\n",
}


@pytest.mark.parametrize("source", SHAPES.values(), ids=SHAPES.keys())
def test_sources_of_any_shape_are_cut_as_ast_cuts_them(source):
    lines = catalogue._LINE.findall(source)
    assert "".join(lines) == source
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            found.append((node.name, catalogue._segment(lines, node)))
    assert found == _as_ast_cuts(source)
