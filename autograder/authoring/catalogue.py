"""Catalogues of named mistakes: a wrong implementation of one student function/class each.

A catalogue module per exercise (`autograder/exercises/<exercise>/mistakes.py`) registers wrong
versions of the contract's functions and classes, written under the contract's own names so that
the source of each can replace the solution cell of that name in a notebook. Checks run them in the
parent on their own inputs, and when a failing submission's output matches one, the failure
names it. tests/exercises/test_mistakes.py proves each is caught by the check named here.
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
import textwrap
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType

import numpy as np

from autograder.core.registry import mistakes_module, reference_module

_BOUND: dict[tuple[str, str], Callable] = {}


@cache
def _class_segments(module: ModuleType) -> tuple[tuple[str, int, int, str], ...]:
    """Every class definition of a module: (name, first line, last line, source). Parsed once
    per module object: a catalogue defines many classes, and each grading asks for their
    sources (a module loaded again is another object, parsed again)."""
    source = inspect.getsource(module)
    lines = _LINE.findall(source)  # split once: ast.get_source_segment splits per call
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            segment = _segment(lines, node)
            found.append((node.name, node.lineno, node.end_lineno, segment))
    return tuple(found)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # keeps ends; as ast's own split


def _segment(lines: list[str], node: ast.ClassDef) -> str:
    """ast.get_source_segment(source, node, padded=True), from the source's lines."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    col, end_col = node.col_offset, node.end_col_offset or 0
    if first == last:
        return lines[first].encode()[col:end_col].decode()
    head = lines[first].encode()
    padding = "".join(c if c in "\f\t" else " " for c in head[:col].decode())
    body = [padding + head[col:].decode(), *lines[first + 1 : last]]
    return "".join([*body, lines[last].encode()[:end_col].decode()])


def _definition_source(implementation: Callable) -> str:
    """The source of a function or class. For a class, inspect.getsource (Python 3.11) returns
    the *first* class of that name in the module, and a catalogue defines many classes under
    one name: find the class definition that holds one of its methods instead."""
    methods = [f for f in vars(implementation).values() if inspect.isfunction(f)]
    if not inspect.isclass(implementation) or not methods:
        return inspect.getsource(implementation)
    line = methods[0].__code__.co_firstlineno
    module = inspect.getmodule(implementation)
    if module is None:
        return inspect.getsource(implementation)
    for name, first, last, segment in _class_segments(module):
        if name == implementation.__name__ and first <= line <= last:
            return segment
    return inspect.getsource(implementation)


@dataclass(frozen=True)
class Mistake:
    id: str
    description: str  # plain words, shown to students: "the scores were not divided by sqrt(d_k)"
    target: str  # the function or class it replaces (also its solution cell's grade id)
    check: str  # the check that must fail on it and name it
    implementation: Callable

    @property
    def source(self) -> str:
        """The implementation's source without the registering decorator."""
        lines = textwrap.dedent(_definition_source(self.implementation)).splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(("def ", "class ")))
        return "\n".join(lines[start:]) + "\n"

    def bound(self, exercise: str) -> Callable:
        """The implementation re-created in a copy of the reference module's namespace, so the
        names it uses (imports, the other contract functions) mean what they mean in a notebook
        whose other cells are the reference: exactly the notebook the mistake tests build."""
        key = (exercise, self.id)
        if key not in _BOUND:
            namespace = dict(vars(reference_module(exercise)))
            exec(compile(self.source, f"<mistake {self.id}>", "exec"), namespace)  # our own code
            _BOUND[key] = namespace[self.target]
        return _BOUND[key]

    def label(self) -> str:
        return f"known mistake `{self.id}`: {self.description}"


@dataclass(frozen=True)
class Raised:
    """The outcome of a mistake that raises on the given inputs: the exception's class name and
    its message (a student's error names a mistake only when both agree: the same class alone,
    say a ValueError of another shape mismatch, is no evidence of the same mistake)."""

    type: str
    message: str = ""

    def matches(self, error: object) -> bool:
        """Whether a student's error (a StudentError: `type`, `message`) is this outcome."""
        return self.type == getattr(error, "type", None) and self.message == getattr(
            error, "message", None
        )


class Catalogue:
    def __init__(self, exercise: str):
        self.exercise = exercise
        self._mistakes: dict[str, Mistake] = {}

    def mistake(
        self, mistake_id: str, description: str, *, check: str
    ) -> Callable[[Callable], Callable]:
        """Decorator registering a wrong implementation (named like the function it replaces)."""

        def register(implementation: Callable) -> Callable:
            if mistake_id in self._mistakes:
                raise ValueError(f"mistake {mistake_id!r} registered twice")
            self._mistakes[mistake_id] = Mistake(
                mistake_id, description, implementation.__name__, check, implementation
            )
            return implementation

        return register

    def __iter__(self) -> Iterator[Mistake]:
        return iter(self._mistakes.values())

    def __len__(self) -> int:
        return len(self._mistakes)

    def __getitem__(self, mistake_id: str) -> Mistake:
        return self._mistakes[mistake_id]

    def for_target(self, target: str) -> list[Mistake]:
        return [m for m in self._mistakes.values() if m.target == target]

    def outputs_on_demand(self, target: str, *args: object, **kwargs: object) -> Outputs:
        """`outputs(target, *args, **kwargs)`, run when first looked at, on copies of the inputs
        taken now: a check looks at them only once an answer is wrong, so a correct answer no
        longer pays for running every catalogued mistake of `target`."""
        taken = copy.deepcopy((args, kwargs))
        return Outputs(lambda: self.outputs(target, *taken[0], **taken[1]))

    def outputs(self, target: str, *args: object, **kwargs: object) -> list[tuple[Mistake, object]]:
        """What each catalogued mistake of `target` returns on these inputs, or `Raised` when it
        raises: candidates for naming a wrong answer."""
        found: list[tuple[Mistake, object]] = []
        for mistake in self.for_target(target):
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    # its own copy: a mistake that changes its input must not change another's
                    mine, named = copy.deepcopy(args), copy.deepcopy(kwargs)
                    found.append((mistake, mistake.bound(self.exercise)(*mine, **named)))
            except Exception as error:  # noqa: BLE001 - raising is this mistake's outcome
                found.append((mistake, Raised(type(error).__name__, str(error)[:2000])))
        return found


class Outputs(Sequence[tuple[Mistake, object]]):
    """Pairs of a catalogued mistake and what it gave (`Catalogue.outputs`), computed on first
    use."""

    def __init__(self, compute: Callable[[], list[tuple[Mistake, object]]]):
        self._compute: Callable[[], list[tuple[Mistake, object]]] | None = compute
        self._found: list[tuple[Mistake, object]] = []

    def _all(self) -> list[tuple[Mistake, object]]:
        if self._compute is not None:
            compute, self._compute = self._compute, None
            self._found = compute()
        return self._found

    def __getitem__(self, index):  # type: ignore[no-untyped-def]  # int or slice, as a list's
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[tuple[Mistake, object]]:
        return iter(self._all())

    def returned(self) -> Outputs:
        """The mistakes that returned (not raised), still computed on first use."""
        return Outputs(lambda: [(m, out) for m, out in self._all() if not isinstance(out, Raised)])


def catalogue_for(exercise: str) -> Catalogue:
    return mistakes_module(exercise).CATALOGUE
