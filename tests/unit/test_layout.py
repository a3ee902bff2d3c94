"""The layout shows the architecture (issue 18): packages by role, each with its purpose, no
import cycle between modules or between packages, small engine modules."""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.core.registry import (
    EXERCISES,
    EXERCISES_DIR,
    PACKAGE_DIR,
    PROJECT_ROOT,
    REFERENCE_DIR,
    TEMPLATES_DIR,
)

ENGINE_MODULE_LINES = 420  # "about 400": the exercises' checks and catalogues are content


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that `path` imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        found |= {name for name in names if name in modules}
    return found


def _role(module: str) -> str:
    """The package a module belongs to: `autograder.X` (sandbox.inside, and each exercise's
    folder, count as their own)."""
    parts = module.split(".")
    if parts[1:3] == ["sandbox", "inside"]:
        return "sandbox.inside"
    if parts[1] == "exercises" and len(parts) > 2:
        return "exercises.<id>"
    return parts[1] if len(parts) > 1 else parts[0]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph`, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for successor in sorted(graph.get(node, ())):
            if state.get(successor) == 1:
                return [*stack[stack.index(successor) :], successor]
            if successor not in state and (found := visit(successor)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = _modules()
    by_module = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    by_role: dict[str, set[str]] = {}
    for name, targets in by_module.items():
        for target in targets:
            if _role(target) != _role(name):
                by_role.setdefault(_role(name), set()).add(_role(target))
    return by_module, by_role


def test_no_import_cycle_between_modules_or_packages():
    by_module, by_role = _graphs()
    assert _cycle(by_module) is None
    assert _cycle(by_role) is None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


# The design card's top level (issue 42), and what may stand beside it.
CARD = {"pyproject.toml", "assignments", "autograder", "reference", "student_templates", "tests"}
BESIDE = {"benchmarks", "docs", "README.md", "CHANGELOG.md", "CONTRIBUTING.md", "mkdocs.yml"}
# what a working copy gathers that git ignores (venv, builds, caches)
UNTRACKED = {"build", "dist", "demo-course", "site", "test-artifacts", "venv"}


def test_the_top_level_is_the_design_cards():
    names = {path.name for path in PROJECT_ROOT.iterdir()}
    extra = {
        name
        for name in names - CARD - BESIDE - UNTRACKED
        if not name.startswith(".") and not name.endswith(".egg-info")
    }
    assert CARD <= names and extra == set(), f"not on the design card: {sorted(extra)}"


def test_students_material_and_references_stand_at_the_top_level():
    """In a checkout the package's `_reference` and `_student_templates` are links to the top
    level folders (a wheel carries the files there); one file per exercise in each."""
    assert REFERENCE_DIR.resolve() == PROJECT_ROOT / "reference"
    assert TEMPLATES_DIR.resolve() == PROJECT_ROOT / "student_templates"
    ids = {path.name.removesuffix(".ipynb.j2") for path in TEMPLATES_DIR.glob("*.ipynb.j2")}
    assert {path.stem for path in REFERENCE_DIR.glob("ex*.py")} == ids == set(EXERCISES)


def test_the_top_level_is_packages_and_at_most_three_modules():
    modules = [p.name for p in PACKAGE_DIR.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= 3, modules


def test_every_package_says_what_it_is_for():
    for init in PACKAGE_DIR.rglob("__init__.py"):
        if EXERCISES_DIR in init.parents:
            continue  # an exercise's __init__ is its declaration
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no purpose line"


def test_engine_modules_stay_small():
    long = {
        str(path.relative_to(PACKAGE_DIR)): n
        for path in PACKAGE_DIR.rglob("*.py")
        if EXERCISES_DIR not in path.parents
        and (n := len(path.read_text().splitlines())) > ENGINE_MODULE_LINES
    }
    assert long == {}


def test_no_engine_path_reuses_a_sandbox():
    """A sandbox is reused only for the grader's own notebooks (the suite's catalogue and fakes,
    the mutation benchmark): no module that grades students builds a SharedSandbox or passes
    `shared=` on (the runner only forwards its own parameter)."""
    users = sorted(
        str(path.relative_to(PACKAGE_DIR))
        for path in PACKAGE_DIR.rglob("*.py")
        if "SharedSandbox" in (text := path.read_text()) or "shared=" in text
    )
    assert users == ["grading/runner.py", "grading/shared.py"]


def test_core_is_the_ground_floor():
    """`autograder/core` (errors, Status, results, versions, text, the registry) imports nothing
    of the package above it: every other package may build on it."""
    modules = _modules()
    upward = sorted(
        f"{path.name}: {module}"
        for path in (PACKAGE_DIR / "core").glob("*.py")
        for module in _imports(path, modules)
        if not module.startswith("autograder.core")
    )
    assert upward == []
