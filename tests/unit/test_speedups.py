"""autograder/nbgrader_plugins/speedups.py: nbgrader's gradebook stamp read in-process, and the
same as the `alembic heads` subprocess that nbgrader runs otherwise."""

from __future__ import annotations

import sqlite3

import pytest

from autograder.course.build import tool_env
from autograder.nbgrader_plugins.speedups import stamp_new_gradebooks_in_process

api = pytest.importorskip("nbgrader.api")


def no_subprocess(*args, **kwargs):
    raise AssertionError(f"a subprocess was started: {args}")


def test_a_new_gradebook_is_stamped_with_alembics_head_without_a_subprocess(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", tool_env()["PATH"])
    monkeypatch.setattr(api, "get_alembic_version", api.get_alembic_version)  # restored after
    expected = api.get_alembic_version()  # nbgrader's own: `alembic heads` in a subprocess
    assert len(expected) >= 12

    monkeypatch.setattr(api.sp, "check_output", no_subprocess)
    stamp_new_gradebooks_in_process()
    stamp_new_gradebooks_in_process()  # twice: still one wrapper
    db = tmp_path / "gradebook.db"
    with api.Gradebook(f"sqlite:///{db}"):
        pass
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    assert rows == [(expected,)]


def test_where_alembic_cannot_answer_in_process_nbgraders_subprocess_does(monkeypatch):
    def renamed(*args, **kwargs):
        raise AttributeError("a future nbgrader without _temp_alembic_ini")

    monkeypatch.setattr(api, "_temp_alembic_ini", renamed)
    monkeypatch.setattr(api, "get_alembic_version", lambda: "abc123def456")  # its subprocess
    stamp_new_gradebooks_in_process()
    assert api.get_alembic_version() == "abc123def456"
