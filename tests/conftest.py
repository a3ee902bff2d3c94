"""Shared fixtures: notebooks built from the templates, with cells swapped in for mistakes."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from autograder.core.registry import EXERCISES, short_name
from autograder.course.build import build_course
from autograder.notebooks.notebook import to_notebook
from autograder.notebooks.render import render_cells
from tests.support.built_once import built_once
from tests.support.ordering import long_first

# Kernels and nbgrader processes started by the tests use one thread each, as the grader's
# sandbox does: with `pytest -n 4` on two cores, more threads only fight over the cores.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")


def exercise_params(exercises=EXERCISES):
    """Parametrize over exercises, each carrying its pytest marker (so `-m ex3` selects it)."""
    return [
        pytest.param(e, id=short_name(e), marks=getattr(pytest.mark, short_name(e)))
        for e in exercises
    ]


def source_notebook(exercise: str, lang: str = "en", replace: dict[str, str] | None = None):
    """The reference-filled source notebook, with the sources of some cells (by grade id)
    replaced."""
    notebook = to_notebook(render_cells(exercise, lang), exercise, lang)
    for grade_id, source in (replace or {}).items():
        cells = [
            c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
        ]
        assert cells, f"no cell {grade_id} in {exercise}"
        cells[0].source = source
    return notebook


def with_student_cells(notebook, *sources: str, position: int | None = None):
    """Add student code cells (no nbgrader metadata), at the end or before cell `position`."""
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    at = len(notebook.cells) if position is None else position
    notebook.cells[at:at] = cells
    return notebook


def write_notebook(notebook, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="session")
def shared_sandbox():
    """This worker's reusable sandbox for trusted notebooks (autograder/grading/shared.py)."""
    from autograder.grading.shared import SharedSandbox

    pool = SharedSandbox()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def release_of(tmp_path_factory):
    """exercise -> its release notebook, built by the real nbgrader once per run (shared by the
    xdist workers: its tests only read it)."""

    def release(exercise: str) -> Path:
        def build(course: Path) -> None:
            built = build_course(course / "course", [exercise], lang="en")[0]
            (course / "release-path").write_text(str(built))

        course = built_once(tmp_path_factory, f"release-{exercise}", build)
        return Path((course / "release-path").read_text())

    return release


@pytest.fixture(scope="session")
def wheel_bin(tmp_path_factory) -> Path:
    """bin/ of a fresh venv with attn-grade installed from a freshly built wheel (no checkout
    on its path); `wheel_bin.parent.parent / "wheel"` holds the wheel."""
    from autograder.ci.wheel import build_wheel
    from tests.support.wheel_venv import install_wheel

    root = tmp_path_factory.mktemp("wheel-install")
    wheel = build_wheel(root / "wheel")
    return install_wheel(wheel, root / "venv")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long tests first, spread over the xdist workers (tests/support/ordering.py)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = long_first(items, workers)


def pytest_configure(config: pytest.Config) -> None:
    """One marker per exercise (`-m ex3`), from the registry: no list of ids to keep in step."""
    for exercise in EXERCISES:
        config.addinivalue_line("markers", f"{short_name(exercise)}: {exercise}")
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # once, before any worker starts
        write_bytecode()


def write_bytecode() -> None:
    """Bytecode of the grader and the test helpers, written before the run. Where
    PYTHONDONTWRITEBYTECODE is set (it is on this machine type), no process writes any, so each
    of the run's ~400 Python processes that load the grader (the command lines, nbgrader with our
    plugins, the corpus's grading processes, the batch's fork servers) compiled the modules it
    imports again: measured, 0.13 s of CPU per process that loads the grading stack. compileall
    writes whatever that variable says, and only what is missing or stale; importing only reads.
    The jail hides the whole package, `__pycache__` included (sandbox/isolation.py)."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for folder in ("autograder", "tests/support"):
        compileall.compile_dir(root / folder, quiet=1)
