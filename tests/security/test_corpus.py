"""Grade every corpus entry at the jail level and at the fallback (`uid`: root without
namespaces), and the resource, process and network entries also as in a Docker container
(`docker`: the uid level without CAP_SYS_ADMIN and without cgroups: rlimits, CPU affinity and
the reaper)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.corpus import ENTRIES, Entry
from tests.support.harness import ROOT, Host, processes_with, remove
from tests.support.levels import LEVELS, missing
from tests.support.outcome import assert_outcome, build, forged_lines


def _params():
    for level in LEVELS:
        for entry in ENTRIES:
            if level not in entry.levels:
                continue
            # one level's entries run on one worker: its grading process (`drivers`) starts once
            # there, not on every worker (tests/support/ordering.py)
            marks = [
                getattr(pytest.mark, entry.exercise.split("_")[0]),
                pytest.mark.xdist_group(level),
            ]
            if level in entry.known:
                marks.append(pytest.mark.xfail(strict=True, reason=entry.known[level]))
            if (reason := missing(level)) is not None:
                marks.append(pytest.mark.skip(reason=reason))
            yield pytest.param(entry, level, id=f"{level}-{entry.id}", marks=marks)


@pytest.fixture
def host():
    bait = Host(Path(tempfile.mkdtemp(prefix="attn-adv-host-")))
    yield bait
    bait.close()
    remove(bait.base)


@pytest.mark.parametrize(("entry", "level"), list(_params()))
def test_corpus_entry(entry: Entry, level: str, drivers, host: Host, tmp_path):
    path = build(entry, host, tmp_path)
    answer = drivers(level).grade(path, entry.budget)
    assert_outcome(entry, answer, host)
    if entry.cli:
        done = subprocess.run(
            [*drivers(level).argv, "-m", "autograder.cli.app", "grade", str(path)],
            cwd=ROOT,
            env=drivers(level).env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert forged_lines(done.stdout.rstrip("\n"), entry.exercise) == []
        assert processes_with(host.marker) == []
