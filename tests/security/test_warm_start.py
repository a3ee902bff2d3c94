"""Warm starts (sandbox/warm.py, sandbox/inside/template.py) keep the jail: measured from inside
the child at each level a root grader runs (`tests/support/warm_probe.py`), against a cold start
of the same level.

- a warm child's first student line runs with the uid, capabilities, no_new_privs, seccomp,
  Landlock, rlimits, cgroup, environment, streams and address-space room of a cold one;
- it can neither signal, trace, read nor take a file descriptor of its template or of a
  sibling sandbox forked from the same template;
- a later child of the template finds nothing of an earlier one (files in the work dir, $TMPDIR,
  $HOME, /tmp and /dev/shm, environment, patched modules, processes, random state);
- a template that dies is replaced (the sandbox that found it dead starts cold);
- in the jail, each child has network, IPC, UTS and mount namespaces of its own, as under a
  cold bubblewrap, and holds nothing the supervisor ran with (its configuration, modules of the
  grader's package).
Before warm starts every sandbox was cold: these fail there on the `warm` flags they check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

from autograder.sandbox import isolation
from tests.support.built_once import computed_once
from tests.support.harness import (
    DEBIAN_PYTHON,
    json_answer,
    layered_venv,
    processes_with,
    remove,
)

DOCKER = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
NO_LANDLOCK = {"ATTN_GRADE_LANDLOCK": "0", "ATTN_GRADE_TRUSTED_CODE": "1"}
# name -> (isolation level, environment, command prefix), as test_perimeter_kernel simulates
LEVELS: dict[str, tuple[str, dict[str, str], list[str]]] = {
    "jail": ("jail", {}, []),
    "uid": ("uid", {}, []),
    "docker": ("uid", {"ATTN_GRADE_CGROUPS": "0"}, DOCKER),
    "docker-without-landlock": ("uid", {"ATTN_GRADE_CGROUPS": "0", **NO_LANDLOCK}, DOCKER),
}
# The levels whose template also loads what torch.optim's first optimizer loads, as a training
# batch's does (Exercise.trains): every test here then holds for that template outside the
# jail, in a container, with and without Landlock (in the jail:
# test_a_template_that_loads_what_optimizers_load_changes_nothing_else); the others keep the
# plain template.
OPTIMIZERS = {"docker", "docker-without-landlock"}
# What a child reaches of its template where nothing hides other processes' /proc (no
# CAP_SYS_ADMIN for a private /proc, no Landlock): the world-readable files of a root process
# whose memory holds the public runtime and the modules every child imports; the same files of
# the grader itself are as readable there (test_perimeter_kernel, RESIDUAL).
WORLD_READABLE_PROC = {"proc_cmdline", "proc_status", "proc_stat"}
# Directories every child at a level shares with the host, warm or cold: without Landlock and
# without a mount namespace of its own (no CAP_SYS_ADMIN), the host's world-writable /tmp and
# /dev/shm (the level relies on file permissions: docs/security.md "Isolation levels").
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
def measured(tmp_path_factory):
    """level -> what warm_probe measured there: once per level and test run, whichever xdist
    workers run this module's tests (built_once); each call returns its own copy."""
    venv: list = []

    def measure(name: str) -> dict:
        return computed_once(tmp_path_factory, f"warm-start-{name}", lambda: probe(name))

    def probe(name: str) -> dict:
        level, extra, prefix = LEVELS[name]
        python = sys.executable
        if name != "jail":
            if not venv:
                venv.append(layered_venv())
            python = str(venv[0] / "bin" / "python")
        marker = f"attn-adv-warm-{uuid.uuid4().hex}"
        env = {**os.environ, "ATTN_GRADE_ISOLATION": level, "ATTN_WARM_MARKER": marker, **extra}
        env.pop(isolation.WARM_VARIABLE, None)
        probe = [*prefix, python, "-m", "tests.support.warm_probe", level]
        found = json_answer(probe + (["optimizers"] if name in OPTIMIZERS else []), env, 600)
        found["lingering"] = processes_with(marker)
        for folder in ("/tmp", "/dev/shm"):  # left there where the level shares them
            if os.path.isfile(f"{folder}/{marker}"):
                os.unlink(f"{folder}/{marker}")
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
def test_each_level_measured_the_template_it_was_meant_to(name, measured):
    """The tests above measured a template with what the first optimizer loads where OPTIMIZERS
    says, and a plain one elsewhere: the template says so, and a warm child finds it."""
    expected = name in OPTIMIZERS
    assert measured(name)["optimizers"] == {"templates": [expected], "child": expected}


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


@pytest.mark.skipif(_missing("jail") is not None, reason=str(_missing("jail")))
def test_warm_children_in_the_jail_have_namespaces_of_their_own():
    """A cold sandbox's bubblewrap gives it its own network, IPC and UTS namespaces; warm
    children live in their template's jail, so their supervisor makes them: neither sibling
    children nor a child and its template share one (a socket, a SysV segment or a hostname
    set by one student never reaches another, should seccomp ever let such a call through)."""
    from autograder.sandbox import warm
    from autograder.sandbox.inside.supervisor import descendants
    from autograder.sandbox.process import Sandbox

    level = isolation.choose("jail")
    with Sandbox(level=level) as first, Sandbox(level=level) as second:
        assert first.warm and second.warm
        template = warm.template_for(level)
        assert template is not None
        pids = {"template": template.pid}
        for name, sandbox in (("first", first), ("second", second)):
            assert sandbox.process is not None
            pids[name] = descendants(sandbox.process.pid)[-1]  # the child, below its supervisor
        for kind in ("net", "ipc", "uts", "mnt"):
            found = {name: os.readlink(f"/proc/{pid}/ns/{kind}") for name, pid in pids.items()}
            assert len(set(found.values())) == 3, (kind, found)
        # no memory the template shares writably with its children (a fork keeps MAP_SHARED
        # mappings shared): what a child writes is its own
        with open(f"/proc/{template.pid}/maps") as maps:
            shared = [line for line in maps if line.split()[1][1::2] == "ws"]
        assert shared == []
        # as bubblewrap leaves a cold one's: the loopback interface, up, and nothing else
        with open(f"/proc/{pids['first']}/net/dev") as devices:
            interfaces = [line.split(":")[0].strip() for line in devices.read().splitlines()[2:]]
        assert interfaces == ["lo"]
        if shutil.which("nsenter") and shutil.which("ip"):
            shown = subprocess.run(
                ["nsenter", f"--net=/proc/{pids['first']}/ns/net", "ip", "-o", "link", "show"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert ",UP," in shown.split("lo:", 1)[1].split(">", 1)[0] + ",", shown


LEFTOVERS = r"""
import gc as _gc, sys as _sys
def _leftovers():
    def supervisor_config(value):
        return isinstance(value, dict) and {"rlimits", "pass_fds"} <= set(value)
    frames, frame = [], _sys._getframe()
    while frame is not None:  # the frames below the notebook's: the server's and what ran it
        frames.append(frame)
        frame = frame.f_back
    return {
        "frames": sorted(
            f"{f.f_code.co_name}:{name}"
            for f in frames for name, value in f.f_locals.items() if supervisor_config(value)
        ),
        "objects": sum(1 for o in _gc.get_objects() if supervisor_config(o)),
        "exception": repr(_sys.exc_info()[1]),
        "grader_modules": sorted(
            name for name, module in list(_sys.modules.items())
            if name.split(".")[0] == "autograder"
            or "autograder" in str(getattr(module, "__file__", "") or "")
        ),
    }
"""


@pytest.mark.skipif(_missing("jail") is not None, reason=str(_missing("jail")))
def test_a_warm_child_holds_nothing_a_cold_one_does_not():
    """What the template and the supervisor ran before the child's first line is gone: no
    frame, object or exception holds the supervisor's configuration (a cold child's exec
    dropped it), and no module of the grader's package is loaded (issue 36: only the
    stdlib-only runtime, which lives outside it)."""
    from autograder.sandbox.process import Sandbox
    from tests.support.warm_probe import call, run

    level = isolation.choose("jail")
    found = {}
    for warm_start in ("1", "0"):
        os.environ[isolation.WARM_VARIABLE] = warm_start
        try:
            with Sandbox(level=level) as sandbox:
                assert sandbox.warm == (warm_start == "1")
                run(sandbox, LEFTOVERS)
                found[sandbox.warm] = call(sandbox, "_leftovers")
        finally:
            os.environ.pop(isolation.WARM_VARIABLE, None)
    empty = {"frames": [], "objects": 0, "exception": "None", "grader_modules": []}
    assert found == {True: empty, False: empty}


@pytest.mark.skipif(_missing("jail") is not None, reason=str(_missing("jail")))
def test_a_template_that_loads_what_optimizers_load_changes_nothing_else():
    """A batch whose exercises train has its template load what torch.optim's first optimizer
    loads (torch._dynamo, sympy), once, instead of every child that trains. Its child starts as
    a cold one otherwise: the same first line (the same room in the address space: the extra
    imports are added to its limit too) and nothing of the template or the grader left."""
    from autograder.sandbox import warm
    from autograder.sandbox.process import Sandbox
    from tests.support.warm_probe import call, first_line, run

    level = isolation.choose("jail")
    warm.close_all()
    try:
        template = warm.template_for(level, optimizers=True)
        assert template is not None and template.optimizers
        warm_facts, cold_facts = first_line(level, True), first_line(level, False)
        assert warm.template_for(level) is template, "the sandboxes used another template"
        with Sandbox(level=level) as sandbox:
            run(sandbox, LEFTOVERS + "\nimport sys as _s\n_LOADED = 'torch._dynamo' in _s.modules")
            run(sandbox, "def _loaded():\n    return _LOADED")
            left, loaded = call(sandbox, "_leftovers"), call(sandbox, "_loaded")
    finally:
        warm.close_all()
    assert (warm_facts["warm"], cold_facts["warm"], loaded) == (True, False, True)
    assert abs(warm_facts["room"] - cold_facts["room"]) < 16 << 20
    differ = {"warm", "cgroups", "sandbox_group", "rlimits", "room", "writes_outside"}
    assert {
        k: (v, cold_facts[k])
        for k, v in warm_facts.items()
        if k not in differ and v != cold_facts[k]
    } == {}
    assert left == {"frames": [], "objects": 0, "exception": "None", "grader_modules": []}
