"""No point without the work: a function or class that returns zeros, a constant, NaN, a copy
of its input, or raises, earns 0 on every check of that function (the "fake-stub matrix").

Each fake keeps the reference's outputs' structure (shapes, dtypes, types), computed on copies
of the arguments so that it has none of the reference's effects (a model is never trained), and
replaces the values; a class keeps the reference's constructor and submodules and fakes what
`forward` returns. Every other cell of the notebook is the reference."""

from __future__ import annotations

import ast
import functools
import inspect

import pytest

from autograder.core.registry import (
    EXERCISES,
    checks_module_path,
    declaration,
    reference_module,
    short_name,
)
from autograder.grading.runner import grade_notebook
from autograder.notebooks.render import render_cells
from tests.conftest import source_notebook, write_notebook

FAKES = ("zeros", "constant", "nan", "identity", "raising")


# Defined in the fake's cell: the reference's output with every value replaced.
FAKE_HELPER = """
def _fake_of(value, kind, args, kwargs):
    import numpy as np
    import torch
    from matplotlib.figure import Figure

    if kind == "identity":
        return args[0] if args else next(iter(kwargs.values()), None)
    number = {"zeros": 0, "constant": 1, "nan": float("nan")}[kind]
    real = {"zeros": 0.0, "constant": 0.5, "nan": float("nan")}[kind]

    def fake(v):
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, torch.Tensor):
            fill = real if v.is_floating_point() else (1 if kind == "constant" else 0)
            return torch.full_like(v, fill)
        if isinstance(v, np.ndarray):
            fill = real if v.dtype.kind == "f" else (1 if kind == "constant" else 0)
            return np.full_like(v, fill)
        if isinstance(v, int):
            return number
        if isinstance(v, float):
            return real
        if isinstance(v, str):
            return {"zeros": "", "constant": "x", "nan": "nan"}[kind]
        if isinstance(v, list | tuple):
            return type(v)(fake(item) for item in v)
        if isinstance(v, dict):
            return {key: fake(item) for key, item in v.items()}
        if isinstance(v, Figure):
            return Figure()
        return v

    return fake(value)
"""


# A class that is not an nn.Module (ex7's KVCache): every public attribute it gives, method
# results and properties alike, faked (or raising), and its length too.
PLAIN_CLASS_FAKE = """
class {target}({target}):
    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if name.startswith("_"):
            return value
        if {kind!r} == "raising":
            raise ValueError("fake")
        if callable(value):
            return lambda *a, **k: _fake_of(value(*a, **k), {kind!r}, a, k)
        return _fake_of(value, {kind!r}, (), {{}})

    def __len__(self):
        if {kind!r} == "raising":
            raise ValueError("fake")
        return _fake_of(super().__len__(), {kind!r}, (), {{}})
"""


def _is_module(cls: type) -> bool:
    import torch.nn as nn

    return issubclass(cls, nn.Module)


def fake_source(exercise: str, target: str, kind: str) -> str:
    """The cell that replaces `target`'s solution cell: the reference, wrapped by the fake."""
    implementation = getattr(reference_module(exercise), target)
    reference = inspect.getsource(implementation)
    if inspect.isclass(implementation) and not _is_module(implementation):
        wrapper = PLAIN_CLASS_FAKE.format(target=target, kind=kind)
    elif inspect.isclass(implementation):
        body = (
            "raise ValueError('fake')"
            if kind == "raising"
            else f"return _fake_of(super().forward(*args, **kwargs), {kind!r}, args, kwargs)"
        )
        wrapper = (
            f"class {target}({target}):\n    def forward(self, *args, **kwargs):\n        {body}\n"
        )
    else:
        body = (
            "raise ValueError('fake')"
            if kind == "raising"
            else "return _fake_of(_real(*copy.deepcopy(args), **copy.deepcopy(kwargs)), "
            f"{kind!r}, args, kwargs)"
        )
        wrapper = (
            f"_real = {target}\n\n\ndef {target}(*args, **kwargs):\n    import copy\n\n    {body}\n"
        )
    return f"{FAKE_HELPER}\n\n{reference}\n\n{wrapper}"


@functools.cache
def check_names(exercise: str) -> list[str]:
    tree = ast.parse(checks_module_path(exercise).read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def checks_of(exercise: str, target: str) -> list[str]:
    prefixes = declaration(exercise).checks_of[target]
    return [name for name in check_names(exercise) if name.startswith(prefixes)]


MATRIX = [
    pytest.param(
        exercise,
        target,
        kind,
        id=f"{short_name(exercise)}-{target}-{kind}",
        marks=[getattr(pytest.mark, short_name(exercise)), pytest.mark.slow],
    )
    for exercise in EXERCISES
    for target in declaration(exercise).checks_of
    for kind in FAKES
]


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_check_belongs_to_one_function(exercise):
    """The matrix covers every check and every solution cell of the exercise."""
    owners = {
        name: [t for t in declaration(exercise).checks_of if name in checks_of(exercise, t)]
        for name in check_names(exercise)
    }
    assert all(len(found) == 1 for found in owners.values()), owners
    solutions = {c.grade_id for c in render_cells(exercise) if c.role == "solution"}
    assert set(declaration(exercise).checks_of) == solutions


@pytest.mark.parametrize(("exercise", "target", "kind"), MATRIX)
def test_fake_earns_nothing(exercise, target, kind, tmp_path, shared_sandbox):
    notebook = source_notebook(exercise, replace={target: fake_source(exercise, target, kind)})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    wanted = checks_of(exercise, target)
    report = grade_notebook(path, only=wanted, shared=shared_sandbox.get())
    assert sorted(c.name for c in report.checks) == sorted(wanted)
    paid = {c.name: c.points for c in report.checks if c.points}
    assert not paid, f"a {kind} {target} was paid: {paid}"
