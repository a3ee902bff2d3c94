"""The batch's worker processes: a pool whose workers have the grading modules imported, through
a fork server only where no sandbox can reach its socket."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


@contextlib.contextmanager
def worker_pool(workers: int, jobs: int, always: bool = False):
    """The batch's worker processes for `jobs` submissions: at most `workers` and no more than
    there are jobs (None for one worker and not `always`: grading runs in this process).

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
    socket is in a private 0700 directory, out of the jail's sight, and a sandbox outside the
    jail cannot create UNIX sockets."""
    if workers <= 1 and not always:
        yield None
        return
    from autograder.batch import recorder

    pool = ProcessPoolExecutor(
        max_workers=max(min(workers, jobs), 1),
        mp_context=pool_context(recorder.WORKER_MODULES),
        initializer=recorder.start_worker,
        initargs=(recorder.batch_identity(),),
    )
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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
