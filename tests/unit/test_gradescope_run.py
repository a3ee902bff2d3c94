"""The Gradescope bundle's scripts and `gradescope-run` where nothing is graded (issue: CI round
2, items 2-6): results.json is written whatever happens (refusal, internal error, a non-root
run), the grader's files under /autograder are locked away from the child before it starts,
the PyTorch index is an option with bounded retries, and "hidden until the due date" hides
the score too. No notebook is graded here; tests/integration/test_gradescope.py and
test_gradescope_container.py grade."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

import pytest

from autograder.ci import gradescope
from autograder.ci.gradescope import BUNDLE, CONFIG_NAME, ROOT_VARIABLE, build_bundle, results_json
from autograder.cli import app
from autograder.core.results import CheckResult, GradeReport
from autograder.core.status import Status
from autograder.sandbox import isolation

EXERCISE = "ex1_numpy_attention"
NOBODY = 65534


def autograder_root(base: Path, config: str | None = None) -> Path:
    """A /autograder as Gradescope leaves it before run_autograder: source with the config,
    a submission, the metadata (0644, as Gradescope writes it), an empty results folder."""
    root = base / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    text = config if config is not None else json.dumps({"exercise": EXERCISE,
                                                        "visibility": "visible"})  # fmt: skip
    (root / "source" / CONFIG_NAME).write_text(text)
    (root / "submission" / f"{EXERCISE}.ipynb").write_text("{}")
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": 4242}]}))
    return root


@pytest.fixture
def gradescope_run(monkeypatch, capsys):
    """`attn-grade gradescope-run --root ROOT` in this process, with `env`: (exit, stderr)."""

    def run(root: Path, **env: str) -> tuple[int, str]:
        for name, value in {ROOT_VARIABLE: str(root), **env}.items():
            monkeypatch.setenv(name, value)
        isolation.detect.cache_clear()
        isolation._choose.cache_clear()
        try:
            code = app.main(["gradescope-run", "--root", str(root)])
        finally:
            isolation.detect.cache_clear()
            isolation._choose.cache_clear()
        return code, capsys.readouterr().err

    return run


def results_of(root: Path) -> dict:
    return json.loads((root / "results" / "results.json").read_text())


def assert_not_graded(results: dict, status: str, *words: str) -> None:
    """Gradescope's format (score 0, no tests, a visible message) with what happened."""
    assert results["score"] == 0 and results["tests"] == []
    assert results["visibility"] == "visible" and results["output_format"] == "md"
    assert results["extra_data"]["status"] == status
    for word in words:
        assert word.lower() in results["output"].lower(), results["output"]


# -- item 3: results.json whatever happens ------------------------------------------------------
def test_a_refusal_writes_results_and_exits_4(tmp_path, gradescope_run):
    root = autograder_root(tmp_path)
    code, stderr = gradescope_run(root, ATTN_GRADE_ISOLATION="landlock", ATTN_GRADE_LANDLOCK="0")
    assert code == 4, stderr
    assert "landlock" in stderr
    assert_not_graded(results_of(root), "not_graded", "not graded", "landlock")


@pytest.mark.parametrize(
    "config",
    ["{not json", json.dumps({"exercise": "ex99_nothing", "visibility": "visible"}), "[]"],
    ids=["not-json", "unknown-exercise", "not-an-object"],
)
def test_a_grader_failure_writes_results_and_exits_3(config, tmp_path, gradescope_run):
    root = autograder_root(tmp_path, config)
    code, stderr = gradescope_run(root)
    assert code == 3, stderr
    assert_not_graded(results_of(root), "grader_error", "not graded")
    assert "Traceback" not in stderr


def test_a_missing_config_writes_results_too(tmp_path, gradescope_run):
    root = autograder_root(tmp_path)
    (root / "source" / CONFIG_NAME).unlink()
    code, _ = gradescope_run(root)
    assert code == 3
    assert_not_graded(results_of(root), "grader_error")


# -- item 2: /autograder locked away from the child ---------------------------------------------
def test_every_entry_but_the_venv_is_locked_away(tmp_path):
    root = autograder_root(tmp_path)
    (root / "venv").mkdir(mode=0o755)
    (root / "harness_notes.txt").write_text("anything Gradescope may add")
    (root / "extra").mkdir(mode=0o755)
    (root / "run_autograder").write_text("#!/bin/sh\n")
    for path in root.iterdir():
        path.chmod(0o755 if path.is_dir() else 0o644)
    locked = gradescope.lock_away(root)
    assert {p.name for p in locked} == {p.name for p in root.iterdir()} - {"venv"}
    for path in locked:
        assert not path.stat().st_mode & 0o077, f"{path.name} is open to others"
    assert (root / "venv").stat().st_mode & 0o005 == 0o005, "the child's Python stays readable"


def test_gradescope_run_locks_the_metadata_before_grading(tmp_path, gradescope_run):
    """Even when grading is then refused, the metadata (earlier results, hidden tests) is
    closed first: the lock comes before anything that could stop the run."""
    root = autograder_root(tmp_path)
    gradescope_run(root, ATTN_GRADE_ISOLATION="landlock", ATTN_GRADE_LANDLOCK="0")
    for name in ("submission_metadata.json", "submission", "source"):
        assert not (root / name).stat().st_mode & 0o077, name


# -- item 4: run_autograder as a non-root user --------------------------------------------------
def run_autograder_as(uid: int, root: Path) -> subprocess.CompletedProcess:
    script = root / "run_autograder"
    shutil.copy(BUNDLE / "run_autograder", script)
    script.chmod(0o755)
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", str(script)]
    env = {"PATH": "/usr/bin:/bin", ROOT_VARIABLE: str(root)}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=root)


@pytest.fixture
def open_root():
    """An /autograder that other users can enter (pytest's tmp folders are root's only)."""
    base = Path(tempfile.mkdtemp(prefix="attn-gs-nonroot-"))
    base.chmod(0o755)
    root = autograder_root(base)
    root.chmod(0o755)
    yield root
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another user")
def test_a_non_root_run_says_why_and_writes_results_where_it_can(open_root):
    results = open_root / "results"
    os.chown(results, NOBODY, NOBODY)
    done = run_autograder_as(NOBODY, open_root)
    assert done.returncode == 4, done.stderr
    assert "must run as root" in done.stderr and "Traceback" not in done.stderr
    assert_not_graded(results_of(open_root), "not_graded", "must run as root")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another user")
def test_a_non_root_run_that_cannot_write_results_says_so(open_root):
    done = run_autograder_as(NOBODY, open_root)
    assert done.returncode == 4
    assert "must run as root" in done.stderr and "results.json" in done.stderr
    assert not (open_root / "results" / "results.json").exists()


def test_run_autograder_writes_results_when_the_grader_is_missing(tmp_path):
    root = autograder_root(tmp_path)
    script = root / "run_autograder"
    shutil.copy(BUNDLE / "run_autograder", script)
    script.chmod(0o755)
    done = subprocess.run([str(script)], capture_output=True, text=True,
                          env={**os.environ, ROOT_VARIABLE: str(root)})  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert_not_graded(results_of(root), "grader_error", "setup.sh")


# -- item 5: the PyTorch index is an option ----------------------------------------------------
FAKE_PYTHON = """\
#!/usr/bin/env bash
# `-m venv DIR`: a venv whose pip records its arguments; anything else: the real python
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/sh\\necho "$@" >> %s/pip-args\\n' "$FAKE_LOG" > "$3/bin/pip"
  printf '#!/bin/sh\\necho %s/site\\n' "$FAKE_LOG" > "$3/bin/python"
  chmod +x "$3/bin/pip" "$3/bin/python"
  exit 0
fi
exec {real} "$@"
"""


def run_setup(tmp_path: Path, torch_index: str | None, **env: str) -> tuple[str, str]:
    """setup.sh of a bundle built with `torch_index`, with a fake interpreter: (pip's
    arguments, setup.sh's stderr)."""
    bundle = tmp_path / "autograder.zip"
    wheel = tmp_path / "attn_grade-0.0.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    options = {} if torch_index is None else {"torch_index": torch_index}
    build_bundle(EXERCISE, bundle, wheel, **options)
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    log = tmp_path / "log"
    (log / "site" / "autograder").mkdir(parents=True)
    python = tmp_path / "python3.11"
    python.write_text(FAKE_PYTHON.format(real=sys.executable))
    python.chmod(0o755)
    environment = {**os.environ, ROOT_VARIABLE: str(root), "ATTN_GRADE_PYTHON": str(python),
                   "FAKE_LOG": str(log), **env}  # fmt: skip
    done = subprocess.run(["bash", str(root / "source" / "setup.sh")], capture_output=True,
                          text=True, env=environment, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return (log / "pip-args").read_text(), done.stderr


@pytest.fixture(scope="module")
def local_index():
    """A reachable package index (an empty one: only reachability matters here)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


UNREACHABLE = "http://127.0.0.1:9/simple"  # the discard port: refused at once


def test_the_default_index_is_pytorchs_cpu_index(tmp_path):
    wheel = tmp_path / "attn_grade-0.0.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    bundle = build_bundle(EXERCISE, tmp_path / "a.zip", wheel)
    with zipfile.ZipFile(bundle) as archive:
        config = json.loads(archive.read(CONFIG_NAME))
    default = gradescope.DEFAULT_TORCH_INDEX
    assert config["torch_index"] == default == "https://download.pytorch.org/whl/cpu"


def test_a_reachable_index_is_used_with_bounded_retries(tmp_path, local_index):
    args, _ = run_setup(tmp_path, local_index)
    assert f"--extra-index-url {local_index}" in args
    assert "--retries" in args and "--timeout" in args


@pytest.mark.parametrize("how", ["bundle option none", "environment"])
def test_the_index_can_be_dropped(how, tmp_path, local_index):
    if how == "environment":
        args, _ = run_setup(tmp_path, local_index, ATTN_GRADE_TORCH_INDEX="none")
    else:
        args, _ = run_setup(tmp_path, "none")
    assert "--extra-index-url" not in args and "attn_grade-0.0.0" in args


def test_the_environment_overrides_the_bundles_index(tmp_path, local_index):
    args, _ = run_setup(tmp_path, UNREACHABLE, ATTN_GRADE_TORCH_INDEX=local_index)
    assert f"--extra-index-url {local_index}" in args


def test_an_unreachable_index_is_skipped_with_a_warning(tmp_path):
    args, stderr = run_setup(tmp_path, UNREACHABLE)
    assert "--extra-index-url" not in args
    assert UNREACHABLE in stderr and "cannot be reached" in stderr


def test_a_setup_sh_without_the_hard_coded_index():
    text = (BUNDLE / "setup.sh").read_text()
    assert "download.pytorch.org" not in text, "the index comes from the bundle's config"


# -- item 6: hidden until the due date hides the score too -------------------------------------
def graded_report(status: str = Status.OK) -> GradeReport:
    checks = [CheckResult("test_a", "g", 4.0, True), CheckResult("test_b", "g", 4.0, False, "no")]
    report = GradeReport(EXERCISE, status=status, checks=checks)
    if status == Status.INVALID_NOTEBOOK:
        report.messages = ["not graded: the file is not valid JSON"]
    return report


@pytest.mark.parametrize("visibility", ["after_due_date", "after_published", "hidden"])
def test_hidden_checks_hide_the_total_and_one_visible_line_says_it_was_graded(visibility):
    results = results_json(graded_report(), visibility)
    assert results["visibility"] == visibility, "the total would explain nothing before then"
    scored = [t for t in results["tests"] if "max_score" in t]
    assert all(t["visibility"] == visibility for t in scored) and len(scored) == 2
    (visible,) = [t for t in results["tests"] if t["visibility"] == "visible"]
    assert "score" not in visible and "max_score" not in visible
    assert visible["status"] == "passed" and "graded" in visible["output"]
    assert "4" not in visible["output"], "no points before the due date"


def test_an_ungraded_notebook_is_said_at_once_even_when_checks_are_hidden():
    results = results_json(graded_report(Status.INVALID_NOTEBOOK), "after_due_date")
    (visible,) = [t for t in results["tests"] if t["visibility"] == "visible"]
    assert visible["status"] == "failed" and "not valid JSON" in visible["output"]


def test_visible_checks_add_no_line_and_show_the_total():
    results = results_json(graded_report(), "visible")
    assert results["visibility"] == "visible"
    assert all("max_score" in t for t in results["tests"])


def test_results_json_is_gradescopes_format():
    """Every key Gradescope documents, with its type; nothing that would be shown twice."""
    results = results_json(graded_report(), "after_due_date")
    assert isinstance(results["score"], float) and isinstance(results["execution_time"], float)
    assert results["stdout_visibility"] == "hidden"
    documented = {"name", "score", "max_score", "status", "output", "output_format"}
    documented |= {"visibility", "extra_data", "tags", "number", "name_format"}
    for test in results["tests"]:
        assert set(test) <= documented
        assert test["status"] in ("passed", "failed")
