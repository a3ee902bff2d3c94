"""`attn-grade build` never destroys instructor settings: the generated config lives in its own
file, course id and exchange persist between builds, one exercise's rebuild touches nothing else."""

from __future__ import annotations

import json
import stat

from autograder.course.api import nbgrader_api
from autograder.course.build import build_course

EX1, EX2 = "ex1_numpy_attention", "ex2_attention_heatmap"
OURS = "c.ZipCollectApp.archive_directory = 'from-the-lms'\n"


def test_rebuilds_keep_instructor_settings(tmp_path):
    course, exchange = tmp_path / "course", tmp_path / "srv" / "exchange"
    build_course(course, [EX1, EX2], release=False, exchange_root=str(exchange), course_id="cs1")
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + OURS)
    ex1 = course / "source" / EX1 / f"{EX1}.ipynb"
    before = (ex1.read_bytes(), ex1.stat().st_mtime_ns)

    build_course(course, [EX2], release=False, lang="ko")

    assert config.read_text().endswith(OURS), "the instructor's file is never rewritten"
    assert (ex1.read_bytes(), ex1.stat().st_mtime_ns) == before, "ex1 was not rebuilt"
    api = nbgrader_api(course)
    assert api.coursedir.course_id == "cs1", "--course-id persists"
    assert api.config.Exchange.root == str(exchange), "--exchange persists"
    assert api.config.ZipCollectApp.archive_directory == "from-the-lms"
    assert "GradeWithChecks" in str(api.config.Autograde.autograde_preprocessors)


def test_the_exchange_is_made_as_nbgrader_needs_it(tmp_path, capsys):
    """F4 of "A Korean course through Canvas and Moodle": `build --exchange` recorded the folder
    but did not make it, and `release_feedback` stopped at "Unwritable directory"."""
    course = tmp_path / "course"
    made, kept = tmp_path / "srv" / "exchange", tmp_path / "own"
    build_course(course, [EX1], release=False, exchange_root=str(made))
    assert (
        stat.S_IMODE(made.stat().st_mode) == 0o1777
        and "made the exchange" in capsys.readouterr().out
    )
    made.chmod(0o700)  # a later build, or the instructor's own folder: left as it is
    kept.mkdir(mode=0o755)
    build_course(course, [EX1], release=False)
    build_course(course, [EX1], release=False, exchange_root=str(kept))
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE(kept.stat().st_mode) == 0o755
    assert "made the exchange" not in capsys.readouterr().out


def test_each_exercise_keeps_its_language_until_told_otherwise(tmp_path, capsys):
    """Issue 21: rebuilding one exercise silently switched a Korean exercise back to English."""
    course = tmp_path / "course"

    def lang(exercise: str) -> str:
        path = course / "source" / exercise / f"{exercise}.ipynb"
        return json.loads(path.read_text())["metadata"]["attn_grade"]["lang"]

    build_course(course, [EX1, EX2], release=False)
    build_course(course, [EX2], release=False, lang="ko")
    build_course(course, [EX1, EX2], release=False)
    assert (lang(EX1), lang(EX2)) == ("en", "ko")
    assert f"{EX2} stays in ko" in capsys.readouterr().out, "and says so"
    build_course(course, [EX2], release=False, lang="en")
    build_course(course, [EX2], release=False)
    assert lang(EX2) == "en"


def test_a_config_of_an_older_attn_grade_is_kept_aside(tmp_path, capsys):
    course = tmp_path / "course"
    course.mkdir()
    old = "# nbgrader configuration of this course, written by `attn-grade build`; rebuilt\n"
    (course / "nbgrader_config.py").write_text(old + "c = get_config()\n" + OURS)
    build_course(course, [EX1], release=False)
    assert (course / "nbgrader_config.py.old").read_text().endswith(OURS)
    assert "load_subconfig" in (course / "nbgrader_config.py").read_text()
    assert "nbgrader_config.py.old" in capsys.readouterr().err


def test_a_released_exercise_with_submissions_is_rebuilt_only_with_force(tmp_path):
    """Issue 21: a rebuild changed the notebook of an exercise students had handed in, without
    a word."""
    import pytest

    from autograder.core.errors import UsageError

    course = tmp_path / "course"
    build_course(course, [EX1, EX2], release=False)
    for exercise in (EX1, EX2):  # both released
        release = course / "release" / exercise / f"{exercise}.ipynb"
        release.parent.mkdir(parents=True)
        release.write_text("{}")
    (course / "submitted" / "alice" / EX1).mkdir(parents=True)
    build_course(course, [EX2], release=False)  # released, nobody handed in: fine
    with pytest.raises(UsageError, match=f"{EX1} \\(1 submitted\\).*--force"):
        build_course(course, [EX1, EX2], release=False)
    build_course(course, [EX1], release=False, force=True)
    assert (course / "submitted" / "alice" / EX1).is_dir(), "submissions are left alone"
