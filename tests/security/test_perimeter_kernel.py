"""The perimeter at every isolation level (issue 17, items 1-3 and 7): what the child can reach
of the kernel and of the grader's identity, measured from inside the child (`reach.py`).

Levels: `jail` with this venv; `uid`, `landlock` and `rlimits` under a root grader with a venv
on Debian's world-readable python3.11 (`harness.layered_venv`), since the child never runs as
root and so needs an interpreter its sandbox uid can run. Each level this host cannot offer is
skipped with the reason. Before issue 17: the 32-bit ABI went through the filter ("another ABI:
allow"), the jail had no filter, UDP reached 127.0.0.1, and the child of a root grader at
`landlock` and `rlimits` ran as uid 0 with every capability.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.core.errors import IsolationError
from autograder.sandbox import isolation
from tests.support.built_once import computed_once
from tests.support.harness import DEBIAN_PYTHON, ROOT, json_answer, layered_venv, remove

LEVELS = ("jail", "uid", "uid-without-landlock", "docker", "docker-without-landlock", "landlock")
LEVELS += ("rlimits",)
NO_LANDLOCK = {"ATTN_GRADE_LANDLOCK": "0", "ATTN_GRADE_TRUSTED_CODE": "1"}
DOCKER = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
# Levels as on another host: (isolation level, environment, command prefix) that simulate it.
SIMULATED: dict[str, tuple[str, dict[str, str], list[str]]] = {
    # a kernel without Landlock (< 5.13); the checkout is readable to others, which uid without
    # Landlock refuses for student code, so the measurement runs as trusted code
    "uid-without-landlock": ("uid", NO_LANDLOCK, []),
    # a default Docker container: root without CAP_SYS_ADMIN and without cgroups
    "docker": ("uid", {"ATTN_GRADE_CGROUPS": "0"}, DOCKER),
    "docker-without-landlock": ("uid", {"ATTN_GRADE_CGROUPS": "0", **NO_LANDLOCK}, DOCKER),
}
RESIDUAL = {
    ("docker-without-landlock", "proc_net"): (
        "without CAP_SYS_ADMIN (no private /proc), Landlock or a pid namespace, "
        "/proc/<host pid>/net/unix names the host's UNIX sockets (socket() is denied, so none "
        "can be connected to)"
    ),
}
DENIED_SURFACE = (
    "io_uring_setup", "userfaultfd", "bpf", "perf_event_open", "keyctl", "memfd_create",
    "unshare_user", "unshare_net", "mount", "ptrace_traceme", "ptrace_attach_parent",
    "clone_newuser", "kexec_load", "init_module", "personality",
)  # fmt: skip


def _missing(level: str) -> str | None:
    if level == "jail":
        return None if isolation.detect().jail else "bubblewrap cannot run here"
    if os.geteuid() != 0:
        return "the other levels are measured under a root grader"
    if not DEBIAN_PYTHON.exists():
        return f"needs a world-readable interpreter ({DEBIAN_PYTHON})"
    if level == "landlock" and not isolation.detect().landlock_abi:
        return "this kernel has no Landlock"
    return None


@pytest.fixture(scope="module")
def venv():
    made: list[Path] = []
    yield lambda: made[0] if made else made.append(layered_venv()) or made[0]
    for path in made:
        remove(path)


@pytest.fixture(scope="module")
def reached(venv, tmp_path_factory):
    """level -> what the child reached, with the UDP datagrams a host listener received:
    measured once per level and test run, whichever xdist workers run this module's tests (a
    share of them stolen by another worker measured every level it met again: 125 CPU-s of
    measurements for about 35); each call returns its own copy."""

    def measure(level: str) -> dict:
        return computed_once(
            tmp_path_factory, f"perimeter-kernel-{level}", lambda: _measured(level, venv)
        )

    return measure


def _measured(level: str, venv) -> dict:
    """What a child at `level` reached, measured now (tests.support.reach)."""
    marker = tempfile.mktemp(prefix="attn-adv-listener-", dir="/tmp")
    host_unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host_unix.bind(marker)
    host_unix.listen(1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    datagrams = _datagram_listeners()  # as /dev/log or journald's: anyone may write
    python = sys.executable if level == "jail" else str(venv() / "bin" / "python")
    chosen, simulated, prefix = SIMULATED.get(level, (level, {}, []))
    env = {**os.environ, "ATTN_GRADE_ISOLATION": chosen, "ATTN_ADV_SECRET": marker}
    env |= simulated
    if level == "rlimits":
        env["ATTN_GRADE_TRUSTED_CODE"] = "1"  # the checkout is readable: rlimits refuses
    hosts = [str(listener.getsockname()[1]), datagrams["path"][1], datagrams["abstract"][1]]
    found = json_answer([*prefix, python, "-m", "tests.support.reach", chosen, *hosts, marker], env)
    try:
        found["udp_received"] = listener.recv(100).decode()
    except TimeoutError:
        found["udp_received"] = ""
    listener.close()
    found["datagrams_received"] = {}
    for name, (sock, _) in datagrams.items():
        try:
            found["datagrams_received"][name] = sock.recv(100).decode()
        except BlockingIOError:
            pass
        sock.close()
    os.unlink(datagrams["path"][1])
    host_unix.close()
    os.unlink(marker)
    found["host_marker"] = marker
    return found


def _datagram_listeners() -> dict[str, tuple[socket.socket, str]]:
    """Host datagram sockets the child must not reach: by path (world-writable) and by abstract
    name; -> name -> (socket, address to give the child)."""
    found = {}
    path = tempfile.mktemp(prefix="attn-adv-dgram-", dir="/tmp")
    abstract = os.path.basename(tempfile.mktemp(prefix="attn-adv-abstract-"))
    for name, address, given in (("path", path, path), ("abstract", "\0" + abstract, abstract)):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(address)
        sock.setblocking(False)
        found[name] = (sock, given)
    os.chmod(path, 0o777)
    return found


def _params(without: tuple[str, ...] = (), what: str = ""):
    for level in [level for level in LEVELS if level not in without]:
        reason = _missing(SIMULATED.get(level, (level,))[0])
        if level in SIMULATED and SIMULATED[level][2] and shutil.which("setpriv") is None:
            reason = "setpriv (util-linux) is needed to drop CAP_SYS_ADMIN"
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        if (level, what) in RESIDUAL:
            marks.append(pytest.mark.xfail(strict=True, reason=RESIDUAL[level, what]))
        yield pytest.param(level, id=level, marks=marks)


@pytest.mark.parametrize("level", list(_params()))
def test_real_work_still_runs(level, reached):
    found = reached(level)
    loss, echo = found["work"]
    assert isinstance(loss, float) and echo == "ok", found["work"]
    assert found["socketpair_works"] is True
    if level.endswith("-without-landlock"):
        assert "landlock" not in found["level"], found["level"]  # the simulation took


@pytest.mark.parametrize("level", list(_params()))
def test_no_other_abi(level, reached):
    found = reached(level)
    killers = ("x32_getpid", "i386_getpid", "i386_socketcall")
    assert {
        name: found[name] for name in killers if "killed by SIGSYS" not in str(found[name])
    } == {}


@pytest.mark.parametrize("level", list(_params()))
def test_the_stack_works_beyond_the_reference_notebooks_paths(level, reached):
    """Threads, fork, multiprocessing, shells, files, polling, asyncio, signals, limits and
    figures: what the allowlist must keep (the reference notebooks are graded in the corpus)."""
    legit = reached(level)["legit"]
    assert {name: outcome for name, outcome in legit.items() if outcome != "ok"} == {}


@pytest.mark.parametrize("level", list(_params()))
def test_a_call_outside_the_allowlist_is_not_implemented(level, reached):
    """Before the allowlist: open_tree_attr and listmount (new calls) reached the kernel, and so
    did inotify, SysV shared memory, POSIX queues, seccomp, Landlock and splice."""
    unlisted = reached(level)["unlisted"]
    assert {name: outcome for name, outcome in unlisted.items() if outcome != "ENOSYS"} == {}


@pytest.mark.parametrize("level", list(_params()))
def test_no_socket_address_reaches_the_host(level, reached):
    """A socketpair's datagram socket reached host datagram sockets by path (sendto, connect,
    sendmsg) at `uid` and `landlock`: every call that takes an address is refused."""
    found = reached(level)
    assert {name: got for name, got in found["addresses"].items() if got != "EPERM"} == {}
    assert found["datagrams_received"] == {}


@pytest.mark.parametrize("level", list(_params()))
def test_no_kernel_surface_a_notebook_never_needs(level, reached):
    surface = reached(level)["surface"]
    assert {name: surface[name] for name in DENIED_SURFACE if surface[name] == "open"} == {}


@pytest.mark.parametrize("level", list(_params()))
def test_no_socket_of_any_family(level, reached):
    found = reached(level)
    assert {k: v for k, v in found["sockets"].items() if v == "open"} == {}
    assert found["udp_received"] == ""


@pytest.mark.parametrize("level", list(_params(without=("rlimits",), what="proc_net")))
def test_no_host_socket_listing_nor_grader_environment(level, reached):
    """A host UNIX listener (as a fork server's) is named in no /proc file the child can read,
    and the grader's environment is not readable; `rlimits` (trusted code only) has no
    filesystem view of its own and is not measured here."""
    found = reached(level)
    readable = {
        path: text for path, text in found["proc_net"].items() if found["host_marker"] in text
    }
    assert readable == {}


@pytest.mark.parametrize("level", list(_params()))
def test_nothing_the_child_wrote_outside_its_work_dir_outlives_its_sandbox(level, reached):
    """Where the child could write in a world-writable folder (no Landlock, no jail): its files,
    folders and links there are gone once its sandbox has closed, /run/lock's too (a channel to
    the next submission that gets its uid)."""
    found = reached(level)
    assert found["scratch_left"] == [], found["scratch_written"]
    if level.endswith("without-landlock") or level == "rlimits":  # the test can fail there
        assert any(path.startswith("/run/lock/") for path in found["scratch_written"])
        assert any(path.startswith("/tmp/") for path in found["scratch_written"])
    elif level != "jail":  # (the jail's /tmp is its own tmpfs)
        assert found["scratch_written"] == [], "Landlock keeps the child in its work dir"


@pytest.mark.parametrize("level", list(_params()))
def test_never_a_privileged_child(level, reached):
    found = reached(level)
    identity = found["identity"]
    assert identity["uid"] != 0 and identity["euid"] != 0
    assert {k: v for k, v in identity["caps"].items() if k != "CapBnd" and v} == {}
    assert found["privileged_acts"] == {"chown_to_root": "EPERM", "mknod": "EPERM"}


@pytest.mark.skipif(os.geteuid() != 0, reason="a root grader's choice")
def test_a_root_grader_with_a_private_python_has_no_weak_level(monkeypatch):
    monkeypatch.setattr(isolation, "python_roots", lambda: ["/root"])
    monkeypatch.setattr(isolation, "_others_can_enter", lambda path: False)
    for level in ("uid", "landlock", "rlimits"):
        assert isolation._probe_level(level) is None


def test_explicit_rlimits_refuses_student_code(monkeypatch):
    weak = isolation.Isolation("rlimits", 0, "")
    monkeypatch.setattr(isolation, "_probe_level", lambda level: weak)
    monkeypatch.delenv(isolation.TRUSTED_CODE_VARIABLE, raising=False)
    isolation._choose.cache_clear()
    try:
        with pytest.raises(IsolationError, match="hidden checks"):
            isolation.choose("rlimits")
        isolation._choose.cache_clear()
        monkeypatch.setenv(isolation.TRUSTED_CODE_VARIABLE, "1")
        assert isolation.choose("rlimits").explicit
    finally:
        isolation._choose.cache_clear()


@pytest.mark.skipif(os.geteuid() != 0, reason="permissions are what a sandbox uid meets")
def test_a_level_without_its_own_view_refuses_a_readable_course(monkeypatch):
    monkeypatch.delenv(isolation.TRUSTED_CODE_VARIABLE, raising=False)
    no_landlock_uid = isolation.Isolation("uid", 0, "")
    base = Path(tempfile.mkdtemp(prefix="attn-adv-course-"))  # /tmp: every ancestor enterable
    try:
        _refuses_until_private(no_landlock_uid, base)
    finally:
        remove(base)


def _refuses_until_private(no_landlock_uid: isolation.Isolation, tmp_path: Path) -> None:
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    (course / "source" / "ex.ipynb").write_text("reference")
    (course / "gradebook.db").write_text("grades")
    for path in (tmp_path, course, course / "source"):
        path.chmod(0o755)
    with pytest.raises(IsolationError, match="chmod -R o-rwx"):
        isolation.require_private(no_landlock_uid, [course])
    course.chmod(0o750)  # as `attn-grade build` leaves it
    isolation.require_private(no_landlock_uid, [course])
    jail = isolation.Isolation("jail", 0, "")
    course.chmod(0o755)
    isolation.require_private(jail, [course])  # the jail binds no course at all


def test_build_leaves_the_course_unreadable_to_others(tmp_path):
    from autograder.course.build import build_course

    course = tmp_path / "course"
    build_course(course, ["ex4_gqa_analysis"], release=False)
    assert course.stat().st_mode & 0o007 == 0


STEAL_COPY = r"""
import json, sys
from autograder.grading.submission import ProgramCell, Submission
from autograder.sandbox import isolation
from autograder.sandbox.limits import Limits
CELL = '''
import os, sys
def steal():
    found = []
    for entry in sys.path:
        for path in (
            os.path.join(entry, "autograder", "_reference", "ex1_numpy_attention.py"),
            os.path.join(entry, "reference", "ex1_numpy_attention.py"),
        ):
            try:
                found.append(open(path).read()[:40])
            except OSError:
                pass
    try:
        import autograder._reference.ex1_numpy_attention as stolen
        found.append(stolen.__file__)
    except Exception:
        pass
    return found
'''
level = isolation.choose(sys.argv[1])
with Submission([ProgramCell("cell 1", CELL)], Limits(), level=level) as submission:
    print(json.dumps(submission.call("steal")))
"""


@pytest.mark.parametrize("level", list(_params(without=("rlimits", *SIMULATED))))
def test_every_importable_copy_of_the_hidden_packages_is_hidden(level, venv, tmp_path):
    """A second installed copy (a wheel's package, with the exercises' references, in the venv
    beside the checkout the grader runs from) was not masked: 8/8 at `jail` by import. (Levels
    without a view of their own refuse a readable copy: `test_a_level_without_its_own_view...`.)"""
    python = venv() / "bin" / "python"
    site = next((venv() / "lib").glob("python*/site-packages"))
    copy = site / "autograder"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "autograder", copy, dirs_exist_ok=True, ignore=ignore)
    try:
        env = {**os.environ, "ATTN_GRADE_ISOLATION": level}
        stolen = json_answer([str(python), "-c", STEAL_COPY, level], env)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert stolen == []
