"""Warm starts (sandbox/warm.py, sandbox/inside/template.py) keep the jail: measured from inside
the child at each level a root grader runs (`tests/support/warm_probe.py`), against a cold start
of the same level.

- a warm child's first student line runs with the uid, capabilities, no_new_privs, seccomp,
  Landlock, rlimits, cgroup, environment, streams and address-space room of a cold one;
- it can neither signal, trace, read nor take a file descriptor of its template or of a
  sibling sandbox forked from the same template;
- a later child of the template finds nothing of an earlier one (files in the work dir, $TMPDIR,
  $HOME, /tmp and /dev/shm, environment, patched modules, processes, random state);
- a template that dies is replaced (the sandbox that found it dead starts cold).
Before warm starts every sandbox was cold: these fail there on the `warm` flags they check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from autograder.sandbox import isolation
from tests.support.harness import DEBIAN_PYTHON, ROOT, layered_venv, processes_with, remove

DOCKER = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
NO_LANDLOCK = {"ATTN_GRADE_LANDLOCK": "0", "ATTN_GRADE_TRUSTED_CODE": "1"}
# name -> (isolation level, environment, command prefix), as test_perimeter_kernel simulates
LEVELS: dict[str, tuple[str, dict[str, str], list[str]]] = {
    "jail": ("jail", {}, []),
    "uid": ("uid", {}, []),
    "docker": ("uid", {"ATTN_GRADE_CGROUPS": "0"}, DOCKER),
    "docker-without-landlock": ("uid", {"ATTN_GRADE_CGROUPS": "0", **NO_LANDLOCK}, DOCKER),
}
# What a child reaches of its template where nothing hides other processes' /proc (no
# CAP_SYS_ADMIN for a private /proc, no Landlock): the world-readable files of a root process
# whose memory holds the public runtime and the modules every child imports; the same files of
# the grader itself are as readable there (test_perimeter_kernel, RESIDUAL).
WORLD_READABLE_PROC = {"proc_cmdline", "proc_status", "proc_stat"}
# Directories every child at a level shares with the host, warm or cold: without Landlock and
# without a mount namespace of its own (no CAP_SYS_ADMIN), the host's world-writable /tmp and
# /dev/shm (the level relies on file permissions: README "Isolation levels").
SHARED_WITH_THE_HOST = {"docker-without-landlock": {"/tmp", "/dev/shm"}}


def _missing(name: str) -> str | None:
    if os.geteuid() != 0:
        return "warm starts are for a root grader (an unprivileged one starts every sandbox cold)"
    if name == "jail":
        return None if isolation.detect().jail else "bubblewrap cannot run here"
    if not DEBIAN_PYTHON.exists():
        return f"needs a world-readable interpreter ({DEBIAN_PYTHON})"
    if LEVELS[name][2] and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is needed to drop CAP_SYS_ADMIN"
    return None


def _params():
    for name in LEVELS:
        reason = _missing(name)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        yield pytest.param(name, id=name, marks=marks)


@pytest.fixture(scope="module")
def measured():
    """level -> what warm_probe measured there (run once per level and test worker)."""
    results: dict[str, dict] = {}
    venv: list = []

    def measure(name: str) -> dict:
        if name in results:
            return results[name]
        level, extra, prefix = LEVELS[name]
        python = sys.executable
        if name != "jail":
            if not venv:
                venv.append(layered_venv())
            python = str(venv[0] / "bin" / "python")
        marker = f"attn-adv-warm-{uuid.uuid4().hex}"
        env = {**os.environ, "ATTN_GRADE_ISOLATION": level, "ATTN_WARM_MARKER": marker, **extra}
        env.pop(isolation.WARM_VARIABLE, None)
        done = subprocess.run(
            [*prefix, python, "-m", "tests.support.warm_probe", level],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])
        found["lingering"] = processes_with(marker)
        for folder in ("/tmp", "/dev/shm"):  # left there where the level shares them
            if os.path.isfile(f"{folder}/{marker}"):
                os.unlink(f"{folder}/{marker}")
        results[name] = found
        return found

    yield measure
    for path in venv:
        remove(path)


LEVEL_PARAMS = list(_params())


@pytest.mark.parametrize("name", LEVEL_PARAMS)
def test_a_warm_child_starts_as_a_cold_one(name, measured):
    found = measured(name)
    warm, cold = found["first_line"]["warm"], found["first_line"]["cold"]
    assert (warm["warm"], cold["warm"]) == (True, False)
    assert found["level"].endswith("+warm")
    differ = {"warm", "cgroups", "sandbox_group", "rlimits", "room", "writes_outside"}
    assert {k: (warm[k], cold.get(k)) for k in warm if k not in differ and warm[k] != cold[k]} == {}
    for facts in (warm, cold):  # each in its own sandbox's cgroup, or none without cgroups
        group = facts["sandbox_group"]
        expected = [f"{kind}:{group}" for kind in ("cpu", "memory", "pids")] if group else []
        assert facts["cgroups"] == expected
    assert {k: v for k, v in warm["rlimits"].items() if k != "RLIMIT_AS"} == {
        k: v for k, v in cold["rlimits"].items() if k != "RLIMIT_AS"
    }
    # the same room in the address space (the template's imports are added to the limit)
    assert abs(warm["room"] - cold["room"]) < 16 << 20, (warm["room"], cold["room"])
    # no write outside the work dir that a cold child could not make
    refused_cold = {k for k, v in cold["writes_outside"].items() if v != "open"}
    assert {k for k, v in warm["writes_outside"].items() if v == "open"} & refused_cold == set()


@pytest.mark.parametrize("name", LEVEL_PARAMS)
def test_a_warm_child_cannot_reach_its_template_nor_a_sibling(name, measured):
    reach = measured(name)["reach"]
    assert reach["warm"] == [True, True]
    allowed = WORLD_READABLE_PROC if name == "docker-without-landlock" else set()
    assert {k: v for k, v in reach["template"].items() if v == "open" and k not in allowed} == {}
    assert {k: v for k, v in reach["sibling"].items() if v == "open" and k not in allowed} == {}
    for what in ("template", "sibling"):  # never its memory, environment, fds or files
        for secret in ("proc_mem", "proc_environ", "proc_maps", "proc_fd", "proc_root"):
            assert reach[what][secret] != "open", (what, secret)
    assert reach["template_alive"] and reach["sibling_answers"]


@pytest.mark.parametrize("name", LEVEL_PARAMS)
def test_a_later_child_of_the_template_finds_nothing_of_an_earlier_one(name, measured):
    found = measured(name)
    traces = found["traces"]
    assert traces["warm"] == [True, True, True] and traces["same_template"]
    shared = SHARED_WITH_THE_HOST.get(name, set())
    traces["files"] = {k: v for k, v in traces["files"].items() if k not in shared}
    left = {
        key: traces[key]
        for key in ("files", "environ", "processes")
        if traces[key] not in ({}, None, [])
    }
    patched = ("norm_patched", "module", "torch_attribute", "rcparams", "builtins")
    left |= {key: True for key in (*patched, "json_attribute") if traces[key]}
    assert left == {}
    second, third = traces["draws"]
    # Python's, NumPy's and PyTorch's generators: seeded from the OS in each child, as cold
    assert [a != b for a, b in zip(second, third, strict=True)] == [True, True, True]
    assert traces["seeded_draws"] not in (second, third)
    assert found["lingering"] == []


@pytest.mark.parametrize("name", LEVEL_PARAMS)
def test_a_template_that_dies_is_replaced(name, measured):
    replaced = measured(name)["replaced"]
    assert replaced["new"] and replaced["new"] != replaced["old"]
    assert all(outcome["answered"] for outcome in replaced["outcomes"])
    assert replaced["outcomes"][-1]["warm"]


@pytest.mark.skipif(os.geteuid() != 0, reason="warm starts are for a root grader")
def test_the_switch_turns_warm_starts_off_and_results_say_which(monkeypatch):
    from autograder.sandbox.process import Sandbox

    with Sandbox() as sandbox:
        assert sandbox.warm and sandbox.describe().endswith("+warm")
    monkeypatch.setenv(isolation.WARM_VARIABLE, "0")
    with Sandbox() as sandbox:
        assert not sandbox.warm and not sandbox.describe().endswith("warm")
        assert sandbox.describe() == isolation.choose().describe()
