"""What a sandbox uid left in world-writable folders is removed before the uid is reused (at the
`uid` level without Landlock a child could write /tmp, /var/tmp and /dev/shm, and an
independent attacker's files outlived the grading: a channel to the next submission that gets
the uid)."""

from __future__ import annotations

import os

import pytest

from autograder.sandbox.identity import FIRST_UID, remove_files_of

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
    removed = remove_files_of(UID, (scratch,))
    assert removed == 3 and list(scratch.iterdir()) == []
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
    assert remove_files_of(UID, (scratch,)) == 0
    assert (scratch / "neighbour.txt").exists()


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
