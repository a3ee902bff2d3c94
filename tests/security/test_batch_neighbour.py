"""A hostile submission graded beside a correct ex5 in a 2-worker `attn-grade autograde`:
100 CPU-bound background processes and 3 GiB of memory in a student cell for 30 s, while the
correct notebook trains its model. The correct one keeps 8/8; nothing of the hog survives."""

from __future__ import annotations

import json
import uuid

import nbformat
import pytest

from tests.support.harness import processes_with
from tests.support.nbgrader_helpers import attn_grade, scores, submission_text

pytestmark = [pytest.mark.slow, pytest.mark.ex5]
EXERCISE = "ex5_causal_mask"

HOG = """import subprocess, sys, time
hogs = [subprocess.Popen([sys.executable, "-S", "-c", "while True: pass", "{marker}"])
        for _ in range(100)]
memory = [subprocess.Popen([sys.executable, "-S", "-c",
          "x = b'1' * (1 << 30); import time; time.sleep(600)", "{marker}"]) for _ in range(3)]
end = time.monotonic() + 30
while time.monotonic() < end:
    pass
"""


def test_a_hog_beside_a_correct_ex5_changes_nothing(tmp_path_factory):
    course = tmp_path_factory.mktemp("neighbour") / "course"
    built = attn_grade("build", EXERCISE, "--course", str(course))
    assert built.returncode == 0, built.stderr
    release = course / "release" / EXERCISE / f"{EXERCISE}.ipynb"
    correct = submission_text(release, EXERCISE, "alice")
    marker = f"attn-adv-hog-{uuid.uuid4().hex}"
    hostile = nbformat.reads(correct, as_version=4)
    hostile.cells.insert(1, nbformat.v4.new_code_cell(HOG.format(marker=marker)))
    # sorted by student: the two are the first (and only) pair the two workers take
    for student, text in (("a_correct", correct), ("b_hog", nbformat.writes(hostile))):
        path = course / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(text)
    done = attn_grade("autograde", EXERCISE, "--course", str(course), "--workers", "2")
    assert done.returncode == 0, done.stderr
    graded = scores(course / "gradebook.db", EXERCISE)
    totals = {
        student: sum(v or 0 for gid, v in cells.items() if not gid.startswith("answer"))
        for student, cells in graded.items()
    }
    assert totals == {"a_correct": 8, "b_hog": 8}, json.dumps(graded)
    assert processes_with(marker) == []
