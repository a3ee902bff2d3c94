"""Mutation testing of the checks: mechanical one-change variants of a reference solution.

Every mutant is a copy of one function or class of an exercise's reference with one change a
student could make (an axis, an off-by-one, two arguments swapped, a scaling or a term dropped,
a dtype, a comparison or a mask flipped, argmax for argmin, a transpose dropped). Graded as a
submission, a mutant should lose points; one that keeps them all either breaks no clause of the
contract on an input it allows (equivalent for grading: the exercise's mutants.toml names that
clause) or shows an input class the checks never draw.

    from autograder.authoring.mutants import mutants_of
    for mutant in mutants_of("ex1_numpy_attention"): ...

benchmarks/mutation.py grades them all and prints the table; a sample runs in the suite.
"""

from __future__ import annotations

import ast
import copy
import inspect
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from autograder.core.registry import exercise_dir, reference_module
from autograder.notebooks.solutions import public_names

AXIS_KEYWORDS = ("axis", "dim", "dim0", "dim1", "axis1", "axis2")
SWAPPED_OPERATORS: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Pow: ast.Mult,
}
FLIPPED_COMPARISONS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
RENAMED_ATTRIBUTES = {
    "float64": "float32",
    "argmax": "argmin",
    "tril": "triu",
    "triu": "tril",
    "max": "min",
    "sum": "mean",
    "mean": "sum",
    "repeat_interleave": "repeat",
}


@dataclass(frozen=True)
class Equivalent:
    """A mutant that breaks no clause of the contract on an input it allows, and that clause
    (`autograder/exercises/<id>/mutants.toml`)."""

    target: str
    operator: str
    line: str  # the line the mutant changes, as ast.unparse writes it
    clause: str
    why: str


def equivalent_mutants(exercise: str) -> list[Equivalent]:
    """The exercise's table of mutants that are equivalent for grading, keyed by function,
    operator and changed line (never by line and column numbers: they move when code does)."""
    path = exercise_dir(exercise) / "mutants.toml"
    table = tomllib.loads(path.read_text()) if path.is_file() else {}
    return [
        Equivalent(target, entry["operator"], entry["line"], entry["clause"], entry["why"])
        for target, entries in table.items()
        for entry in entries
    ]


def equivalent_to(mutant: Mutant, table: list[Equivalent]) -> Equivalent | None:
    """The entry of `table` that declares this mutant equivalent, if any."""
    key = (mutant.target, mutant.operator, mutant.changed)
    return next((e for e in table if (e.target, e.operator, e.line) == key), None)


@dataclass(frozen=True)
class Mutant:
    exercise: str
    target: str  # the function or class (its solution cell's grade id)
    operator: str  # "axis", "off_by_one", "swap_args", "drop_term", ...
    where: str  # the changed line of the original, shortened
    line: int  # of the change, within the target's source
    span: str  # "start-end" columns of the changed node (two changes on one line differ by it)
    source: str  # the mutated target, as a solution cell's code

    @property
    def id(self) -> str:
        return f"{self.target}:{self.line}:{self.span}:{self.operator}"

    @property
    def changed(self) -> str:
        """The first line of the mutant that differs from the reference's (both as ast.unparse
        writes them): with the target and the operator, what names the mutant in tables."""
        original = inspect.getsource(getattr(reference_module(self.exercise), self.target))
        before = ast.unparse(ast.parse(original)).splitlines()
        after = self.source.splitlines()
        pairs = zip(before, after, strict=False)
        return next((new.strip() for old, new in pairs if old != new), "?")


# A change mutates (a copy of) the node in place and returns None, or returns a replacement.
Change = Callable[[Any], Any]


def _changes(node: ast.AST) -> Iterator[tuple[str, Change]]:
    """(operator, change) for each mutation that applies at `node`; a change mutates a copy of
    the node in place, or returns a replacement."""
    if isinstance(node, ast.keyword) and node.arg in AXIS_KEYWORDS:
        if isinstance(node.value, ast.Constant | ast.UnaryOp):
            yield "axis", lambda n: setattr(n, "value", _shifted_axis(n.value))
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 10**6:
        yield "off_by_one", lambda n: setattr(n, "value", n.value + 1)
    if isinstance(node, ast.BinOp) and type(node.op) in SWAPPED_OPERATORS:
        yield "operator", lambda n: setattr(n, "op", SWAPPED_OPERATORS[type(n.op)]())
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.Mult | ast.Add | ast.Sub):
        yield "drop_term", lambda n: n.left
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        if type(node.ops[0]) in FLIPPED_COMPARISONS:
            yield "comparison", lambda n: setattr(n, "ops", [FLIPPED_COMPARISONS[type(n.ops[0])]()])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.Invert):
        yield "polarity", lambda n: n.operand
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not _commutes(node):
        yield "swap_args", lambda n: setattr(n, "args", [n.args[1], n.args[0], *n.args[2:]])
    if isinstance(node, ast.Attribute) and node.attr in RENAMED_ATTRIBUTES:
        yield "rename", lambda n: setattr(n, "attr", RENAMED_ATTRIBUTES[n.attr])
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        yield "transpose", lambda n: n.value
    if isinstance(node, ast.Slice):
        for part in ("lower", "upper"):
            if getattr(node, part) is not None:
                yield f"slice_{part}", _plus_one(part)
    if isinstance(node, ast.BoolOp):
        yield (
            "bool_op",
            lambda n: setattr(n, "op", ast.Or() if isinstance(n.op, ast.And) else ast.And()),
        )


def _plus_one(part: str) -> Change:
    def change(node: Any) -> None:
        setattr(node, part, ast.BinOp(getattr(node, part), ast.Add(), ast.Constant(1)))

    return change


def _shifted_axis(value: ast.expr) -> ast.expr:
    if isinstance(value, ast.Constant) and isinstance(value.value, int):
        return ast.Constant(
            value.value - 1
            if value.value >= 1
            else value.value + 1
            if value.value < -1
            else 0
            if value.value == -1
            else 1
        )
    return ast.BinOp(value, ast.Sub(), ast.Constant(1))


# calls whose first two arguments commute by definition (transpose(1, 2) is transpose(2, 1)):
# swapping them is no mutation
SYMMETRIC_CALLS = {"transpose", "swapaxes", "swapdims", "maximum", "minimum"}


def _commutes(call: ast.Call) -> bool:
    """Swapping the call's first two arguments changes nothing: they are the same expression,
    or the function is symmetric in them."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return name in SYMMETRIC_CALLS or ast.dump(call.args[0]) == ast.dump(call.args[1])


def _skipped(node: ast.AST) -> bool:
    """Docstrings and error messages are not behaviour worth mutating; nor are signatures
    (the defaults and annotations): the stub gives them, students fill in the body."""
    return isinstance(node, ast.JoinedStr | ast.Raise | ast.arguments) or (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    )


def _nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` in a fixed order, without what _skipped leaves out."""
    stack = [tree]
    while stack:
        node = stack.pop(0)
        if _skipped(node):
            continue
        yield node
        stack[0:0] = list(ast.iter_child_nodes(node))


def _mutated(tree: ast.AST, index: int, change: Change) -> ast.AST | None:
    clone = copy.deepcopy(tree)
    target = list(_nodes(clone))[index]
    replacement = change(target)
    if replacement is None:
        return ast.fix_missing_locations(clone)
    for parent in ast.walk(clone):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, replacement)
                return ast.fix_missing_locations(clone)
            if isinstance(value, list) and any(item is target for item in value):
                setattr(parent, field, [replacement if item is target else item for item in value])
                return ast.fix_missing_locations(clone)
    return None


def mutants_of(exercise: str, targets: tuple[str, ...] | None = None) -> list[Mutant]:
    """Every one-change mutant of the exercise's reference functions and classes (or `targets`),
    in a fixed order; mutants whose code does not change behaviour textually are left out."""
    module = reference_module(exercise)
    found = []
    for name in targets or public_names(module):
        original = inspect.getsource(getattr(module, name))
        tree = ast.parse(original)
        baseline = ast.unparse(tree)
        lines = original.splitlines()
        for index, node in enumerate(list(_nodes(tree))):
            for operator, change in _changes(node):
                mutated = _mutated(tree, index, change)
                if mutated is None:
                    continue
                try:
                    source = ast.unparse(mutated)
                    compile(source, f"<mutant {name}>", "exec")
                except (SyntaxError, ValueError, TypeError, AttributeError):
                    continue
                if source == baseline:
                    continue
                line = getattr(node, "lineno", 1)
                span = f"{getattr(node, 'col_offset', 0)}-{getattr(node, 'end_col_offset', 0)}"
                where = lines[line - 1].strip()[:80] if 0 < line <= len(lines) else ""
                found.append(Mutant(exercise, name, operator, where, line, span, source))
    unique: dict[str, Mutant] = {}
    for mutant in found:
        unique.setdefault(f"{mutant.target}\n{mutant.source}", mutant)
    return list(unique.values())
