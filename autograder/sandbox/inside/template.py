"""The warm start's template: a process that has imported the child's runtime, NumPy, PyTorch
and matplotlib, and from which each sandbox's supervisor is forked. It never runs a line of
student code and never reads a file a child could have written.

Started by the grader as `python -s template.py SOCKET_FD [optimizers]` with the child's
environment for a work dir of its own: in the jail, under bubblewrap exactly as a cold
supervisor is; at the other levels as a plain process. It runs as the grader's uid (root: warm
starts are for a root grader, whose children each get a uid of their own), is not dumpable and
runs no second thread.
Protocol on the socket (AF_UNIX, SOCK_SEQPACKET; the grader's end has SO_PASSCRED, so the
kernel tells it who sent each message, with the pid as the grader sees it):
- the template sends {"ready": ...} once its imports are done;
- the grader sends {"fds": [target, ...]} with as many fds (SCM_RIGHTS): the new supervisor's
  stdin, stdout and stderr (targets 0, 1 and 2) and the child's pipes (the numbers its
  configuration names);
- the template forks; the new process puts the fds at their targets, closes every other,
  sends {"forked": pid}, closes the socket and is that sandbox's supervisor (supervisor.main):
  it reads its configuration from the stdin it was given (nothing of it passes the template),
  prepares the sandbox (in the jail: a mount namespace with fresh tmpfs at /sandbox, /tmp and
  /etc and a /proc showing only the child's own processes; network, IPC and UTS namespaces of
  its own, as bubblewrap gives a cold sandbox) and forks the child as a cold
  supervisor does (own session, fds, rlimits, uid, no_new_privs, Landlock, seccomp last). Where
  a cold child would exec child.py, the warm one raises `Launch`, which unwinds the template's
  and the supervisor's frames, and runs the child's server here (`run_child`).
- the template answers {"error": ...} to a request it cannot serve; at EOF it exits.
"""

import array
import ctypes
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys

import supervisor  # beside this file (the script's directory is first on sys.path)

PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 0x4000, 0x40000
MAX_FDS = 16
HERE = os.path.dirname(os.path.abspath(__file__))

libc = ctypes.CDLL(None, use_errno=True)


# Address space the template mapped for modules a cold child imports only when its notebook
# does (NumPy, matplotlib): added to a warm child's RLIMIT_AS, so that its first line has the
# room a cold child's has (a notebook that fills its address space fails where it would cold).
PRELOADED_BYTES = 0


def preload() -> None:
    """What every child imports (torch through the probes' capture before the first cell, the
    rest in the notebook's setup cell), imported once here; with `optimizers`, also what the
    first torch.optim optimizer of a process imports (torch._dynamo, about 0.9 CPU-s), for the
    children of a batch whose exercises train."""
    global PRELOADED_BYTES
    import child  # noqa: F401 - the runtime: wire format, probes, stand-ins' proxies
    import trusted

    trusted.capture()
    cold = address_space()  # a cold child's, at its first line
    import matplotlib
    import numpy  # noqa: F401

    matplotlib.use("agg")
    import matplotlib.pyplot

    if "optimizers" in sys.argv[2:]:  # what a process's first torch.optim optimizer loads
        import torch._dynamo  # noqa: F401

    PRELOADED_BYTES = max(address_space() - cold, 0)


def address_space() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what} failed")


def _mount(source, target: str, kind, flags: int, options: str | None = None) -> None:
    _check(
        libc.mount(
            source and source.encode(),
            target.encode(),
            kind and kind.encode(),
            flags,
            options and options.encode(),
        ),
        f"mount {target}",
    )


def own_namespaces() -> None:
    """Network, IPC and UTS namespaces of this sandbox's own, as bubblewrap gives a cold one
    (--unshare-net, --unshare-ipc, --unshare-uts, --hostname sandbox), with the loopback
    interface up as bubblewrap leaves it: no socket, SysV object or hostname of one sandbox
    is another's, nor the template's."""
    _check(libc.unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare(NET, IPC, UTS)")
    hostname = b"sandbox"
    _check(libc.sethostname(hostname, len(hostname)), "sethostname")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(control, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def fresh_jail(fresh: dict) -> None:
    """The sandbox's own filesystem and namespaces in the template's jail, as a cold jail would
    have them: a mount namespace of this supervisor's (the child inherits it) with new tmpfs at
    /sandbox and /tmp (the template's and every other sandbox's stay out of sight), /etc with
    a passwd naming the child's uid, and a /proc in which only the child's own processes are
    visible; network, IPC and UTS namespaces of its own (`own_namespaces`)."""
    keep = {}
    for path in fresh["etc_copies"]:
        try:
            with open(path, "rb") as handle:
                keep[path] = handle.read()
        except OSError:
            pass
    keep.update({path: text.encode() for path, text in fresh["etc"].items()})
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    own_namespaces()
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    size = int(fresh["work_bytes"])
    # a root bound below /tmp (a venv there) stays in sight, as in a cold jail (which mounts
    # its /tmp before the roots): held open, then bound again, read-only, through the handle
    kept = [(root, os.open(root, os.O_PATH)) for root in fresh.get("keep_below_tmp", [])]
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    for root, held in kept:
        os.makedirs(root, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{held}", root, None, MS_BIND | MS_REC)
        _mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(held)
    work = fresh["work"]
    _mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0755")
    for sub in fresh["subdirs"]:
        os.mkdir(f"{work}/{sub}", 0o755)
    for name in os.listdir(HERE):
        if name.startswith("fontlist-") and name.endswith(".json"):
            shutil.copyfile(f"{HERE}/{name}", f"{work}/mpl/{name}")
    _mount("tmpfs", "/etc", "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    for path, content in keep.items():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(descriptor, content)
        os.close(descriptor)
    _mount(None, "/etc", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if not any(
        libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, option) == 0
        for option in (b"hidepid=invisible", b"hidepid=2")
    ):
        raise OSError(ctypes.get_errno(), "mount /proc failed")


class Warm:
    """The supervisor's hooks for a warm start (supervisor.main(warm))."""

    @staticmethod
    def prepare(config: dict) -> None:
        if config.get("fresh"):
            fresh_jail(config["fresh"])
        limits = config["rlimits"]
        if "RLIMIT_AS" in limits and min(limits["RLIMIT_AS"]) >= 0:
            limits["RLIMIT_AS"] = [limit + PRELOADED_BYTES for limit in limits["RLIMIT_AS"]]


def _forget_matplotlib_dirs() -> None:
    """matplotlib remembers the config and cache dirs it found (the template's): a cold child
    finds its own, from its environment."""
    matplotlib = sys.modules.get("matplotlib")
    for name in ("get_configdir", "get_cachedir"):
        function = getattr(matplotlib, name, None)
        code = getattr(function, "__code__", None)
        cells = getattr(function, "__closure__", None) or ()
        if code is not None and "called" in code.co_freevars:
            cells[code.co_freevars.index("called")].cell_contents = False


def run_child(config: dict) -> None:
    """The warm child, isolated, becomes what `python -s child.py REQUEST RESPONSE` would be
    once started: its environment, arguments, streams and random state, then the server."""
    signal.set_wakeup_fd(-1)  # the supervisor's wake-up pipe (closed) is not the child's
    for number in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(config["env"])
    sys.argv = list(config["argv"][2:])
    config.clear()  # the supervisor's configuration, which a cold child's exec dropped
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    import tempfile

    import numpy

    tempfile.tempdir = None  # from TMPDIR again
    # the generators a fresh import seeds from the OS (Python's reseeds itself after fork)
    numpy.random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()
    _forget_matplotlib_dirs()
    import child

    try:
        child.main()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - exiting anyway
                pass
        os._exit(0)


def _received(ancillary) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            numbers = array.array("i")
            numbers.frombytes(data[: len(data) - len(data) % numbers.itemsize])
            fds += list(numbers)
    return fds


def _refuse(channel: socket.socket, fds: list[int], why: str) -> None:
    for fd in fds:
        os.close(fd)
    channel.send(json.dumps({"error": why}).encode())


def _targets(message: bytes, fds: list[int]) -> list[int] | None:
    try:
        targets = json.loads(message)["fds"]
    except (ValueError, KeyError, TypeError):
        return None
    valid = isinstance(targets, list) and all(type(t) is int and 0 <= t < 1024 for t in targets)
    if not valid or len(set(targets)) != len(targets) or len(targets) != len(fds):
        return None
    return targets if {0, 1, 2} <= set(targets) else None


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(channel: socket.socket) -> bool:
    """Fork a supervisor for each request until EOF (False). Returns True in a new supervisor,
    whose fds are in place and which holds nothing of the template's but its memory."""
    while True:
        _reap()
        ready, _, _ = select.select([channel], [], [], 0.5)
        if not ready:
            continue
        message, ancillary, _, _ = channel.recvmsg(65536, socket.CMSG_SPACE(MAX_FDS * 4))
        fds = _received(ancillary)
        if not message:
            for fd in fds:
                os.close(fd)
            return False
        targets = _targets(message, fds)
        if targets is None:
            _refuse(channel, fds, "a malformed request")
            continue
        if threads() != 1:  # fork copies only this thread: never fork a threaded process
            _refuse(channel, fds, f"the template runs {threads()} threads")
            return False
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            _become_supervisor(channel, fds, targets)
            return True
        for fd in fds:
            os.close(fd)


def _become_supervisor(channel: socket.socket, fds: list[int], targets: list[int]) -> None:
    """In the new supervisor: its own session, the given fds at their targets and no other."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    above = max(targets) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, above) for fd in fds]
    for fd in fds:
        os.close(fd)
    try:
        channel.send(json.dumps({"forked": os.getpid()}).encode())
    finally:
        channel.close()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in moved and fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass
    for source, target in zip(moved, targets, strict=True):
        os.dup2(source, target)
    for fd in moved:
        os.close(fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)


def main() -> None:
    channel = socket.socket(fileno=int(sys.argv[1]))
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace, /proc/PID/mem or environ of it
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # and EOF on the socket: both end it
    preload()
    channel.send(json.dumps({"ready": True, "threads": threads()}).encode())
    if not serve(channel):
        os._exit(0)
    try:
        supervisor.main(Warm())
    except supervisor.Launch as launch:
        config = launch.config
    except BaseException:  # noqa: BLE001 - the supervisor failed: say why, on the output pipe
        import traceback

        traceback.print_exc()
        os._exit(1)
    else:
        os._exit(0)
    run_child(config)  # the frames above are gone: only the modules' state is left


if __name__ == "__main__":
    main()
