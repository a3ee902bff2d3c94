"""What the grader keeps in the shared temporary folder is its own: a name another user could
take first (a folder, a link, a file in it) is never followed or read, so no one can make a root
grader copy a file of its choice into every sandbox (an independent attacker planted a link
named fontlist-*.json in the font cache's folder, and every child read the course's source
notebook and mistakes.py through it)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from autograder.sandbox import plumbing

SECRET = "attn-secret-that-only-the-grader-reads"


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):
    # a world-writable sticky folder that other users can reach, as /tmp is
    folder = Path(tempfile.mkdtemp(prefix="attn-shared-tmp-", dir="/tmp"))
    folder.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    plumbing.mpl_font_files.cache_clear()
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    yield folder, secret
    plumbing.mpl_font_files.cache_clear()
    shutil.rmtree(folder, ignore_errors=True)


def _cache(folder):
    return folder / f"attn-grade-mplcache-{os.getuid()}"


def _as_nobody(function):
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            function()
        except BaseException as error:  # noqa: BLE001 - said on stderr, then the test fails
            os.write(2, f"as nobody: {error!r}\n".encode())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _plant_link(folder, secret, name="fontlist-v390.json"):
    cache = _cache(folder)
    cache.mkdir(mode=0o700, exist_ok=True)
    (cache / name).symlink_to(secret)


def _plant_hard_link(folder, secret):
    _cache(folder).mkdir(mode=0o700)
    os.link(secret, _cache(folder) / "fontlist-v1.json")


@pytest.mark.parametrize(
    "plant",
    [
        pytest.param(_plant_link, id="link-in-our-folder"),
        pytest.param(
            lambda folder, secret: (
                os.link(secret, _cache(folder) / "fontlist-v1.json")
                if _cache(folder).mkdir(mode=0o700) is None
                else None
            ),
            id="hard-link",
        ),
        pytest.param(
            lambda folder, secret: _cache(folder).symlink_to(secret.parent), id="folder-is-a-link"
        ),
    ],
)
def test_a_planted_font_list_is_not_read(shared_tmp, plant):
    folder, secret = shared_tmp
    plant(folder, secret)
    found = plumbing.mpl_font_files()
    assert all(SECRET.encode() not in content for content in found.values())
    assert found, "the grader builds a font list of its own instead"


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's folder needs root to set up")
def test_a_folder_another_user_made_is_not_used(shared_tmp):
    folder, _ = shared_tmp

    cache = _cache(folder)  # the grader's name for it (computed here: getuid() is ours)

    def take_the_name():
        cache.mkdir(mode=0o777)
        cache.chmod(0o777)
        (cache / "fontlist-v390.json").write_text('{"forged": true}')

    _as_nobody(take_the_name)
    assert _cache(folder).stat().st_uid == 65534
    found = plumbing.mpl_font_files()
    assert found and all(b"forged" not in content for content in found.values())


def test_a_folder_of_ours_an_older_grader_left_open_is_closed_and_its_list_used(
    shared_tmp, monkeypatch
):
    """Graders before 0.2.9 made the folder with mkdir's default mode (0755). Passed over as
    not private, it made every grading process of an upgraded host build a font list of its
    own (1-2 CPU-s each). No one else could write into it: it is closed and used."""
    folder, _ = shared_tmp
    cache = _cache(folder)
    cache.mkdir()
    cache.chmod(0o755)
    ours = b'{"_version": 390, "ttflist": []}'
    (cache / "fontlist-v390.json").write_bytes(ours)
    builds: list[Path] = []
    monkeypatch.setattr(plumbing, "_build_font_lists", builds.append)
    found = plumbing.mpl_font_files()
    assert found == {"fontlist-v390.json": ours}
    assert not builds, "a font list was built although one of ours was there"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def _planted_fifo(cache: Path) -> None:
    os.mkfifo(cache / "fontlist-v999.json")


def _planted_folder(cache: Path) -> None:
    (cache / "fontlist-v998.json").mkdir()


def _planted_lock(cache: Path) -> None:
    os.mkfifo(cache / ".build-lock")


def _in_thread(function):
    import threading

    found: list = []
    worker = threading.Thread(target=lambda: found.append(function()), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "still blocked"
    return found[0] if found else None


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's plant needs root to set up")
@pytest.mark.parametrize("mode", [0o775, 0o777], ids=["0775", "0777"])
@pytest.mark.parametrize("plant", [_planted_fifo, _planted_folder, _planted_lock])
def test_a_folder_of_ours_others_could_write_into_is_passed_over(shared_tmp, mode, plant):
    """One that others could write into may hold anything they left there: a FIFO named like a
    font list blocked every grading process's read of it for good, a folder so named failed
    every sandbox (an independent reviewer, against the first version of the change above)."""
    folder, _ = shared_tmp
    cache = _cache(folder)
    cache.mkdir()
    os.chown(cache, os.getuid(), 65534)  # nobody's group: 0775 lets it write too
    cache.chmod(mode)
    _as_nobody(lambda: plant(cache))
    found = _in_thread(plumbing.mpl_font_files)
    assert found, "the grader builds a font list of its own instead"
    assert stat.S_IMODE(cache.stat().st_mode) == mode, "the folder was taken over"


@pytest.mark.parametrize("plant", [_planted_fifo, _planted_folder, _planted_lock])
def test_what_is_no_plain_file_in_our_folder_is_skipped(shared_tmp, plant):
    """Whatever is in the folder, the font lists read are plain files of ours: a FIFO does not
    block the read, a folder does not fail it, and no descriptor is left open."""
    folder, _ = shared_tmp
    cache = _cache(folder)
    cache.mkdir(mode=0o700)
    plant(cache)
    before = len(os.listdir("/proc/self/fd"))
    found = _in_thread(plumbing.mpl_font_files)
    assert found and all(name.startswith("fontlist-") for name in found)
    assert "fontlist-v999.json" not in found and "fontlist-v998.json" not in found
    assert len(os.listdir("/proc/self/fd")) <= before


def test_a_runtime_copy_cut_short_is_made_again(tmp_path, monkeypatch):
    """The jail's runtime copy counts as made once its supervisor.py is there: that file comes
    last, so a copy that failed halfway (a font list that could not be read) is made again by
    the next sandbox instead of being used without its font lists and modes."""
    monkeypatch.setattr(plumbing, "jail_runtime_root", lambda: tmp_path)
    calls = []

    def failing_once():
        calls.append(1)
        if len(calls) == 1:
            raise OSError("cut short")
        return {"fontlist-v1.json": b"{}"}

    monkeypatch.setattr(plumbing, "mpl_font_files", failing_once)
    with pytest.raises(OSError):
        plumbing.jail_runtime()
    root = plumbing.jail_runtime()
    assert (root / "supervisor.py").exists() and (root / "fontlist-v1.json").exists()
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
