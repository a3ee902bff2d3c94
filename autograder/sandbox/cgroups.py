"""Per-submission accounting with cgroups: all processes of one sandbox together are limited in
memory, process count and CPU share (one core).

cgroup v2 (a unified hierarchy where this process may create a group with the memory, pids and
cpu controllers) or v1 (the memory, pids and cpu hierarchies mounted writable, as on the grading
machines). Where neither is writable, `detect()` says "" and the sandbox falls back to rlimits,
CPU affinity and the supervisor's reaper.
"""

from __future__ import annotations

import os
import time
import uuid
from functools import cache
from pathlib import Path

from autograder.sandbox.killing import kill_until_gone

ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")
BASE = "attn-grade"
PERIOD_US = 100_000


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _v2_base() -> Path | None:
    if not (ROOT / "cgroup.controllers").exists():
        return None
    wanted = {"memory", "pids", "cpu"}
    if not wanted <= set((ROOT / "cgroup.controllers").read_text().split()):
        return None
    base = ROOT / BASE
    base.mkdir(exist_ok=True)
    for group in (ROOT, base):
        enabled = set((group / "cgroup.subtree_control").read_text().split())
        if not wanted <= enabled:
            _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
    return base


def _v1_bases() -> list[Path] | None:
    bases = []
    for controller in V1_CONTROLLERS:
        hierarchy = ROOT / controller
        if not (hierarchy / "cgroup.procs").exists():
            return None
        base = hierarchy / BASE
        base.mkdir(exist_ok=True)
        bases.append(base)
    return bases


@cache
def detect() -> str:
    """ "v2", "v1" or "" (no writable cgroups): tried by creating and removing a probe group."""
    try:
        if os.geteuid() != 0:
            return ""
        if _v2_base() is not None:
            probe = Group.create("v2", memory_bytes=64 << 20, processes=8)
            probe.remove()
            return "v2"
        if _v1_bases() is not None:
            probe = Group.create("v1", memory_bytes=64 << 20, processes=8)
            probe.remove()
            return "v1"
    except OSError:
        pass
    return ""


def _sweep(version: str) -> None:
    """Remove groups left by grading processes that were killed (their pid is the prefix)."""
    found = [_v2_base()] if version == "v2" else _v1_bases()
    for base in [base for base in found or [] if base is not None]:
        for group in base.iterdir():
            owner = group.name.split("-", 1)[0]
            if not group.is_dir() or not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                continue
            try:
                if not (group / "cgroup.procs").read_text().split():
                    group.rmdir()
            except OSError:
                pass


class Group:
    """One sandbox's cgroup (one directory per v1 hierarchy, or one v2 directory)."""

    def __init__(self, version: str, paths: list[Path]):
        self.version = version
        self.paths = paths

    @classmethod
    def create(cls, version: str, *, memory_bytes: int, processes: int, cpus: float = 1.0):
        _sweep(version)
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        quota = str(int(PERIOD_US * cpus))
        if version == "v2":
            base = _v2_base()
            if base is None:
                raise OSError("the cgroup v2 hierarchy is no longer usable")
            path = base / name
            path.mkdir()
            group = cls("v2", [path])
            _write(path / "memory.max", str(memory_bytes))
            if (path / "memory.swap.max").exists():
                _write(path / "memory.swap.max", "0")
            _write(path / "pids.max", str(processes))
            _write(path / "cpu.max", f"{quota} {PERIOD_US}")
            return group
        bases = _v1_bases()
        if bases is None:
            raise OSError("the cgroup v1 hierarchies are no longer usable")
        memory, pids, cpu = (base / name for base in bases)
        group = cls("v1", [memory, pids, cpu])
        for path in group.paths:
            path.mkdir()
        _write(memory / "memory.limit_in_bytes", str(memory_bytes))
        if (memory / "memory.memsw.limit_in_bytes").exists():
            _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
        _write(pids / "pids.max", str(processes))
        _write(cpu / "cpu.cfs_period_us", str(PERIOD_US))
        _write(cpu / "cpu.cfs_quota_us", quota)
        return group

    def add(self, pid: int) -> None:
        for path in self.paths:
            _write(path / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        try:
            text = (self.paths[0] / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(line) for line in text.split()]

    def contains(self, pid: int) -> bool:
        return pid in self.pids()

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this group for its memory limit."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            for line in (self.paths[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def kill_all(self) -> None:
        """SIGKILL every process of the group until it is empty."""
        if self.version == "v2" and (self.paths[0] / "cgroup.kill").exists():
            try:
                _write(self.paths[0] / "cgroup.kill", "1")
            except OSError:
                pass
        kill_until_gone(self.pids, rounds=200, pause=0.005)

    def remove(self) -> None:
        self.kill_all()
        for path in self.paths:
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
