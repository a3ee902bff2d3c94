"""The process that runs a pool batch never grades (its workers do), so it never imports PyTorch:
planning (is this notebook still unreadable?), the audit line of each result, the course's
reports (each graded notebook's stored report) and the batch's own modules read notebooks
without the sandbox and the checks. It imported torch for the grading budget's defaults in the
first audit line (in every pool batch, beside the workers' grading) and to read a stored
report (a batch of one exercise or student, at its end): 1.1 CPU-s each time. A one-worker
batch imports torch as it grades its first notebook, after its sandbox template started
(pool.worker_pool), so the two overlap."""

from __future__ import annotations

import sys

from tests.support.harness import json_answer

EXERCISE = "ex1_numpy_attention"

PARENT = f"""
import json, sys
from pathlib import Path
from autograder.audit import log
from autograder.batch import dispatch, engine, pool, resume, table
from autograder.core.results import REPORT_KEY
from autograder.report import data

folder = Path(sys.argv[1])
graded = folder / "graded.ipynb"
notebook = {{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {{}}}}
notebook["metadata"][REPORT_KEY] = {{"exercise": "{EXERCISE}", "status": "ok", "checks": []}}
graded.write_text(json.dumps(notebook))
broken = folder / "broken.ipynb"
broken.write_text("{{not json")
line = log.record(
    json.loads(graded.read_text())["metadata"][REPORT_KEY],
    course=folder,
    notebook=graded,
    student="alice",
    batch="b1",
)
found = {{
    "audited": line["student"] == "alice" and "cell_timeout" in line["budget"],
    "stored": resume.stored_report(graded) is not None,
    "unreadable": [resume.unreadable(path, "{EXERCISE}") for path in (graded, broken)],
    "loaded": sorted(name for name in ("torch", "matplotlib") if name in sys.modules),
}}
print(json.dumps(found))
"""


def test_a_pool_batchs_own_process_reads_notebooks_without_torch(tmp_path):
    found = json_answer([sys.executable, "-c", PARENT, str(tmp_path)], timeout=120)
    assert found == {"audited": True, "stored": True, "unreadable": [False, True], "loaded": []}
