"""What the grader keeps in the shared temporary folder is its own: a name another user could
take first (a folder, a link, a file in it) is never followed or read, so no one can make a root
grader copy a file of its choice into every sandbox (an independent attacker planted a link
named fontlist-*.json in the font cache's folder, and every child read the course's source
notebook and mistakes.py through it)."""

from __future__ import annotations

import os
import shutil
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


@pytest.mark.parametrize("mode", [0o755, 0o775, 0o777], ids=["0755", "0775", "0777"])
def test_a_folder_of_ours_left_open_is_closed_and_its_list_used(shared_tmp, monkeypatch, mode):
    """Graders before 0.2.9 made the folder with mkdir's default mode (0755). Passed over as
    not private, it made every grading process of an upgraded host build a font list of its
    own (1-2 CPU-s each). It is closed and used; what another user put in it while it was open
    is not read."""
    import stat

    folder, _ = shared_tmp
    cache = _cache(folder)
    cache.mkdir()
    cache.chmod(mode)
    ours = b'{"_version": 390, "ttflist": []}'
    (cache / "fontlist-v390.json").write_bytes(ours)
    if os.geteuid() == 0 and mode & 0o002:
        _as_nobody(lambda: (cache / "fontlist-v1.json").write_text('{"forged": true}'))
        assert (cache / "fontlist-v1.json").stat().st_uid == 65534
    builds: list[Path] = []
    monkeypatch.setattr(plumbing, "_build_font_lists", builds.append)
    found = plumbing.mpl_font_files()
    assert found == {"fontlist-v390.json": ours}
    assert not builds, "a font list was built although one of ours was there"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
