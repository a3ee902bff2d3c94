"""A container the way Gradescope runs its autograder (Docker): root, Docker's default
capabilities (no CAP_SYS_ADMIN, no CAP_NET_ADMIN), the default seccomp profile, cgroups
read-only. Rootful podman with no image: its root file system is an empty folder with this
host's /usr and /etc bound read-only (Debian's python3.11 is the grader's interpreter), this
venv's site-packages bound read-only at its own path (the grader's dependencies, as in
tests/support/wheel_venv.py), and the test's /autograder bound read-write.

Podman reads the containers.conf written here (CONTAINERS_CONF) and nothing else: Docker's
capability list, `runc` (crun refuses the hybrid cgroups of a host that is itself a container)
and open-file and process limits of 16384 (podman's defaults are above what a host without
CAP_SYS_RESOURCE may set). `apt-get install podman runc` (README, .ci/run) installs it.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PYTHON = Path("/usr/bin/python3.11")  # world-readable, at the same path inside
# Docker's default capabilities (moby's oci/caps/defaults.go); Gradescope adds none
DOCKER_CAPABILITIES = [
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
    "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
]  # fmt: skip
CONTAINERS_CONF = """\
[containers]
default_capabilities = [{caps}]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]
[engine]
runtime = "runc"
"""


def missing() -> str | None:
    """Why no container can be started here, or None."""
    for tool in ("podman", "runc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install podman runc)"
    if not PYTHON.exists():
        return f"needs Debian's world-readable {PYTHON}"
    return None


@dataclass
class Container:
    """Runs commands in fresh containers over one /autograder folder of the host."""

    base: Path  # holds the root file system, containers.conf and the autograder folder
    autograder: Path = field(init=False)

    def __post_init__(self) -> None:
        rootfs = self.base / "rootfs"
        rootfs.mkdir(parents=True)
        for name in ("bin", "lib", "lib64", "sbin"):  # merged /usr, as on the host
            (rootfs / name).symlink_to(f"usr/{name}")
        caps = ", ".join(f'"{cap}"' for cap in DOCKER_CAPABILITIES)
        (self.base / "containers.conf").write_text(CONTAINERS_CONF.format(caps=caps))
        self.autograder = self.base / "autograder"
        self.autograder.mkdir(mode=0o755)
        self.autograder.chmod(0o755)  # as in an image: others may enter (to reach the venv)

    @property
    def packages(self) -> str:
        return site.getsitepackages()[0]

    def run(self, script: str, *options: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """`bash -c script` as root in a fresh container (`options` go to `podman run`)."""
        command = [
            "podman", "run", "--rm", "--network=none", "--read-only",
            "-v", "/usr:/usr:ro", "-v", "/etc:/etc:ro",
            "-v", f"{self.packages}:{self.packages}:ro",
            "-v", f"{self.autograder}:/autograder",
            "-e", "PIP_CONFIG_FILE=/dev/null",
            *options, "--rootfs", str(self.base / "rootfs"), "/usr/bin/bash", "-c", script,
        ]  # fmt: skip
        env = {**os.environ, "CONTAINERS_CONF": str(self.base / "containers.conf")}
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
