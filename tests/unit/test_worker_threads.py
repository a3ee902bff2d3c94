"""The batch's workers share the CPUs out between them: each worker's torch uses its share of
math threads (batch/pool.threads_per_worker), so that two workers computing at once do not
spin-wait on each other's threads."""

from __future__ import annotations

import os
import time

import pytest

from autograder.batch import pool


@pytest.mark.parametrize(
    ("cpus", "workers", "threads"),
    [(2, 1, 2), (2, 2, 1), (2, 3, 1), (8, 2, 4), (8, 3, 2), (1, 1, 1), (4, 0, 4)],
)
def test_threads_per_worker_share_out_the_cpus(monkeypatch, cpus, workers, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert pool.threads_per_worker(workers) == threads


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def test_each_worker_of_the_pool_runs_torch_on_its_share(monkeypatch):
    # 6 CPUs for 2 workers: 3 threads each, which is neither torch's default here nor 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)))
    assert _torch_threads() != 3
    with pool.worker_pool(2, 2) as workers:
        assert workers is not None
        answers = {workers.submit(_torch_threads).result(timeout=120) for _ in range(4)}
    assert answers == {3}


def _template_started_for_optimizers() -> list[bool]:
    from autograder.sandbox import warm

    return [template.optimizers for template in warm._TEMPLATES.values()]


@pytest.mark.parametrize("optimizers", [True, False])
def test_each_worker_starts_its_template_as_the_batch_says(optimizers):
    """A batch whose exercises train (`Exercise.trains`) has every worker's sandbox template
    load what the first optimizer loads; any other batch does not pay for it."""
    from autograder.core.registry import any_trains
    from autograder.sandbox import isolation

    if not isolation.choose().warm:
        pytest.skip("sandboxes start cold here (warm starts are for a root grader)")
    assert any_trains(["ex1_numpy_attention", "ex8_additive_attention"])
    assert not any_trains(["ex1_numpy_attention", "ex2_attention_heatmap"])
    with pool.worker_pool(2, 2, optimizers=optimizers) as workers:
        assert workers is not None
        seen = set()
        for _ in range(60):  # each worker's early start ends within a template's start
            found = workers.submit(_template_started_for_optimizers).result(timeout=120)
            seen.update(found)
            if found:
                break
            time.sleep(1)
    assert seen == {optimizers}


def _template_start_asked() -> bool:
    """Whether this worker asked for a sandbox template (its start thread, the template, or a
    failed start); its initializer has run by the time any task does."""
    import threading

    from autograder.sandbox import warm

    started = any(t.name == "attn-grade-template-start" for t in threading.enumerate())
    return started or bool(warm._TEMPLATES) or bool(warm._FAILED)


def test_workers_that_run_nbgraders_part_only_start_no_template():
    """With --scheduler a Dask cluster grades; the local workers run nbgrader's part only, and
    a template each would be started for nothing. A grading pool's workers do start theirs."""
    from autograder.sandbox import isolation

    if not isolation.choose().warm:
        pytest.skip("sandboxes start cold here (warm starts are for a root grader)")
    for grades in (False, True):
        with pool.worker_pool(2, 2, grades=grades) as workers:
            assert workers is not None
            asked = {workers.submit(_template_start_asked).result(timeout=120) for _ in range(4)}
        assert asked == {grades}, grades


def test_the_batch_chooses_its_workers_only_when_not_told():
    """--workers as given; left out, two workers, or grading in the batch's own process for a
    batch too small to repay a pool's start (one submission, or a few quick ones)."""
    ex1, ex3, ex8 = "ex1_numpy_attention", "ex3_transformer_classifier", "ex8_additive_attention"
    assert [pool.worker_count(asked, [ex1]) for asked in (1, 2, 3)] == [1, 2, 3]
    assert pool.worker_count(None, []) == 1
    assert pool.worker_count(None, [ex8]) == 1, "one submission"
    assert pool.worker_count(None, [ex1] * 3) == 1, "three quick ones"
    assert pool.worker_count(None, [ex8] * 2) == pool.worker_count(None, [ex3] * 3) == 2
    assert pool.worker_count(None, [ex1] * 30) == pool.AUTO_WORKERS == 2
    # where a Dask cluster grades (--scheduler), nbgrader's part runs in the batch's process
    # unless --workers says otherwise
    assert pool.worker_count(None, [ex1], grades=False) == 1
    assert pool.worker_count(None, [ex8] * 30, grades=False) == 1
    assert pool.worker_count(3, [ex8] * 9, grades=False) == 3


def _in_a_process(code: str) -> str:
    """`code` run in a fresh interpreter, with `_template_start_asked()` defined: its output."""
    import inspect
    import subprocess
    import sys

    program = f"import sys\n{inspect.getsource(_template_start_asked)}\n{code}"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_batch_that_only_records_starts_no_template_in_its_process():
    """With --scheduler and no --workers, the batch's own process runs nbgrader's part: it
    opens no pool and starts no sandbox template (a grading batch of one worker does)."""
    from autograder.sandbox import isolation

    if not isolation.choose().warm:
        pytest.skip("sandboxes start cold here (warm starts are for a root grader)")
    code = (
        "from autograder.batch import pool\n"
        "with pool.worker_pool(1, 9, grades={grades}) as workers:\n"
        "    print(workers is None, _template_start_asked())\n"
    )
    assert _in_a_process(code.format(grades=False)) == "True False"
    assert _in_a_process(code.format(grades=True)) == "True True"


def test_a_preloaded_dask_worker_is_ready_before_its_first_task():
    """`dask worker --preload autograder.batch.dask_worker` loads what a local pool worker
    loads, and asks for its sandbox template, as it starts."""
    from autograder.batch import recorder
    from autograder.sandbox import isolation

    code = (
        "from autograder.batch import dask_worker\n"
        "before = set(sys.modules)\n"
        "dask_worker.dask_setup(None)\n"
        "print(','.join(sorted(set(sys.modules) - before)))\n"
        "print(_template_start_asked())\n"
    )
    loaded, asked = _in_a_process(code).splitlines()
    assert set(recorder.WORKER_MODULES) <= set(loaded.split(","))
    assert asked == str(isolation.choose().warm)
