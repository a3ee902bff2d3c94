"""Versions that mean something (issue 18): the digest covers every file that decides points and
ignores moves; each version has its changelog entry."""

from __future__ import annotations

import re
import shutil
import tomllib

from autograder.core.registry import PROJECT_ROOT
from autograder.core.versions import CHECKS_VERSION, PACKAGE_DIR, digest_of, points_files


def _copy(tmp_path):
    copy = tmp_path / "autograder"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_shared_grading_code_decides_the_digest(tmp_path):
    copy = _copy(tmp_path)
    before = digest_of(points_files(copy))
    for shared in (
        "authoring/expect.py",
        "grading/plugin.py",
        "sandbox/inside/probes.py",
        "notebooks/cells.py",
        "exercises/ex1_numpy_attention/checks.py",
        "_student_templates/ex2_attention_heatmap.ipynb.j2",
        "_reference/ex3_transformer_classifier.py",
    ):
        path = copy / shared
        original = path.read_bytes()
        path.write_bytes(original + b"\n# a tolerance changed\n")
        assert digest_of(points_files(copy)) != before, shared
        path.write_bytes(original)
    assert digest_of(points_files(copy)) == before


def test_a_move_changes_nothing_and_other_code_does_not_count(tmp_path):
    copy = _copy(tmp_path)
    before = digest_of(points_files(copy))
    (copy / "authoring" / "expect.py").rename(copy / "grading" / "expect_moved.py")
    assert digest_of(points_files(copy)) == before
    (copy / "report" / "html.py").write_text("# the report does not decide points\n")
    assert digest_of(points_files(copy)) == before


def test_verify_reports_a_change_of_shared_grading_code(tmp_path, monkeypatch):
    """`verify` (and `autograde`'s up-to-date test, which compares the same digest) sees an
    edit of autograder/authoring/expect.py as other checks."""
    from autograder.audit.verify import context_changes
    from autograder.core import versions

    copy = _copy(tmp_path)
    monkeypatch.setattr(versions, "PACKAGE_DIR", copy)
    versions.checks_digest.cache_clear()
    record = {
        "grader_version": versions.grader_version(),
        "checks_version": CHECKS_VERSION,
        "checks_sha256": versions.checks_digest(),
        "isolation": "jail",
    }
    assert context_changes(record, "jail") == []
    expect = copy / "authoring" / "expect.py"
    expect.write_text(expect.read_text().replace("1e-", "2e-"))
    versions.checks_digest.cache_clear()
    try:
        changes = context_changes(record, "jail")
    finally:
        versions.checks_digest.cache_clear()
    assert [c for c in changes if c.startswith("checks_sha256 ")] == changes and changes


def test_every_version_has_its_changelog_entry():
    changelog = (PROJECT_ROOT / "CHANGELOG.md").read_text()
    version = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert re.search(rf"^## grader {re.escape(version)}\b", changelog, re.M)
    assert re.search(rf"^## checks {CHECKS_VERSION}\b", changelog, re.M)
