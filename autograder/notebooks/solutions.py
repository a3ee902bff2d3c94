"""Turn reference modules into notebook code: the setup cell and one solution cell per name.

A solution cell keeps the signature and docstring of the reference and wraps every body in
nbgrader's `### BEGIN SOLUTION` / `### END SOLUTION`, so generate_assignment leaves a stub.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from functools import cache
from types import ModuleType

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


@dataclass(frozen=True)
class ParsedModule:
    lines: tuple[str, ...]
    tree: ast.Module

    def segment(self, first: int, last: int) -> list[str]:
        """Source lines first..last, 1-based and inclusive."""
        return list(self.lines[first - 1 : last])


@cache
def parse(module: ModuleType) -> ParsedModule:
    source = inspect.getsource(module)
    return ParsedModule(tuple(source.splitlines()), ast.parse(source))


# Appended to the setup cell of notebooks that import torch: on a shared JupyterHub node, the
# default (one thread per core) made the ex3 notebook 25x slower than one thread.
ONE_THREAD = """
# One thread for PyTorch: on a shared server, more threads only queue for the same busy
# cores (these models are small, so one thread is as fast on a quiet machine).
torch.set_num_threads(1)"""


def setup_source(module: ModuleType) -> str:
    """The module's top-level import statements, as the notebook's setup cell (plus one
    thread for PyTorch when it imports torch)."""
    parsed = parse(module)
    imports = [node for node in parsed.tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    source = "\n".join(line for node in imports for line in parsed.segment(node.lineno, _end(node)))
    imports_torch = any(
        isinstance(node, ast.Import) and any(a.name == "torch" and not a.asname for a in node.names)
        for node in imports
    )
    return source + ONE_THREAD if imports_torch else source


def given_names(module: ModuleType) -> tuple[str, ...]:
    """Functions a reference module hands to students whole (its `GIVEN`): shown complete in
    a locked cell (`{{ given("name") }}`), not a solution cell; e.g. ex7's `apply_rope`, the
    rotation of ex6, which ex7 uses but does not ask for again."""
    return tuple(getattr(module, "GIVEN", ()))


def public_names(module: ModuleType) -> list[str]:
    """Public functions and classes of a reference module that students write (solution
    cells), in source order."""
    given = given_names(module)
    return [
        node.name
        for node in parse(module).tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and not node.name.startswith("_")
        and node.name not in given
    ]


def given_source(module: ModuleType, name: str) -> str:
    """The whole definition of a given function, for a locked cell."""
    if name not in given_names(module):
        raise KeyError(f"{module.__name__} does not give {name!r} (add it to GIVEN)")
    node = _definition(module, name)
    return "\n".join(parse(module).segment(_start(node), _end(node)))


def _definition(module: ModuleType, name: str) -> ast.FunctionDef | ast.ClassDef:
    for node in parse(module).tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return node
    raise KeyError(f"{module.__name__} defines no function or class {name!r}")


def _header_end(node: ast.FunctionDef | ast.ClassDef) -> int:
    """Last line of the signature, or of the docstring when there is one."""
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return _end(first)
    return first.lineno - 1


def _end(node: ast.stmt) -> int:
    """The node's last line (parsed source always has one)."""
    return node.end_lineno if node.end_lineno is not None else node.lineno


def _start(node: ast.FunctionDef | ast.ClassDef) -> int:
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def _function_lines(parsed: ParsedModule, node: ast.FunctionDef) -> list[str]:
    header_end = _header_end(node)
    body = parsed.segment(header_end + 1, _end(node))
    while body and not body[0].strip():
        body.pop(0)
    indent = body[0][: len(body[0]) - len(body[0].lstrip())]
    return [
        *parsed.segment(_start(node), header_end),
        indent + BEGIN,
        *body,
        indent + END,
    ]


def _body_ranges(node: ast.FunctionDef | ast.ClassDef) -> list[tuple[int, int]]:
    """(first, last) line ranges of what is hidden: function bodies after the docstring."""
    if isinstance(node, ast.FunctionDef):
        return [(_header_end(node) + 1, _end(node))]
    return [
        rng for item in node.body if isinstance(item, ast.FunctionDef) for rng in _body_ranges(item)
    ]


def solution_source(module: ModuleType, name: str) -> str:
    """Notebook source of the solution cell for function or class `name`."""
    parsed = parse(module)
    node = _definition(module, name)
    if isinstance(node, ast.FunctionDef):
        return "\n".join(_function_lines(parsed, node))
    lines = parsed.segment(_start(node), _header_end(node))
    position = _header_end(node) + 1
    methods = [item for item in node.body if isinstance(item, ast.FunctionDef)]
    for method in methods:
        lines += parsed.segment(position, _start(method) - 1)
        lines += _function_lines(parsed, method)
        position = _end(method) + 1
    return "\n".join(lines)


def hidden_body_lines(module: ModuleType) -> set[str]:
    """Every stripped line of a solution body that holds code (not only brackets): what the
    release must not contain."""
    parsed = parse(module)
    hidden: set[str] = set()
    for name in public_names(module):
        for first, last in _body_ranges(_definition(module, name)):
            hidden.update(
                line.strip()
                for line in parsed.segment(first, last)
                if any(char.isalnum() for char in line)
            )
    return hidden


def student_source(module: ModuleType, name: str) -> str:
    """The solution cell as a student who solved it would leave it: no nbgrader markers."""
    return "\n".join(
        line
        for line in solution_source(module, name).splitlines()
        if line.strip() not in (BEGIN, END)
    )
