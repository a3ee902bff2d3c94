"""Which isolation level the sandbox runs at: detected once per process, chosen explicitly, or
refused.

Levels, strongest first (docs/security.md):
- `jail`: bubblewrap. The child sees a minimal filesystem (Python, the importable packages, a
  private work dir and /tmp on tmpfs), fresh namespaces, an unprivileged uid, Landlock.
- `uid`: root without namespaces (a Docker-style container): an unprivileged uid, Landlock.
- `landlock`: an unprivileged grader on a kernel with Landlock.
- `rlimits`: resource limits and the process-tree reaper only.
Every level adds per-submission accounting: a cgroup where the host gives a writable one
(`autograder.sandbox.cgroups`), else rlimits, CPU affinity and the reaper.

Never a privileged child: a root grader runs the child under a sandbox uid of its own with no
capabilities at EVERY level (`Isolation.separate_uid`); where that uid could not run Python (an
installation under a private home), no level but the jail (which binds Python at fresh 0755
parents) is available to a root grader, and grading is refused with what to change.

Secure by default, at every level: a level whose child could read the hidden files (checks,
mistake catalogues, reference) is refused. A level without a filesystem view of its own (`uid`
without Landlock, `rlimits`) relies on file permissions, so the entry points that know the
course also call `require_private(level, [course])`: the course (reference notebooks, other
submissions, the gradebook) must be unreadable to the sandbox uid (`attn-grade build` writes it
so). A same-uid child (`rlimits` under an unprivileged grader) can read whatever the grader
can: only with ATTN_GRADE_TRUSTED_CODE=1, for code that is not a student's.
"""

from __future__ import annotations

import os
import site
import stat
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from autograder.core.errors import IsolationError
from autograder.sandbox import cgroups, jail
from autograder.sandbox.inside.supervisor import landlock_abi

LEVELS = ("jail", "uid", "landlock", "rlimits")
ENVIRONMENT_VARIABLE = "ATTN_GRADE_ISOLATION"
TRUSTED_CODE_VARIABLE = "ATTN_GRADE_TRUSTED_CODE"  # "1": a same-uid child may read everything
WARM_VARIABLE = "ATTN_GRADE_WARM"  # "0": every sandbox starts cold (sandbox/warm.py)
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # autograder/


@dataclass(frozen=True)
class Isolation:
    level: str  # one of LEVELS
    landlock_abi: int  # 0: no Landlock layer; else the kernel's Landlock ABI version
    cgroup: str  # "v1", "v2" or "" (none writable: rlimits + affinity + reaper)
    explicit: bool = False  # chosen by the instructor rather than detected

    @property
    def jail(self) -> bool:
        return self.level == "jail"

    @property
    def separate_uid(self) -> bool:
        """The child runs under a uid of its own: always under a root grader, at every level."""
        return os.geteuid() == 0

    @property
    def warm(self) -> bool:
        """Whether sandboxes start forked from a template (sandbox/warm.py): only under a root
        grader (children under uids of their own); ATTN_GRADE_WARM=0 turns it off."""
        return self.separate_uid and os.environ.get(WARM_VARIABLE, "").strip() != "0"

    @property
    def own_filesystem_view(self) -> bool:
        """The child's reads are confined by a jail or Landlock, not file permissions alone."""
        return self.level == "jail" or (self.level != "rlimits" and self.landlock_abi > 0)

    def describe(self, warm: bool | None = None) -> str:
        """E.g. `jail(bwrap)+landlock-v7+cgroup-v1+warm`, `rlimits+reaper`: recorded in every
        result; `warm`: whether the child was forked from a template (default: `self.warm`)."""
        parts = [{"jail": "jail(bwrap)", "uid": "uid", "rlimits": "rlimits"}.get(self.level, "")]
        if self.landlock_abi and self.level != "rlimits":
            parts.append(f"landlock-v{self.landlock_abi}")
        parts.append(f"cgroup-{self.cgroup}" if self.cgroup else "reaper")
        if self.warm if warm is None else warm:
            parts.append("warm")
        return "+".join(part for part in parts if part)

    def protects_grader(self) -> bool:
        """The child cannot signal the grader (pid namespace, uid, Landlock ABI 6 scoping)."""
        return self.level in ("jail", "uid") or self.landlock_abi >= 6

    def safe_by_default(self) -> bool:
        return self.hides_hidden_files() and self.protects_grader()

    def hides_hidden_files(self) -> bool:
        """Whether the child cannot read the checks, the catalogues or the reference."""
        return self.hides(hidden_paths())

    def hides(self, paths: list[Path]) -> bool:
        """Whether the child cannot read below any of `paths`."""
        if self.own_filesystem_view:
            return True  # not bound into the jail / not in Landlock's readable set
        if self.separate_uid:
            return not any(_others_can_read(path) for path in paths if path.exists())
        return False  # the grader's own uid reads what the grader reads


HIDDEN_PACKAGES = ("autograder",)  # the exercises' checks, catalogues and references
LINKED_HIDDEN = "_reference"  # in a checkout, a link to the top level reference/


def hidden_paths() -> list[Path]:
    """What the child must never read: the grader package (checks, mistake catalogues) and the
    reference solutions, wherever they are installed (checkout, wheel, sdist) and every other
    importable copy (a wheel beside a checkout, a .pth path); a checkout's `reference/` too."""
    found = {PACKAGE_DIR}
    for entry in _import_roots():
        for name in HIDDEN_PACKAGES:
            candidate = Path(entry) / name
            if (candidate / "__init__.py").is_file():
                found.add(candidate.resolve())
    linked = {(package / LINKED_HIDDEN).resolve() for package in found}
    return sorted(found | {p for p in linked if p.is_dir() and not found & set(p.parents)})


def _import_roots() -> list[str]:
    """Directories the child's interpreter may import packages from: this process's path
    (site-packages, .pth additions) and every site-packages of the Python roots."""
    roots = {p for p in sys.path if p and os.path.isdir(p)}
    for root in python_roots():
        for pattern in ("lib*/python*/site-packages", "lib/python*/dist-packages"):  # lib64 too
            roots.update(str(p) for p in Path(root).glob(pattern))
    return sorted(roots)


def _others_can_enter(path: str) -> bool:
    """Whether a uid with no group in common can reach `path` (search permission all the way)."""
    current = Path(os.path.realpath(path))
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in [current, *current.parents])


def _others_can_read(path: Path) -> bool:
    """True when a uid with no group in common could read files below `path` (walks up the
    ancestors for search permission, and down to any world-readable file)."""
    for ancestor in [path, *path.parents]:
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return False
    for root, dirs, files in os.walk(path):
        mode = os.stat(root).st_mode
        if not mode & stat.S_IXOTH:
            dirs[:] = []
            continue
        for name in files:
            if os.stat(os.path.join(root, name)).st_mode & stat.S_IROTH:
                return True
    return False


# -- detection ---------------------------------------------------------------------------------
def python_roots() -> list[str]:
    """The Python installation the child runs with: interpreter, stdlib, site-packages."""
    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *site.getsitepackages(),
        # package directories added by .pth files (e.g. a venv layered on another's packages)
        *(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")),
    }
    paths |= {os.path.realpath(path) for path in paths}
    existing = sorted(path for path in paths if os.path.isdir(path))
    # keep only the outermost of nested roots
    return [p for p in existing if not any(p != q and p.startswith(q + os.sep) for q in existing)]


# No /etc directory: only the few files Python needs (not /etc/shadow, not the host's config).
SYSTEM_READ = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/sys", "/dev"]
# /proc entries that belong to no process (cpuinfo, meminfo, sys, ...); the child's own
# /proc/PID is added by the supervisor after the fork, without its `net` listing.
PROC_NOT_SHARED = ("self", "thread-self", "net")


def proc_shared_entries() -> list[str]:
    """/proc without any process's directory and without the network listings, which outside a
    network namespace show the host's UNIX socket paths (a fork server's, a grader's)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [
        f"/proc/{name}"
        for name in names
        if not name.isdigit()
        and name not in PROC_NOT_SHARED
        and not os.path.islink(f"/proc/{name}")  # `mounts` -> self/mounts: the grader's
    ]


ETC_READ = ["/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"]


def readable_paths(exclude: list[Path] | None = None) -> list[str]:
    """Where the child may read and execute under Landlock: Python and system directories,
    with the hidden paths (and only them) cut out of any root that contains them."""
    roots = [*python_roots(), *[p for p in SYSTEM_READ + ETC_READ if os.path.exists(p)]]
    roots += proc_shared_entries()
    excluded = [str(path) for path in (exclude if exclude is not None else hidden_paths())]
    allowed: list[str] = []
    for root in roots:
        allowed += _cut_out(os.path.realpath(root), excluded)
    return sorted(set(allowed))


def listable_paths(exclude: list[Path] | None = None) -> list[str]:
    """Directories between a readable root and a hidden path: the child may list them (Python
    lists site-packages to find modules and .pth files) but gets no files there but through
    `readable_paths`."""
    roots = [os.path.realpath(root) for root in python_roots()]
    excluded = [str(path) for path in (exclude if exclude is not None else hidden_paths())]
    found: set[str] = set()
    for path in excluded:
        for root in roots:
            if path.startswith(root + os.sep):
                parent = os.path.dirname(path)
                while parent.startswith(root):
                    found.add(parent)
                    parent = os.path.dirname(parent)
    return sorted(found)


def _cut_out(root: str, excluded: list[str]) -> list[str]:
    """`root`, or, when an excluded path lies below it, its entries except that branch."""
    if any(root == path for path in excluded):
        return []
    inside = [path for path in excluded if path.startswith(root + os.sep)]
    if not inside:
        return [root]
    try:
        entries = os.listdir(root)
    except OSError:
        return []
    allowed: list[str] = []
    for entry in entries:
        path = os.path.join(root, entry)
        target = os.path.realpath(path)
        if target != path and any(p == target or p.startswith(target + os.sep) for p in inside):
            continue  # a symlink (a venv's lib64 -> lib) would grant the hidden path through it
        allowed += _cut_out(path, inside)
    return allowed


def _jail_works() -> bool:
    return jail.probe()


def _probe_level(level: str) -> Isolation | None:
    abi = _landlock()
    cgroup = _cgroups()
    if level == "jail":
        return Isolation("jail", abi, cgroup) if _jail_works() else None
    if private_python():
        return None  # the sandbox uid could not run Python: never a root child instead
    if level == "uid":
        return Isolation("uid", abi, cgroup) if os.geteuid() == 0 else None
    if level == "landlock":
        return Isolation("landlock", abi, cgroup) if abi else None
    return Isolation("rlimits", 0, cgroup)


def _landlock() -> int:
    """The kernel's Landlock ABI (0: none); ATTN_GRADE_LANDLOCK=0 turns it off, as on kernels
    without it (how the tests measure what a child reaches there)."""
    return 0 if os.environ.get("ATTN_GRADE_LANDLOCK", "").strip() == "0" else landlock_abi()


def _cgroups() -> str:
    """The cgroup version to use; ATTN_GRADE_CGROUPS=0 turns them off (the rlimits + reaper
    fallback, as on hosts without writable cgroups)."""
    return "" if os.environ.get("ATTN_GRADE_CGROUPS", "").strip() == "0" else cgroups.detect()


@cache
def detect() -> Isolation:
    """The strongest level this host offers (whether or not it may be used: see `choose`)."""
    for level in LEVELS:
        found = _probe_level(level)
        if found is not None:
            return found
    raise IsolationError(private_python_message())  # rlimits is refused only for this reason


def requested() -> str | None:
    """The level chosen through the environment (also how the config setting reaches workers)."""
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    return value or None


def choose(level: str | None = None) -> Isolation:
    """The level to grade at: `level` (or $ATTN_GRADE_ISOLATION) when given, else the detected
    one. IsolationError when a requested level is unavailable, or when nothing was requested
    and the detected level would let the child read the hidden files."""
    return _choose(level or requested() or "auto")


@cache
def _choose(level: str) -> Isolation:
    if level == "auto":
        found = detect()
        if not found.safe_by_default():
            raise IsolationError(refusal_message(found))
        return found
    if level not in LEVELS:
        raise IsolationError(f"unknown isolation level {level!r}; choose from {', '.join(LEVELS)}")
    probed = _probe_level(level)
    if probed is None and level != "jail" and private_python():
        raise IsolationError(private_python_message(level))
    if probed is None:
        raise IsolationError(f"isolation level {level!r} is not available here: " + _missing(level))
    chosen = Isolation(probed.level, probed.landlock_abi, probed.cgroup, explicit=True)
    if not chosen.hides_hidden_files() and not trusted_code():
        raise IsolationError(
            f"refusing to grade at {level!r}: its child could read the hidden checks and "
            "reference solutions (" + _unhidden_reason(chosen) + f"). {TRUSTED_CODE_VARIABLE}=1 "
            "allows it for code that is not a student's."
        )
    return chosen


def trusted_code() -> bool:
    """The instructor said the graded code is their own (never a student's)."""
    return os.environ.get(TRUSTED_CODE_VARIABLE, "").strip() == "1"


def _unhidden_reason(level: Isolation) -> str:
    if not level.separate_uid:
        return "it runs under the grader's own uid"
    return "the installed package is readable by other users: chmod -R o-rwx it"


def require_private(level: Isolation, paths: list[Path]) -> None:
    """Refuse (IsolationError) when the child at `level` could read below one of `paths` (the
    course: source notebooks with the reference filled in, other students' submissions, the
    gradebook). A jail or Landlock hides them; permissions must otherwise."""
    if level.hides(paths) or trusted_code():
        return
    exposed = ", ".join(str(p) for p in paths if not level.hides([p]))
    raise IsolationError(
        f"refusing to grade at {level.level!r}: its child could read {exposed} (a level without "
        "a filesystem view of its own relies on file permissions). Make it unreadable to "
        f"other users (chmod -R o-rwx {exposed}; `attn-grade build` writes courses so), or use "
        "a level with a jail or Landlock."
    )


def private_python() -> list[str]:
    """The parts of this Python that a root grader's sandbox uid cannot enter (e.g. /root)."""
    if os.geteuid() != 0:
        return []
    return [root for root in python_roots() if not _others_can_enter(root)]


def private_python_message(level: str | None = None) -> str:
    """Why a root grader with a private Python gets no level (or not `level`): what to change."""
    from autograder.sandbox import jail

    roots = private_python()
    closed = sorted({_closed_ancestor(root) for root in roots})
    what = f"isolation level {level!r} is not available here" if level else "refusing to grade"
    jail_remedy = (
        "install bubblewrap (`apt-get install bubblewrap`) and grade at the default level: "
        if jail.bwrap() is None
        else "grade in the jail (--isolation jail, the default where bubblewrap works): "
    )
    return (
        f"{what}: the grader runs as root, student code never does, and the uid it runs under "
        f"cannot run this Python ({', '.join(roots)}: other users cannot enter "
        f"{', '.join(closed)}). Either {jail_remedy}the jail binds Python into the sandbox; or "
        "run attn-grade from a Python that other users can read, e.g. a venv of Debian's "
        "world-readable python3 (`/usr/bin/python3 -m venv /opt/attn-grade`, then install "
        "attn-grade into it)."
    )


def _closed_ancestor(path: str) -> str:
    """The outermost directory on the way to `path` that other users cannot enter."""
    current = Path(os.path.realpath(path))
    for candidate in [*reversed(current.parents), current]:
        if not os.stat(candidate).st_mode & stat.S_IXOTH:
            return str(candidate)
    return str(current)


def _missing(level: str) -> str:
    if level == "jail":
        return jail.missing()
    return {
        "uid": "the grader must run as root to start the child under a uid of its own",
        "landlock": "a Linux kernel with Landlock (5.13 or later, enabled in the LSM list)",
    }.get(level, "")  # a root grader's private Python: private_python_message()


def refusal_message(found: Isolation) -> str:
    hides = found.hides_hidden_files()
    danger = (
        "kill the grading process (Landlock older than ABI 6 does not scope signals)"
        if hides
        else "read the hidden checks and reference solutions"
    )
    anyway = (
        f"To grade anyway at this level, choose it explicitly: --isolation {found.level} (or "
        f"{ENVIRONMENT_VARIABLE}={found.level})."
        if hides
        else f"Only code that is not a student's may run there ({TRUSTED_CODE_VARIABLE}=1)."
    )
    return (
        f"refusing to grade: the strongest isolation this host offers ({found.level}) would let "
        f"student code {danger}. For the jail: "
        f"{_missing('jail')}. Or root (uid level) with the installed package not readable by "
        "other users; or a kernel with Landlock ABI 6 or later (Linux 6.12). " + anyway
    )
