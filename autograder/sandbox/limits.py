"""Resource limits of one sandbox, enforced from outside the child."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 << 30  # address space (RLIMIT_AS)
    cpu_seconds: int = 900  # CPU time of the child (RLIMIT_CPU)
    file_size_bytes: int = 64 << 20  # largest file it may write (RLIMIT_FSIZE)
    processes: int = 512  # processes and threads of the user (RLIMIT_NPROC; not for root)
    open_files: int = 256  # RLIMIT_NOFILE
    output_bytes: int = 4 << 20  # stdout+stderr; the sandbox is killed past this
    message_bytes: int = 128 << 20  # largest response frame the parent accepts (arrays)
    header_bytes: int = 2 << 20  # largest JSON part of a response frame (bounds parse memory)
    start_timeout: float = 90.0  # seconds for the child to import torch and answer its first ping
    # All processes of one submission together (a cgroup where the host gives one):
    group_memory_bytes: int = 4 << 30  # memory.max / memory.limit_in_bytes
    group_processes: int = 256  # pids.max
    cpus: float = 1.0  # CPU share: at most one core
    work_bytes: int = 512 << 20  # size of the jail's tmpfs work dir and of its /tmp

    def rlimits(self) -> dict[str, tuple[int, int]]:
        return {
            "RLIMIT_AS": (self.memory_bytes, self.memory_bytes),
            "RLIMIT_CPU": (self.cpu_seconds, self.cpu_seconds + 5),
            "RLIMIT_FSIZE": (self.file_size_bytes, self.file_size_bytes),
            "RLIMIT_NPROC": (self.processes, self.processes),
            "RLIMIT_NOFILE": (self.open_files, self.open_files),
            "RLIMIT_CORE": (0, 0),
        }
