"""`attn-grade build --small-demo`: each exercise's `small_demo` edits fit its demo cells (each
text found once) in every language, change only demo cells, and an edit that no longer fits the
template is an error, not a silent full-size demo."""

from __future__ import annotations

import pytest

from autograder.core.errors import GraderError
from autograder.core.registry import EXERCISES, declaration
from autograder.notebooks import render
from autograder.notebooks.render import LANGUAGES, render_cells, with_small_demo


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("exercise", EXERCISES)
def test_small_demo_edits_only_demo_cells(exercise, lang):
    full, small = render_cells(exercise, lang), render_cells(exercise, lang, small_demo=True)
    assert len(full) == len(small)
    changed = [(a, b) for a, b in zip(full, small, strict=True) if a != b]
    assert all(a.role == b.role == "demo" for a, b in changed)
    edits = declaration(exercise).small_demo
    assert len(changed) >= (1 if edits else 0)
    for text, replacement in edits.items():
        assert sum(b.source.count(replacement) for _, b in changed) >= 1, text


def test_the_training_demos_have_small_edits():
    """The exercises whose demo cells train a model (the ones that make a cycle slow)."""
    training = [
        e
        for e in EXERCISES
        if any("train_" in c.source for c in render_cells(e) if c.role == "demo")
    ]
    assert training and all(declaration(e).small_demo for e in training), training


def test_an_edit_that_no_longer_fits_is_an_error(monkeypatch):
    exercise = next(e for e in EXERCISES if declaration(e).small_demo)
    real = declaration(exercise)
    stale = type(real)(**{**real.__dict__, "small_demo": {"EPOCHS = 999": "EPOCHS = 1"}})
    monkeypatch.setattr(render, "declaration", lambda name: stale)
    with pytest.raises(GraderError, match="EPOCHS = 999"):
        with_small_demo(render_cells(exercise), exercise)
