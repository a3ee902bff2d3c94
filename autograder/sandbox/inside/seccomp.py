"""The sandbox child's seccomp policy, as data, and the BPF program that enforces it.

Stdlib only: the supervisor loads this file from its own directory (in the jail, from the
runtime copy) and installs the filter in the child after no_new_privs, just before exec, at
every isolation level. The policy:
- any other ABI than the machine's own (i386 `int 0x80` and x32 on x86_64, arm32 on aarch64):
  the process is killed (no code in the child has a reason to use one, and a filter that lets a
  second system call table through is no filter);
- the kernel surface a notebook never needs: DENIED (EPERM);
- `clone` with any namespace flag (EPERM) and `clone3` (ENOSYS: libc falls back to `clone`,
  whose flags a filter can read);
- `socket()` of every family: the child has no use for the network, and no socket means no
  TCP, no UDP, no raw or netlink socket and no host UNIX socket (D-Bus, a Jupyter server, a
  batch's fork server) at any level. `socketpair()` still works;
- everything else is allowed (numpy, PyTorch and matplotlib need a broad set).
"""

from __future__ import annotations

import ctypes
import errno
import os

# Every system call named here is refused with EPERM, on every machine that has it.
DENIED = (
    # other processes and the kernel's memory
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "process_madvise", "perf_event_open", "bpf", "userfaultfd", "syslog", "lookup_dcookie",
    # asynchronous I/O beside the filter (io_uring runs operations a filter never sees)
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # keys, executable anonymous memory
    "keyctl", "add_key", "request_key", "memfd_create", "memfd_secret",
    # namespaces and mounts
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "quotactl",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "adjtimex",
    "clock_adjtime", "sethostname", "setdomainname", "vhangup", "iopl", "ioperm",
    "personality", "uselib",
)  # fmt: skip

# Linux system call numbers (x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64: the
# generic table, include/uapi/asm-generic/unistd.h). A name missing on a machine is skipped.
_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "pidfd_getfd": 438, "process_madvise": 440, "perf_event_open": 298, "bpf": 321,
    "userfaultfd": 323, "syslog": 103, "lookup_dcookie": 212, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
    "request_key": 249, "memfd_create": 319, "memfd_secret": 447, "unshare": 272,
    "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "fanotify_init": 300, "quotactl": 179, "kexec_load": 246, "kexec_file_load": 320,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169,
    "swapon": 167, "swapoff": 168, "acct": 163, "settimeofday": 164, "clock_settime": 227,
    "adjtimex": 159, "clock_adjtime": 305, "sethostname": 170, "setdomainname": 171,
    "vhangup": 153, "iopl": 172, "ioperm": 173, "personality": 135, "uselib": 134,
    "clone": 56, "clone3": 435, "socket": 41,
}  # fmt: skip
_AARCH64 = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
    "pidfd_getfd": 438, "process_madvise": 440, "perf_event_open": 241, "bpf": 280,
    "userfaultfd": 282, "syslog": 116, "lookup_dcookie": 18, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217,
    "request_key": 218, "memfd_create": 279, "memfd_secret": 447, "unshare": 97,
    "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
    "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "fanotify_init": 262, "quotactl": 60, "kexec_load": 104, "kexec_file_load": 294,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142,
    "swapon": 224, "swapoff": 225, "acct": 89, "settimeofday": 170, "clock_settime": 112,
    "adjtimex": 171, "clock_adjtime": 266, "sethostname": 161, "setdomainname": 162,
    "vhangup": 58, "personality": 92, "clone": 220, "clone3": 435, "socket": 198,
}  # fmt: skip
# machine -> (AUDIT_ARCH of its native ABI, system call numbers)
MACHINES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NAMESPACES = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
CLONE_NAMESPACES |= 0x20000000 | 0x40000000

RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data (arg0: its low half)
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def supported(machine: str | None = None) -> bool:
    return (machine or os.uname().machine) in MACHINES


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for `machine` (default: this one)."""
    audit_arch, numbers = MACHINES[machine or os.uname().machine]
    denied = sorted({numbers[name] for name in DENIED if name in numbers})
    # Jumps are relative; the tail is fixed: [allow, clone check (3), deny, enosys, kill].
    body: list[tuple] = [("ld", OFFSET_NR)]
    if audit_arch == MACHINES["x86_64"][0]:
        body.append(("jge", X32_SYSCALL_BIT, "kill"))
    body += [("jeq", nr, "deny") for nr in denied]
    body += [
        ("jeq", numbers["socket"], "deny"),
        ("jeq", numbers["clone3"], "enosys"),
        ("jeq", numbers["clone"], "clone"),
        ("ret", RET_ALLOW),
    ]
    # the native ABI goes on, anything else (i386 int 0x80 on x86_64) is killed
    head: list[tuple] = [("ld", OFFSET_ARCH), ("jeq_arch", audit_arch, "kill")]
    labels = {"clone": len(head) + len(body)}
    tail: list[tuple] = [
        ("ld", OFFSET_ARG0),
        ("jset", CLONE_NAMESPACES, "deny"),
        ("ret", RET_ALLOW),
    ]
    labels["deny"] = labels["clone"] + len(tail)
    labels["enosys"], labels["kill"] = labels["deny"] + 1, labels["deny"] + 2
    ending = [
        (RET_K, 0, 0, RET_ERRNO | errno.EPERM),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),
        (RET_K, 0, 0, RET_KILL_PROCESS),
    ]
    code: list[tuple[int, int, int, int]] = []
    for index, op in enumerate(head + body + tail):
        code.append(_assemble(op, index, labels))
    return code + ending


def _assemble(op: tuple, index: int, labels: dict[str, int]) -> tuple[int, int, int, int]:
    kind = op[0]
    if kind == "ld":
        return (LD_W_ABS, 0, 0, op[1])
    if kind == "ret":
        return (RET_K, 0, 0, op[1])
    offset = labels[op[2]] - index - 1
    if not 0 <= offset <= 255:
        raise ValueError("seccomp program too long for a jump")
    if kind == "jeq_arch":  # the native ABI goes on, anything else is killed
        return (JEQ_K, 0, offset, op[1])
    code = {"jeq": JEQ_K, "jge": JGE_K, "jset": JSET_K}[kind]
    return (code, offset, 0, op[1])


class SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]


def install() -> None:
    """Install the filter on the calling thread (and what it execs and forks). Needs
    no_new_privs first. OSError when the kernel refuses it or the machine is unknown: the
    sandbox must never run without it."""
    if not supported():
        raise OSError(errno.ENOSYS, f"no seccomp policy for {os.uname().machine}")
    instructions = program()
    filters = (SockFilter * len(instructions))(*[SockFilter(*op) for op in instructions])
    fprog = SockFprog(len(instructions), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
