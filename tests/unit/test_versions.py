"""Versions that mean something (issue 18): the digest covers every file that decides points and
ignores moves; each version has its changelog entry."""

from __future__ import annotations

import re
import shutil
import tomllib

from autograder.core.registry import PROJECT_ROOT
from autograder.core.versions import CHECKS_VERSION, PACKAGE_DIR, digest_of, shared_points_files


def _copy(tmp_path):
    copy = tmp_path / "autograder"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_move_changes_nothing_and_other_code_does_not_count(tmp_path):
    copy = _copy(tmp_path)
    before = digest_of(shared_points_files(copy))
    (copy / "authoring" / "expect.py").rename(copy / "grading" / "expect_moved.py")
    assert digest_of(shared_points_files(copy)) == before
    (copy / "report" / "html.py").write_text("# the report does not decide points\n")
    assert digest_of(shared_points_files(copy)) == before


def test_verify_reports_a_change_of_shared_grading_code(tmp_path, monkeypatch):
    """`verify` (and `autograde`'s up-to-date test, which compares the same digest) sees an
    edit of autograder/authoring/expect.py as other checks."""
    from autograder.audit.digest import checks_digest
    from autograder.audit.verify import context_changes
    from autograder.core import versions

    copy = _copy(tmp_path)
    monkeypatch.setattr(versions, "PACKAGE_DIR", copy)
    checks_digest.cache_clear()
    record = {
        "exercise": "ex2_attention_heatmap",
        "grader_version": versions.grader_version(),
        "checks_version": CHECKS_VERSION,
        "checks_sha256": checks_digest("ex2_attention_heatmap"),
        "isolation": "jail",
    }
    assert context_changes(record, "jail") == []
    expect = copy / "authoring" / "expect.py"
    expect.write_text(expect.read_text().replace("1e-", "2e-"))
    checks_digest.cache_clear()
    try:
        changes = context_changes(record, "jail")
    finally:
        checks_digest.cache_clear()
    assert [c for c in changes if c.startswith("checks_sha256 ")] == changes and changes


def test_verify_compares_a_record_with_its_own_exercise_s_digest():
    """A record of ex1 is up to date against ex1's digest, whatever ex8's is; a record of an
    exercise that no longer exists says so instead of failing."""
    from autograder.audit.digest import checks_digest
    from autograder.audit.verify import context_changes
    from autograder.core import versions

    record = {
        "exercise": "ex1_numpy_attention",
        "grader_version": versions.grader_version(),
        "checks_version": CHECKS_VERSION,
        "checks_sha256": checks_digest("ex1_numpy_attention"),
        "isolation": "jail",
    }
    assert context_changes(record, "jail") == []
    assert context_changes({**record, "exercise": "ex8_additive_attention"}, "jail")
    gone = context_changes({**record, "exercise": "ex99_gone"}, "jail")
    assert gone and all(change.startswith("checks_sha256 ") for change in gone)


def test_every_version_has_its_changelog_entry():
    changelog = (PROJECT_ROOT / "CHANGELOG.md").read_text()
    version = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert re.search(rf"^## grader {re.escape(version)}\b", changelog, re.M)
    assert re.search(rf"^## checks {CHECKS_VERSION}\b", changelog, re.M)


def _digests(monkeypatch, copy) -> dict[str, str]:
    """Each exercise's checks digest, computed over `copy` (a copied autograder/)."""
    from autograder.audit.digest import checks_digest
    from autograder.core import registry, versions

    monkeypatch.setattr(versions, "PACKAGE_DIR", copy)
    monkeypatch.setattr(registry, "EXERCISES_DIR", copy / "exercises")
    monkeypatch.setattr(registry, "REFERENCE_DIR", copy / "_reference")
    monkeypatch.setattr(registry, "TEMPLATES_DIR", copy / "_student_templates")
    checks_digest.cache_clear()
    try:
        return {exercise: checks_digest(exercise) for exercise in registry.EXERCISES}
    finally:
        checks_digest.cache_clear()


def _own_files(exercise: str) -> list:
    """The parts of an exercise, found through the registry (wherever they live)."""
    from autograder.core import registry

    folder = registry.exercise_dir(exercise)
    return [
        folder / "__init__.py",
        registry.checks_module_path(exercise),
        folder / "mistakes.py",
        folder / "clauses.toml",
        folder / "input_classes.toml",
        registry.reference_path(exercise),
        registry.template_path(exercise),
    ]


def test_editing_one_exercise_leaves_the_others_digests_alone(tmp_path, monkeypatch):
    """Issue 42: an edit of ex8's checks (or any part of one exercise: its declaration,
    catalogue, tables, reference, template) changes its own digest and no other's, so the next
    `autograde` regrades that exercise alone."""
    from autograder.core import registry

    copy = _copy(tmp_path)
    before = _digests(monkeypatch, copy)
    assert len(set(before.values())) == len(before)  # each exercise has its own
    edited = 0
    for exercise in registry.EXERCISES:
        for path in _own_files(exercise):
            if not path.is_file():
                continue
            assert copy in path.parents, f"{path} is not in the copy: point the registry there"
            original = path.read_bytes()
            path.write_bytes(original + b"\n# a threshold changed\n")
            after = _digests(monkeypatch, copy)
            path.write_bytes(original)
            changed = {name for name in before if after[name] != before[name]}
            assert changed == {exercise}, (path, changed)
            edited += 1
    assert edited >= 6 * len(registry.EXERCISES)
    assert _digests(monkeypatch, copy) == before


def test_shared_grading_code_changes_every_exercise_s_digest(tmp_path, monkeypatch):
    copy = _copy(tmp_path)
    before = _digests(monkeypatch, copy)
    for shared in (
        "authoring/expect.py",
        "authoring/mutants.py",
        "grading/plugin.py",
        "sandbox/inside/probes.py",
        "notebooks/cells.py",
    ):
        path = copy / shared
        original = path.read_bytes()
        path.write_bytes(original + b"\n# a tolerance changed\n")
        after = _digests(monkeypatch, copy)
        path.write_bytes(original)
        assert all(after[name] != before[name] for name in before), shared


def test_files_that_decide_no_points_change_no_digest(tmp_path, monkeypatch):
    copy = _copy(tmp_path)
    before = _digests(monkeypatch, copy)
    (copy / "report" / "html.py").write_text("# the report does not decide points\n")
    draft = copy / "exercises" / "ex9_draft"
    draft.mkdir()
    (draft / "checks.py").write_text("# a draft is no exercise\n")
    (copy / "exercises" / "ex1_numpy_attention" / "notes.txt").write_text("not a part\n")
    assert _digests(monkeypatch, copy) == before
