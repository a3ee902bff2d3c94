"""A sandbox reused for the grader's own trusted notebooks (autograder/grading/shared.py) grades
exactly as a fresh one: each program starts from an empty `__main__`, and the reports agree."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from autograder.grading.shared import SharedSandbox
from tests.conftest import source_notebook, write_notebook

EX1, EX6 = "ex1_numpy_attention", "ex6_rope"


def outcome(report) -> list[tuple]:
    return [(c.name, c.points, c.passed, c.mistake, c.message) for c in report.checks]


@pytest.fixture
def pool():
    shared = SharedSandbox()
    yield shared
    shared.close()


@pytest.mark.ex1
def test_the_next_program_does_not_see_the_last_ones_names(tmp_path, pool):
    whole = write_notebook(source_notebook(EX1), tmp_path / "whole" / f"{EX1}.ipynb")
    assert grade_notebook(whole, shared=pool.get()).score == 8
    # softmax's cell left empty: the reference's softmax of the last program must not answer
    empty = source_notebook(EX1, replace={"softmax": "# nothing yet\n"})
    blank = write_notebook(empty, tmp_path / "blank" / f"{EX1}.ipynb")
    report = grade_notebook(blank, shared=pool.get())
    assert pool.started == 1, "both programs ran in the one sandbox"
    softmax = [c for c in report.checks if c.grade_id == "check_softmax"]
    assert softmax and not any(c.passed for c in softmax)
    assert any("softmax" in c.message and "not defined" in c.message for c in softmax)


@pytest.mark.ex6
def test_reused_and_fresh_sandboxes_grade_alike(tmp_path, pool):
    mistake = next(iter(catalogue_for(EX6)))
    notebooks = {
        "reference": source_notebook(EX6),
        mistake.id: source_notebook(EX6, replace={mistake.target: mistake.source}),
    }
    for name, notebook in notebooks.items():
        path = write_notebook(notebook, tmp_path / name / f"{EX6}.ipynb")
        fresh = grade_notebook(path)
        reused = grade_notebook(path, shared=pool.get())
        assert outcome(reused) == outcome(fresh), name
        assert (reused.status, reused.score, reused.seed) == (fresh.status, fresh.score, fresh.seed)
    assert pool.started == 1


@pytest.mark.ex1
def test_a_check_run_forces_no_garbage_collection(tmp_path, pool, monkeypatch):
    """pytest's unraisable-exception plugin ran gc.collect() ten times per check session, about
    0.35 s of every grading with torch loaded; the check run leaves it (and the thread-exception
    plugin) out, and a failing check still gets its message."""
    import gc

    mistake = next(iter(catalogue_for(EX1)))
    notebook = source_notebook(EX1, replace={mistake.target: mistake.source})
    path = write_notebook(notebook, tmp_path / f"{EX1}.ipynb")
    grade_notebook(path, shared=pool.get())  # imports settle first
    collections: list[int] = []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(1) or real(*a))
    report = grade_notebook(path, shared=pool.get())
    assert collections == []
    failed = [c for c in report.checks if not c.passed]
    assert failed and all(c.message for c in failed)


@pytest.mark.ex1
def test_an_installed_pytest_plugin_has_no_say_in_the_checks(tmp_path, pool, monkeypatch):
    """A pytest plugin installed in the grader's environment (here one that drops every test,
    as a reordering or reseeding plugin would change them) is not loaded by the check run."""
    site = tmp_path / "site"
    info = site / "dropper-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dropper\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\ndropper = attn_dropper_plugin\n")
    (site / "attn_dropper_plugin.py").write_text(
        "def pytest_collection_modifyitems(items):\n    items.clear()\n"
    )
    monkeypatch.syspath_prepend(str(site))
    from importlib.metadata import entry_points

    assert "dropper" in {e.name for e in entry_points(group="pytest11")}, "the plugin is seen"
    path = write_notebook(source_notebook(EX1), tmp_path / f"{EX1}.ipynb")
    assert grade_notebook(path, shared=pool.get()).score == 8


def test_a_child_is_replaced_after_its_uses_or_half_its_output(monkeypatch):
    """The child's limits count over its life: it serves `uses` programs at most, and none
    more once it has printed half its output limit."""
    from autograder.grading import shared as module
    from autograder.sandbox.limits import Limits

    class Child:
        limits = Limits()

        def __init__(self):
            self.alive, self.output_bytes_used = True, 0

        def start(self):
            pass

        def close(self):
            self.alive = False

    monkeypatch.setattr(module, "Sandbox", Child)
    pool = SharedSandbox(uses=3)
    children = [pool.get() for _ in range(4)]
    assert children[0] is children[1] is children[2] is not children[3]
    children[3].output_bytes_used = Limits().output_bytes // 2 + 1
    assert pool.get() is not children[3] and not children[3].alive
    assert pool.started == 3
