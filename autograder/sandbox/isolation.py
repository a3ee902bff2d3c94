"""What isolation this host gives the sandbox, detected once per process."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from functools import cache

from autograder.sandbox.supervisor import landlock_abi

NAMESPACE_FLAGS = (
    "--user",
    "--map-root-user",
    "--net",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount",
    "--mount-proc",
)


@dataclass(frozen=True)
class Isolation:
    namespaces: bool  # user + pid + net + mount namespaces via util-linux `unshare`
    landlock_abi: int  # 0: no Landlock; else the kernel's Landlock ABI version

    def describe(self) -> str:
        """E.g. `rlimits+landlock-v7+namespaces(user,pid,net,mount)`."""
        parts = ["rlimits", "process-tree-kill"]
        if self.landlock_abi:
            parts.append(f"landlock-v{self.landlock_abi}")
        if self.namespaces:
            parts.append("namespaces(user,pid,net,mount)")
        return "+".join(parts)

    def command_prefix(self) -> list[str]:
        return [shutil.which("unshare"), *NAMESPACE_FLAGS] if self.namespaces else []


def _namespaces_work() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        probe = subprocess.run(
            [unshare, *NAMESPACE_FLAGS, sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0 and probe.stdout.strip() == "1"


@cache
def detect() -> Isolation:
    """Probe the host. ATTN_GRADE_ISOLATION=rlimits turns the optional layers off (for tests)."""
    if os.environ.get("ATTN_GRADE_ISOLATION") == "rlimits":
        return Isolation(namespaces=False, landlock_abi=0)
    return Isolation(namespaces=_namespaces_work(), landlock_abi=landlock_abi())


def readable_paths() -> list[str]:
    """Where the child may read and execute: the Python installation and system libraries."""
    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *site.getsitepackages(),
    }
    paths |= {os.path.realpath(path) for path in paths}
    system = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev"]
    return sorted(path for path in paths | set(system) if os.path.exists(path))
