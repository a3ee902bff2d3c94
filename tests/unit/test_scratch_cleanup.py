"""What a sandbox uid left in world-writable folders is removed before the uid is reused (at the
`uid` level without Landlock a child could write /tmp, /var/tmp and /dev/shm, and an
independent attacker's files outlived the grading: a channel to the next submission that gets
the uid). Later: every entry of the uid goes however many it made (a flood of one folder once
ended the sweep before the others), /run/lock and every world-writable mount point are swept,
and a slot whose grader died before its sweep is swept by the next grader that takes it."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder.sandbox import identity, sweep
from autograder.sandbox.identity import FIRST_UID
from autograder.sandbox.sweep import Sweep, remove_files_of, scratch_folders

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
UID = FIRST_UID + 4242
OTHER = FIRST_UID + 4243


@pytest.fixture
def scratch(tmp_path):
    folder = tmp_path / "tmp"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def _owned(path, uid=UID):
    os.chown(path, uid, uid, follow_symlinks=False)
    return path


def test_files_folders_and_links_of_the_uid_go(scratch, tmp_path):
    outside = tmp_path / "keep.txt"
    outside.write_text("not the sandbox's")
    (scratch / "file.txt").write_text("left for the next one")
    _owned(scratch / "file.txt")
    (scratch / "folder").mkdir()
    (scratch / "folder" / "inner").write_text("y")
    _owned(scratch / "folder" / "inner")
    _owned(scratch / "folder")
    (scratch / "link").symlink_to(outside)
    _owned(scratch / "link")
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=3, complete=True)
    assert list(scratch.iterdir()) == []
    assert outside.read_text() == "not the sandbox's", "a link is removed, not followed"


def test_inside_another_users_world_writable_folder_too(scratch):
    shared = scratch / ".X11-unix"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "mine").write_text("z")
    _owned(shared / "mine")
    (shared / "theirs").write_text("w")
    _owned(shared / "theirs", OTHER)
    closed = scratch / "closed"
    closed.mkdir(mode=0o755)
    (closed / "not-reached").write_text("v")
    _owned(closed / "not-reached")  # the uid could not have written it: not looked for
    remove_files_of(UID, (scratch,))
    assert sorted(p.name for p in shared.iterdir()) == ["theirs"]
    assert (closed / "not-reached").exists()


def test_another_uids_files_stay(scratch):
    (scratch / "neighbour.txt").write_text("a concurrent sandbox's")
    _owned(scratch / "neighbour.txt", OTHER)
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=0, complete=True)
    assert (scratch / "neighbour.txt").exists()


@pytest.mark.parametrize("flooded", ["the first folder swept", "the last folder swept"])
def test_a_flood_of_the_uids_own_entries_hides_nothing(tmp_path, flooded):
    """However many entries the uid made in one folder, its entries in every other folder go
    too (the sweep once stopped after 100,000 entries, /dev/shm's first)."""
    folders = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        folder.chmod(0o1777)
        folders.append(folder)
    flood, other = folders if flooded == "the last folder swept" else folders[::-1]
    for number in range(30):
        (flood / f"flood-{number}").touch()
        _owned(flood / f"flood-{number}")
    (other / "message").write_text("for the next holder of the uid")
    _owned(other / "message")
    assert remove_files_of(UID, tuple(folders), limit=10) == Sweep(removed=31, complete=True)
    assert list(flood.iterdir()) == list(other.iterdir()) == []


def test_a_walk_cut_short_by_others_entries_is_not_complete(scratch):
    for number in range(12):
        (scratch / f"theirs-{number}").touch()
        _owned(scratch / f"theirs-{number}", OTHER)
    shared = scratch / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "mine").touch()
    _owned(shared / "mine")
    assert not remove_files_of(UID, (scratch,), limit=5).complete
    assert remove_files_of(UID, (scratch,), limit=100).complete
    assert not (shared / "mine").exists()


def test_the_limit_on_others_entries_holds_within_one_folder(scratch):
    for number in range(12):
        (scratch / f"theirs-{number}").touch()
        _owned(scratch / f"theirs-{number}", OTHER)
    assert not remove_files_of(UID, (scratch,), limit=5).complete
    assert remove_files_of(UID, (scratch,), limit=100).complete


def test_a_folder_another_sandbox_closed_after_this_uid_wrote_in_it_is_swept(scratch):
    """A concurrent sandbox can let this uid write in its folder and then `chmod 0711` it: no
    longer world-writable, it was passed over and the sweep called itself complete."""
    closed = scratch / "closed-by-its-owner"
    closed.mkdir()
    (closed / "left").write_text("for the next holder of the uid")
    _owned(closed / "left")
    _owned(closed, FIRST_UID + identity.SLOTS - 1)  # a sandbox uid
    closed.chmod(0o711)
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=1, complete=True)
    assert list(closed.iterdir()) == []


def test_an_entry_of_the_uid_that_stays_makes_the_sweep_incomplete(scratch, monkeypatch):
    (scratch / "pinned").write_text("a file the sweep could not remove")
    _owned(scratch / "pinned")

    def refused(path, *args, **kwargs):
        raise PermissionError(1, "Operation not permitted", path)

    monkeypatch.setattr(os, "unlink", refused)
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=1, complete=False)


def _as_uid(uid: int, work) -> int:
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            work()
            status = 0
        finally:
            os._exit(status)
    return pid


def _swapping(first: Path, second: Path, seconds: float, pause: float):
    """Work for `_as_uid`: swap two entries again and again (renameat2, RENAME_EXCHANGE)."""

    def swap():
        libc = ctypes.CDLL(None, use_errno=True)
        one, other = os.fsencode(first), os.fsencode(second)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            libc.syscall(316, -100, one, -100, other, 2)  # x86_64 renameat2
            if pause:
                time.sleep(pause)

    return swap


@pytest.fixture
def reachable_scratch():
    """A world-writable folder other uids can reach (tmp_path's parents are root's 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="attn-sweep-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="renameat2 by its x86_64 number")
def test_a_folder_swapped_for_a_link_during_the_sweep_never_leads_it_outside(reachable_scratch):
    """Another sandbox running at the same time owns a world-writable folder `b` with a folder
    `d`, where this uid left files named as root's files elsewhere, and a link `s` to root's
    folder; it swaps `d` and `s` again and again (renameat2 RENAME_EXCHANGE). A sweep by path
    removed root's files through the link (an independent review: 1,250 of 2,000)."""
    scratch = reachable_scratch
    victim = scratch / "roots"
    victim.mkdir(mode=0o755)
    names = [f"v{number}" for number in range(300)]
    for name in names:
        (victim / name).write_text("root's file")
    (victim / "tree").mkdir()
    (victim / "tree" / "inner").write_text("root's tree")
    b = scratch / "b"

    def make_folders():
        os.umask(0)
        os.mkdir(b, 0o777)
        os.mkdir(b / "d", 0o777)
        os.symlink(victim, b / "s")

    def leave_files():
        for name in names:
            os.close(os.open(b / "d" / name, os.O_CREAT | os.O_WRONLY, 0o600))
        os.mkdir(b / "d" / "tree")

    swap = _swapping(b / "d", b / "s", seconds=20, pause=0)
    assert os.waitpid(_as_uid(OTHER, make_folders), 0)[1] == 0
    assert os.waitpid(_as_uid(UID, leave_files), 0)[1] == 0
    swapper = _as_uid(OTHER, swap)
    try:
        time.sleep(0.2)
        remove_files_of(UID, (scratch,))
    finally:
        os.kill(swapper, 9)
        os.waitpid(swapper, 0)
    assert sorted(p.name for p in victim.iterdir()) == sorted([*names, "tree"])
    assert (victim / "tree" / "inner").exists()


def test_a_folder_of_the_uid_that_cannot_be_removed_makes_the_sweep_incomplete(
    scratch, monkeypatch
):
    """Where rm or /proc is missing, the sweep says so (the slot stays marked) and does not
    raise into the sandbox's close()."""
    (scratch / "folder").mkdir()
    (scratch / "folder" / "inner").write_text("left for the next one")
    _owned(scratch / "folder" / "inner")
    _owned(scratch / "folder")

    def missing(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "rm")

    monkeypatch.setattr(sweep.subprocess, "run", missing)
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=1, complete=False)


NOBODY = 65534


@pytest.mark.skipif(platform.machine() != "x86_64", reason="renameat2 by its x86_64 number")
def test_a_third_users_folder_swapped_in_for_the_uids_keeps_everything_of_theirs(
    reachable_scratch,
):
    """A concurrent sandbox swaps this uid's folder `d` in its own world-writable folder with a
    third user's folder it cannot empty: removing `d` by name removed the third user's tree (an
    independent review: hit in 3 of 6 tries)."""
    b = reachable_scratch / "b"
    assert os.waitpid(_as_uid(OTHER, lambda: os.mkdir(b) or os.chmod(b, 0o777)), 0)[1] == 0

    def third_users_tree():
        os.mkdir(b / "victim", 0o755)
        (b / "victim" / "precious").write_text("nobody's")
        os.mkdir(b / "victim" / "sub", 0o755)
        (b / "victim" / "sub" / "deep").write_text("nobody's")

    assert os.waitpid(_as_uid(NOBODY, third_users_tree), 0)[1] == 0

    swap = _swapping(b / "d", b / "victim", seconds=30, pause=0.0005)

    def leave_a_folder():
        names = {entry.name for entry in os.scandir(b)}
        os.mkdir(b / ("victim" if "d" in names else "d"), 0o700)

    swapper = None
    try:
        for _ in range(150):
            if {p.name for p in b.iterdir()} == {"victim"}:  # this uid's folder was removed
                os.waitpid(_as_uid(UID, leave_a_folder), 0)
            if swapper is None:
                swapper = _as_uid(OTHER, swap)
                time.sleep(0.1)
            remove_files_of(UID, (reachable_scratch,))
            os.kill(swapper, signal.SIGSTOP)  # looked at while nothing moves
            theirs = [p for p in b.iterdir() if p.lstat().st_uid == NOBODY]
            assert len(theirs) == 1, "the third user's folder was removed"
            assert (theirs[0] / "precious").exists() and (theirs[0] / "sub" / "deep").exists()
            os.kill(swapper, signal.SIGCONT)
    finally:
        if swapper is not None:
            os.kill(swapper, 9)
            os.waitpid(swapper, 0)


def test_six_hundred_folders_of_another_user_side_by_side_are_all_walked(scratch):
    """Any local account could make more world-writable folders side by side than a sweep held
    open at once: every sweep ended incomplete and no slot was reused again."""
    for number in range(600):
        folder = scratch / f"theirs-{number:03d}"
        folder.mkdir()
        folder.chmod(0o777)
        _owned(folder, OTHER)
    (scratch / "theirs-599" / "left").write_text("for the next holder of the uid")
    _owned(scratch / "theirs-599" / "left")
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=1, complete=True)


def test_two_sandboxes_nesting_their_folders_deeper_than_the_walk_keep_nothing(scratch):
    """Another sandbox makes 200 nested world-writable folders and this uid leaves a file at
    the bottom: the walk stopped at its depth, this uid's sweep was never complete, the other's
    could not remove its folders, and both slots were passed over for good (a third review)."""
    folder = scratch
    for depth in range(200):
        folder = folder / f"n{depth}"
        folder.mkdir()
        folder.chmod(0o777)
    (folder / "bottom").write_text("for the next holder of the uid")
    _owned(folder / "bottom")
    other = FIRST_UID + identity.SLOTS - 1  # a sandbox uid
    for path in [folder, *folder.parents]:
        if path == scratch:
            break
        _owned(path, other)
    assert remove_files_of(UID, (scratch,)).complete
    assert not (folder / "bottom").exists()
    assert remove_files_of(other, (scratch,)) == Sweep(removed=1, complete=True)
    assert list(scratch.iterdir()) == []


def test_a_file_another_sandbox_moved_into_this_uids_folder_goes_with_it(scratch):
    """A sandbox running beside this one moves its own file into this uid's folder after its
    own sweep: the folder could not be removed (another's entry in it), and the file outlived
    both for the next holder of the other uid."""
    mine = scratch / "mine"
    mine.mkdir()
    mine.chmod(0o777)
    (mine / "moved-in").write_text("for the next holder of the other uid")
    _owned(mine / "moved-in", FIRST_UID + identity.SLOTS - 1)  # a sandbox uid
    (mine / "not-a-sandboxs").write_text("a host user's")
    _owned(mine / "not-a-sandboxs", OTHER)
    _owned(mine)
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=1, complete=False)
    assert [p.name for p in mine.iterdir()] == ["not-a-sandboxs"], "nothing of a host user's"


def test_a_folder_of_another_that_vanishes_during_the_sweep_leaves_it_complete(
    scratch, monkeypatch
):
    """A live sandbox makes and removes folders all the time (its work dir is a sandbox uid's
    folder in /tmp): one gone between the listing and its opening was taken for a swap, and
    the sweep of an unrelated uid ended incomplete (a fourth review: 1 in 10 sweeps)."""
    (scratch / "churn").mkdir()
    _owned(scratch / "churn", FIRST_UID + identity.SLOTS - 1)
    listed = sweep._open_listed

    def removed_meanwhile(parent, name, info, *args):
        if name == "churn":
            os.rmdir(scratch / "churn")
        return listed(parent, name, info, *args)

    monkeypatch.setattr(sweep, "_open_listed", removed_meanwhile)
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=0, complete=True)


def test_a_grader_started_without_stdin_still_removes_the_uids_folders(scratch):
    """With descriptor 0 free, the first folder opened was 0, which subprocesses take for their
    stdin: rm never ran in it."""
    (scratch / "folder").mkdir()
    (scratch / "folder" / "inner").write_text("x")
    _owned(scratch / "folder" / "inner")
    _owned(scratch / "folder")
    code = (
        "import os, sys; os.close(0); from pathlib import Path; "
        "from autograder.sandbox.sweep import remove_files_of; "
        f"print(remove_files_of({UID}, (Path(sys.argv[1]),)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(scratch)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "Sweep(removed=1, complete=True)", done.stderr
    assert list(scratch.iterdir()) == []


def test_an_entry_of_the_uid_that_cannot_be_looked_at_again_is_not_taken_for_gone(
    scratch, monkeypatch
):
    """Where the entry changed since it was listed and then cannot be looked at (an error other
    than its absence), the sweep is incomplete; the error never reaches the sandbox's close()."""
    (scratch / "changed").write_text("x")
    _owned(scratch / "changed")
    monkeypatch.setattr(sweep, "_open_listed", lambda *args: None)
    looked = os.stat

    def refused(path, *args, dir_fd=None, **kwargs):
        if dir_fd is not None and path == "changed":
            raise PermissionError(13, "Permission denied", path)
        return looked(path, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "stat", refused)
    assert remove_files_of(UID, (scratch,)) == Sweep(removed=1, complete=False)


def test_every_world_writable_mount_point_and_the_lock_folder_are_swept():
    """Measured with util-linux's findmnt, not with the grader's own reading of mountinfo."""
    swept = {str(folder) for folder in scratch_folders()}
    if shutil.which("findmnt") is None:
        pytest.skip("findmnt (util-linux) is not installed")
    listed = subprocess.run(
        ["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True, check=True
    ).stdout.split()
    targets = [t.encode().decode("unicode_escape") for t in listed]
    writable = [
        os.path.realpath(t)
        for t in [*targets, "/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock"]
        if not t.startswith(("/proc", "/sys")) and _world_writable(t)
    ]
    assert writable, "this host has no world-writable folder: the test proves nothing here"
    assert set(writable) <= swept, set(writable) - swept


def _world_writable(path: str) -> bool:
    try:
        return os.path.isdir(path) and bool(os.stat(path).st_mode & 0o002)
    except OSError:
        return False


@pytest.fixture
def next_slot(scratch, monkeypatch):
    """The uid acquire() hands out next in this process, its sweep confined to `scratch`."""
    monkeypatch.setattr(sweep, "SCRATCH", (scratch,))
    monkeypatch.setattr(sweep, "_mount_points", lambda: [])
    probe = identity.acquire(sweep.clean)
    uid = probe.uid
    probe.release()
    yield uid
    with open(identity.lock_directory() / str(uid - FIRST_UID), "r+b") as lock:
        lock.truncate(0)  # never leave a slot marked for the graders after this test


def _take(uid: int) -> identity.SandboxUid:
    held = identity.acquire(sweep.clean)
    if held.uid != uid:
        held.release()
        pytest.fail(f"slot {uid - FIRST_UID} was taken by a concurrent grader; rerun")
    return held


def test_a_slot_whose_grader_died_before_its_sweep_is_swept_when_taken(scratch, next_slot):
    held = _take(next_slot)
    held.mark_dirty()
    (scratch / "answers.txt").write_text("for whoever gets this uid next")
    _owned(scratch / "answers.txt", next_slot)
    held.release()  # as a grader killed with SIGKILL: no sweep ran
    again = _take(next_slot)
    try:
        assert not (scratch / "answers.txt").exists()
    finally:
        again.release()
    lock = identity.lock_directory() / str(next_slot - FIRST_UID)
    assert lock.read_bytes() == b"", "a slot swept clean is no longer marked"


def test_a_slot_whose_sweep_cannot_finish_is_passed_over(scratch, next_slot):
    held = _take(next_slot)
    held.mark_dirty()
    held.release()
    unfinished = []

    def cut_short(uid):
        unfinished.append(uid)
        return False

    other = identity.acquire(cut_short)
    try:
        assert other.uid != next_slot and unfinished == [next_slot]
    finally:
        other.release()
    lock = identity.lock_directory() / str(next_slot - FIRST_UID)
    assert lock.read_bytes() == identity.DIRTY, "still marked: the next grader sweeps again"


def test_a_killed_grading_process_not_yet_reaped_leaves_no_runtime_copy(tmp_path):
    """A batch worker killed with SIGKILL stays a zombie until its pool reaps it (a replaced
    pool may never): its runtime copy is still removed by the next sweep."""
    import os
    import signal
    import time

    from autograder.sandbox.inside.supervisor import stat_fields
    from autograder.sandbox.plumbing import RUNTIME_PREFIX, sweep_runtime_roots

    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    try:
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # dead, not reaped: a zombie
            if stat_fields(f"/proc/{pid}/stat")[0] == b"Z":
                break
            time.sleep(0.05)
        killed = tmp_path / f"{RUNTIME_PREFIX}{pid}-abc"
        running = tmp_path / f"{RUNTIME_PREFIX}{os.getpid()}-def"
        killed.mkdir()
        running.mkdir()
        sweep_runtime_roots(tmp_path)
        assert not killed.exists() and running.exists()
    finally:
        os.waitpid(pid, 0)
