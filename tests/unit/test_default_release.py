"""The lesson's five are the default release; the companion chapters' exercises are built when
asked for (issue 19, item 5)."""

from __future__ import annotations

from autograder.core.registry import EXERCISES, core_exercises, declaration
from autograder.course.build import build_course


def test_the_core_five_are_the_lessons_and_the_others_are_companions():
    assert len(core_exercises()) == 5
    assert all(e.startswith(f"ex{i}_") for i, e in enumerate(core_exercises(), start=1))
    assert all(not declaration(e).core for e in EXERCISES if e not in core_exercises())


def test_build_without_names_builds_the_default_release(tmp_path):
    build_course(tmp_path / "course", None, release=False)
    built = sorted(p.name for p in (tmp_path / "course" / "source").iterdir())
    assert built == sorted(core_exercises())


def test_build_all_builds_every_exercise(tmp_path, monkeypatch):
    from autograder.cli import app

    seen = {}
    monkeypatch.setattr(
        "autograder.course.build.build_course",
        lambda course, exercises, **kwargs: seen.setdefault("exercises", exercises) and [],
    )
    assert app.main(["build", "--all", "--course", str(tmp_path / "c")]) == 0
    assert seen["exercises"] == list(EXERCISES)
