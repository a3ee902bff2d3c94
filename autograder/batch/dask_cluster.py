"""The sandboxed grading of a batch as tasks on a Dask cluster (`autograde --scheduler`).

Only the expensive, self-contained part runs on the cluster: a task receives the notebook's
bytes (workers need no course directory, no gradebook, no shared filesystem) and returns the
grading report. The batch parent then runs nbgrader's part locally (recorder.py), exactly as
for a local batch, so the gradebook equals a serial run's.

Every worker needs attn-grade installed (same version, same checks: the task refuses a worker
whose checks differ from the parent's) and an isolation level at least the parent's: the task
asks for the parent's level explicitly, so a worker without bubblewrap fails the task rather
than grading with less isolation.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

from autograder.batch.messages import Graded


class WorkerMismatch(RuntimeError):
    """The Dask worker grades with other checks than the batch (another attn-grade install)."""


def grade_on_worker(
    exercise: str, student: str, notebook: bytes, level: str, checks_sha256: str
) -> Graded:
    """A Dask task: grade one notebook given as bytes, at the batch's isolation level."""
    from autograder.batch.recorder import grade_file
    from autograder.core.versions import checks_digest
    from autograder.grading.runner import GRADING_LOCK
    from autograder.sandbox.isolation import ENVIRONMENT_VARIABLE

    if checks_digest() != checks_sha256:
        raise WorkerMismatch(
            f"this worker's checks ({checks_digest()[:12]}) are not the batch's "
            f"({checks_sha256[:12]}): install the same attn-grade on every worker"
        )
    # a worker started with several threads runs tasks side by side: the level (process-wide)
    # and the grading are taken one task at a time (see runner.GRADING_LOCK)
    with GRADING_LOCK, tempfile.TemporaryDirectory(prefix="attn-grade-task-") as folder:
        os.environ[ENVIRONMENT_VARIABLE] = level
        path = Path(folder) / f"{exercise}.ipynb"
        path.write_bytes(notebook)
        return grade_file(exercise, student, str(path))


def connect(address: str, timeout: float = 10.0):
    """A Dask client for the scheduler at `address` (tcp://host:8786, or a scheduler file)."""
    from autograder.core.errors import UsageError

    try:
        from distributed import Client
    except ImportError:
        raise UsageError(
            "--scheduler needs Dask: pip install 'attn-grade[dask]' (dask[distributed])"
        ) from None
    try:
        if address.endswith(".json") and Path(address).is_file():
            return Client(scheduler_file=address, timeout=timeout)
        _refuse_early(address)
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as error:
        raise UsageError(
            f"cannot reach the Dask scheduler at {address!r} ({type(error).__name__}: "
            f"{str(error)[:300]}); start one with `dask scheduler` and workers with "
            "`dask worker ADDRESS`"
        ) from None


def _refuse_early(address: str) -> None:
    """Raise ConnectionRefusedError when nothing listens at a tcp:// address. Dask's client
    retries a refused connection until its timeout (10 s); a mistyped port is known at once."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    if not address.startswith("tcp://") or not host or not port.isdigit():
        return  # another protocol or form: Dask decides
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
    except ConnectionRefusedError:
        raise
    except OSError:
        return  # unreachable or slow to answer: Dask's own timeout decides
