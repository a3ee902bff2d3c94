"""The README's two fresh-machine commands are the ones CI and newcomers actually run; the README
is a front page and the manual in docs/ is built whole (every page in the nav)."""

from __future__ import annotations

import re
import tomllib

import yaml

from autograder.core.registry import PROJECT_ROOT

FRONT_PAGE_LINES = 250


def readme_commands() -> list[str]:
    text = (PROJECT_ROOT / "README.md").read_text()
    return re.findall(r"```(?:bash|sh)\n(.*?)\n```", text, flags=re.S)[:2]


def docs_pages() -> set[str]:
    return {
        page.relative_to(PROJECT_ROOT / "docs").as_posix()
        for page in (PROJECT_ROOT / "docs").rglob("*.md")
    }


def nav_pages(entries: object) -> list[str]:
    """Every file the mkdocs.yml nav names, at any depth (`- Title: page.md`, `- page.md`)."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    raise TypeError(f"unexpected nav entry {entries!r}")


def test_readme_opens_with_demo_and_test_commands():
    demo, tests = readme_commands()
    assert demo.strip().endswith("attn-grade demo")
    assert "pytest" in tests
    gates = [
        "ruff check .",
        "ruff format --check .",
        "mypy",
        "mkdocs build --strict",
        "python -m pytest",
    ]
    positions = [tests.find(gate) for gate in gates]
    assert -1 not in positions and positions == sorted(positions), (
        "lint, types and docs before tests"
    )


def test_the_manual_is_built_outside_the_repository():
    """A site built into the checkout would be committed, or linted as part of the tree."""
    _, tests = readme_commands()
    site = re.search(r"mkdocs build --strict --site-dir (\S+)", tests)
    assert site is not None and site[1].startswith("/tmp/"), "mkdocs build --site-dir /tmp/..."


def test_ci_runs_the_readme_test_command():
    ci = (PROJECT_ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1].strip() == readme_commands()[1].strip()


def test_the_readme_is_a_front_page():
    lines = (PROJECT_ROOT / "README.md").read_text().splitlines()
    assert len(lines) < FRONT_PAGE_LINES, f"README.md has {len(lines)} lines; the manual is docs/"


def test_the_readmes_links_reach_the_manual():
    """mkdocs checks the links inside docs/; the front page's own links are checked here."""
    text = (PROJECT_ROOT / "README.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert any(t.startswith("docs/") for t in targets), "the README links the manual"
    missing = [t for t in targets if not (PROJECT_ROOT / t.split("#")[0]).is_file()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_every_docs_page_is_in_the_nav():
    config = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text())
    named = nav_pages(config["nav"])
    assert len(named) == len(set(named)), f"a page named twice in the nav: {named}"
    pages = docs_pages()
    assert set(named) == pages, (
        f"in docs/ but not in the nav: {sorted(pages - set(named))}; "
        f"in the nav but not in docs/: {sorted(set(named) - pages)}"
    )


def test_every_version_a_command_names_is_the_current_one():
    """Wheel file names and pins of attn-grade in the docs name the version being released
    (the GitLab example installed a 0.1.0 wheel at 0.2.7); prose about history may cite
    older versions ("grader 0.2.1")."""
    current = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    documents = ["README.md", "CONTRIBUTING.md", *(f"docs/{page}" for page in sorted(docs_pages()))]
    named = {
        f"{name}: {match.group(0)}"
        for name in documents
        for match in re.finditer(
            r"attn[-_]grade(?:==|-|\s+)v?(\d+\.\d+(?:\.\d+)?)\b", (PROJECT_ROOT / name).read_text()
        )
        if match.group(1) != current
    }
    assert not named, f"not the current version {current}: {sorted(named)}"
