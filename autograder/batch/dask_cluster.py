"""The sandboxed grading of a batch as tasks on a Dask cluster (`autograde --scheduler`).

Only the expensive, self-contained part runs on the cluster: a task receives the notebook's
bytes (workers need no course directory, no gradebook, no shared filesystem) and returns the
grading as a JSON document (dask_results.py), which the batch checks before use. The batch
parent then runs nbgrader's part locally (recorder.py), exactly as for a local batch, so the
gradebook equals a serial run's.

Who may take part: Dask moves task results, exceptions and events between its members as
pickles, so any worker that joins the scheduler receives every student's notebook and could run
code in the batch's process. The batch therefore connects only over TLS with certificates
(`tls://`, Dask's mutual authentication: the scheduler admits only workers and clients whose
certificate the cluster's CA signed), unless the instructor opts out explicitly
(`--insecure-scheduler`). Its client also reads results as msgpack only and never unpickles a
task's exception, a result's type or a worker's warning (PlainClient): a worker's answer is
data, and a bad answer is graded here with a warning that names the worker.

Every worker needs attn-grade installed (same version, same checks: the task refuses a worker
whose checks differ from the parent's) and an isolation level at least the parent's: the task
asks for the parent's level explicitly, so a worker without bubblewrap fails the task rather
than grading with less isolation.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.core.errors import UsageError

SETUP = "see docs/instructors.md, 'More than one machine: Dask'"


@dataclass(frozen=True)
class SchedulerAccess:
    """How to reach the cluster: `--scheduler` and its TLS credentials (paths; None: Dask's
    config `distributed.comm.tls.*`), or the instructor's explicit opt-out of authentication."""

    address: str  # tls://host:8786, or a scheduler file
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False


@dataclass(frozen=True)
class Plan:
    address: str
    security: object | None  # distributed.Security; None: the instructor's --insecure-scheduler


def grade_on_worker(
    exercise: str, student: str, notebook: bytes, level: str, checks_sha256: str
) -> bytes:
    """A Dask task: grade one notebook given as bytes, at the batch's isolation level; the
    answer is a JSON document (dask_results.encode), also when the worker cannot grade."""
    from autograder.audit.digest import checks_digest
    from autograder.batch import dask_results
    from autograder.batch.recorder import grade_file
    from autograder.core.registry import any_trains
    from autograder.grading.runner import GRADING_LOCK
    from autograder.sandbox import isolation, warm
    from autograder.sandbox.isolation import ENVIRONMENT_VARIABLE

    try:
        here = checks_digest(exercise)
    except UsageError as error:  # an exercise this worker's attn-grade does not have
        here = f"none: {error}"
    if here != checks_sha256:
        return dask_results.encode(
            error=f"this worker's checks of {exercise} ({here[:12]}) are not the batch's "
            f"({checks_sha256[:12]}): install the same attn-grade on every worker"
        )
    # a worker started with several threads runs tasks side by side: the level (process-wide)
    # and the grading are taken one task at a time (see runner.GRADING_LOCK)
    try:
        with GRADING_LOCK, tempfile.TemporaryDirectory(prefix="attn-grade-task-") as folder:
            os.environ[ENVIRONMENT_VARIABLE] = level
            if any_trains([exercise]):  # this worker's template, if it starts now, loads it too
                warm.template_for(isolation.choose(), optimizers=True)
            path = Path(folder) / f"{exercise}.ipynb"
            path.write_bytes(notebook)
            return dask_results.encode(grade_file(exercise, student, str(path)))
    except Exception as error:  # noqa: BLE001 - the batch reads no pickled exception: say it
        return dask_results.encode(error=f"{type(error).__name__}: {str(error)[:1000]}")


def plan(access: SchedulerAccess) -> Plan:
    """The scheduler's address and the credentials to reach it; UsageError for a scheduler
    without TLS (unless `access.insecure`) or TLS without credentials. Nothing is contacted."""
    address = _address(access.address)
    scheme = address.partition("://")[0] if "://" in address else _default_scheme()
    if scheme != "tls":
        if not access.insecure:
            raise UsageError(
                f"refusing the Dask scheduler {address!r}: it is not authenticated ({scheme}, "
                "no TLS), so anyone who can reach it can attach a worker that receives every "
                "student's notebook, returns any score and can run code in this process (Dask "
                "moves results as pickles). Start the scheduler and the workers with TLS "
                "certificates of one CA and give tls://HOST:8786 with --tls-ca-file, "
                f"--tls-cert and --tls-key ({SETUP}); or, for a cluster on a network only you "
                "can reach, say so with --insecure-scheduler"
            )
        print(
            f"attn-grade autograde: warning: the Dask scheduler {address} is not "
            "authenticated (--insecure-scheduler): whoever can reach it can attach a worker, "
            "read every notebook, return any score and run code in this process",
            file=sys.stderr,
        )
        return Plan(address, None)
    return Plan(address, _security(access))


def _address(given: str) -> str:
    """The address itself, or the one a scheduler file (`dask scheduler --scheduler-file`) names."""
    if not given.endswith(".json"):
        return given
    if not Path(given).is_file():
        raise UsageError(f"no Dask scheduler file {given}")
    try:
        address = json.loads(Path(given).read_text()).get("address")
    except (OSError, ValueError, AttributeError):
        address = None
    if not isinstance(address, str):
        raise UsageError(f"{given} is no Dask scheduler file (no address in it)")
    return address


def _default_scheme() -> str:
    import dask

    return str(dask.config.get("distributed.comm.default-scheme", "tcp"))


def _security(access: SchedulerAccess):
    """Dask's Security for a client of a TLS cluster: the options, else Dask's config."""
    try:
        from distributed import Security
    except ImportError:
        raise UsageError(
            "--scheduler needs Dask: pip install 'attn-grade[dask]' (dask[distributed])"
        ) from None
    given = {
        "tls_ca_file": access.tls_ca_file,
        "tls_client_cert": access.tls_cert,
        "tls_client_key": access.tls_key,
    }
    security = Security(require_encryption=True, **{k: v for k, v in given.items() if v})
    found = {name: getattr(security, name) for name in given}  # the options, else the config
    options = {"tls_ca_file": "--tls-ca-file", "tls_client_cert": "--tls-cert"}
    missing = [option for name, option in options.items() if not found[name]]
    if missing:
        raise UsageError(
            f"a tls:// scheduler needs the cluster's CA certificate and this client's "
            f"certificate and key: {', '.join(missing)} missing (or Dask's config "
            f"distributed.comm.tls.ca-file and distributed.comm.tls.client.cert/key; {SETUP})"
        )
    for value in found.values():
        if value and "\n" not in value and not os.access(value, os.R_OK):
            raise UsageError(f"cannot read the TLS file {value}")
    return security


def connect(access: Plan, timeout: float = 10.0):
    """A client of the scheduler that reads nothing a worker pickled (see PlainClient)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError(
            "--scheduler needs Dask: pip install 'attn-grade[dask]' (dask[distributed])"
        ) from None
    from autograder.batch.dask_client import PlainClient

    try:
        _refuse_early(access.address)
        return PlainClient(
            access.address,
            security=access.security,
            timeout=timeout,
            deserializers=["msgpack"],
        )
    except (OSError, TimeoutError, ValueError) as error:
        raise UsageError(
            f"cannot reach the Dask scheduler at {access.address!r} ({type(error).__name__}: "
            f"{str(error)[:300]}); start one with `dask scheduler` and workers with "
            f"`dask worker ADDRESS`, both with the cluster's TLS certificates ({SETUP})"
        ) from None


def _refuse_early(address: str) -> None:
    """Raise ConnectionRefusedError when nothing listens at a tcp:// or tls:// address. Dask's
    client retries a refused connection until its timeout (10 s); a mistyped port is known at
    once."""
    scheme, _, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    if scheme not in ("tcp", "tls") or not host or not port.isdigit():
        return  # another protocol or form: Dask decides
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
    except ConnectionRefusedError:
        raise
    except OSError:
        return  # unreachable or slow to answer: Dask's own timeout decides
