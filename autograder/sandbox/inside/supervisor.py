"""Sandbox supervisor: starts the child under limits and, at the end, kills its whole tree.
Self-contained (stdlib only), started by the grader as `python -s supervisor.py`, possibly as
pid 1 of fresh user/pid/net namespaces. It reads one JSON line of configuration on stdin, then:
- marks itself a child subreaper, so that descendants which detach (setsid, double fork) are
  re-parented to it and stay findable;
- starts the child in a new session with resource limits, under the sandbox's own uid when one
  is given (the supervisor itself stays out of the child's reach), pinned to one CPU when no
  cgroup limits it, and, where the kernel has it, in a Landlock domain (writes only in the
  working directory, reads only where Python lives, no TCP, no signals to processes outside
  the sandbox), and always under the seccomp policy of `seccomp.py` (an allowlist: no other
  ABI, no socket() nor any socket address, no namespaces, no io_uring, ...);
- reports `started` and `exited` events as JSON lines on stdout;
- on `reap`, SIGKILLs every descendant but the child (nothing a request started outlives it)
  and reports `reaped`;
- on `kill`, EOF on stdin, or the child's exit, SIGKILLs every descendant and exits.
Warm (`template.py`: forked from a template), `main(warm)` also makes the sandbox's own mounts
and namespaces, and raises `Launch` once the child is isolated where a cold one execs child.py.
"""

import ctypes
import errno
import json
import os
import resource
import select
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock filesystem rights (ABI 1 has bits 0..12; 2 adds REFER; 3 TRUNCATE; 5 IOCTL_DEV).
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_ABI1_ALL = (1 << 13) - 1
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    version = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(int(version), 0)


def landlock_ruleset(
    abi: int, read: list[str], write: list[str], listable: list[str] | None = None
) -> int:
    """A ruleset fd allowing reads (and execution) under `read`, everything under `write`,
    directory listings (only) under `listable`."""
    handled = FS_ABI1_ALL
    if abi >= 2:
        handled |= FS_REFER
    if abi >= 3:
        handled |= FS_TRUNCATE
    if abi >= 5:
        handled |= FS_IOCTL_DEV
    attr = RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0, 0)
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    for paths, rights in ((read, READ_RIGHTS), (write, handled), (listable or [], FS_READ_DIR)):
        add_rules(ruleset, abi, paths, rights)
    return ruleset


READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR


def add_rules(ruleset: int, abi: int, paths: list[str], rights: int) -> None:
    """Allow `rights` beneath each of `paths` (missing paths are skipped; files get only the
    rights a file can have)."""
    file_rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        allowed = rights
        if not os.path.isdir(path):
            allowed &= file_rights | (FS_IOCTL_DEV if abi >= 5 else 0)
        rule = PathBeneathAttr(allowed, fd)
        added = libc.syscall(
            SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0
        )
        error = ctypes.get_errno()
        os.close(fd)
        if added < 0:
            raise OSError(error, f"landlock_add_rule failed for {path}")


def own_proc_entries(pid: int) -> list[str]:
    """The child's own /proc/PID entries without `net` (and each task's without `net`): the
    Landlock view of /proc has no other process's directory and no network listing, not even
    the child's own, which outside a network namespace is the host's (its UNIX socket paths).
    Symbolic links (`root`, `cwd`, `exe`) are left out: a rule on them would allow their
    target, `/` for `root`."""

    def entries(directory: str, skip: tuple[str, ...]) -> list[str]:
        return [
            f"{directory}/{name}"
            for name in os.listdir(directory)
            if name not in skip and not os.path.islink(f"{directory}/{name}")
        ]

    base = f"/proc/{pid}"
    found = entries(base, ("net", "task"))
    for task in os.listdir(f"{base}/task"):
        found += entries(f"{base}/task/{task}", ("net",))
    return found


class Launch(BaseException):
    """Raised in an isolated warm child where a cold one execs `child.py` (template.py)."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = config


_SECCOMP: list = []


def load_seccomp():
    """The seccomp policy module beside this file (the supervisor runs isolated, `-I`, so its
    directory is not on sys.path). Loaded before the child is forked, once per process."""
    if _SECCOMP:
        return _SECCOMP[0]
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seccomp.py")
    spec = importlib.util.spec_from_file_location("attn_grade_seccomp", path)
    if spec is None or spec.loader is None:
        raise OSError(f"cannot load the seccomp policy from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _SECCOMP.append(module)
    return module


def stat_fields(path: str) -> list[bytes]:
    """The fields of a /proc/PID/stat (or task stat) file after the command name, which may
    hold spaces and parentheses: [0] is the state (field 3), [1] the parent (field 4), [19]
    the start time (field 22). OSError when the process is gone."""
    with open(path, "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()


def children_by_parent() -> dict[int, list[int]]:
    """ppid -> pids of the processes visible in /proc (also used by the grading process)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(stat_fields(f"/proc/{entry}/stat")[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """Pids of every process below `root`, read from /proc."""
    children = children_by_parent()
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, []):
            found.append(child)
            frontier.append(child)
    return found


EXITED: dict[int, int] = {}  # pid -> wait status of every child reaped so far


def reap() -> dict[int, int]:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return EXITED
        if pid == 0:
            return EXITED
        EXITED[pid] = status


def _dead(pid: int) -> bool:
    """Whether every thread of `pid` has exited (a zombie not yet waited for, or gone). A
    zombie thread-group leader whose other threads still run is not dead."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        return False
    for task in tasks:
        try:
            state = stat_fields(f"/proc/{pid}/task/{task}/stat")[0]
        except (FileNotFoundError, ProcessLookupError):
            continue  # that thread is gone
        except (OSError, IndexError):
            return False
        if state not in (b"Z", b"X"):
            return False
    return True


def kill_tree(me: int, keep: int | None = None) -> int:
    """SIGKILL all descendants (but `keep`) until none is left; returns how many were killed.
    Zombies are dead already: children of the kept child stay zombies until it waits for them
    (it may never), and counting them would spin this loop to its end on every reap."""
    killed = 0
    for _ in range(200):
        pids = [pid for pid in descendants(me) if pid != keep and not _dead(pid)]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        reap()
        select.select([], [], [], 0.005)
    reap()
    return killed


def kill_uid(uid: int) -> None:
    """SIGKILL every process of the sandbox's uid at once: kill(-1) from a helper running as
    that uid. The kernel signals the whole task list under the lock fork() needs, so a fork
    bomb cannot outrun it (kill_tree, one pid at a time, races it for minutes on a busy host).
    kill_tree then reaps them and catches anything left."""
    helper = os.fork()
    if helper == 0:
        try:
            drop_privileges(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(helper, 0)


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def own(paths: list[str], uid: int) -> None:
    """Give the sandbox uid its work tree (created by the grader or by bubblewrap as root)."""
    for top in paths:
        os.chown(top, uid, uid)
        for root, dirs, files in os.walk(top):
            for name in dirs + files:
                os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


def private_proc() -> bool:
    """A /proc of the child's own (a private mount namespace) in which processes of other
    users are invisible (hidepid): no other process's command line, environment or
    /proc/<pid>/net listing, without a pid namespace. Best effort: without CAP_SYS_ADMIN
    (Docker's default), or where the host's /proc has masked paths (a container given
    CAP_SYS_ADMIN), it returns False and Landlock (if any) is what hides them."""
    if libc.unshare(CLONE_NEWNS) != 0:
        return False
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    return any(
        libc.mount(b"proc", b"/proc", b"proc", flags, option) == 0
        for option in (b"hidepid=invisible", b"hidepid=2")  # the first from Linux 5.8
    )


def drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid):
        raise OSError("could not change to the sandbox uid")


def start_child(config: dict, ruleset: int | None, seccomp, warm=None) -> int:
    limits = {getattr(resource, name): tuple(value) for name, value in config["rlimits"].items()}
    keep = set(config["pass_fds"])
    output = config["output_fd"]
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        for fd in range(3, 1024):
            if fd not in keep and fd != ruleset:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd in keep:
            os.set_inheritable(fd, True)
        os.chdir(config["cwd"])
        if config.get("cpu") is not None:
            os.sched_setaffinity(0, {config["cpu"]})
        for which, (soft, hard) in limits.items():
            resource.setrlimit(which, (soft, hard))
        if config.get("unshare_net") and libc.unshare(CLONE_NEWNET) != 0:
            # Root in a container without CAP_SYS_ADMIN (Docker's default) gets EPERM: the
            # child keeps the container's network, where Landlock (ABI 4+) still refuses TCP.
            if ctypes.get_errno() != errno.EPERM:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
        if config.get("private_proc"):
            private_proc()
        if config.get("uid") is not None:
            drop_privileges(config["uid"])
        if warm is not None:  # what exec does: the child's own /proc files are its own
            libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
        if ruleset is not None:
            add_rules(ruleset, config["landlock_abi"], own_proc_entries(os.getpid()), READ_RIGHTS)
            add_rules(
                ruleset,
                config["landlock_abi"],
                [f"/proc/{os.getpid()}", f"/proc/{os.getpid()}/task"],
                FS_READ_DIR,
            )
            if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
                raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
        # every level, last: from here on only the calls the policy allows (execve is one)
        seccomp.install()
        if warm is not None:
            if ruleset is not None:
                os.close(ruleset)
            raise Launch(config)
        os.execve(config["argv"][0], config["argv"], config["env"])
    except Launch:
        raise
    except BaseException as error:  # noqa: BLE001 - report anything, never return
        os.write(2, f"sandbox child failed to start: {error!r}\n".encode())
    os._exit(127)


def main(warm=None) -> None:
    config = json.loads(sys.stdin.readline())
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    me = int(os.readlink("/proc/self")) if os.path.exists("/proc/self") else os.getpid()
    if warm is not None:
        warm.prepare(config)
    if config.get("uid") is not None and config.get("own"):
        own(config["own"], config["uid"])
    ruleset, abi = None, 0
    landlock = config.get("landlock")
    if landlock:
        abi = landlock_abi()
        if abi:
            ruleset = landlock_ruleset(
                abi, landlock["read"], landlock["write"], landlock.get("list", [])
            )
            config["landlock_abi"] = abi
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: None)
    child = start_child(config, ruleset, load_seccomp(), warm)
    for fd in config["pass_fds"]:
        os.close(fd)
    emit({"event": "started", "pid": child, "landlock": abi if ruleset is not None else 0})
    status = None
    control = sys.stdin.fileno()
    while status is None:
        ready, _, _ = select.select([control, wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
        if control in ready:
            line = sys.stdin.readline()
            if not line or line.strip() == "kill":
                break
            if line.strip() == "reap":
                emit({"event": "reaped", "killed": kill_tree(me, keep=child)})
        status = reap().get(child, status)
    if config.get("uid") is not None:
        kill_uid(config["uid"])
    killed = kill_tree(me)
    event = {"event": "exited", "killed": killed}
    if status is not None:
        event["exit_code"] = os.waitstatus_to_exitcode(status)
    emit(event)


if __name__ == "__main__":
    main()
