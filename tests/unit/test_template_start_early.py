"""A grading process that knows it will grade starts its sandbox template in the background
(`sandbox.warm.start_early`), so the template's imports overlap the grader's own; the first
sandbox then uses that template, not a second one, and waits for it if it is not ready yet."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

import pytest

from autograder.sandbox import isolation, warm

LEVEL = isolation.Isolation("jail", 7, "", explicit=True)


class FakeTemplate:
    made: ClassVar[list[FakeTemplate]] = []
    release = threading.Event()
    fail = False

    def __init__(self, in_jail: bool, optimizers: bool = False):
        # a real template takes a second or two to import: this one until the test says so
        if not self.release.wait(timeout=10):
            raise AssertionError("start_early waited for the template to be ready")
        if FakeTemplate.fail:
            raise warm.TemplateFailed("no python here")
        self.in_jail, self.optimizers, self.alive = in_jail, optimizers, True
        FakeTemplate.made.append(self)

    def close(self) -> None:
        self.alive = False


@pytest.fixture
def fake(monkeypatch):
    FakeTemplate.made, FakeTemplate.release, FakeTemplate.fail = [], threading.Event(), False
    monkeypatch.setattr(warm, "Template", FakeTemplate)
    monkeypatch.setattr(warm, "_TEMPLATES", {})
    monkeypatch.setattr(warm, "_FAILED", [])
    assert LEVEL.warm
    return FakeTemplate


def test_the_template_starts_in_the_background_and_the_first_sandbox_uses_it(fake):
    warm.start_early(LEVEL, optimizers=True)  # returns while the template is still starting
    got: list = []
    first = threading.Thread(target=lambda: got.append(warm.template_for(LEVEL)))
    first.start()
    first.join(timeout=0.5)
    assert first.is_alive(), "the first sandbox did not wait for the starting template"
    fake.release.set()
    first.join(timeout=60)
    assert len(fake.made) == 1 and got == fake.made, "one template, the one started early"
    assert fake.made[0].optimizers, "the batch's choice reached the template"
    assert warm._FAILED == []


def test_a_template_that_fails_early_is_tried_again_by_the_first_sandbox(fake, caplog):
    fake.fail = True
    fake.release.set()
    warm.start_early(LEVEL)
    for thread in threading.enumerate():
        if thread.name == "attn-grade-template-start":
            thread.join(timeout=60)
    assert len(warm._FAILED) == 1 and "template" in caplog.text
    fake.fail = False
    assert warm.template_for(LEVEL) is fake.made[0]


def test_no_template_starts_where_sandboxes_start_cold(fake, monkeypatch):
    monkeypatch.setenv("ATTN_GRADE_WARM", "0")
    cold = isolation.Isolation("jail", 7, "", explicit=True)
    fake.release.set()
    warm.start_early(cold)
    assert not cold.warm
    assert not [t for t in threading.enumerate() if t.name == "attn-grade-template-start"]


def test_a_template_that_dies_while_it_starts_is_noticed_at_once(tmp_path, monkeypatch):
    """A template that dies before it is ready (a worker exiting while its template starts
    removes the runtime it was starting from) is a failure as soon as it ends: it used to be
    noticed only after READY_TIMEOUT, while this process's own end of the template's socket
    kept it open, and a batch worker's exit waited 120 s for it."""
    (tmp_path / "template.py").write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(warm, "jail_runtime", lambda: tmp_path)
    monkeypatch.setattr(warm, "READY_TIMEOUT", 100_000.0)
    failed: list[BaseException] = []

    def start() -> None:
        try:
            warm.Template(in_jail=False)
        except warm.TemplateFailed as error:
            failed.append(error)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "still waiting for a template that has ended"
    assert failed and "ended" in str(failed[0])


@pytest.mark.parametrize(
    ("exercise", "asked"), [("ex8_additive_attention", [True]), ("ex1_numpy_attention", [])]
)
def test_a_dask_task_of_an_exercise_that_trains_has_the_template_load_it(
    monkeypatch, exercise, asked
):
    """On a Dask worker the first task of an exercise that trains starts the worker's template
    with what the first optimizer loads; a task of another exercise leaves the template as it
    is (started plain by its first sandbox, or already running)."""
    from autograder.audit.digest import checks_digest
    from autograder.batch import dask_cluster, recorder

    calls: list[bool] = []
    monkeypatch.setattr(
        warm, "template_for", lambda level, optimizers=False: calls.append(optimizers)
    )
    monkeypatch.setattr(recorder, "grade_file", lambda *args: {"graded": True})
    monkeypatch.setattr("autograder.batch.dask_results.encode", lambda *a, **k: b"{}")
    level = isolation.choose().level
    monkeypatch.setenv(isolation.ENVIRONMENT_VARIABLE, level)
    answer = dask_cluster.grade_on_worker(exercise, "s", b"{}", level, checks_digest(exercise))
    assert answer == b"{}"
    assert calls == asked


@pytest.mark.parametrize("optimizers", [True, False])
def test_grading_in_the_batch_process_starts_its_template_as_the_pool_opens(
    fake, monkeypatch, optimizers
):
    """One worker: the batch grades in its own process, whose template starts in the
    background as `worker_pool` decides so (the one home of that choice), loading what the
    first optimizer loads only when the batch trains."""
    from autograder.batch import pool

    monkeypatch.setattr(isolation, "choose", lambda: LEVEL)
    with pool.worker_pool(1, 3, optimizers=optimizers) as workers:
        assert workers is None
        assert FakeTemplate.made == []  # still importing, in the background
        fake.release.set()
        for _ in range(200):  # started by the pool, not by a sandbox: nothing asks for it here
            if FakeTemplate.made:
                break
            time.sleep(0.05)
        assert [template.optimizers for template in FakeTemplate.made] == [optimizers]
        assert warm.template_for(LEVEL) is FakeTemplate.made[0]
