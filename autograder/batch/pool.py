"""The batch's worker processes: a pool whose workers have the grading modules imported, through
a fork server only where no sandbox can reach its socket."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path


class Workers:
    """The batch's worker processes. A pool whose worker died is broken for good (every
    submission it held fails), so the batch replaces it (`renew`); `stop` ends them at once."""

    def __init__(self, count: int, context, optimizers: bool = False, grades: bool = True) -> None:
        from autograder.batch import recorder

        self.count, self.context, self.optimizers = count, context, optimizers
        self.grades = grades  # False: nbgrader's part only (--scheduler), no early template
        self.identity = recorder.batch_identity()
        self.generation = 0
        self.pool = self._new()

    def _new(self) -> ProcessPoolExecutor:
        from autograder.batch import recorder

        return ProcessPoolExecutor(
            max_workers=self.count,
            mp_context=self.context,
            initializer=recorder.start_worker,
            initargs=(
                self.identity,
                threads_per_worker(self.count),
                self.optimizers,
                self.grades,
            ),
        )

    def submit(self, function, *args) -> Future:
        return self.pool.submit(function, *args)

    def renew(self) -> None:
        """A new pool for the broken one (the fork server is started again if it died too)."""
        broken, self.pool = self.pool, self._new()
        self.generation += 1
        broken.shutdown(wait=True, cancel_futures=True)

    def stop(self) -> None:
        """Kill the workers (their sandboxes die with them) and wait for the pool to end: what
        they were grading is in their scratch, never in the course."""
        processes = getattr(self.pool, "_processes", None) or {}
        for process in list(processes.values()):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                process.kill()
        self.shutdown()

    def shutdown(self) -> None:
        """Wait for the pool to end, then remove the runtime copies of every worker that was
        killed on the way (atexit never ran in them): a worker that replaces one sweeps them as
        it starts, but not those of workers still dying then, nor of the last generation."""
        import tempfile

        from autograder.sandbox.plumbing import sweep_runtime_roots

        self.pool.shutdown(wait=True, cancel_futures=True)
        sweep_runtime_roots(Path(tempfile.gettempdir()))


AUTO_WORKERS = 2  # --workers left out: up to this many worker processes
# --workers left out: a batch whose declared grading seconds (core.registry, summed over its
# submissions) come below this grades in this process. A pool's start (its fork server's
# imports, then each worker's sandbox template) is serial and costs about 3 s and 4 CPU-s on 2
# cores; one worker's template starts beside the batch's own imports. Measured on a quiet
# 2-core machine, one worker against two (wall): 3 ex1 notebooks (9 declared seconds) 4.4 s
# against 7.0 s, 3 ex2 (12.3) 7.0 s against 8.9 s; 2 ex8 (18) 14.3 s against 12.7 s, 3 ex3
# (18.3) 23.5 s against 18.1 s.
POOL_REPAID_SECONDS = 15.0


def worker_count(requested: int | None, exercises: Iterable[str], grades: bool = True) -> int:
    """The batch's worker processes for submissions of `exercises` (one item per submission):
    `requested` (--workers) as given; left out (None), AUTO_WORKERS, or 1 (grading in this
    process, no pool) for a batch too small to repay a pool's start (POOL_REPAID_SECONDS), one
    submission's regrade included. Where a Dask cluster grades (`grades` False), the local
    side runs nbgrader's part only (0.14-0.47 CPU-s a demo notebook): in this process, as each
    answer comes in, unless `requested`. A pool for it cost the demo's Dask batch its fork
    server's imports on the CPUs the cluster grades on (2 cores: 38.3 s against 37.5 s);
    `--workers N` gives a large cluster N recording processes."""
    from autograder.core.registry import grading_seconds

    if requested is not None:
        return requested
    if not grades:
        return 1
    items = list(exercises)
    if len(items) <= 1 or sum(grading_seconds(item) for item in items) < POOL_REPAID_SECONDS:
        return 1
    return AUTO_WORKERS


def threads_per_worker(workers: int) -> int:
    """The math threads (torch's intra-op pool) each of `workers` workers may use: the CPUs this
    process may run on, shared out. torch starts one thread per CPU in every process, and where
    two workers compute at once, 2 x 2 threads on 2 CPUs spin-wait for each other: the pool of a
    2-worker batch of the demo used 48 CPU-s for the grading one process did in 29, and 23 with
    this (benchmarks/batch_throughput.py, docs/numbers.md); the sandboxes' student code costs the
    same either way (it runs single-threaded). Dask's workers get one thread by Dask's default."""
    return max(1, len(os.sched_getaffinity(0)) // max(1, workers))


@contextlib.contextmanager
def worker_pool(
    workers: int, jobs: int, optimizers: bool = False, grades: bool = True
) -> Iterator[Workers | None]:
    """The batch's worker processes for `jobs` submissions: at most `workers` and no more than
    there are jobs (None for one worker: the work runs in this process). They
    are stopped at once when the block ends with an exception (a stop, a failure).

    The caller opens the pool only once it knows there is work: a usage error, an empty course
    or a batch whose submissions are all up to date starts no process. (The workers used to
    start first, their imports overlapping the reading of the course: that paid about 2 CPU-s
    and 1.2 s for nothing on those runs, and saves only about 0.5 s of a real batch; CHANGELOG,
    grader 0.2.7.) The processes start with the first submissions.

    The workers are forked from multiprocessing's fork server, which loads torch, nbgrader
    and the grader once (recorder.WORKER_MODULES; no thread runs there, so forking is safe):
    two workers share those pages instead of each importing its own copy, and a 2-worker
    batch of the demo went from about 50 s to 42-44 s. Each worker watches this process and
    dies with it (recorder._die_with_batch), and the fork server ends once no worker is left,
    so a killed batch leaves no worker, fork server or sandbox behind. The fork server's
    socket is in a private 0700 directory, out of the jail's sight (claim_temp_dir), and a
    sandbox outside the jail cannot create UNIX sockets. `optimizers`: the workers' sandbox
    templates load what torch.optim's first optimizer loads (`Exercise.trains`). `grades`
    False: the workers run nbgrader's part only (a Dask cluster grades, `--scheduler`), so none
    starts a sandbox template early (a sandbox that is needed after all still starts one).

    Grading in this process (None, `grades`) starts this process's sandbox template now, in
    the background (sandbox.warm.start_early): its imports overlap the grader's own; recording
    only (None, not `grades`) starts none. Each grading worker starts its own as it starts
    (recorder.start_worker)."""
    if workers <= 1:
        from autograder.sandbox import isolation, warm

        if grades:
            warm.start_early(isolation.choose(), optimizers)
        yield None
        return
    from autograder.batch import recorder

    claim_temp_dir()
    end_fork_server_at_exit()
    context = pool_context(recorder.WORKER_MODULES)
    pool = Workers(max(min(workers, jobs), 1), context, optimizers, grades)
    try:
        yield pool
    except BaseException:
        pool.stop()
        raise
    pool.shutdown()


_EXIT_HOOKED: set[int] = set()  # the processes whose exit ends their fork server


def end_fork_server_at_exit() -> None:
    """When this process exits, its fork server (if it started one) is killed instead of left
    to notice the exit and tear down its torch and nbgrader, which takes about 1.3 s during
    which it still holds the batch's stdout and stderr (a pipe reading them waits; a stopped
    batch looked slow to end). Only at exit: concurrent.futures has joined every pool of the
    process by then, so no pool can need the server any more; killing it as one pool stops
    would break another pool of the same process starting a worker through it."""
    import atexit

    owner = os.getpid()
    if owner in _EXIT_HOOKED:
        return
    _EXIT_HOOKED.add(owner)

    def end() -> None:
        if os.getpid() != owner:  # a forked child inherited the hook: not its server
            return
        import multiprocessing.forkserver

        server = getattr(multiprocessing.forkserver, "_forkserver", None)
        pid = getattr(server, "_forkserver_pid", None)
        if isinstance(pid, int):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)

    atexit.register(end)  # after multiprocessing's own hook, so it runs before that one


MARK = "attn-grade-batch"  # in multiprocessing's temp folder: "PID STARTTIME" of its batch


def claim_temp_dir() -> Path:
    """multiprocessing's temp folder of this process (pymp-*, where the fork server's socket
    goes; removed when the batch exits, not when it is killed), marked as this batch's; and the
    marked folders of batches that were killed are removed (another process's pymp-* folder,
    unmarked, is never touched)."""
    import multiprocessing.util
    import shutil
    import tempfile

    from autograder.batch import recorder

    for mark in Path(tempfile.gettempdir()).glob(f"pymp-*/{MARK}"):
        try:
            pid, started = mark.read_text().split()
            gone = recorder.process_start_time(int(pid)) != started
        except OSError:
            gone = True  # no such process
        except ValueError:
            continue
        if gone:
            shutil.rmtree(mark.parent, ignore_errors=True)
    folder = Path(multiprocessing.util.get_temp_dir())
    mine, since = recorder.batch_identity()
    (folder / MARK).write_text(f"{mine} {since}")
    return folder


def pool_context(modules):
    """The fork server, preloaded with `modules`; "spawn" where its socket cannot be made (a
    UNIX socket path has at most 107 bytes, and multiprocessing puts it under $TMPDIR) and
    where a sandbox might reach it: Python 3.11's fork server runs any pickle sent to its
    unauthenticated socket, so it is used only where no child can see or traverse its private
    directory (the jail's own /tmp; another uid under a root grader). Every level also denies
    the child socket() (autograder/sandbox/inside/seccomp.py)."""
    import tempfile

    if not fork_server_is_private():
        return multiprocessing.get_context("spawn")
    socket_path = Path(tempfile.gettempdir()) / "pymp-xxxxxxxx" / "listener-xxxxxxxx"
    if len(os.fsencode(socket_path)) > 100:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(modules))
    return context


def fork_server_is_private() -> bool:
    from autograder.sandbox import isolation

    level = isolation.choose()
    return level.jail or level.separate_uid
