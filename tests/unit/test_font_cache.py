"""matplotlib's font list is built once per cache folder, however many grading processes start
at once (a batch's workers with a fresh $TMPDIR, as in a container or a CI job): each used to
build its own, a second or two of CPU apiece, then all but one threw theirs away."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from autograder.course.build import tool_env

COUNTING = textwrap.dedent(
    """
    import subprocess, sys
    real = subprocess.run

    def counting(command, *args, **kwargs):
        if "import matplotlib.font_manager" in command:
            with open(sys.argv[1], "a") as log:
                log.write("built\\n")
        return real(command, *args, **kwargs)

    subprocess.run = counting
    from autograder.sandbox import plumbing

    print(len(plumbing.mpl_font_files()))
    """
)


def test_processes_starting_together_build_the_font_list_once(tmp_path):
    folder = tmp_path / "tmp"
    folder.mkdir()
    log = tmp_path / "builds.log"
    env = {**tool_env(), "TMPDIR": str(folder)}
    started = [
        subprocess.Popen(
            [sys.executable, "-c", COUNTING, str(log)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    answers = [process.communicate(timeout=300) for process in started]
    assert all(process.returncode == 0 for process in started), answers
    assert all(int(out) > 0 for out, _ in answers), "each process has the font list"
    assert log.read_text().count("built") == 1


def test_a_lock_held_past_a_build_is_not_waited_for(tmp_path, monkeypatch):
    """A holder that never lets go (hung, or another process of the same uid at the `rlimits`
    level) costs the wait of one build, not the batch."""
    import fcntl
    import os
    import tempfile
    import threading

    from autograder.sandbox import plumbing

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(plumbing, "FONT_LOCK_SECONDS", 1.0)
    plumbing.mpl_font_files.cache_clear()
    cache = tmp_path / f"attn-grade-mplcache-{os.getuid()}"
    cache.mkdir(mode=0o700)
    holder = os.open(cache / ".build-lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    found: list[dict] = []
    worker = threading.Thread(target=lambda: found.append(plumbing.mpl_font_files()), daemon=True)
    try:
        worker.start()
        worker.join(timeout=60)
        assert not worker.is_alive(), "still waiting for the lock"
        assert found and found[0], "built without the lock"
    finally:
        os.close(holder)
        plumbing.mpl_font_files.cache_clear()


def test_a_font_list_cut_short_is_not_used(tmp_path, monkeypatch):
    """A list half-written (a build killed halfway, or read while matplotlib writes it) would
    be copied into every sandbox, and each child would build its own again."""
    import json
    import os
    import tempfile

    from autograder.sandbox import plumbing

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    plumbing.mpl_font_files.cache_clear()
    cache = tmp_path / f"attn-grade-mplcache-{os.getuid()}"
    cache.mkdir(mode=0o700)
    (cache / "fontlist-v390.json").write_text('{"_version": 390, "ttflist": [{"fname": "/usr')
    try:
        found = plumbing.mpl_font_files()
    finally:
        plumbing.mpl_font_files.cache_clear()
    assert found and all(isinstance(json.loads(content), dict) for content in found.values())
    assert not [p.name for p in cache.iterdir() if p.name.startswith(".building-")], "build folder"
