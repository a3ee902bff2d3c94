"""`attn-grade report` on a planted batch with known answers: item statistics, flags, named
mistakes, problems, integrity flags and a copied pair; the page rendered in Chromium."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from autograder.core.results import REPORT_KEY, CheckResult
from autograder.report import html, stats
from autograder.report.data import Batch, Graded, report_from_metadata, without_stub
from autograder.report.similarity import compare
from tests.support.chromium import images, rendered_dom, screenshot, visible_text
from tests.support.nbgrader_helpers import attn_grade

EX = "ex1_numpy_attention"
STUDENTS = [f"s{i:02d}" for i in range(10)]  # s00 weakest ... s09 strongest
# check -> the students who pass it (1 point each)
PASSES = {
    "test_everyone_passes": set(STUDENTS),
    "test_nobody_passes": set(),
    "test_top_six": set(STUDENTS[4:]),
    "test_top_four": set(STUDENTS[6:]),
    "test_top_eight": set(STUDENTS[2:]),
    "test_inverted": {"s00", "s01", "s02"},  # passed only by weak students
}
MISTAKES = {("test_top_six", s): "no_sqrt_scaling" for s in ("s01", "s02", "s03")}
HOSTILE = "<script>alert('x')</script>"

SOURCE = """
def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)

def scaled_dot_product_attention(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return np.matmul(weights, V), weights
"""
# The same code with every variable renamed, comments added and lines re-wrapped.
COPIED = """
def softmax(arr, axis=-1):
    # subtract the max for stability
    z = arr - np.max(arr, axis=axis,
                     keepdims=True)
    ez = np.exp(z)
    return ez / np.sum(ez, axis=axis, keepdims=True)


def scaled_dot_product_attention(query, key, value, mask=None):
    dim = query.shape[-1]
    s = np.matmul(query, np.swapaxes(key, -1, -2)) / np.sqrt(dim)  # scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = softmax(s, axis=-1)
    return np.matmul(w, value), w
"""
# A correct solution written independently.
HONEST = """
def softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    out = np.exp(x - m)
    out /= out.sum(axis=axis, keepdims=True)
    return out

def scaled_dot_product_attention(Q, K, V, mask=None):
    scale = 1.0 / math.sqrt(Q.shape[-1])
    logits = np.einsum("...qd,...kd->...qk", Q, K) * scale
    if mask is not None:
        logits = np.where(mask, logits, -1e30)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, V), p
"""
STARTER = '''
def softmax(x, axis=-1):
    """Softmax of x along `axis`, numerically stable."""
    raise NotImplementedError()
'''


def planted_batch() -> Batch:
    batch = Batch(mistake_words={(EX, "no_sqrt_scaling"): "scores not divided by sqrt(d_k)"})
    for student in STUDENTS:
        checks = tuple(
            CheckResult(
                name, "cell", 1.0, student in passers, mistake=MISTAKES.get((name, student))
            )
            for name, passers in PASSES.items()
        )
        score = sum(c.points for c in checks)
        batch.submissions.append(Graded(EX, student, "ok", checks, score=score))
    batch.submissions += [
        Graded(EX, "tim", "timeout", messages=(f"cell 4 ran out of time {HOSTILE}",)),
        Graded(EX, "ivan", "invalid_notebook", messages=("the file is not valid JSON",)),
        Graded(EX, "tess", "tampered", messages=("replaced builtins.__import__",)),
        Graded(EX, "s09x", "ok", manual_pending=True),
    ]
    batch.code = {
        (EX, "s03"): SOURCE,
        (EX, "s07"): COPIED,
        (EX, "s05"): HONEST,
        (EX, "s06"): STARTER,
    }
    batch.starter = {EX: STARTER}
    return batch


def by_check(batch: Batch) -> dict[str, stats.CheckStats]:
    return {row.check: row for row in stats.check_stats(batch, EX)}


def test_difficulty_and_flags_of_the_planted_checks():
    rows = by_check(planted_batch())
    assert rows["test_everyone_passes"].difficulty == 1.0
    assert rows["test_everyone_passes"].flags == (stats.FLAG_NEVER_FAILS,)
    assert rows["test_everyone_passes"].point_biserial is None  # no variation: undefined
    assert rows["test_nobody_passes"].flags == (stats.FLAG_ALWAYS_FAILS,)
    assert rows["test_inverted"].flags == (stats.FLAG_NEGATIVE,)
    for name in ("test_top_six", "test_top_four", "test_top_eight"):
        assert rows[name].flags == (), name
        assert rows[name].point_biserial > 0, name
    assert rows["test_top_six"].difficulty == pytest.approx(0.6)
    assert rows["test_inverted"].graded == 10  # tim, ivan, tess have no check results


def test_point_biserial_is_pearson_against_the_rest_score():
    batch = planted_batch()
    rows = by_check(batch)
    totals = {s: sum(s in passers for passers in PASSES.values()) for s in STUDENTS}
    for name, passers in PASSES.items():
        item = np.array([s in passers for s in STUDENTS], dtype=float)
        rest = np.array([totals[s] for s in STUDENTS]) - item
        if item.std() == 0:
            continue
        expected = np.corrcoef(item, rest)[0, 1]
        assert rows[name].point_biserial == pytest.approx(expected), name
    assert rows["test_inverted"].point_biserial == pytest.approx(-0.8233, abs=1e-4)


def test_upper_lower_index_by_hand():
    rows = by_check(planted_batch())
    # totals: s00 s01 s03 = 2 (bottom 27% = 3 students, ties by id), s07 s08 s09 = 4 (top)
    assert rows["test_inverted"].upper_lower == pytest.approx(0 - 2 / 3)
    assert rows["test_top_six"].upper_lower == pytest.approx(1 - 0)
    assert rows["test_top_eight"].upper_lower == pytest.approx(1 - 1 / 3)
    assert rows["test_everyone_passes"].upper_lower == 0


def test_named_mistakes_count_students():
    (row,) = stats.mistake_counts(planted_batch(), EX)
    assert (row.check, row.mistake, row.count) == ("test_top_six", "no_sqrt_scaling", 3)
    assert row.students == ("s01", "s02", "s03")
    assert row.description == "scores not divided by sqrt(d_k)"


def test_summary_and_backlog():
    summary = stats.summarise(planted_batch(), EX)
    assert summary.submissions == 14 and summary.manual_pending == 1
    scores = sorted(summary.scores)
    assert summary.median == pytest.approx(float(np.median(scores)))
    assert summary.mean == pytest.approx(float(np.mean(scores)))
    assert sum(n for _, n in stats.histogram(summary.scores, 8)) == 14


def test_problems_and_integrity_are_separate():
    batch = planted_batch()
    assert [(p.student, p.status) for p in stats.problems(batch)] == [
        ("tim", "timeout"),
        ("ivan", "invalid_notebook"),
    ]
    assert [p.student for p in stats.integrity(batch)] == ["tess"]


def test_copied_pair_with_renamed_variables_is_the_top_pair():
    pairs = compare(EX, {"s03": SOURCE, "s07": COPIED, "s05": HONEST}, STARTER)
    top = pairs[0]
    assert (top.first, top.second) == ("s03", "s07")
    assert top.score >= 0.9
    honest = [p.score for p in pairs if "s05" in (p.first, p.second)]
    assert max(honest) < 0.3, pairs
    matched = "".join(seg.text for seg in top.segments_second if seg.match)
    assert "np.swapaxes(key, -1, -2)" in matched  # the matching region, in the copy's own names


def test_starter_code_alone_is_not_similarity():
    pairs = compare(EX, {"a": STARTER + SOURCE, "b": STARTER + HONEST}, STARTER)
    only_starter = compare(EX, {"a": STARTER, "b": STARTER}, STARTER)
    assert pairs[0].score < 0.3
    assert only_starter[0].score == 0


def test_stub_lines_are_removed_from_the_written_code():
    filled = STARTER.replace("raise NotImplementedError()", "return np.exp(x) / 2")
    assert without_stub(filled, STARTER).strip() == "return np.exp(x) / 2"
    assert without_stub(STARTER, STARTER) == ""
    # an edited docstring whose removal would leave an open string: the cell stays whole
    edited = filled.replace('"""Softmax', '"""Mine.\n    Softmax')
    assert "return np.exp(x) / 2" in without_stub(edited, STARTER)
    # one edited line in the middle of a docstring would be left as a bare line of prose
    stub = 'def f(x):\n    """One.\n\n    Two words.\n    """\n    raise NotImplementedError()\n'
    mine = stub.replace("Two words.", "Two of my words.").replace(
        "raise NotImplementedError()", "1"
    )
    assert without_stub(mine, stub) == mine


def test_checks_csv(tmp_path):
    batch = planted_batch()
    path = tmp_path / "report-checks.csv"
    html.write_checks_csv(batch, path)
    rows = {row["check"]: row for row in csv.DictReader(path.open())}
    assert rows["test_inverted"]["flags"] == stats.FLAG_NEGATIVE
    assert rows["test_inverted"]["upper_lower"] == "-0.667"
    assert rows["test_top_six"]["mistakes"] == "no_sqrt_scaling x3"
    assert rows["test_everyone_passes"]["point_biserial"] == ""


def test_stored_report_is_read_as_untrusted_data(tmp_path):
    check = {"name": "=HYPERLINK(1)", "grade_id": "g", "max_points": "9", "passed": "yes"}
    report = report_from_metadata({"metadata": {REPORT_KEY: {"checks": [check]}}})
    assert report.checks[0].passed is False and report.checks[0].max_points == 0
    assert report.status == "crashed"  # no status: not taken as ok
    assert report_from_metadata({"metadata": {REPORT_KEY: {"checks": "all passed"}}}) is None
    assert report_from_metadata({"metadata": ["not", "a", "dict"]}) is None
    batch = Batch(submissions=[Graded(EX, "x", "ok", tuple(report.checks))])
    html.write_checks_csv(batch, tmp_path / "c.csv")
    (row,) = csv.DictReader((tmp_path / "c.csv").open())
    assert row["check"] == "'=HYPERLINK(1)"  # not a formula in a spreadsheet


def test_student_text_is_escaped():
    batch = planted_batch()
    batch.submissions.append(Graded(EX, 'eve"><img src=x>', "crashed", messages=(HOSTILE,)))
    page = html.render(batch, title="t", csv_name="c.csv")
    assert "<script>" not in page and "<img src=x>" not in page
    assert "&lt;script&gt;" in page
    assert "http://" not in page and "https://" not in page  # nothing loaded from the network


def test_planted_report_renders_in_chromium(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(html.render(planted_batch(), title="Planted batch", csv_name="c.csv"))
    dom = rendered_dom(page)
    text = visible_text(dom)
    for heading in (
        "1. Scores and the manual-grading backlog",
        "2. Checks: difficulty and discrimination",
        "3. Named mistakes",
        "4. Timeouts, crashes, invalid notebooks, integrity flags",
        "5. Similarity of student-written code",
    ):
        assert heading in text
    assert re.search(r"test_inverted cell 1 3/10 0\.30 -0\.82 -0\.67 negative discrimination", text)
    assert re.search(r"test_everyone_passes cell 1 10/10 1\.00 — \+0\.00 never fails", text)
    assert "no_sqrt_scaling : scores not divided by sqrt(d_k) ×3 s01, s02, s03" in text
    assert "tess ex1_numpy_attention tampered replaced builtins.__import__" in text
    assert f"tim ex1_numpy_attention timeout cell 4 ran out of time {HOSTILE}" in text
    assert "1 s03 ↔ s07 1.00" in text
    assert "waiting for a hand grade 1 of 14 (2 points)" in text
    (histogram,) = images(dom)
    assert len(histogram) > 2000
    shot = screenshot(page, "report-planted.png")
    assert shot.stat().st_size > 20_000


def test_report_of_a_directory_that_is_no_course(tmp_path):
    done = attn_grade("report", "--course", str(tmp_path))
    assert done.returncode == 2
    assert "has no nbgrader_config.py" in done.stderr
    assert not list(tmp_path.iterdir())


def test_names_and_late_submissions_section():
    """Students known by LMS ids get their names; each late submission its penalty ("A Korean
    course through Canvas and Moodle", item 8); names came through a download: escaped."""
    from autograder.report.roster import Late, Named, Roster, late_by

    roster = Roster(
        names=[
            Named("10001", "", "canvas: 김민준"),
            Named("20003", "Luis García, Jr.", "moodle: Luis García, Jr."),
            Named("20009", "", f"moodle: {HOSTILE}"),
        ],
        late=[Late(EX, "20002", "2026-11-21 14:00 UTC", "2026-11-20 12:00 UTC",
                   late_by(93_600), 4.5, 4.5, 0.0, 10.0, "not graded by hand yet: answer")],
        rule="LateSubmissionPlugin, penalty_method = zero",
    )  # fmt: skip
    page = html.render(planted_batch(), title="t", csv_name="c.csv", roster=roster)
    assert "<script>" not in page and "&lt;script&gt;" in page
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "6. Students: names and late submissions" in text
    assert "10001 — canvas: 김민준" in text
    assert "20003 Luis García, Jr. moodle: Luis García, Jr." in text
    assert (
        f"{EX} 20002 2026-11-21 14:00 UTC 2026-11-20 12:00 UTC 1 d 2 h 4.5 −4.5 0 / 10 "
        "(not final: not graded by hand yet: answer)"
    ) in text
    assert "penalty_method = zero" in text
    assert [late_by(s) for s in (40, 720, 19_800, 93_600)] == ["40 s", "12 min", "5 h 30 min",
                                                              "1 d 2 h"]  # fmt: skip
    empty = html.render(planted_batch(), title="t", csv_name="c.csv")
    assert "None: no submission was handed in after its due date." in empty
