"""Warm starts measured from inside the child at one isolation level (sandbox/warm.py).

Run as `python -m tests.support.warm_probe LEVEL [optimizers]` with the interpreter the level
needs (`optimizers`: the template loads what torch.optim's first optimizer loads, as a training
batch's does), and
$ATTN_WARM_MARKER the marker of what the first child leaves (never on a command line: at a
level without a private /proc a child reads command lines);
prints one JSON object with
- `first_line`: what the notebook's first line finds (identity, limits, seccomp, Landlock,
  cgroup, environment, streams), for a warm child and for a cold one (ATTN_GRADE_WARM=0);
- `reach`: what a warm child can do to its template and to a sibling running beside it (the
  pids as the child sees them), and whether both were still there afterwards;
- `traces`: what a second child of the same template finds of everything the first one left
  (files, environment, patched modules, processes, random state);
- `replaced`: sandboxes started after the template was killed;
- `optimizers`: whether each template that was used had loaded torch._dynamo (what the first
  optimizer loads), as the template says and as a warm child finds in its own modules.
Used by tests/security/test_warm_start.py.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from autograder.sandbox import isolation, warm
from autograder.sandbox.inside import wire
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox

FIRST_LINE = r"""
import os as _os, sys as _sys
def _first_line():
    import ctypes, resource
    status = dict(
        line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines()
        if ":\t" in line
    )
    keys = ["Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh",
            "CapPrm", "CapEff", "CapBnd", "CapAmb", "SigBlk", "SigIgn", "SigCgt", "Threads"]
    found = {key: status.get(key, "").strip() for key in keys}
    found["rlimits"] = {
        name: list(resource.getrlimit(getattr(resource, name)))
        for name in sorted(dir(resource)) if name.startswith("RLIMIT_")
    }
    work = _os.getcwd()
    found["env"] = {k: v.replace(work, "WORK") for k, v in _os.environ.items()}
    mask = _os.umask(0)
    _os.umask(mask)
    found["umask"] = mask
    found["flags"] = repr(_sys.flags)
    found["argv"] = len(_sys.argv)
    found["fds"] = len(_os.listdir("/proc/self/fd"))
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * _os.sysconf("SC_PAGE_SIZE")
    found["room"] = resource.getrlimit(resource.RLIMIT_AS)[0] - used  # address space left
    found["dumpable"] = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
    found["hash"] = hash("attn-grade")
    found["streams"] = [_sys.stdout.encoding, _sys.stdout.errors, _sys.stdout.write_through,
                        _sys.stderr.errors, _sys.stdin.read()]
    found["cgroups"] = sorted(
        line.split(":", 2)[1] + ":" + line.rsplit("/", 1)[-1]
        for line in open("/proc/self/cgroup").read().splitlines() if "attn-grade" in line
    )
    tries = {}
    for name, path in [("dev_shm", "/dev/shm/attn-warm-probe"), ("var_tmp", "/var/tmp/attn-wp"),
                       ("runtime", _os.path.dirname(_sys.argv[0]) + "/attn-warm-probe")]:
        try:
            open(path, "w").close()
            _os.unlink(path)
            tries[name] = "open"
        except OSError as error:
            tries[name] = type(error).__name__
    found["writes_outside"] = tries
    import getpass
    try:
        found["user"] = getpass.getuser()
    except KeyError as error:  # outside the jail the sandbox uid has no passwd entry
        found["user"] = type(error).__name__
    return found
FIRST_FACTS = _first_line()
def first_facts():
    return FIRST_FACTS
"""

REACH = r"""
import ctypes, errno, os, platform, signal
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_NR = {"x86_64": {"ptrace": 101, "process_vm_readv": 310, "kcmp": 312},
       "aarch64": {"ptrace": 117, "process_vm_readv": 270, "kcmp": 272}}[platform.machine()]
_NR.update({"pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438})
def _call(name, *args):
    result = _libc.syscall(ctypes.c_long(_NR[name]), *[ctypes.c_long(a) for a in args])
    return "open" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
def _try(action):
    try:
        action()
        return "open"
    except OSError as error:
        return errno.errorcode.get(error.errno, type(error).__name__)
def reach(pid):
    found = {
        "kill_0": _try(lambda: os.kill(pid, 0)),
        "kill_stop": _try(lambda: os.kill(pid, signal.SIGSTOP)),
        "kill_kill": _try(lambda: os.kill(pid, signal.SIGKILL)),
        "ptrace_attach": _call("ptrace", 16, pid, 0, 0),
        "ptrace_seize": _call("ptrace", 0x4206, pid, 0, 0),
        "process_vm_readv": _call("process_vm_readv", pid, 0, 0, 0, 0, 0),
        "kcmp": _call("kcmp", os.getpid(), pid, 0, 0, 0),
        "pidfd_getfd": _call("pidfd_getfd", -1, 3, 0),
    }
    handle = _libc.syscall(ctypes.c_long(_NR["pidfd_open"]), ctypes.c_long(pid), ctypes.c_long(0))
    if handle >= 0:
        found["pidfd_signal"] = _call("pidfd_send_signal", handle, signal.SIGKILL, 0, 0)
        found["pidfd_getfd_of_it"] = _call("pidfd_getfd", handle, 3, 0)
        os.close(handle)
    for name in ("mem", "environ", "maps", "cmdline", "status", "stat", "fd", "root", "cwd"):
        path = f"/proc/{pid}/{name}"
        listed = name in ("fd", "root", "cwd")
        found[f"proc_{name}"] = _try(
            (lambda: os.listdir(path)) if listed else (lambda: open(path, "rb").read(1))
        )
    return found
"""

LEAVE = r"""
import builtins, json, os, random, subprocess, sys, types
import matplotlib, numpy, torch
def leave(marker):
    for folder in (os.getcwd(), os.environ["TMPDIR"], os.environ["HOME"], "/tmp", "/dev/shm"):
        try:
            with open(os.path.join(folder, marker), "w") as handle:
                handle.write("left")
        except OSError:
            pass
    os.environ["ATTN_LEFTOVER"] = marker
    os.putenv("ATTN_LEFTOVER_C", marker)
    numpy.linalg.norm = lambda *args, **kwargs: 42.0
    sys.modules["attn_leftover"] = types.ModuleType("attn_leftover")
    torch.nn.Module.attn_leftover = marker
    matplotlib.rcParams["lines.linewidth"] = 9.5
    builtins.attn_leftover = marker
    json.attn_leftover = marker
    random.seed(1)
    numpy.random.seed(1)
    torch.manual_seed(1)
    code = f"import os, time; os.setsid(); os.fork() or time.sleep(300); os._exit(0)  # {marker}"
    subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    return os.getuid()
"""

FIND = r"""
import builtins, json, os, random, sys
import matplotlib, numpy, torch
def find(marker):
    seen = {}
    for folder in (os.getcwd(), os.environ["TMPDIR"], os.environ["HOME"], "/tmp", "/dev/shm"):
        try:
            seen[folder] = sorted(os.listdir(folder))
        except OSError as error:
            seen[folder] = type(error).__name__
    found = {
        "files": {k: v for k, v in seen.items() if isinstance(v, list) and marker in v},
        "environ": os.environ.get("ATTN_LEFTOVER") or os.getenv("ATTN_LEFTOVER_C"),
        "norm_patched": float(numpy.linalg.norm(numpy.ones(4))) == 42.0,
        "module": "attn_leftover" in sys.modules,
        "torch_attribute": hasattr(torch.nn.Module, "attn_leftover"),
        "rcparams": float(matplotlib.rcParams["lines.linewidth"]) == 9.5,
        "builtins": hasattr(builtins, "attn_leftover"),
        "json_attribute": hasattr(json, "attn_leftover"),
    }
    processes = []
    try:
        listed = os.listdir("/proc")
    except OSError:  # Landlock: no listing of /proc outside the jail
        listed = []
    for pid in listed:
        try:
            if marker in open(f"/proc/{pid}/cmdline", errors="replace").read():
                processes.append(pid)
        except OSError:
            pass
    found["processes"] = processes
    found["uid"] = os.getuid()
    return found
def draws():
    return [random.random(), float(numpy.random.random()), float(torch.rand(1))]
def seeded_draws():
    random.seed(1)
    numpy.random.seed(1)
    torch.manual_seed(1)
    return draws()
"""


def call(sandbox: Sandbox, name: str, *args):
    """The plain value `name(*args)` returns in the child."""
    encoder = wire.Encoder()
    header = {"op": "call", "target": {"$global": name}, "args": encoder.encode(list(args))}
    header["kwargs"] = encoder.encode({})
    response, blobs = sandbox.request(header, encoder.blobs, timeout=120)
    if not response.get("ok"):
        raise RuntimeError(f"{name}: {response.get('error')}")
    return wire.Decoder(blobs).decode(response.get("value"))


def run(sandbox: Sandbox, source: str) -> None:
    response, _ = sandbox.request({"op": "exec", "source": source, "label": "cell"}, timeout=120)
    if not response.get("ok"):
        raise RuntimeError(f"the cell failed: {response.get('error')}")


def started(level: isolation.Isolation) -> Sandbox:
    sandbox = Sandbox(Limits(), level)
    sandbox.start()
    return sandbox


def template_pid(level: isolation.Isolation) -> int:
    template = warm._TEMPLATES.get(level.jail)
    return template.pid if template is not None else 0


def as_seen_inside(pid: int) -> int:
    """`pid` (of this process's namespace) as the template's jail numbers it (its NSpid)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return pid


def first_line(level: isolation.Isolation, warm_start: bool) -> dict:
    os.environ[isolation.WARM_VARIABLE] = "1" if warm_start else "0"
    sandbox = started(level)
    try:
        run(sandbox, FIRST_LINE)
        facts = call(sandbox, "first_facts")
        group = sandbox._group
        facts["sandbox_group"] = group.paths[0].name if group is not None else ""
        facts["warm"] = sandbox.warm
        return facts
    finally:
        sandbox.close()
        os.environ.pop(isolation.WARM_VARIABLE)


def reach(level: isolation.Isolation) -> dict:
    first, sibling = started(level), started(level)
    try:
        template = template_pid(level)
        run(first, REACH)
        found = {
            "warm": [first.warm, sibling.warm],
            "template": call(first, "reach", as_seen_inside(template)),
            "sibling": call(first, "reach", sibling.pid),
        }
        found["template_alive"] = template == template_pid(level) and _alive(template)
        found["sibling_answers"] = sibling.alive and bool(
            sibling.request({"op": "ping"}, timeout=30)
        )
        return found
    finally:
        first.close()
        sibling.close()


def traces(level: isolation.Isolation, marker: str) -> dict:
    """A first child of the template leaves what it can; a second one looks for it. A third
    draws random numbers: two children of one template must not draw the same ones."""
    before = template_pid(level)
    first = started(level)
    try:
        run(first, LEAVE)
        first_uid = call(first, "leave", marker)
    finally:
        first.close()
    second = started(level)
    try:
        run(second, FIND)
        draws = [call(second, "draws")]
        found = call(second, "find", marker)
        found["seeded_draws"] = call(second, "seeded_draws")
        found["same_template"] = before != 0 and before == template_pid(level)
        found["first_uid"] = first_uid
    finally:
        second.close()
    third = started(level)
    try:
        run(third, FIND)
        draws.append(call(third, "draws"))
    finally:
        third.close()
    found["draws"] = draws
    found["warm"] = [first.warm, second.warm, third.warm]
    return found


def replaced(level: isolation.Isolation) -> dict:
    first = started(level)
    old = template_pid(level)
    first.close()
    os.kill(old, signal.SIGKILL)
    outcomes = []
    for _ in range(3):
        sandbox = started(level)
        try:
            answered = bool(sandbox.request({"op": "ping"}, timeout=30))
            outcomes.append({"warm": sandbox.warm, "answered": answered})
        finally:
            sandbox.close()
    return {"old": old, "new": template_pid(level), "outcomes": outcomes}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def main() -> None:
    chosen = isolation.choose(sys.argv[1])
    marker = os.environ["ATTN_WARM_MARKER"]
    optimizers = sys.argv[2:] == ["optimizers"]
    if optimizers:  # every sandbox below uses it (or, once it is killed, its replacement)
        assert warm.template_for(chosen, optimizers=True) is not None
    found = {
        "level": chosen.describe(),
        "first_line": {
            "warm": first_line(chosen, True),
            "cold": first_line(chosen, False),
        },
        "reach": reach(chosen),
        "traces": traces(chosen, marker),
        "replaced": replaced(chosen),
        "optimizers": {
            "templates": [template.optimizers for template in warm._TEMPLATES.values()],
            "child": dynamo_loaded(chosen),
        },
    }
    print(json.dumps(found))


def dynamo_loaded(level: isolation.Isolation) -> bool:
    """Whether a warm child has torch._dynamo loaded before its first line (from its template)."""
    sandbox = started(level)
    try:
        run(sandbox, "import sys as _s\n_DYNAMO = 'torch._dynamo' in _s.modules")
        run(sandbox, "def _dynamo():\n    return _DYNAMO")
        return bool(sandbox.warm and call(sandbox, "_dynamo"))
    finally:
        sandbox.close()


if __name__ == "__main__":
    main()
