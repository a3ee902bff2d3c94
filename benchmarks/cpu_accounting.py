"""CPU time of every process a benchmarked command starts, from a cgroup's cpuacct.

`RUSAGE_CHILDREN` counts a descendant only once every process between it and the benchmark has
waited for it: it misses the batch's pool (its workers are children of multiprocessing's fork
server) and a Dask cluster's workers. A cpuacct group counts every task in it, from the moment it
joins, whatever becomes of its parent; processes inherit the group of the process that forks
them, so a command started inside the group brings all of its descendants.

`Accounted.run()` starts a command in a fresh group and returns its wall time, its CPU time and
that CPU by kind of process (the batch, the pool's fork server and workers, bubblewrap, the warm
start's templates, the sandboxes' supervisors, the children running student code, nbgrader's
kernels, Dask), sampled from /proc while it runs: what the samples miss (processes that live
less than the sampling interval) is reported as `unattributed`. Without a writable cpuacct
hierarchy (not root, cgroup v2 only), the CPU comes from RUSAGE_CHILDREN and says so.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
import uuid
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
CGROUP2 = Path("/sys/fs/cgroup")
SANDBOX_UIDS = 1_900_000_000  # autograder.sandbox.identity.FIRST_UID
TICKS = os.sysconf("SC_CLK_TCK")


class Group:
    """One accounting group: cgroup v1 cpuacct, or a v2 group with the cpu controller."""

    def __init__(self) -> None:
        name = f"attn-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if (CPUACCT / "cpuacct.usage").exists() and os.access(CPUACCT, os.W_OK):
            self.path, self.version = CPUACCT / name, "v1"
        elif (CGROUP2 / "cgroup.controllers").exists() and os.access(CGROUP2, os.W_OK):
            self.path, self.version = CGROUP2 / name, "v2"
        else:
            raise OSError("no writable cpuacct or cgroup v2 hierarchy (run as root)")
        self.path.mkdir()

    def usage(self) -> float:
        """CPU seconds of every task that has been in the group."""
        if self.version == "v1":
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, value = line.split()
            if key == "usage_usec":
                return int(value) / 1e6
        return 0.0

    def pids(self) -> list[int]:
        try:
            return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def wrap(self, command: list[str]) -> list[str]:
        """`command` started inside the group (with all it starts): a shell joins it, then
        execs the command (no preexec_fn: the benchmark's sampler thread runs meanwhile)."""
        procs = str(self.path / "cgroup.procs")
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *command]

    def remove(self) -> None:
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # tasks still leaving
                time.sleep(0.1)


def available() -> bool:
    try:
        Group().remove()
    except OSError:
        return False
    return True


def _stat(pid: int) -> tuple[int, int, float] | None:
    """(parent, start time, CPU seconds) of `pid`."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / TICKS


def _describe(pid: int) -> tuple[str, int] | None:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        uid = os.stat(f"/proc/{pid}").st_uid
    except (OSError, UnicodeDecodeError):
        return None
    return cmdline, uid


def kind(cmdline: str, uid: int, parent_kind: str) -> str:
    """What a process of a benchmarked batch is, from its command line, uid and parent."""
    if uid >= SANDBOX_UIDS or "child.py" in cmdline:
        return "sandbox children (student code)"
    if "template.py" in cmdline:
        return "sandbox supervisors" if parent_kind == "warm templates" else "warm templates"
    if "supervisor.py" in cmdline:
        return "sandbox supervisors"
    if "bwrap" in cmdline.split(" ", 1)[0]:
        return "bubblewrap"
    if "multiprocessing.forkserver" in cmdline:
        return "pool fork server"
    if "spawn_main" in cmdline or parent_kind in ("pool fork server", "pool workers"):
        return "pool workers"
    if "ipykernel" in cmdline:
        return "kernels (stock nbgrader)"
    if "distributed" in cmdline or "dask" in cmdline or parent_kind == "dask":
        return "dask"
    if "autograder.cli.app" in cmdline or "nbgrader" in cmdline:
        return "batch (parent)"
    return "other"


class Sampler:
    """Reads the CPU time of every process in `group` every `interval` seconds."""

    def __init__(self, group: Group, interval: float = 0.1):
        self.group, self.interval = group, interval
        self.seen: dict[tuple[int, int], list] = {}  # (pid, start) -> [kind, CPU seconds]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self._sample()
        by_kind: dict[str, float] = {}
        for what, cpu in self.seen.values():
            by_kind[what] = by_kind.get(what, 0.0) + cpu
        return by_kind

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        kinds = {pid: entry[0] for (pid, _), entry in self.seen.items()}
        for pid in self.group.pids():
            stat = _stat(pid)
            if stat is None:
                continue
            parent, start, cpu = stat
            entry = self.seen.get((pid, start))
            if entry is None:
                described = _describe(pid)
                if described is None:
                    continue
                what = kind(*described, kinds.get(parent, ""))
                entry = self.seen[(pid, start)] = [what, 0.0]
                kinds[pid] = what
            entry[1] = max(entry[1], cpu)


class Accounted:
    """Runs commands, each in a group of its own (or with RUSAGE_CHILDREN where none can be had)."""

    def __init__(self) -> None:
        self.cgroups = available()
        self.method = "cgroup cpuacct" if self.cgroups else "RUSAGE_CHILDREN (no cgroup here)"

    def run(
        self,
        command: list[str],
        cwd: Path,
        env: dict[str, str],
        also: Group | None = None,
    ) -> dict:
        """{"wall_s", "cpu_s", "by_kind"} of `command`, which must succeed. `also`: a group
        that already holds processes the command uses (a Dask cluster) and runs it instead."""
        if not self.cgroups:
            return self._run_rusage(command, cwd, env)
        group = also or Group()
        sampler = Sampler(group)
        before = group.usage()
        sampler.start()
        started = time.monotonic()
        try:
            done = subprocess.run(
                group.wrap(command), cwd=cwd, env=env, capture_output=True, text=True
            )
            wall = time.monotonic() - started
            _wait_until_empty(group, keep=also is not None)
        finally:
            by_kind = sampler.stop()
            cpu = group.usage() - before
            if also is None:
                group.remove()
        if done.returncode != 0:
            raise SystemExit(
                f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        attributed = sum(by_kind.values())
        if also is None:
            by_kind["unattributed (short-lived)"] = max(cpu - attributed, 0.0)
        return {
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "by_kind": {k: round(v, 1) for k, v in sorted(by_kind.items())},
        }

    @staticmethod
    def _run_rusage(command: list[str], cwd: Path, env: dict[str, str]) -> dict:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "by_kind": {}}


def _wait_until_empty(group: Group, keep: bool, timeout: float = 30.0) -> None:
    """Processes that outlive the command (the pool's fork server ends just after the batch)
    still count: wait for them (not for a cluster kept in the group on purpose)."""
    if keep:
        return
    deadline = time.monotonic() + timeout
    while group.pids() and time.monotonic() < deadline:
        time.sleep(0.05)
