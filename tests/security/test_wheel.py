"""A wheel install: the grader comes from a built wheel in site-packages (not the checkout), and
the corpus's stealing notebooks still cannot read the reference or the checks, at the jail level
and at the uid level.

The wheel is built from a copy of the checkout (`pip wheel --no-deps --no-build-isolation`) and
installed with `pip install --no-deps --target` into the site-packages of a venv on Debian's
world-readable python3.11, whose other packages (numpy, torch, ...) come from this venv through
a plain path line (no .pth processing: this venv's editable finder stays out). Every installed
file is world-readable, the worst case for the uid level. Until the wheel carries the exercise
templates as package data, grading needs them beside the package (TEMPLATES_DIR): they are
copied there, and only then.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.corpus import ENTRIES
from tests.support.harness import DEBIAN_PYTHON, ROOT, Driver, Host, remove
from tests.support.levels import missing as _missing
from tests.support.outcome import assert_outcome, build

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
STEALING = [e for e in ENTRIES if e.id.startswith(("fs_reference", "fs_checks"))]


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel_site():
    if not DEBIAN_PYTHON.exists():
        pytest.skip(f"needs a world-readable interpreter ({DEBIAN_PYTHON})")
    base = Path(tempfile.mkdtemp(prefix="attn-adv-wheel-"))
    os.chmod(base, 0o755)
    source = base / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "autograder", source / "autograder", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(base / "dist"), str(source))
    (wheel,) = (base / "dist").glob("attn_grade-*.whl")
    venv = base / "venv"
    _run(str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(venv))
    packages = venv / "lib" / "python3.11" / "site-packages"
    _run(*pip, "install", "--no-deps", "--no-index", "--target", str(packages), str(wheel))
    (packages / "deps.pth").write_text(site.getsitepackages()[0] + "\n")
    assert any((packages / "autograder").rglob("*.ipynb.j2")), "templates are package data"
    yield venv, packages
    remove(base)


@pytest.mark.parametrize("level", ["jail", "uid"])
@pytest.mark.parametrize("entry", STEALING, ids=[e.id for e in STEALING])
def test_a_wheel_install_hides_the_reference_and_checks(entry, level, wheel_site, tmp_path):
    if (reason := _missing(level)) is not None:
        pytest.skip(reason)
    venv, packages = wheel_site
    env = {**os.environ, "ATTN_GRADE_ISOLATION": level, "PYTHONSAFEPATH": "1"}
    driver = Driver([str(venv / "bin" / "python")], env, module=False)
    host = Host(Path(tempfile.mkdtemp(prefix="attn-adv-host-")))
    host.overrides.update(
        {
            "@REFERENCE@": str(packages / "autograder" / "_reference" / "ex1_numpy_attention.py"),
            "@CHECKS@": str(packages / "autograder" / "checks" / "ex1_numpy_attention.py"),
            "@SITE@": str(packages),
        }
    )
    try:
        answer = driver.grade(build(entry, host, tmp_path), entry.budget)
        assert Path(answer["grader"]) == packages / "autograder"  # graded by the wheel
        assert_outcome(entry, answer, host)
    finally:
        driver.close()
        host.close()
        remove(host.base)
