"""What a sandbox child can reach, measured from inside it at one isolation level.

Run as `python -m tests.support.reach LEVEL UDP_PORT DGRAM_PATH ABSTRACT_NAME STREAM_PATH` (with
the interpreter the level needs; the last three name host listeners: a datagram socket by path
and by abstract name, a stream socket by path); prints one JSON object: each probe's outcome
("open" when the kernel let it through, else the errno name, "killed" when the child died of
it), with the system call battery of `reach_calls.py`. Used by test_perimeter_kernel.py.
"""

from __future__ import annotations

import json
import os
import sys

from autograder.grading.submission import ProgramCell, StudentError, Submission
from autograder.sandbox import isolation
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import SandboxDied
from tests.support.reach_calls import CALL_PROBES

PROBES = r"""
import ctypes, errno, mmap, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def _errno_name(value):
    return errno.errorcode.get(value, str(value))

def _syscall(nr, *args):
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "open" if result >= 0 else _errno_name(ctypes.get_errno())

def _i386(nr):
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(bytes([0x53, 0xB8, nr, 0, 0, 0, 0xCD, 0x80, 0x5B, 0xC3]))  # int 0x80: eax = nr
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)()

def i386_getpid():
    return _i386(20)

def i386_socketcall():  # the 32-bit ABI's one door to every socket call
    return _i386(102)

def x32_getpid():
    return _syscall(0x40000000 | 39)

def sockets(udp_port):
    found = {}
    for name, family, kind in [
        ("unix", socket.AF_UNIX, socket.SOCK_STREAM),
        ("udp", socket.AF_INET, socket.SOCK_DGRAM),
        ("tcp", socket.AF_INET, socket.SOCK_STREAM),
        ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
        ("packet", socket.AF_PACKET, socket.SOCK_RAW),
        ("raw", socket.AF_INET, socket.SOCK_RAW),
    ]:
        try:
            made = socket.socket(family, kind)
        except OSError as error:
            found[name] = _errno_name(error.errno)
            continue
        found[name] = "open"
        if name == "udp":
            try:
                made.sendto(b"attn-adv-udp", ("127.0.0.1", udp_port))
            except OSError:
                pass
        made.close()
    return found

def proc_net(grader_pid):
    found = {}
    for path in ["/proc/net/unix", "/proc/self/net/unix", f"/proc/{os.getppid()}/net/unix",
                 "/proc/1/net/unix", f"/proc/{grader_pid}/net/unix", f"/proc/{grader_pid}/environ"]:
        try:
            found[path] = open(path, errors="replace").read()
        except OSError as error:
            found[path] = _errno_name(error.errno)
    return found

def socketpair_works():
    a, b = socket.socketpair()
    a.send(b"x")
    return b.recv(1) == b"x"

def surface():
    return {
        "io_uring_setup": _syscall(425, 1, ctypes.addressof(ctypes.create_string_buffer(120))),
        "userfaultfd": _syscall(323, 0),
        "bpf": _syscall(321, 0, 0, 0),
        "perf_event_open": _syscall(298, 0, 0, -1, -1, 0),
        "keyctl": _syscall(250, 0, 0),
        "memfd_create": _syscall(319, ctypes.addressof(ctypes.create_string_buffer(b"x")), 0),
        "unshare_user": _syscall(272, 0x10000000),
        "unshare_net": _syscall(272, 0x40000000),
        "mount": _syscall(165, 0, 0, 0, 0, 0),
        "ptrace_traceme": _syscall(101, 0, 0, 0, 0),
        "ptrace_attach_parent": _syscall(101, 16, os.getppid(), 0, 0),
        "clone_newuser": _syscall(56, 0x10000000 | 17, 0, 0, 0, 0),
        "kexec_load": _syscall(246, 0, 0, 0, 0),
        "init_module": _syscall(175, 0, 0, 0),
        "personality": _syscall(135, 0x0040000),
    }

def identity():
    status = open("/proc/self/status").read().splitlines()
    caps = {
        line.split(":")[0]: int(line.split()[1], 16) for line in status if line.startswith("Cap")
    }
    return {"uid": os.getuid(), "euid": os.geteuid(), "caps": caps}

def privileged_acts():
    found = {}
    open("mine", "w").close()
    try:
        os.chown("mine", 0, 0)
        found["chown_to_root"] = "open"
    except OSError as error:
        found["chown_to_root"] = _errno_name(error.errno)
    try:
        os.mknod("node", 0o600 | 0o020000, os.makedev(1, 3))
        found["mknod"] = "open"
    except OSError as error:
        found["mknod"] = _errno_name(error.errno)
    return found

SCRATCH = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")

def scratch_writes(name):
    # what the child can leave outside its work dir for the next holder of its uid: a file
    # (0600, as a careful sender would make it), a folder with a file in it and a link
    written = []
    for folder in SCRATCH:
        path = os.path.join(folder, name)
        try:
            with open(os.open(path + "-file", os.O_CREAT | os.O_WRONLY, 0o600), "w") as f:
                f.write("left for the next submission")
            written.append(path + "-file")
            os.mkdir(path + "-folder")
            with open(os.path.join(path + "-folder", "inner"), "w") as f:
                f.write("left too")
            written.append(path + "-folder")
            os.symlink("/etc/passwd", path + "-link")
            written.append(path + "-link")
        except OSError:
            pass
    return written

def work():
    import subprocess
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import torch
    x = torch.randn(32, 5)
    model = torch.nn.Linear(5, 1)
    loss = model(x).pow(2).mean()
    loss.backward()
    torch.optim.Adam(model.parameters()).step()
    figure = plt.figure()
    plt.plot(np.arange(3))
    figure.savefig("figure.png")
    echo = subprocess.run(["echo", "ok"], capture_output=True, text=True).stdout.strip()
    return [float(loss), echo]
"""


def _outcome(submission: Submission, name: str, *args) -> object:
    try:
        return submission.call(name, *args, timeout=60)
    except SandboxDied as died:
        return f"killed: {died}"
    except StudentError as error:
        return f"raised: {error}"


def main() -> None:
    level, udp_port, listeners = sys.argv[1], int(sys.argv[2]), sys.argv[3:6]
    chosen = isolation.choose(level)
    cells = [ProgramCell("cell 1", PROBES), ProgramCell("cell 2", CALL_PROBES)]
    with Submission(cells, Limits(), level=chosen) as submission:
        found = {"level": chosen.describe()}
        for name in ("work", "identity", "privileged_acts", "surface", "socketpair_works"):
            found[name] = _outcome(submission, name)
        found["legit"] = _outcome(submission, "legit")
        found["unlisted"] = _outcome(submission, "unlisted")
        found["addresses"] = _outcome(submission, "addresses", *listeners)
        found["sockets"] = _outcome(submission, "sockets", udp_port)
        found["proc_net"] = _outcome(submission, "proc_net", os.getpid())
        scratch_name = f"attn-adv-scratch-{os.getpid()}"
        found["scratch_written"] = _outcome(submission, "scratch_writes", scratch_name)
        # last: each kills the child (the submission starts a new one for the next)
        for name in ("x32_getpid", "i386_getpid", "i386_socketcall"):
            found[name] = _outcome(submission, name)
    # the sandboxes have closed: nothing the child wrote outside its work dir is left
    written = found["scratch_written"] if isinstance(found["scratch_written"], list) else []
    found["scratch_left"] = [
        path
        for path in map(str, written)
        if os.path.basename(path).startswith(scratch_name) and os.path.lexists(path)
    ]
    print(json.dumps(found))


if __name__ == "__main__":
    main()
