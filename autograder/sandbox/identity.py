"""A uid of its own for each running sandbox (when the grader is root).

Each sandbox's processes run under a uid that no user of the host has and no other sandbox
uses at the same time: they cannot signal or trace the grader or another submission, read
files that are not world-readable, and RLIMIT_NPROC counts one submission only. A slot is held
with an flock on a file in a root-only directory for the sandbox's lifetime, so concurrent
graders (batch workers are separate processes) never share a uid.

The slots live in one fixed, root-owned directory (never under $TMPDIR: two graders with
different temporary directories would otherwise hand out the same uid, and one's teardown
would kill the other's sandbox). A uid is swept when it is taken: a process left running
under it (a grader killed with SIGKILL frees its slot at once) is killed before the uid is
handed to the next submission, so it can never signal or trace that submission.

Where a child could write outside its work dir (the `uid` level without Landlock), what its uid
left in the world-writable folders is removed when its sandbox closes (`remove_files_of`). A
slot whose sweep did not run (its grader was killed) or did not finish is marked in its lock
file; the next grader that takes the slot sweeps first, and passes the slot over while the
sweep cannot finish, so no submission meets files an earlier one left under its uid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pwd
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from autograder.sandbox.killing import kill_until_gone

FIRST_UID = 1_900_000_000
SLOTS = 4096
# /run is root's tmpfs on every systemd (and most other) Linux hosts; /tmp is the fallback
LOCK_PARENTS = (Path("/run"), Path("/tmp"))
LOCK_NAME = "attn-grade-uids"


class SandboxUid:
    """A held uid (also used as the gid); `release()` frees it."""

    def __init__(self, uid: int, lock_fd: int):
        self.uid = uid
        self._lock_fd = lock_fd

    @property
    def slot(self) -> int:
        return self.uid - FIRST_UID

    def mark_dirty(self) -> None:
        """Say in the slot's lock file that files of this uid may be left outside the work dir
        (until `mark_clean`): a grader killed before its sweep leaves the mark for the next."""
        _write_mark(self._lock_fd, DIRTY)

    def mark_clean(self) -> None:
        _write_mark(self._lock_fd, b"")

    def release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


DIRTY = b"files may be left\n"


def _write_mark(fd: int, mark: bytes) -> None:
    if fd >= 0:
        os.ftruncate(fd, 0)
        if mark:
            os.pwrite(fd, mark, 0)


def _is_dirty(fd: int) -> bool:
    return bool(os.pread(fd, len(DIRTY), 0))


def _unused(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False


def lock_directory() -> Path:
    """The directory of the slot locks: root's own, mode 0700, not a symlink (a directory
    someone else made there could hand out a uid twice); RuntimeError if none can be had."""
    problems = []
    for parent in LOCK_PARENTS:
        folder = parent / LOCK_NAME
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            problems.append(f"{folder}: {error.strerror}")
            continue
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            problems.append(f"{folder} is not a directory of uid {os.geteuid()}")
            continue
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(folder, 0o700)
        return folder
    raise RuntimeError("no directory for the sandbox uid locks: " + "; ".join(problems))


def processes_of(uid: int) -> list[int]:
    """The pids of the processes running as `uid` (by their /proc entry's owner)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    found.append(int(entry))
            except OSError:
                continue
    return found


# Run as the sandbox uid: kill(-1) signals every process that uid may signal (its own), all at
# once: the kernel walks the task list under the lock fork() needs, so a fork bomb cannot
# outrun it, where killing pid by pid races it for minutes on a busy host.
KILL_ALL = "import os, signal; os.kill(-1, signal.SIGKILL)"


def kill_processes_of(uid: int) -> None:
    """SIGKILL every process running as `uid` (a sandbox uid: no one else has it): all at once
    from a helper running as that uid, then one by one whatever is left."""
    if processes_of(uid):
        try:
            subprocess.run(
                [sys.executable, "-S", "-I", "-c", KILL_ALL],
                user=uid,
                group=uid,
                extra_groups=[],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            pass  # the loop below still kills them one by one
    kill_until_gone(lambda: processes_of(uid), rounds=50, pause=0.01)


def acquire() -> SandboxUid:
    """Hold a free sandbox uid, with no process left running under it. Needs root;
    RuntimeError when every slot is taken."""
    locks = lock_directory()
    start = os.getpid() % SLOTS
    skipped = 0
    for offset in range(SLOTS):
        slot = (start + offset) % SLOTS
        uid = FIRST_UID + slot
        if not _unused(uid):
            continue
        fd = os.open(
            locks / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        kill_processes_of(uid)  # left by a grader that died with its sandbox running
        if _is_dirty(fd):  # its grader died before its sweep, or the sweep did not finish
            if not remove_files_of(uid).complete:
                os.close(fd)
                skipped += 1
                continue  # never handed out with files of an earlier submission left
            _write_mark(fd, b"")
        return SandboxUid(uid, fd)
    raise RuntimeError(
        "no free sandbox uid"
        + (
            f" ({skipped} slots hold files of earlier sandboxes that could not be removed from "
            f"{', '.join(map(str, scratch_folders()))})"
            if skipped
            else ""
        )
    )


# Folders every user may write in on a Linux host (the FHS's and systemd's); `scratch_folders`
# adds every world-writable mount point the host has
SCRATCH = (
    Path("/tmp"),
    Path("/var/tmp"),
    Path("/dev/shm"),
    Path("/run/lock"),
    Path("/var/lock"),
    Path("/dev/mqueue"),
)
# Entries of other users walked past in one sweep (those of the uid are all removed, however
# many): past it the sweep is not complete and the slot is passed over
OTHERS_LIMIT = 1_000_000


def scratch_folders() -> tuple[Path, ...]:
    """The world-writable folders outside a sandbox's work dir: SCRATCH and every mount point
    other users may write in, each once (/var/lock is a link to /run/lock)."""
    found = [*SCRATCH, *_mount_points()]
    unique: dict[str, Path] = {}
    for folder in found:
        try:
            real = os.path.realpath(folder)
            if os.stat(real).st_mode & stat.S_IWOTH and os.path.isdir(real):
                unique.setdefault(real, Path(real))
        except OSError:
            continue
    return tuple(unique.values())


def _mount_points() -> list[Path]:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and not fields[4].startswith(("/proc", "/sys")):
            # octal escapes (\040 for a space) as the kernel writes them
            points.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])))
    return points


@dataclasses.dataclass(frozen=True)
class Sweep:
    removed: int  # entries of the uid removed (a folder with all below it counts once)
    complete: bool  # every folder walked to its end and nothing of the uid left


def remove_files_of(
    uid: int, folders: tuple[Path, ...] | None = None, limit: int = OTHERS_LIMIT
) -> Sweep:
    """Remove what `uid` (a sandbox uid, about to be reused) left in the world-writable folders
    outside its work dir, where it could write when Landlock did not keep it out (the `uid`
    level on a kernel without Landlock): its entries at any depth below world-writable folders
    and below any sandbox uid's folder, never following a link. A file left there was a channel
    to whichever submission gets the uid next. Every entry of the uid goes, however many it
    made; `limit` bounds the entries of others walked past, and a sweep cut short by it, by a
    folder that changed while it was walked, by folders nested deeper than `MAX_DEPTH` or by an
    entry of the uid that is still linked somewhere is not `complete`.

    Folders are walked depth first by descriptor (each opened relative to its parent's, without
    following a link, and checked to be the entry listed), and entries removed relative to
    them: another sandbox running at the same time may swap one of its folders for a link or
    for someone else's folder at any moment (renameat2's RENAME_EXCHANGE), and a sweep that used
    paths or names removed what they led to. Only the uid's own entries are ever removed."""
    sweep = _Sweeper(uid, limit)
    for folder in scratch_folders() if folders is None else folders:
        try:
            top = os.open(folder, _DIRECTORY)
        except OSError:
            continue  # not on this host
        if not sweep.walk(top):
            break
    return Sweep(sweep.removed, sweep.complete)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# folders of others open at once, one per level (two descriptors each); below, GNU find
# sweeps the rest of the tree by itself
MAX_DEPTH = 128


class _Sweeper:
    def __init__(self, uid: int, limit: int):
        self.uid, self.limit = uid, limit
        self.removed, self.others, self.complete = 0, 0, True

    def walk(self, top: int) -> bool:
        """Sweep the folder open as `top` (closed here); False once the limit is reached."""
        stack: list[tuple[int, Iterator[os.DirEntry[str]]]] = []
        self._enter(stack, top)
        try:
            while stack:
                fd, entries = stack[-1]
                try:
                    entry = next(entries, None)
                except OSError:
                    entry, self.complete = None, False
                if entry is None:
                    stack.pop()
                    _close(fd, entries)
                    continue
                if self.others >= self.limit:
                    self.complete = False
                    return False
                self._meet(stack, fd, entry)
        finally:
            for fd, entries in stack:
                _close(fd, entries)
        return True

    def _enter(self, stack: list, fd: int) -> None:
        try:
            stack.append((fd, os.scandir(fd)))
        except OSError:
            os.close(fd)
            self.complete = False

    def _meet(self, stack: list, parent: int, entry: os.DirEntry[str]) -> None:
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            return
        except OSError:
            self.complete = False
            return
        if info.st_uid == self.uid:
            self.removed += 1
            self.complete &= _remove_at(parent, entry.name, info, self.uid)
            return
        self.others += 1
        if not _walked(info):
            return
        child = _open_listed(parent, entry.name, info)
        if child is None:
            self.complete = False
        elif len(stack) < MAX_DEPTH:
            self._enter(stack, child)
        else:  # deeper still (two sandboxes can nest their folders): find has no depth limit
            try:
                self.complete &= _empty(child, self.uid)
            finally:
                os.close(child)


def _close(fd: int, entries: Iterator[os.DirEntry[str]]) -> None:
    entries.close()  # type: ignore[attr-defined]  # a ScandirIterator
    os.close(fd)


def _walked(info: os.stat_result) -> bool:
    """A folder of another the uid may have written in: world-writable, or a sandbox uid's (a
    concurrent sandbox can let this one write in and then close it: `chmod 0711`)."""
    return stat.S_ISDIR(info.st_mode) and (
        bool(info.st_mode & stat.S_IWOTH) or FIRST_UID <= info.st_uid < FIRST_UID + SLOTS
    )


def _open_listed(
    parent: int, name: str, info: os.stat_result, flags: int = _DIRECTORY
) -> int | None:
    """`name` of the folder open as `parent`, if it is still the entry listed (else None), as
    a descriptor above 2 (a grader started without stdin has 0 free: subprocesses take it)."""
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError:  # gone, or swapped for a link (ELOOP) or a file (ENOTDIR) since listed
        return None
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino, opened.st_uid) != (info.st_dev, info.st_ino, info.st_uid):
            return None
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def _remove_at(parent: int, name: str, info: os.stat_result, uid: int) -> bool:
    """Remove the uid's entry `name` of the folder open as `parent`; whether it is gone (no
    longer linked anywhere: another sandbox may have moved it meanwhile)."""
    flags = _DIRECTORY if stat.S_ISDIR(info.st_mode) else os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
    held = _open_listed(parent, name, info, flags)
    if held is None:  # gone already, or another entry swapped in under its name
        return _not_the_uids(parent, name, uid)
    try:
        if stat.S_ISDIR(info.st_mode):
            _empty(held, uid, any_sandbox=True)
            with contextlib.suppress(OSError):  # only ever removes an empty folder
                os.rmdir(name, dir_fd=parent)
        else:
            with contextlib.suppress(OSError):  # what stays is found below
                os.unlink(name, dir_fd=parent)
        return os.fstat(held).st_nlink == 0
    finally:
        os.close(held)


def _empty(folder: int, uid: int, any_sandbox: bool = False) -> bool:
    """Remove the uid's entries below the folder open as `folder` (with `any_sandbox`, a folder
    of the uid's own: every sandbox uid's, since another sandbox may have put a file there to
    outlive both), by descriptor: GNU find, started in it (never its path), walks without
    following links, with no depth limit (a 5,000-deep tree), and removes nothing of anyone
    else (another's folder swapped in below keeps everything of theirs). Whether find removed
    every one it met."""
    sandboxes = ["-o", "(", "-uid", f"+{FIRST_UID - 1}", "-uid", f"-{FIRST_UID + SLOTS}", ")"]
    owners = ["(", "-uid", str(uid), *(sandboxes if any_sandbox else []), ")"]
    try:
        return (
            subprocess.run(
                ["find", ".", "-xdev", "-mindepth", "1", *owners, "-delete"],
                cwd=f"/proc/self/fd/{folder}",
                pass_fds=(folder,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            ).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False  # no /proc, no find: what stays is found by the caller


def _not_the_uids(parent: int, name: str, uid: int) -> bool:
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False).st_uid != uid
    except FileNotFoundError:
        return True
