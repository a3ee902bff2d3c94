"""The README's two fresh-machine commands are the ones CI and newcomers actually run."""

from __future__ import annotations

import re
import tomllib

from autograder.core.registry import PROJECT_ROOT


def readme_commands() -> list[str]:
    text = (PROJECT_ROOT / "README.md").read_text()
    return re.findall(r"```(?:bash|sh)\n(.*?)\n```", text, flags=re.S)[:2]


def test_readme_opens_with_demo_and_test_commands():
    demo, tests = readme_commands()
    assert demo.strip().endswith("attn-grade demo")
    assert "pytest" in tests
    gates = ["ruff check .", "ruff format --check .", "mypy", "python -m pytest"]
    positions = [tests.find(gate) for gate in gates]
    assert -1 not in positions and positions == sorted(positions), "lint and types before tests"


def test_ci_runs_the_readme_test_command():
    ci = (PROJECT_ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1].strip() == readme_commands()[1].strip()


def test_every_version_a_command_names_is_the_current_one():
    """Wheel file names and pins of attn-grade in the docs name the version being released
    (the GitLab example installed a 0.1.0 wheel at 0.2.7); prose about history may cite
    older versions ("grader 0.2.1")."""
    current = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    named = {
        f"{name}: {match.group(0)}"
        for name in ("README.md", "CONTRIBUTING.md")
        for match in re.finditer(
            r"attn[-_]grade(?:==|-|\s+)v?(\d+\.\d+(?:\.\d+)?)\b", (PROJECT_ROOT / name).read_text()
        )
        if match.group(1) != current
    }
    assert not named, f"not the current version {current}: {sorted(named)}"
