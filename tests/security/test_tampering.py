"""Hostile notebooks gain nothing: each scores exactly what its honest parts earn, and no
process of it survives grading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.budget import Budget
from autograder.grading.runner import grade_notebook
from autograder.sandbox import isolation
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.support.harness import DEBIAN_PYTHON, layered_venv, processes_with, remove

pytestmark = pytest.mark.ex1
EXERCISE = "ex1_numpy_attention"
WRONG = catalogue_for(EXERCISE)["no_sqrt_scaling"]  # an honest notebook with one mistake


def grade(notebook, tmp_path: Path, **kwargs):
    return grade_notebook(write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb"), **kwargs)


def scores(report) -> dict[str, float]:
    return {check.name: check.points for check in report.checks}


@pytest.fixture(scope="module")
def honest_wrong(tmp_path_factory):
    """The scores of the notebook with one catalogued mistake and no tampering."""
    notebook = source_notebook(EXERCISE, replace={WRONG.target: WRONG.source})
    report = grade(notebook, tmp_path_factory.mktemp("honest"))
    assert 0 < report.score < 8
    return scores(report)


PATCHES = {
    "numpy_allclose": "import numpy as np\nnp.allclose = lambda *a, **k: True\n"
    "np.testing.assert_allclose = lambda *a, **k: None\nnp.array_equal = lambda *a, **k: True",
    "torch_allclose": "import torch\ntorch.allclose = lambda *a, **k: True\n"
    "torch.testing.assert_close = lambda *a, **k: None",
    "builtins": "import builtins\nbuiltins.isinstance = lambda *a: True\n"
    "builtins.abs = lambda x: 0\nbuiltins.len = lambda x: 0\nbuiltins.max = lambda *a, **k: 0",
    "print_all_passed": "print('All checks passed! Score: 8/8')\nimport sys\n"
    "sys.stderr.write('8.0\\n')",
    "fake_results_file": "import json\nfor name in ('results.json', '../results.json', "
    "'/tmp/results.json'):\n    try:\n        open(name, 'w').write(json.dumps({'score': 8}))\n"
    "    except OSError:\n        pass",
    "sys_exit": "import sys\nsys.exit(0)",
    "raise_keyboard_interrupt": "raise KeyboardInterrupt",
}


@pytest.mark.parametrize("patch", sorted(PATCHES))
def test_patching_gains_nothing(patch, honest_wrong, tmp_path):
    notebook = source_notebook(EXERCISE, replace={WRONG.target: WRONG.source})
    report = grade(with_student_cells(notebook, PATCHES[patch]), tmp_path)
    assert scores(report) == honest_wrong


def test_magics_and_shell_escapes_never_run_commands(tmp_path):
    marker = Path("/tmp") / f"attn-grade-shell-{uuid.uuid4().hex}"
    cells = [
        "%matplotlib inline\n%load_ext autoreload",
        f"!touch {marker}\nlisting = !ls /",
        f"%%bash\ntouch {marker}",
        "%%time\ntimed_here = 42",
        "%time also_timed = 7",
    ]
    notebook = with_student_cells(source_notebook(EXERCISE), *cells)
    report = grade(notebook, tmp_path)
    assert report.score == 8 and report.status == "ok"
    assert not marker.exists()
    assert any("ignored shell command" in m for m in report.messages)
    assert not any("raised" in m for m in report.messages), report.messages


def test_results_file_written_by_grader_only(tmp_path):
    results = tmp_path / "results.json"
    notebook = source_notebook(EXERCISE, replace={WRONG.target: WRONG.source})
    with_student_cells(
        notebook,
        f"try:\n    open({str(results)!r}, 'w').write('{{\"score\": 8}}')\nexcept OSError:\n"
        "    pass",
    )
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "autograder.cli.app", "grade", str(path), "--results", str(results)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(results.read_text())
    assert 0 < data["score"] < 8
    assert data["score"] == sum(test["score"] for test in data["tests"])


def test_os_exit_in_a_cell_skips_that_cell_only(tmp_path):
    notebook = with_student_cells(source_notebook(EXERCISE), "import os\nos._exit(3)")
    report = grade(notebook, tmp_path)
    assert report.score == 8
    assert report.status == "crashed"
    assert any("exit code 3" in message for message in report.messages)


def test_endless_loop_ignoring_sigalrm_is_killed(tmp_path):
    loop = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass"
    notebook = with_student_cells(source_notebook(EXERCISE), loop)
    report = grade(notebook, tmp_path, budget=Budget(cell_timeout=8))
    assert report.score == 8
    # every check completed: the cell past its time is a note on that cell (issue 20)
    assert report.status == "ok"
    notes = [m for m in report.messages if "stopped the notebook's process (timeout" in m]
    assert len(notes) == 1 and notes[0].startswith("cell "), report.messages


def test_endless_loop_inside_a_function_fails_only_its_checks(tmp_path):
    hang = "def score_variance(d_k, n_samples=10_000, seed=0):\n    while True:\n        pass"
    notebook = source_notebook(EXERCISE, replace={"score_variance": hang})
    report = grade(notebook, tmp_path, budget=Budget(call_timeout=5, max_restarts=5))
    failed = {check.name for check in report.checks if not check.passed}
    assert failed == {
        "test_score_variance_close_to_d_k_and_one",
        "test_score_variance_uses_its_arguments",
    }
    assert report.status == "timeout"


@pytest.mark.parametrize(
    "bomb",
    [
        "import numpy as np\nhuge = np.ones(10**11)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(10**8))",
    ],
    ids=["one_allocation", "growing"],
)
def test_memory_bomb_gains_nothing(bomb, tmp_path):
    report = grade(with_student_cells(source_notebook(EXERCISE), bomb), tmp_path)
    assert report.score == 8
    assert any("MemoryError" in message for message in report.messages)


LINGER = """import os, subprocess, sys, time
marker = {marker!r}
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", marker])
    os._exit(0)
"""


@pytest.fixture(scope="module")
def grader_for():
    """mode -> (python, environment) of a grader at that level. `rlimits` under a root grader
    needs an interpreter the sandbox uid can run (the child is never root) and, since the
    checkout is world-readable, the trusted-code acknowledgement (the test's own notebooks)."""
    made = []

    def grader(mode: str) -> tuple[str, dict]:
        env = {**os.environ, "ATTN_GRADE_ISOLATION": mode}
        if mode != "rlimits":
            return sys.executable, env
        env["ATTN_GRADE_TRUSTED_CODE"] = "1"
        if os.geteuid() != 0:
            return sys.executable, env
        if not DEBIAN_PYTHON.exists():
            pytest.skip(f"rlimits under root needs a world-readable {DEBIAN_PYTHON}")
        if not made:
            made.append(layered_venv())
        return str(made[0] / "bin" / "python"), env

    yield grader
    for path in made:
        remove(path)


@pytest.mark.parametrize("mode", ["auto", "rlimits"])
def test_no_process_survives_grading(mode, tmp_path, grader_for):
    marker = f"attn-grade-linger-{uuid.uuid4().hex}"
    notebook = with_student_cells(source_notebook(EXERCISE), LINGER.format(marker=marker))
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    python, env = grader_for(mode)
    done = subprocess.run(
        [python, "-m", "autograder.cli.app", "grade", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["score"] == 8
    assert processes_with(marker) == []


@pytest.mark.parametrize("mode", ["auto", "rlimits"])
def test_killing_the_supervisor_gains_nothing(mode, tmp_path, grader_for):
    marker = f"attn-grade-orphan-{uuid.uuid4().hex}"
    attack = LINGER.format(marker=marker) + "import signal\nos.kill(os.getppid(), signal.SIGKILL)"
    notebook = with_student_cells(source_notebook(EXERCISE), attack)
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    python, env = grader_for(mode)
    done = subprocess.run(
        [python, "-m", "autograder.cli.app", "grade", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["score"] == 8
    # Namespaces (pid 1) or Landlock (signal scope) protect the supervisor; without them the
    # grader adopts the orphans (child subreaper) and kills them when the sandbox closes.
    assert processes_with(marker) == []


@pytest.mark.skipif(
    not isolation.detect().landlock_abi, reason="this kernel has no Landlock: files are readable"
)
def test_reference_and_checks_are_unreadable_from_the_notebook(tmp_path):
    import autograder._reference.ex1_numpy_attention as ref

    steal = f"exec(open({ref.__file__!r}).read())"
    release_like = source_notebook(EXERCISE, replace={"make_qkv": "def make_qkv():\n    pass"})
    report = grade(with_student_cells(release_like, steal), tmp_path)
    # the jail has no such file; Landlock alone denies reading it
    assert any(
        "PermissionError" in message or "FileNotFoundError" in message
        for message in report.messages
    )
    assert not next(c for c in report.checks if c.name == "test_make_qkv_shapes_and_dtype").passed


@pytest.mark.parametrize(
    ("exercise", "mistake_id"),
    [
        (EXERCISE, "no_sqrt_scaling"),
        ("ex2_attention_heatmap", "heads_split_without_transpose"),
        ("ex4_gqa_analysis", "kv_repeat_not_interleave"),
    ],
)
def test_grading_twice_gives_identical_results(exercise, mistake_id, tmp_path):
    """Messages included: modules a submission builds with unseeded initialisation must come
    out the same on a regrade."""
    mistake = catalogue_for(exercise)[mistake_id]
    notebook = source_notebook(exercise, replace={mistake.target: mistake.source})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    first = grade_notebook(path).to_gradescope()
    second = grade_notebook(path).to_gradescope()
    first.pop("execution_time"), second.pop("execution_time")
    assert first == second
