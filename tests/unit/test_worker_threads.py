"""The batch's workers share the CPUs out between them: each worker's torch uses its share of
math threads (batch/pool.threads_per_worker), so that two workers computing at once do not
spin-wait on each other's threads."""

from __future__ import annotations

import os

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
