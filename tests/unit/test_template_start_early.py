"""A grading process that knows it will grade starts its sandbox template in the background
(`sandbox.warm.start_early`), so the template's imports overlap the grader's own; the first
sandbox then uses that template, not a second one, and waits for it if it is not ready yet."""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest

from autograder.sandbox import isolation, warm

LEVEL = isolation.Isolation("jail", 7, "", explicit=True)


class FakeTemplate:
    made: ClassVar[list[FakeTemplate]] = []
    release = threading.Event()
    fail = False

    def __init__(self, in_jail: bool):
        # a real template takes a second or two to import: this one until the test says so
        if not self.release.wait(timeout=10):
            raise AssertionError("start_early waited for the template to be ready")
        if FakeTemplate.fail:
            raise warm.TemplateFailed("no python here")
        self.in_jail, self.alive = in_jail, True
        FakeTemplate.made.append(self)

    def close(self) -> None:
        self.alive = False


@pytest.fixture
def fake(monkeypatch):
    FakeTemplate.made, FakeTemplate.release, FakeTemplate.fail = [], threading.Event(), False
    monkeypatch.setattr(warm, "Template", FakeTemplate)
    monkeypatch.setattr(warm, "_TEMPLATES", {})
    monkeypatch.setattr(warm, "_FAILED", [])
    assert LEVEL.warm
    return FakeTemplate


def test_the_template_starts_in_the_background_and_the_first_sandbox_uses_it(fake):
    warm.start_early(LEVEL)  # returns while the template is still starting
    got: list = []
    first = threading.Thread(target=lambda: got.append(warm.template_for(LEVEL)))
    first.start()
    first.join(timeout=0.5)
    assert first.is_alive(), "the first sandbox did not wait for the starting template"
    fake.release.set()
    first.join(timeout=60)
    assert len(fake.made) == 1 and got == fake.made, "one template, the one started early"
    assert warm._FAILED == []


def test_a_template_that_fails_early_is_tried_again_by_the_first_sandbox(fake, caplog):
    fake.fail = True
    fake.release.set()
    warm.start_early(LEVEL)
    for thread in threading.enumerate():
        if thread.name == "attn-grade-template-start":
            thread.join(timeout=60)
    assert len(warm._FAILED) == 1 and "template" in caplog.text
    fake.fail = False
    assert warm.template_for(LEVEL) is fake.made[0]


def test_no_template_starts_where_sandboxes_start_cold(fake, monkeypatch):
    monkeypatch.setenv("ATTN_GRADE_WARM", "0")
    cold = isolation.Isolation("jail", 7, "", explicit=True)
    fake.release.set()
    warm.start_early(cold)
    assert not cold.warm
    assert not [t for t in threading.enumerate() if t.name == "attn-grade-template-start"]
