"""Handing submissions to the batch's workers, and handing them out again when a worker dies.

At most one submission per worker is in the pool at a time, so the submissions a dead worker
took down with its pool are known: those that were running. The pool is replaced with a new one
(pool.Workers.renew) and they are queued again, first; a submission that was running when
workers died MAX_ATTEMPTS times is not graded (the batch says so, and the rerun grades it).
One killed worker used to fail every remaining submission of the batch (`BrokenProcessPool`).
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from autograder.batch.retry import AGAIN
from autograder.core.errors import EnvironmentFailure

MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Job:
    item: Any  # engine.Submitted
    args: tuple  # record_in_worker's arguments


class Dispatcher:
    """`call(*job.args)` in the workers for each job added; each result goes to `done(item,
    result)`, each submission that could not be done to `failed(item, reason, environment)`."""

    def __init__(
        self,
        workers,
        call: Callable,
        done: Callable[[Any, Any], None],
        failed: Callable[[Any, str, bool], None],
    ) -> None:
        self.workers, self.call, self.done, self.failed = workers, call, done, failed
        self.queue: deque[Job] = deque()
        self.running: dict[Future, tuple[Job, int]] = {}  # future -> job, pool generation
        self.attempts: Counter[Any] = Counter()

    def add(self, item, *args) -> None:
        self.queue.append(Job(item, args))
        self._fill()

    def _fill(self) -> None:
        renewed = 0
        while self.queue and len(self.running) < self.workers.count:
            job = self.queue[0]
            try:
                future = self.workers.submit(self.call, *job.args)
            except BrokenProcessPool as error:  # a worker died since the last look
                if renewed == 2:  # a new pool breaks at once: its processes cannot start
                    raise EnvironmentFailure(
                        f"the batch's worker processes cannot be started ({error}); {AGAIN}"
                    ) from error
                renewed += 1
                self.workers.renew()
                continue
            self.queue.popleft()
            self.running[future] = (job, self.workers.generation)

    def pump(self, block: bool) -> None:
        """Take the results that are in (waiting for one if `block`), and fill the pool."""
        if not self.running:
            self._fill()
            return
        finished, _ = wait(
            list(self.running), timeout=None if block else 0, return_when=FIRST_COMPLETED
        )
        renew = False
        for future in finished:
            job, generation = self.running.pop(future)
            try:
                result = future.result()
            except BrokenProcessPool:
                renew |= generation == self.workers.generation
                self._again(job)
                continue
            except Exception as error:  # noqa: BLE001 - the grader failed on it: say so, go on
                self.failed(job.item, f"worker failed ({type(error).__name__}: {error})", False)
                continue
            self.done(job.item, result)
        if renew:
            self.workers.renew()
        self._fill()

    def _again(self, job: Job) -> None:
        item = job.item
        self.attempts[item] += 1
        who = f"{item.student}/{item.exercise}"
        if self.attempts[item] >= MAX_ATTEMPTS:
            reason = f"a worker process died {MAX_ATTEMPTS} times while grading it"
            self.failed(item, reason, True)
            return
        print(
            f"attn-grade autograde: a worker process died while grading {who} (killed from "
            "outside, or out of memory?); a new worker grades it again "
            f"(attempt {self.attempts[item] + 1} of {MAX_ATTEMPTS})",
            file=sys.stderr,
            flush=True,
        )
        self.queue.appendleft(job)

    def drain(self) -> None:
        while self.running or self.queue:
            self.pump(block=True)
