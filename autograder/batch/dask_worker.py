"""A Dask worker made ready to grade before its first task: `dask worker ADDRESS --preload
autograder.batch.dask_worker` (docs/instructors.md, "More than one machine: Dask").

Without it, a worker's first task of a batch imports torch, nbgrader and the grader and starts
its sandbox template, one after the other, while the batch waits for that task; every later
task of the worker's life finds them loaded. With it, the worker loads them as it starts, and
its template (the one for the worker's own isolation level, loading what torch.optim loads)
starts beside those imports, as a local pool's worker does (recorder.start_worker). The same
modules and template are used by the tasks (dask_cluster.grade_on_worker): nothing about the
grading or its isolation changes, only when the cost is paid. Templates are kept per kind of
sandbox (in the jail or not, sandbox.warm): a task whose level asks for the other kind starts
that template then, as before. Dask may warn that the worker's event loop was busy while it
started (the imports run there).
"""

from __future__ import annotations


def dask_setup(worker: object = None) -> None:
    """Dask's preload hook, run once as the worker starts."""
    from autograder.batch import recorder

    recorder.load_grading(template=True, optimizers=True)
