"""The Gradescope bundle run the way Gradescope runs it, in a container (issue: CI round 2):
root, Docker's default capabilities and seccomp profile (tests/support/podman.py). The bundle
is unpacked into /autograder/source, its setup.sh runs as root (the grader's pip install is
replaced by the wheel installed over this venv's dependencies: no network), run_autograder is
copied to /autograder; then each submission runs `cd /autograder && ./run_autograder` in a
fresh container, with Gradescope's submission_metadata.json (0644, earlier results inside).

Graded: the reference, the blank release, a catalogued mistake, a notebook probing what of
/autograder its code can read at `uid` without Landlock; not graded, with a results.json that
says why: an explicit `jail` (refused) and a non-root user. The full build with the real pip
install (mmdebstrap root file system, setup.sh with and without the PyTorch index) is
benchmarks/gradescope_container.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from autograder.authoring.catalogue import catalogue_for
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.support import podman
from tests.support.nbgrader_helpers import attn_grade

pytestmark = [pytest.mark.ex1, pytest.mark.slow]
EXERCISE = "ex1_numpy_attention"
MISTAKE = "no_sqrt_scaling"
NOBODY = "65534"
SITE = "/autograder/venv/lib/python3.11/site-packages"
# Gradescope's metadata holds earlier submissions' full results, hidden tests included
METADATA = {
    "id": 123456789,
    "users": [{"email": "student@example.edu", "id": 4242, "name": "Student One"}],
    "previous_submissions": [
        {"score": 5.0, "results": {"tests": [{"name": "HIDDEN-TEST-SECRET", "score": 0}]}}
    ],
}
SETUP = f"""set -e
/usr/bin/python3.11 -m venv --without-pip /autograder/venv
echo {{packages}} > {SITE}/zz-dependencies.pth
/autograder/venv/bin/python -m pip install -q --no-deps --no-index --ignore-installed \\
    /autograder/source/attn_grade-*.whl
cd /autograder/source && bash ./setup.sh
cp /autograder/source/run_autograder /autograder/run_autograder
chmod 755 /autograder/run_autograder
"""
# What a notebook's code can read of /autograder: every entry but the venv, and the grader
PROBE = f"""
import os
names = ["source", "submission", "results", "submission_metadata.json", "run_autograder",
         "extra", "notes.txt"]
try:
    names += os.listdir("/autograder")
except OSError:
    pass
paths = [os.path.join("/autograder", n) for n in sorted(set(names)) if n != "venv"]
paths += ["{SITE}/autograder/_reference/ex1_numpy_attention.py",
          "/autograder/source/attn-grade.json"]
readable = []
for path in paths:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        readable.append(path.replace("/autograder/", ""))
    except OSError:
        pass
raise RuntimeError("PROBE readable=" + (",".join(readable)[:150] or "nothing"))
"""


@pytest.fixture(scope="module")
def container(tmp_path_factory) -> podman.Container:
    """A /autograder after Gradescope's image build, and the way to run in it."""
    if (reason := podman.missing()) is not None:
        if os.environ.get("CI"):  # .ci/run installs podman: missing there is a failure
            pytest.fail(reason)
        pytest.skip(reason)
    made = podman.Container(tmp_path_factory.mktemp("gradescope-container"))
    bundle = made.base / "autograder.zip"
    done = attn_grade("gradescope", "ex1", "--out", str(bundle), "--torch-index", "none")
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(made.autograder / "source")
    done = made.run(SETUP.format(packages=made.packages))
    assert done.returncode == 0, done.stdout + done.stderr
    return made


def run_autograder(
    container: podman.Container, notebook: Path | None, *options: str
) -> tuple[subprocess.CompletedProcess, dict | None]:
    """One submission as Gradescope runs it; (the run, results.json or None)."""
    root = container.autograder
    (root / "run_autograder").chmod(0o755)  # as the image has it (a run locks it away)
    for name in ("submission", "results"):
        shutil.rmtree(root / name, ignore_errors=True)
        (root / name).mkdir(mode=0o755)
    if notebook is not None:
        shutil.copy(notebook, root / "submission" / notebook.name)
    (root / "submission_metadata.json").write_text(json.dumps(METADATA))
    (root / "submission_metadata.json").chmod(0o644)
    if "--user" in options:  # only the results folder is the user's (else nothing is written)
        shutil.chown(root / "results", int(NOBODY), int(NOBODY))
    done = container.run("cd /autograder && ./run_autograder", *options)
    results = root / "results" / "results.json"
    return done, json.loads(results.read_text()) if results.exists() else None


def notebook(tmp_path: Path, *, mistake: str | None = None, probe: bool = False) -> Path:
    replace = {}
    if mistake:
        found = catalogue_for(EXERCISE)[mistake]
        replace = {found.target: found.source}
    made = source_notebook(EXERCISE, replace=replace)
    if probe:
        made = with_student_cells(made, PROBE, position=2)
    return write_notebook(made, tmp_path / f"{EXERCISE}.ipynb")


def graded(done: subprocess.CompletedProcess, results: dict | None) -> dict:
    assert done.returncode == 0, done.stdout + done.stderr
    assert results is not None and results["extra_data"]["status"] == "ok", results
    assert results["extra_data"]["isolation"].startswith("uid"), "the jail needs capabilities"
    return results


def test_the_reference_scores_full_marks_at_the_uid_level(container, tmp_path):
    results = graded(*run_autograder(container, notebook(tmp_path)))
    assert results["score"] == 8


def test_the_blank_release_scores_zero(container, release_of):
    results = graded(*run_autograder(container, release_of(EXERCISE)))
    assert results["score"] == 0


def test_a_mistake_is_named(container, tmp_path):
    results = graded(*run_autograder(container, notebook(tmp_path, mistake=MISTAKE)))
    assert 0 < results["score"] < 8
    named = [t for t in results["tests"] if t.get("extra_data", {}).get("mistake") == MISTAKE]
    assert named and all(t["status"] == "failed" for t in named)


@pytest.mark.parametrize("landlock", ["0", "1"], ids=["uid-without-landlock", "uid+landlock"])
def test_the_notebook_reads_nothing_of_autograder_but_python(container, tmp_path, landlock):
    """At `uid` without Landlock, file permissions are all that keep the child out: Gradescope
    writes the metadata 0644 and the submission and results folders 0755."""
    (container.autograder / "notes.txt").write_text("anything Gradescope may add")
    (container.autograder / "notes.txt").chmod(0o644)
    options = ["-e", "ATTN_GRADE_LANDLOCK=0"] if landlock == "0" else []
    done, results = run_autograder(container, notebook(tmp_path, probe=True), *options)
    results = graded(done, results)
    assert ("landlock" in results["extra_data"]["isolation"]) == (landlock == "1")
    assert "PROBE readable=nothing" in results["output"], results["output"]
    assert "HIDDEN-TEST-SECRET" not in json.dumps(results)


def test_an_explicit_jail_is_refused_with_a_results_json_that_says_why(container, tmp_path):
    done, results = run_autograder(container, notebook(tmp_path), "-e", "ATTN_GRADE_ISOLATION=jail")
    assert done.returncode == 4, done.stdout + done.stderr
    assert results is not None and results["score"] == 0 and results["tests"] == []
    assert results["extra_data"]["status"] == "not_graded"
    for words in ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "--cap-add"):
        assert words in results["output"], results["output"]
    assert "sysctl" not in results["output"]


def test_a_non_root_user_gets_a_message_and_a_results_json(container, tmp_path):
    done, results = run_autograder(container, notebook(tmp_path), "--user", f"{NOBODY}:{NOBODY}")
    assert done.returncode == 4 and "Traceback" not in done.stderr
    assert "must run as root" in done.stderr
    assert results is not None and results["extra_data"]["status"] == "not_graded"
    assert "must run as root" in results["output"] and results["score"] == 0
