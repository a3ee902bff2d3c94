"""What every corpus entry must come out as, whatever the level."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from functools import cache
from pathlib import Path

from autograder.core.registry import checks_module_path
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.support import raw
from tests.support.corpus import Entry
from tests.support.harness import Host, processes_with

# The grading process (about 0.4 GiB) stays under 1.5 GiB whatever the notebook sends: a reply
# of up to 128 MiB may be held a few times over while it is read and decoded, never multiplied.
PEAK_RSS_LIMIT_KIB = 3 << 19
# Words the corpus's cells put into their own error messages when an attack got through.
# (Writes are judged on the host: a write to the jail's private /tmp is harmless.)
GOT_THROUGH = ("UNBOUNDED", "'reached'")
# Nothing a notebook wrote may reach the report as a control or line-breaking character.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]"
)


@cache
@functools.cache
def check_points(exercise: str) -> dict[str, float]:
    """Check name -> points, read from the `@check` markers of the exercise's check module."""
    spec = importlib.util.spec_from_file_location(
        f"_points_{exercise}", checks_module_path(exercise)
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = {}
    for name, function in vars(module).items():
        for mark in getattr(function, "pytestmark", []):
            if name.startswith("test_") and mark.name == "check":
                found[name] = float(mark.kwargs["points"])
    assert sum(found.values()) == 8, (exercise, found)
    return found


def expected_scores(entry: Entry) -> dict[str, float]:
    return {
        name: 0.0 if entry.fails is None or name in entry.fails else points
        for name, points in check_points(entry.exercise).items()
    }


def build(entry: Entry, host: Host, directory: Path) -> Path:
    path = directory / f"{entry.exercise}.ipynb"
    if entry.raw is not None:
        path.write_bytes(raw.BUILDERS[entry.raw](entry.exercise))
        return path
    replace = {gid: host.fill(source) for gid, source in entry.replace.items()}
    notebook = source_notebook(entry.exercise, replace=replace)
    cells = [host.fill(cell) for cell in entry.source_cells()]
    return write_notebook(with_student_cells(notebook, *cells), path)


def forged_lines(text: str, exercise: str) -> list[str]:
    """Lines of an `attn-grade grade` report that are not of the report's own shapes."""
    names = set(check_points(exercise))
    shapes = [
        rf"{exercise}: [\d.]+ / 8 auto-graded points \(.*\)",
        r"status: \w+   isolation: \S+   seed: \d+",
        r"",
        r"  (PASS|FAIL)  (?P<name>test_\w+) +[\d.]+ / [\d.]+ *",
        r" {10}\S.*",
        r"notes:",
        r"  - .*",
        r"    .*",
    ]
    bad, seen = [], []
    for index, line in enumerate(text.split("\n")):
        match = next((re.fullmatch(s, line) for s in shapes if re.fullmatch(s, line)), None)
        if match is None or (index > 0 and line.startswith(exercise)):
            bad.append(line)
        elif match.groupdict().get("name"):
            seen.append(match["name"])
    if sorted(seen) != sorted(names):
        bad.append(f"check lines {seen}")
    return bad + [repr(ch) for ch in set(UNSAFE.findall(text))]


def assert_outcome(entry: Entry, answer: dict, host: Host) -> None:
    """The exact scores and status, and nothing leaked, reached, changed or left running."""
    results = answer["results"]
    report = json.dumps(results) + answer["text"]
    got = {test["name"]: test["score"] for test in results["tests"]}
    assert (got, results["extra_data"]["status"]) == (expected_scores(entry), entry.status), (
        results["output"]
    )
    assert processes_with(host.marker) == []
    assert [s for s in host.secrets if s in report] == []
    assert [word for word in GOT_THROUGH if word in report] == []
    assert host.what_reached_the_listeners() == []
    assert host.changed_course_files() == []
    assert host.files_written_outside() == []
    assert answer["peak_rss_kib"] < PEAK_RSS_LIMIT_KIB
    assert forged_lines(answer["text"], entry.exercise) == []
    texts = [results["output"], *(test["output"] for test in results["tests"])]
    assert [t for t in texts if UNSAFE.search(t.replace("\n", " "))] == []
