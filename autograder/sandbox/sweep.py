"""The sweep of what a sandbox uid left outside its work dir, before the uid is reused.

Where a child can write outside its work dir (the `uid` level without Landlock, `rlimits`),
what its uid made in the world-writable folders of the host would reach the next submission
graded under the same uid. `remove_files_of` removes it when the sandbox closes
(`Sandbox.close`) and again when a slot marked in its lock file is taken (`identity.acquire`).
docs/security.md "Files left outside the work dir" has the argument and what only Landlock or
the jail closes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

from autograder.sandbox.identity import FIRST_UID, SLOTS

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
        real = os.path.realpath(folder)
        try:
            mode = os.stat(real).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) and mode & stat.S_IWOTH:
            unique.setdefault(real, Path(real))
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


def clean(uid: int) -> bool:
    """Whether nothing of `uid` is left outside its work dir (`identity.acquire`'s cleaner)."""
    return remove_files_of(uid).complete


@dataclasses.dataclass(frozen=True)
class Sweep:
    # entries of the uid the walk removed (a folder with all below it counts once; what find
    # removes below MAX_DEPTH is not counted)
    removed: int
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
    folder that changed while it was walked or by an entry of the uid that is still linked
    somewhere (or that find could not remove) is not `complete`.

    Folders are walked depth first by descriptor (each opened relative to its parent's, without
    following a link, and checked to be the entry listed), and entries removed relative to
    them: another sandbox running at the same time may swap one of its folders for a link or
    for someone else's folder at any moment (renameat2's RENAME_EXCHANGE), and a sweep that used
    paths or names removed what they led to. Only sandbox uids' entries are ever removed: the
    uid's anywhere, another sandbox's inside the uid's own folders."""
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
        if child is None:  # gone since listed (a live sandbox's churn: harmless), or swapped
            self.complete &= _owner_at(parent, entry.name) is None
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
        return _owner_at(parent, name) not in (uid, _UNREADABLE)
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
    # (entries that vanish while it walks, a live sandbox's, are no error)
    command = ["find", ".", "-xdev", "-ignore_readdir_race", "-mindepth", "1", *owners, "-delete"]
    try:
        return (
            subprocess.run(
                command,
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


_UNREADABLE = -1  # an owner no uid has


def _owner_at(parent: int, name: str) -> int | None:
    """The owner of `name` in the folder open as `parent`: None when it is gone, _UNREADABLE
    when it is there but cannot be looked at (never an exception into `Sandbox.close`)."""
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False).st_uid
    except FileNotFoundError:
        return None
    except OSError:
        return _UNREADABLE
