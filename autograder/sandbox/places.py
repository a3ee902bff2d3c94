"""Where one sandbox's child runs: its work dir, the runtime it runs from, the command that
starts a cold supervisor (bubblewrap's in the jail) or the mounts a warm one makes, and the
paths Landlock lets it read, write and list."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.sandbox import isolation, jail
from autograder.sandbox.limits import Limits
from autograder.sandbox.plumbing import (
    RUNTIME_DIR,
    RUNTIME_FILES,
    SUPERVISOR,
    jail_files,
    jail_runtime,
    mpl_font_files,
)


@dataclass
class Places:
    work: Path  # the child's work dir, as it sees it
    script_dir: str  # where it finds child.py
    readable: list[str]
    writable: list[str]
    listable: list[str]
    workdir: Path | None = None  # the work dir on the host, outside the jail: removed at close
    command: list[str] = field(default_factory=list)  # a cold supervisor's
    file_fds: list[int] = field(default_factory=list)  # to pass to it (bubblewrap's --file)
    fresh: dict | None = None  # a warm supervisor's own mounts in the template's jail


def prepare(iso: isolation.Isolation, limits: Limits, warm: bool, child_uid: int | None) -> Places:
    """The places of a sandbox at `iso`, started warm (from a template) or cold."""
    if not iso.jail:
        return _outside_the_jail(warm)
    runtime = jail_runtime()
    inside_uid = child_uid if child_uid is not None else jail.SANDBOX_USER_ID
    work, script_dir = Path(jail.WORK_MOUNT), jail.RUNTIME_MOUNT
    # the jail's /proc is its own (pid and network namespaces): all of it is the child's
    readable = [*isolation.python_roots(), *isolation.SYSTEM_READ, "/proc", script_dir]
    readable += jail.ETC_FILES + tuple(jail.passwd_files(inside_uid))
    # hidden packages are masked by empty directories: nothing to list
    found = Places(work, script_dir, readable, [str(work), "/tmp", os.devnull], [])
    if warm:  # the template's jail: this sandbox's own mounts, made by its supervisor
        found.fresh = {
            "work": str(work),
            "work_bytes": limits.work_bytes,
            "subdirs": list(jail.WORK_SUBDIRS),
            "etc": {k: v.decode() for k, v in jail.passwd_files(inside_uid).items()},
            "etc_copies": list(jail.ETC_FILES),
            # bound read-only roots the fresh /tmp would cover (a venv below the host's /tmp)
            "keep_below_tmp": [r for r in isolation.python_roots() if _below("/tmp", r)],
        }
        return found
    files = {dest: runtime / name for dest, name in jail_files(inside_uid).items()}
    found.file_fds = [os.open(path, os.O_RDONLY | os.O_CLOEXEC) for path in files.values()]
    found.command = jail.command(
        roots=isolation.python_roots(),
        hidden=isolation.hidden_paths(),
        runtime_dir=runtime,
        files=dict(zip(files, found.file_fds, strict=True)),
        work_bytes=limits.work_bytes,
        unprivileged=os.geteuid() != 0,
        argv=[sys.executable, "-s", "-I", f"{script_dir}/supervisor.py"],
    )
    return found


def _outside_the_jail(warm: bool) -> Places:
    workdir = Path(tempfile.mkdtemp(prefix="attn-grade-sandbox-"))
    for sub in jail.WORK_SUBDIRS:
        (workdir / sub).mkdir()
    for name, content in mpl_font_files().items():
        (workdir / "mpl" / name).write_bytes(content)
    readable, writable = isolation.readable_paths(), [str(workdir), os.devnull]
    if warm:  # the template's modules came from the public runtime copy: its sources
        runtime = jail_runtime()
        readable.append(str(runtime))
        command = []
    else:
        runtime = workdir / ".runtime"
        runtime.mkdir()
        for name in RUNTIME_FILES:
            shutil.copy(RUNTIME_DIR / name, runtime / name)
        command = [sys.executable, "-s", "-I", str(SUPERVISOR)]
    listable = isolation.listable_paths()
    return Places(workdir, str(runtime), readable, writable, listable, workdir, command)


def _below(folder: str, path: str) -> bool:
    return os.path.commonpath([folder, os.path.abspath(path)]) == folder
