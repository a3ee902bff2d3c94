"""The jail: a bubblewrap command line that gives the supervisor (and so the child) a minimal
filesystem and fresh namespaces.

What the child sees:
- read-only: /usr (with the /bin, /lib, ... links of a merged-/usr system), the Python
  installation and the virtual environment's packages (the grader's own packages, `autograder`
  and `reference`, masked by empty read-only tmpfs wherever they are installed), the runtime
  (supervisor, child, wire protocol, probes) at /opt/attn-grade, and from /etc only
  ld.so.cache and a passwd/group naming the sandbox user;
- writable: /sandbox (its work dir) and /tmp, both size-limited tmpfs that vanish with it;
- a private /proc and a minimal /dev; no /run, /var, /home, /srv, host /tmp, course, gradebook
  or other submission; new pid, net (loopback only), ipc, uts and cgroup namespaces, a new
  session, and death with the grader.
Identity: a root grader runs bubblewrap as root (no user namespace is needed to mount) and the
supervisor starts the child under a sandbox uid of its own (`identity`), so host files are
never opened with root's identity; an unprivileged grader runs bubblewrap in a new user
namespace (`--unshare-user --disable-userns`) under its own uid.
Where it runs: a root grader's bubblewrap needs CAP_SYS_ADMIN (namespaces, mounts) and
CAP_NET_ADMIN (the loopback), which a container with Docker's or podman's default capabilities
(Gradescope) lacks; an unprivileged grader needs unprivileged user namespaces. `missing()` says
which is missing here, for the refusal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from autograder.core.errors import IsolationError

RUNTIME_MOUNT = "/opt/attn-grade"
WORK_MOUNT = "/sandbox"
SANDBOX_USER_ID = 1000  # the uid inside a user namespace (unprivileged grader)
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
WORK_SUBDIRS = ("home", "tmp", "mpl")


def bwrap() -> str | None:
    return shutil.which("bwrap") or next(
        (path for path in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(path, os.X_OK)), None
    )


def _ancestors(paths: list[str]) -> list[str]:
    found: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent not in ("/", ""):
            found.add(parent)
            parent = os.path.dirname(parent)
    return sorted(found, key=lambda p: (p.count("/"), p))


def _masks(roots: list[str], hidden: list[Path]) -> list[str]:
    """Hidden paths that lie inside a bound root (they get an empty read-only tmpfs)."""
    masks = []
    for path in (str(p) for p in hidden):
        if any(path == root or path.startswith(root + os.sep) for root in roots):
            masks.append(path)
    return masks


def command(
    *,
    roots: list[str],
    hidden: list[Path],
    runtime_dir: Path,
    files: dict[str, int],
    work_bytes: int,
    unprivileged: bool,
    argv: list[str],
    environment: dict[str, str] | None = None,
) -> list[str]:
    """The bubblewrap argv that runs `argv` in the jail. `files` maps a path inside the jail to
    an open fd whose content bubblewrap copies there (the fd must be passed to the process);
    `environment`, if given, is the whole environment `argv` gets (else only PATH)."""
    binary = bwrap()
    if binary is None:
        raise IsolationError("bubblewrap (bwrap) is not installed")
    args = [binary, "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try"]
    if unprivileged:
        args += ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_USER_ID)]
        args += ["--gid", str(SANDBOX_USER_ID), "--cap-drop", "ALL"]
    # the private /tmp first: a bound root may itself live below the host's /tmp
    args += ["--size", str(work_bytes), "--perms", "01777", "--tmpfs", "/tmp"]
    args += ["--size", str(work_bytes), "--perms", "0755", "--tmpfs", WORK_MOUNT]
    destinations = [*roots, RUNTIME_MOUNT]
    for directory in _ancestors(destinations):
        if directory != "/usr":
            args += ["--perms", "0755", "--dir", directory]
    args += ["--ro-bind", "/usr", "/usr"]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for root in roots:
        if not root.startswith("/usr/"):
            args += ["--ro-bind", root, root]
    for mask in _masks(roots, hidden):
        args += ["--perms", "0555", "--tmpfs", mask, "--remount-ro", mask]
    args += ["--ro-bind", str(runtime_dir), RUNTIME_MOUNT]
    # made explicitly: as the parent of the files below, bubblewrap would make it 0700, and
    # the child (not root) could read neither its passwd nor ld.so.cache
    args += ["--perms", "0755", "--dir", "/etc"]
    for etc in ETC_FILES:
        args += ["--ro-bind-try", etc, etc]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for sub in WORK_SUBDIRS:
        args += ["--perms", "0755", "--dir", f"{WORK_MOUNT}/{sub}"]
    for dest, fd in files.items():
        args += ["--perms", "0644", "--file", str(fd), dest]
    args += ["--chmod", "0755", "/"]
    args += ["--chdir", WORK_MOUNT, "--clearenv"]
    for name, value in (environment or {"PATH": "/usr/bin:/bin"}).items():
        args += ["--setenv", name, value]
    return [*args, "--", *argv]


def passwd_files(uid: int) -> dict[str, bytes]:
    """/etc/passwd and /etc/group naming the sandbox user (Python's getpass and friends)."""
    return {
        "/etc/passwd": (
            f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
            f"student:x:{uid}:{uid}:student:{WORK_MOUNT}/home:/usr/sbin/nologin\n"
        ).encode(),
        "/etc/group": f"root:x:0:\nstudent:x:{uid}:\n".encode(),
    }


@cache
def probe() -> bool:
    """Whether bubblewrap runs here with the namespaces the jail needs (as this user)."""
    path = bwrap()
    if path is None:
        return False
    unprivileged = os.geteuid() != 0
    runtime = Path(tempfile.mkdtemp(prefix="attn-grade-jail-probe-"))
    try:
        argv = command(
            roots=[],
            hidden=[],
            runtime_dir=runtime,
            files={},
            work_bytes=1 << 20,
            unprivileged=unprivileged,
            argv=["/bin/sh", "-c", "echo $$"],
        )
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    return done.returncode == 0 and done.stdout.strip() in ("1", "2")


CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21


def effective_capabilities() -> int:
    """This process's effective capability set (CapEff in /proc/self/status; 0 if unknown)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def missing() -> str:
    """What the jail needs here: a root grader runs bubblewrap without a user namespace (it
    needs CAP_SYS_ADMIN for the namespaces and mounts, CAP_NET_ADMIN for the loopback), which
    a container does not grant by default; an unprivileged one needs user namespaces."""
    install = [] if bwrap() else ["bubblewrap is not installed (`apt-get install bubblewrap`)"]
    if os.geteuid() != 0:
        needs = (
            "an unprivileged grader runs bubblewrap in a user namespace: it needs unprivileged "
            "user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
            "user.max_user_namespaces > 0)"
        )
        return "; ".join([*install, needs])
    caps = effective_capabilities()
    lacking = [
        name
        for bit, name in ((CAP_SYS_ADMIN, "CAP_SYS_ADMIN"), (CAP_NET_ADMIN, "CAP_NET_ADMIN"))
        if not caps >> bit & 1
    ]
    needs = (
        "a root grader runs bubblewrap without a user namespace, which needs the capabilities "
        "CAP_SYS_ADMIN and CAP_NET_ADMIN"
    )
    if lacking:
        needs += (
            f"; this process lacks {' and '.join(lacking)}, as in a container by default "
            "(Docker, podman and Gradescope grant neither; a container started with "
            "`--cap-add SYS_ADMIN --cap-add NET_ADMIN` has them). Without them the strongest "
            "level is `uid`, with Landlock where the host's kernel has it"
        )
    return "; ".join([*install, needs])
