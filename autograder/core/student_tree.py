"""A tree a student controls, read without following anything: one home for every intake.

Every intake (`nbgrader collect` from the exchange, zip_collect's archive folder and extracted
tree, Gradescope's submission folder, the course's `submitted/`) takes only plain folders and
plain files with one name, and Classroom takes only plain blobs (`git_mode_refusal`). A
component is looked at without following it (lstat, relative to its folder's open descriptor),
then opened with O_NOFOLLOW and looked at again (fstat: the same inode, still plain), so a
component swapped for a link between the look and the read is refused, never followed.

Refused, each with its path and why: symbolic links (the tree's own top too, unless the caller
owns it), hard links (a file with a second name may be someone else's file, such as the
course's reference), FIFOs, sockets, devices, folders deeper than MAX_DEPTH and entries past
MAX_ENTRIES. Callers name every refusal; nothing is left out without a word.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder.core.text import clean_text

MAX_DEPTH = 32  # folders below the top
MAX_ENTRIES = 100_000  # names in one tree
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC  # a FIFO never blocks the open
CHANGED = "changed while it was read (replaced by a link or another file)"
# git tree entry modes: 100644 and 100755 (the executable bit) are plain files
GIT_MODES = {
    "120000": "a symbolic link",
    "160000": "a submodule (a link to another repository)",
    "040000": "a folder",
}


@dataclass(frozen=True)
class Refusal:
    """A path that was not taken: `path` begins with the tree's own name."""

    path: PurePosixPath
    reason: str

    def __str__(self) -> str:
        return f"{clean_text(str(self.path), 300)} ({self.reason})"


@dataclass
class Tree:
    """What a walk took (paths relative to the top) and what it refused."""

    files: list[PurePosixPath] = field(default_factory=list)
    folders: list[PurePosixPath] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


# on_file(relative path, open descriptor, its fstat): None, or why the file is not taken
FileVisitor = Callable[[PurePosixPath, int, os.stat_result], str | None]
# exclude(relative path, its lstat): True drops it without a word (nbgrader's ignore globs)
Exclude = Callable[[PurePosixPath, os.stat_result], bool]


class TreeError(RuntimeError):
    """The walk stopped (raised by a visitor): the tree is refused as a whole."""


def refusal_of(info: os.stat_result) -> str | None:
    """None for a plain folder or a plain file with one name; otherwise what it is."""
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        return None
    if stat.S_ISREG(mode):
        return None if info.st_nlink == 1 else f"a hard link: one of {info.st_nlink} names"
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    )
    return next((what for test, what in kinds if test(mode)), "not a plain file")


def git_mode_refusal(mode: str) -> str | None:
    """None for a git tree entry that is a plain file (100644, or 100755 with the executable
    bit), else what it is."""
    if mode in ("100644", "100755"):
        return None
    return GIT_MODES.get(mode, f"not a plain file (git mode {mode})")


def _same(first: os.stat_result, second: os.stat_result) -> bool:
    return (first.st_dev, first.st_ino, stat.S_IFMT(first.st_mode)) == (
        second.st_dev,
        second.st_ino,
        stat.S_IFMT(second.st_mode),
    )


def walk(
    top: str | Path,
    *,
    follow_top: bool = False,
    on_file: FileVisitor | None = None,
    on_folder: Callable[[PurePosixPath], None] | None = None,
    exclude: Exclude | None = None,
) -> Tree:
    """Walk `top` (module doc). `follow_top`: the top itself may be a link (a folder the
    caller owns, such as the instructor's archive folder). `on_folder` is called for the top
    (an empty path) and each folder before its content; `on_file` for each plain file while it
    is open; `exclude(path, lstat)` drops entries silently (nbgrader's ignore globs).
    FileNotFoundError if `top` does not exist."""
    top = Path(top)
    tree = Tree()
    name = PurePosixPath(top.name or str(top))
    info = os.stat(top) if follow_top else os.lstat(top)
    why = refusal_of(info) or (None if stat.S_ISDIR(info.st_mode) else "not a folder")
    if why:
        tree.refused.append(Refusal(name, why))
        return tree
    try:
        handle = os.open(top, _FOLDER | (0 if follow_top else os.O_NOFOLLOW))
    except OSError:
        tree.refused.append(Refusal(name, CHANGED))
        return tree
    try:
        if not _same(os.fstat(handle), info):
            tree.refused.append(Refusal(name, CHANGED))
            return tree
        if on_folder is not None:
            on_folder(PurePosixPath())
        _Walker(tree, name, on_file, on_folder, exclude).folder(handle, PurePosixPath(), 0)
    finally:
        os.close(handle)
    return tree


@dataclass
class _Walker:
    tree: Tree
    name: PurePosixPath
    on_file: FileVisitor | None
    on_folder: Callable[[PurePosixPath], None] | None
    exclude: Exclude | None
    seen: int = 0

    def refuse(self, relative: PurePosixPath, reason: str) -> None:
        self.tree.refused.append(Refusal(self.name / relative, reason))

    def folder(self, handle: int, relative: PurePosixPath, depth: int) -> None:
        for entry in sorted(os.listdir(handle)):
            path = relative / entry
            self.seen += 1
            if self.seen > MAX_ENTRIES:
                if self.seen == MAX_ENTRIES + 1:  # said once; every folder stops here
                    self.refuse(relative, f"more than {MAX_ENTRIES} names: the rest is left out")
                return
            try:
                info = os.stat(entry, dir_fd=handle, follow_symlinks=False)
            except FileNotFoundError:
                self.refuse(path, "removed while it was read")
                continue
            if self.exclude is not None and self.exclude(path, info):
                continue
            why = refusal_of(info)
            if why:
                self.refuse(path, why)
            elif stat.S_ISDIR(info.st_mode):
                self.subfolder(handle, entry, path, info, depth + 1)
            else:
                self.file(handle, entry, path, info)

    def subfolder(self, parent: int, entry: str, path, info, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.refuse(path, f"more than {MAX_DEPTH} folders deep")
            return
        try:
            handle = os.open(entry, _FOLDER | os.O_NOFOLLOW, dir_fd=parent)
        except OSError:
            self.refuse(path, CHANGED)
            return
        try:
            if not _same(os.fstat(handle), info):
                self.refuse(path, CHANGED)
                return
            self.tree.folders.append(path)
            if self.on_folder is not None:
                self.on_folder(path)
            self.folder(handle, path, depth)
        finally:
            os.close(handle)

    def file(self, parent: int, entry: str, path, info) -> None:
        try:
            handle = os.open(entry, _FILE | os.O_NOFOLLOW, dir_fd=parent)
        except OSError:
            self.refuse(path, CHANGED)
            return
        try:
            now = os.fstat(handle)
            why = refusal_of(now) or (None if _same(now, info) else CHANGED)
            if why is None and self.on_file is not None:
                why = self.on_file(path, handle, now)
            if why:
                self.refuse(path, why)
            else:
                self.tree.files.append(path)
        finally:
            os.close(handle)


def copy_open_file(handle: int, target: Path, info: os.stat_result, limit: int | None) -> int:
    """Copy the open file `handle` to the new file `target` (never through an existing name or
    link), keeping its modification time; at most `limit` bytes (TreeError past it, the
    partial copy removed). Returns the bytes copied."""
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
    copied = 0
    try:
        while chunk := os.read(handle, 1 << 20):
            copied += len(chunk)
            if limit is not None and copied > limit:
                raise TreeError(f"larger than {limit} bytes")
            os.write(out, chunk)
        os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
    except BaseException:
        os.close(out)
        target.unlink()
        raise
    os.close(out)
    return copied


def copy_tree(
    source: str | Path,
    target: str | Path,
    *,
    exclude: Exclude | None = None,
    max_file_bytes: int | None = None,
    max_total_bytes: int | None = None,
) -> Tree:
    """Copy the plain folders and files of `source` (the top not followed) to the new folder
    `target`, which is made only when `source` is a plain folder. A file over `max_file_bytes`
    is refused; past `max_total_bytes` in all, the copy is removed and the whole tree refused."""
    target = Path(target)
    total = [0]

    def on_folder(relative: PurePosixPath) -> None:
        (target / relative).mkdir(parents=relative == PurePosixPath())

    def on_file(relative: PurePosixPath, handle: int, info: os.stat_result) -> str | None:
        if max_file_bytes is not None and info.st_size > max_file_bytes:
            return f"larger than {max_file_bytes} bytes"
        try:
            total[0] += copy_open_file(handle, target / relative, info, max_file_bytes)
        except TreeError as error:
            return str(error)
        if max_total_bytes is not None and total[0] > max_total_bytes:
            raise TreeError(f"larger than {max_total_bytes} bytes in all")
        return None

    try:
        return walk(source, on_file=on_file, on_folder=on_folder, exclude=exclude)
    except TreeError as error:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        return Tree(refused=[Refusal(PurePosixPath(Path(source).name), str(error))])
