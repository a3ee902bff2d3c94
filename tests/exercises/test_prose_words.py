"""The words of the notebooks' prose (issue "A Korean course through Canvas and Moodle", items
9 and 10): a reference to the lesson names its chapter, not the course design's lesson number
("수업 001 §7" means nothing to a student); a term has one Korean word across the notebooks
("query" was 질문 and 쿼리 on ex1's first screen); the math in Korean prose holds no English
words (`\\text{ at }` in ex6)."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from autograder.core.registry import EXERCISES
from autograder.notebooks.render import render_cells
from tests.conftest import exercise_params

HANGUL = "\uac00-\ud7a3"
# the words the Korean notebooks use for the terms of attention (glossed once, then used alone)
TERMS = {"query": "쿼리", "key": "키", "value": "값"}
# a lesson named by a number: "lesson 001", "lesson (001 §7)", "수업 002", "001 §8"
LESSON_NUMBER = re.compile(r"(?:lesson|수업)\W{0,3}\d{3}\b|\b\d{3}\s*§|§\s*\d", re.I)
# math in prose: $$...$$ or $...$
MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)
ENGLISH_IN_MATH = re.compile(r"\\(?:text|textrm|mbox)\{[^}]*[A-Za-z]{2,}[^}]*\}")
# a Korean word glossed by its English term: 쿼리(query), 키(key), 주석(annotation)
GLOSS = re.compile(rf"([{HANGUL}]+)\(([A-Za-z][A-Za-z -]*[A-Za-z])\)")


def prose(exercise: str, lang: str) -> list[str]:
    return [cell.source for cell in render_cells(exercise, lang) if not cell.is_code]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("exercise", exercise_params())
def test_the_lesson_is_named_not_numbered(exercise, lang):
    numbered = [m[0] for text in prose(exercise, lang) for m in LESSON_NUMBER.finditer(text)]
    assert numbered == [], f"name the lesson's chapter instead of {numbered}"


@pytest.mark.parametrize("exercise", exercise_params())
def test_the_math_of_korean_prose_has_no_english_words(exercise):
    found = [
        word
        for text in prose(exercise, "ko")
        for math in MATH.finditer(text)
        for word in ENGLISH_IN_MATH.findall(math[1] or math[2])
    ]
    assert found == [], f"English words in the math of Korean prose: {found}"


def test_each_term_has_one_korean_word_in_every_notebook():
    """Every English term glossed in Korean prose is glossed by the same word everywhere; the
    terms of attention by the words the notebooks use alone (TERMS)."""
    words: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for exercise in EXERCISES:
        for text in prose(exercise, "ko"):
            for korean, english in GLOSS.findall(text):
                words[english.lower()].add((korean, exercise[:3]))
    mixed = {term: sorted(used) for term, used in words.items() if len({k for k, _ in used}) > 1}
    assert mixed == {}, f"one term, several Korean words: {mixed}"
    for term, word in TERMS.items():
        used = {korean for korean, _ in words.get(term, set())}
        assert used <= {word}, f"{term} is glossed as {used}, not {word}"
