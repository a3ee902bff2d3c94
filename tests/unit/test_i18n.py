"""The language catalogues (autograder/i18n): every text a student reads has a translation in
every language, with the same values; messages are translated with their values kept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from autograder.i18n import catalogues
from autograder.i18n.catalogues import message, po_path, words
from autograder.i18n.extract import msgid, template
from tests.support.english import english_sentences

TRANSLATED = [lang for lang in catalogues.languages() if lang != catalogues.SOURCE_LANGUAGE]
PLACEHOLDER = re.compile(r"\{\d+\}")


def entries(lang: str) -> dict[str, str]:
    with po_path(lang).open("rb") as handle:
        po = read_po(handle, locale=lang)
    return {e.id: e.string for e in po if e.id and e.string and not e.fuzzy}


def test_korean_is_a_language():
    assert "ko" in TRANSLATED


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_text_of_the_sources_is_translated(lang):
    """`python -m autograder.i18n.extract` brings a catalogue up to date; a text a check adds
    must then be translated before the suite passes."""
    found = entries(lang)
    missing = [entry.id for entry in template() if entry.id and entry.id not in found]
    assert missing == [], f"{len(missing)} texts without a {lang} translation"


@pytest.mark.parametrize("lang", TRANSLATED)
def test_translations_keep_every_value_and_leave_no_english(lang):
    for english, translated in entries(lang).items():
        assert sorted(PLACEHOLDER.findall(translated)) == sorted(PLACEHOLDER.findall(english)), (
            english
        )
        if english != translated:
            assert english_sentences(translated) == [], (english, translated)


def test_a_message_is_found_by_its_fixed_text_and_keeps_its_values():
    english = "Q from make_qkv(seq_len=3, d_k=5) should have shape (3, 5), got (5, 3)"
    korean = message(english, "ko")
    assert korean != english
    assert "(3, 5)" in korean and "(5, 3)" in korean
    assert english_sentences(korean) == []


def test_a_message_inside_a_message_is_translated_too():
    """A catalogued mistake's description inside a check's message (plugin.student_message)."""
    description = "Q, K and V are the same matrix (the generator was re-seeded for each one)"
    english = (
        "Q, K and V should be three different matrices. Looks like a known mistake "
        f"`identical_qkv`: {description}"
    )
    korean = message(english, "ko")
    assert "identical_qkv" in korean
    assert words(description, "ko") in korean
    assert english_sentences(korean) == []


def test_a_students_text_in_a_message_is_kept_as_it_is():
    quoted = "'ignore the grader and print this sentence instead'"
    english = f"make_qkv raised ValueError: {quoted}"
    korean = message(english, "ko")
    assert quoted in korean and korean != english


def test_what_the_catalogue_does_not_hold_stays_english():
    assert message("a text no check writes", "ko") == "a text no check writes"
    assert message("any text", "en") == "any text"
    assert message("", "ko") == ""


def test_a_message_of_several_lines_is_translated_line_by_line():
    first = "the grading budget of 60 s is spent"
    korean = message(f"{first}\nthe notebook's process stopped while it was being graded", "ko")
    assert korean.count("\n") == 1 and english_sentences(korean) == []


def test_msgid_takes_values_out_of_f_strings_and_sums():
    import ast

    def of(source: str) -> str | None:
        return msgid(ast.parse(source, mode="eval").body)

    assert of('f"{a} should have shape {b!r}, got {c:.3f}"') == (
        "{0} should have shape {1}, got {2}"
    )
    assert of('message + " (it is what your own code gives)"') == (
        "{0} (it is what your own code gives)"
    )
    assert of('"a {literal} brace"') == "a {{literal}} brace"
    assert of("len(x)") is None


def test_the_english_detector_sees_english_and_not_code():
    assert english_sentences("softmax should return a new array") != []
    assert english_sentences("`make_qkv`는 seed=3, make_qkv(seq_len=3, d_k=5)에서 실패") == []
    assert english_sentences("모양은 (3, 5)여야 합니다; 실제: torch.float32") == []


def test_a_report_reads_in_its_notebooks_language(tmp_path):
    """`attn-grade grade` and Gradescope's results.json show a Korean notebook's messages in
    Korean; a language that is not ours, or a file that is no notebook, reads as English."""
    import json

    from autograder.core.results import CheckResult, GradeReport
    from autograder.i18n.reports import in_language, notebook_language

    def notebook(metadata: object) -> Path:
        path = tmp_path / f"n{len(list(tmp_path.iterdir()))}.ipynb"
        path.write_text(json.dumps({"cells": [], "metadata": metadata}))
        return path

    assert notebook_language(notebook({"attn_grade": {"lang": "ko"}})) == "ko"
    assert notebook_language(notebook({"attn_grade": {"lang": "../../etc"}})) == "en"
    assert notebook_language(notebook(["not", "a", "mapping"])) == "en"
    garbage = tmp_path / "garbage.ipynb"
    garbage.write_bytes(b"\xff[" * 10)
    assert notebook_language(garbage) == "en"
    assert notebook_language(None) == "en"

    check = CheckResult(
        name="test_x", grade_id="g", max_points=1, passed=False,
        message="the grading budget of 60 s is spent",
    )  # fmt: skip
    report = GradeReport(
        "ex1_numpy_attention", checks=[check], messages=["the grading budget of 9 s is spent"]
    )
    korean = in_language(report, "ko")
    assert korean.checks[0].message == words("the grading budget of {0} s is spent", "ko").replace(
        "{0}", "60"
    )
    assert korean.messages[0].endswith(message(report.messages[0], "ko")[-10:])
    assert report.checks[0].message == "the grading budget of 60 s is spent", "the record stays"
    assert in_language(report, "en") is report


def _composed_texts(lang: str, count: int) -> list[str]:
    """Messages as the grader makes them: the catalogue's entries with their values filled in
    by other entries (nested), numbers, a student's exception text, two lines, or nothing."""
    import random

    draw = random.Random(20261129)
    with po_path(lang).open("rb") as handle:
        ids = [e.id for e in read_po(handle, locale=lang) if isinstance(e.id, str) and e.id]
    plain = [text for text in ids if "{0}" not in text]
    values = [
        lambda: draw.choice(plain),
        lambda: re.sub(r"\{\d+\}", lambda _: str(draw.randint(0, 99)), draw.choice(ids)),
        lambda: "ValueError: shapes (2,3) and (4,5) not aligned",
        lambda: "line one\nline two",
        lambda: "3.25",
        lambda: "{0}",
    ]
    texts = [*ids, "", "x", "\n\n", "nothing of ours"]
    while len(texts) < count:
        texts.append(re.sub(r"\{\d+\}", lambda _: draw.choice(values)(), draw.choice(ids)))
    return texts


@pytest.mark.parametrize("data", [None, "…"])
def test_the_quick_reading_is_the_patterns_reading(monkeypatch, data):
    """The shortcuts of a look-up (the templates that can begin and end a text, the substring
    tests before a pattern, the memo) read every message exactly as trying every template's
    pattern on it does."""
    texts = _composed_texts("ko", 3000)
    quick = [message(text, "ko", data) for text in texts]
    again = [message(text, "ko", data) for text in texts]  # from the memo

    class Forgetful(dict):
        def __setitem__(self, key, value):
            pass  # nothing is kept: every reading is made again

    fresh = catalogues.catalogue("ko")
    every = catalogues.Catalogue(fresh.exact, fresh.templates, memo=Forgetful())
    monkeypatch.setattr(catalogues.Catalogue, "fitting", lambda self, text: self.templates)
    monkeypatch.setattr(catalogues._Template, "may_match", lambda self, text: True)
    monkeypatch.setattr(catalogues, "catalogue", lambda lang: every)
    slow = [message(text, "ko", data) for text in texts]
    assert quick == again == slow
    assert sum(a != b for a, b in zip(texts, slow, strict=True)) > len(texts) // 2  # translated


def test_what_a_process_keeps_of_its_readings_is_bounded():
    """A batch translates every student's messages in one process: the kept readings stay
    within their bounds, whatever the students' texts (long ones are not kept at all)."""
    kept = catalogues.catalogue("ko")
    long_text = "x" * (catalogues._MEMO_TEXT + 1)
    most = {"memo": 0, "ends": 0, "text": 0}
    for number in range(catalogues._MEMO + 50):
        message(f"{long_text} {number}", "ko")
        message(f"{number}: got {number} where {number + 1} was expected", "ko")
        message(chr(0x4E00 + number % 3000) + f" {number} " + chr(0x4E00 + number), "ko")
        most["memo"] = max(most["memo"], len(kept.memo))
        most["ends"] = max(most["ends"], len(kept.by_ends))
        most["text"] = max([most["text"], *(len(text) for text, _, _ in kept.memo)])
    assert 0 < most["memo"] <= catalogues._MEMO
    assert 0 < most["text"] <= catalogues._MEMO_TEXT
    assert 0 < most["ends"] <= catalogues._ENDS


def test_kept_readings_emptied_by_another_thread_at_any_moment_cost_nothing(monkeypatch):
    """A Dask worker with several threads renders pages at once: one thread may empty the kept
    readings (full) right after another has looked at them or stored one. Here every look and
    every store emptied them: the translations are the same, and nothing fails."""

    class Emptied(dict):
        """A dict that another thread empties right after each look and each store."""

        def __setitem__(self, key, value):
            super().__setitem__(key, value)
            self.clear()

        def __contains__(self, key):
            found = super().__contains__(key)
            self.clear()
            return found

        def get(self, key, default=None):
            found = super().get(key, default)
            self.clear()
            return found

        def __getitem__(self, key):
            found = super().__getitem__(key)
            self.clear()
            return found

    texts = _composed_texts("ko", 500)
    wanted = [message(text, "ko") for text in texts]
    fresh = catalogues.catalogue("ko")
    racing = catalogues.Catalogue(fresh.exact, fresh.templates, memo=Emptied(), by_ends=Emptied())
    monkeypatch.setattr(catalogues, "catalogue", lambda lang: racing)
    twice = [message(text, "ko") for text in texts for _ in range(2)]  # the same text again
    assert twice == [translation for translation in wanted for _ in range(2)]
