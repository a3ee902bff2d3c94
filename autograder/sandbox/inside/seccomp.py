"""The sandbox child's seccomp policy, as data, and the BPF program that enforces it.

Stdlib only: the supervisor loads this file from its own directory (in the jail, from the
runtime copy) and installs the filter in the child after no_new_privs and Landlock, just before
exec, at every isolation level. The policy is an allowlist, the same on every machine:
- any other ABI than the machine's own (i386 `int 0x80` and x32 on x86_64, arm32 on aarch64):
  the process is killed (no code in the child has a reason to use one, and a filter that lets a
  second system call table through is no filter);
- the calls in ALLOWED: what CPython, NumPy, PyTorch and matplotlib use (traced while grading
  every exercise's reference notebook and the hostile corpus), and the rest of the standard
  library's file, process, thread, time, memory and local-socket surface; a name a machine
  lacks (x86_64's `open`, `fork`, ... on aarch64) is skipped there;
- `clone` with any namespace flag (EPERM) and `clone3` (ENOSYS: libc falls back to `clone`,
  whose flags a filter can read);
- sockets: `socket()` of every family and every call that takes an address (`connect`, `bind`,
  `listen`, `accept`, `accept4`, and `sendmsg`/`sendmmsg`, whose address sits in a struct a
  filter cannot read) are refused (EPERM); `sendto` only without an address (arg 4 NULL, as
  `send()` calls it). `socketpair(AF_UNIX)` works (multiprocessing, asyncio), but its sockets
  reach no host socket by path or abstract name: Landlock does not govern UNIX socket
  addresses;
- anything else: ENOSYS, the kernel's own answer to a call it does not have, so that libraries
  take their fallback path, and so that a call a newer kernel adds (open_tree_attr, 467, in
  6.15) is refused until it is added here.
"""

from __future__ import annotations

import ctypes
import errno
import os

# Left out on purpose (ENOSYS): io_uring, ptrace, process_vm_*, bpf, perf_event_open,
# userfaultfd, keys, memfd_create, inotify/fanotify, SysV and POSIX IPC, splice, mincore,
# mlock, mount and the mount API, unshare/setns, Landlock and seccomp themselves (the filter is
# installed last, after Landlock), setuid and capabilities, and the machine's administration.
ALLOWED = (
    # files: Landlock, the jail's mounts and the sandbox uid decide which paths
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
    "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "stat",
    "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
    "faccessat2", "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir",
    "fchdir", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat",
    "fchmodat2", "chown", "fchown", "lchown", "fchownat", "mknod", "mknodat", "umask",
    "truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "sync_file_range", "fadvise64",
    "readahead", "flock", "fcntl", "ioctl", "dup", "dup2", "dup3", "pipe", "pipe2", "utime",
    "utimes", "futimesat", "utimensat", "sendfile", "copy_file_range", "getxattr", "lgetxattr",
    "fgetxattr", "listxattr", "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr",
    "removexattr", "lremovexattr", "fremovexattr",
    # waiting for file descriptors and events
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4",
    "timerfd_create", "timerfd_settime", "timerfd_gettime",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mbind",
    "get_mempolicy", "set_mempolicy", "membarrier", "map_shadow_stack", "mseal",
    # processes and threads (clone, clone3: see RULES)
    "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill",
    "tkill", "tgkill", "pidfd_open", "pidfd_send_signal", "rt_sigaction", "rt_sigprocmask",
    "rt_sigreturn", "rt_sigsuspend", "rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "sigaltstack", "pause", "restart_syscall", "getpid", "getppid",
    "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
    "getpgid", "getpgrp", "setpgid", "getsid", "setsid", "prctl", "arch_prctl",
    "set_tid_address", "set_robust_list", "rseq", "futex", "futex_waitv", "futex_wake",
    "futex_wait", "futex_requeue", "sched_yield", "sched_getaffinity", "sched_setaffinity",
    "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getattr", "sched_setattr",
    "getpriority", "setpriority", "getrlimit", "setrlimit", "prlimit64", "getrusage", "times",
    "sysinfo", "uname", "getcpu", "getrandom",
    # time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "alarm", "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
    "timer_getoverrun", "timer_delete",
    # sockets the child already holds (socketpair: see RULES): no call here takes an address
    "recvfrom", "recvmsg", "recvmmsg", "shutdown", "getsockopt", "setsockopt",
    "getsockname", "getpeername",
)  # fmt: skip

# Refused with EPERM: the network and any address a socket could reach.
REFUSED = ("socket", "connect", "bind", "listen", "accept", "accept4", "sendmsg", "sendmmsg")

# Linux system call numbers (x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64: the
# generic table, include/uapi/asm-generic/unistd.h; from 424 on both share the numbers), for
# the names above and the rules below.
_X86_64 = {
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7,
    "lseek": 8, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigaction": 13,
    "rt_sigprocmask": 14, "rt_sigreturn": 15, "ioctl": 16, "pread64": 17, "pwrite64": 18,
    "readv": 19, "writev": 20, "access": 21, "pipe": 22, "select": 23, "sched_yield": 24,
    "mremap": 25, "msync": 26, "madvise": 28, "dup": 32, "dup2": 33, "pause": 34, "nanosleep": 35,
    "getitimer": 36, "alarm": 37, "setitimer": 38, "getpid": 39, "sendfile": 40, "socket": 41,
    "connect": 42, "accept": 43, "sendto": 44, "recvfrom": 45, "sendmsg": 46, "recvmsg": 47,
    "shutdown": 48, "bind": 49, "listen": 50, "getsockname": 51, "getpeername": 52,
    "socketpair": 53, "setsockopt": 54, "getsockopt": 55, "clone": 56, "fork": 57, "vfork": 58,
    "execve": 59, "exit": 60, "wait4": 61, "kill": 62, "uname": 63, "fcntl": 72, "flock": 73,
    "fsync": 74, "fdatasync": 75, "truncate": 76, "ftruncate": 77, "getdents": 78, "getcwd": 79,
    "chdir": 80, "fchdir": 81, "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85, "link": 86,
    "unlink": 87, "symlink": 88, "readlink": 89, "chmod": 90, "fchmod": 91, "chown": 92,
    "fchown": 93, "lchown": 94, "umask": 95, "gettimeofday": 96, "getrlimit": 97, "getrusage": 98,
    "sysinfo": 99, "times": 100, "getuid": 102, "getgid": 104, "geteuid": 107, "getegid": 108,
    "setpgid": 109, "getppid": 110, "getpgrp": 111, "setsid": 112, "getgroups": 115,
    "getresuid": 118, "getresgid": 120, "getpgid": 121, "getsid": 124, "rt_sigpending": 127,
    "rt_sigtimedwait": 128, "rt_sigqueueinfo": 129, "rt_sigsuspend": 130, "sigaltstack": 131,
    "utime": 132, "mknod": 133, "statfs": 137, "fstatfs": 138, "getpriority": 140,
    "setpriority": 141, "sched_setparam": 142, "sched_getparam": 143, "sched_setscheduler": 144,
    "sched_getscheduler": 145, "sched_get_priority_max": 146, "sched_get_priority_min": 147,
    "prctl": 157, "arch_prctl": 158, "setrlimit": 160, "gettid": 186, "readahead": 187,
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "getxattr": 191, "lgetxattr": 192,
    "fgetxattr": 193, "listxattr": 194, "llistxattr": 195, "flistxattr": 196, "removexattr": 197,
    "lremovexattr": 198, "fremovexattr": 199, "tkill": 200, "time": 201, "futex": 202,
    "sched_setaffinity": 203, "sched_getaffinity": 204, "epoll_create": 213, "getdents64": 217,
    "set_tid_address": 218, "restart_syscall": 219, "fadvise64": 221, "timer_create": 222,
    "timer_settime": 223, "timer_gettime": 224, "timer_getoverrun": 225, "timer_delete": 226,
    "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230, "exit_group": 231,
    "epoll_wait": 232, "epoll_ctl": 233, "tgkill": 234, "utimes": 235, "mbind": 237,
    "set_mempolicy": 238, "get_mempolicy": 239, "waitid": 247, "openat": 257, "mkdirat": 258,
    "mknodat": 259, "fchownat": 260, "futimesat": 261, "newfstatat": 262, "unlinkat": 263,
    "renameat": 264, "linkat": 265, "symlinkat": 266, "readlinkat": 267, "fchmodat": 268,
    "faccessat": 269, "pselect6": 270, "ppoll": 271, "set_robust_list": 273,
    "sync_file_range": 277, "utimensat": 280, "epoll_pwait": 281, "signalfd": 282,
    "timerfd_create": 283, "eventfd": 284, "fallocate": 285, "timerfd_settime": 286,
    "timerfd_gettime": 287, "accept4": 288, "signalfd4": 289, "eventfd2": 290,
    "epoll_create1": 291, "dup3": 292, "pipe2": 293, "preadv": 295, "pwritev": 296,
    "rt_tgsigqueueinfo": 297, "recvmmsg": 299, "prlimit64": 302, "sendmmsg": 307, "getcpu": 309,
    "sched_setattr": 314, "sched_getattr": 315, "renameat2": 316, "getrandom": 318,
    "execveat": 322, "membarrier": 324, "copy_file_range": 326, "preadv2": 327, "pwritev2": 328,
    "statx": 332, "rseq": 334, "pidfd_send_signal": 424, "pidfd_open": 434, "clone3": 435,
    "close_range": 436, "openat2": 437, "faccessat2": 439, "epoll_pwait2": 441, "futex_waitv": 449,
    "fchmodat2": 452, "map_shadow_stack": 453, "futex_wake": 454, "futex_wait": 455,
    "futex_requeue": 456, "mseal": 462,
}  # fmt: skip
_AARCH64 = {
    "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "getxattr": 8, "lgetxattr": 9, "fgetxattr": 10,
    "listxattr": 11, "llistxattr": 12, "flistxattr": 13, "removexattr": 14, "lremovexattr": 15,
    "fremovexattr": 16, "getcwd": 17, "eventfd2": 19, "epoll_create1": 20, "epoll_ctl": 21,
    "epoll_pwait": 22, "dup": 23, "dup3": 24, "fcntl": 25, "ioctl": 29, "flock": 32, "mknodat": 33,
    "mkdirat": 34, "unlinkat": 35, "symlinkat": 36, "linkat": 37, "renameat": 38, "statfs": 43,
    "fstatfs": 44, "truncate": 45, "ftruncate": 46, "fallocate": 47, "faccessat": 48, "chdir": 49,
    "fchdir": 50, "fchmod": 52, "fchmodat": 53, "fchownat": 54, "fchown": 55, "openat": 56,
    "close": 57, "pipe2": 59, "getdents64": 61, "lseek": 62, "read": 63, "write": 64, "readv": 65,
    "writev": 66, "pread64": 67, "pwrite64": 68, "preadv": 69, "pwritev": 70, "sendfile": 71,
    "pselect6": 72, "ppoll": 73, "signalfd4": 74, "readlinkat": 78, "newfstatat": 79, "fstat": 80,
    "fsync": 82, "fdatasync": 83, "sync_file_range": 84, "timerfd_create": 85,
    "timerfd_settime": 86, "timerfd_gettime": 87, "utimensat": 88, "exit": 93, "exit_group": 94,
    "waitid": 95, "set_tid_address": 96, "futex": 98, "set_robust_list": 99, "nanosleep": 101,
    "getitimer": 102, "setitimer": 103, "timer_create": 107, "timer_gettime": 108,
    "timer_getoverrun": 109, "timer_settime": 110, "timer_delete": 111, "clock_gettime": 113,
    "clock_getres": 114, "clock_nanosleep": 115, "sched_setparam": 118, "sched_setscheduler": 119,
    "sched_getscheduler": 120, "sched_getparam": 121, "sched_setaffinity": 122,
    "sched_getaffinity": 123, "sched_yield": 124, "sched_get_priority_max": 125,
    "sched_get_priority_min": 126, "restart_syscall": 128, "kill": 129, "tkill": 130,
    "tgkill": 131, "sigaltstack": 132, "rt_sigsuspend": 133, "rt_sigaction": 134,
    "rt_sigprocmask": 135, "rt_sigpending": 136, "rt_sigtimedwait": 137, "rt_sigqueueinfo": 138,
    "rt_sigreturn": 139, "setpriority": 140, "getpriority": 141, "getresuid": 148,
    "getresgid": 150, "times": 153, "setpgid": 154, "getpgid": 155, "getsid": 156, "setsid": 157,
    "getgroups": 158, "uname": 160, "getrlimit": 163, "setrlimit": 164, "getrusage": 165,
    "umask": 166, "prctl": 167, "getcpu": 168, "gettimeofday": 169, "getpid": 172, "getppid": 173,
    "getuid": 174, "geteuid": 175, "getgid": 176, "getegid": 177, "gettid": 178, "sysinfo": 179,
    "socket": 198, "socketpair": 199, "bind": 200, "listen": 201, "accept": 202, "connect": 203,
    "getsockname": 204, "getpeername": 205, "sendto": 206, "recvfrom": 207, "setsockopt": 208,
    "getsockopt": 209, "shutdown": 210, "sendmsg": 211, "recvmsg": 212, "readahead": 213,
    "brk": 214, "munmap": 215, "mremap": 216, "clone": 220, "execve": 221, "mmap": 222,
    "fadvise64": 223, "mprotect": 226, "msync": 227, "madvise": 233, "mbind": 235,
    "get_mempolicy": 236, "set_mempolicy": 237, "rt_tgsigqueueinfo": 240, "accept4": 242,
    "recvmmsg": 243, "wait4": 260, "prlimit64": 261, "sendmmsg": 269, "sched_setattr": 274,
    "sched_getattr": 275, "renameat2": 276, "getrandom": 278, "execveat": 281, "membarrier": 283,
    "copy_file_range": 285, "preadv2": 286, "pwritev2": 287, "statx": 291, "rseq": 293,
    "pidfd_send_signal": 424, "pidfd_open": 434, "clone3": 435, "close_range": 436, "openat2": 437,
    "faccessat2": 439, "epoll_pwait2": 441, "futex_waitv": 449, "fchmodat2": 452,
    "map_shadow_stack": 453, "futex_wake": 454, "futex_wait": 455, "futex_requeue": 456,
    "mseal": 462,
}  # fmt: skip
# machine -> (AUDIT_ARCH of its native ABI, system call numbers)
MACHINES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NAMESPACES = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
CLONE_NAMESPACES |= 0x20000000 | 0x40000000

RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
OFFSET_NR, OFFSET_ARCH = 0, 4
AF_UNIX = 1
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2

ALLOW = (RET_K, 0, 0, RET_ALLOW)
DENY = (RET_K, 0, 0, RET_ERRNO | errno.EPERM)
ENOSYS = (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS)
KILL = (RET_K, 0, 0, RET_KILL_PROCESS)


def _arg(index: int, high: bool = False) -> tuple[int, int, int, int]:
    """Load one 32-bit half of argument `index` (struct seccomp_data, little-endian)."""
    return (LD_W_ABS, 0, 0, 16 + 8 * index + (4 if high else 0))


# What a call with a rule of its own runs (the accumulator holds its number; every path
# returns). The kernel decides a clone's namespaces from the low half of its flags.
RULES: dict[str, list[tuple[int, int, int, int]]] = {
    "clone": [_arg(0), (JSET_K, 0, 1, CLONE_NAMESPACES), DENY, ALLOW],
    "clone3": [ENOSYS],
    # no destination address: both halves of the pointer are 0
    "sendto": [_arg(4), (JEQ_K, 0, 3, 0), _arg(4, high=True), (JEQ_K, 0, 1, 0), ALLOW, DENY],
    # AF_UNIX only (another family that has pairs, TIPC, would load a module for the child)
    "socketpair": [_arg(0), (JEQ_K, 0, 1, AF_UNIX), ALLOW, DENY],
    **{name: [DENY] for name in REFUSED},
}


def supported(machine: str | None = None) -> bool:
    return (machine or os.uname().machine) in MACHINES


def allowed(machine: str | None = None) -> list[str]:
    """The names ALLOWED on `machine` (default: this one), without those it lacks."""
    numbers = MACHINES[machine or os.uname().machine][1]
    return [name for name in ALLOWED if name in numbers]


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for `machine` (default: this one). Each
    call is one comparison and its block, so every jump is short; the kernel caches the answer
    for each call whose block never reads an argument (Linux 5.11+)."""
    machine = machine or os.uname().machine
    audit_arch, numbers = MACHINES[machine]
    code = [(LD_W_ABS, 0, 0, OFFSET_ARCH), (JEQ_K, 1, 0, audit_arch), KILL]
    code.append((LD_W_ABS, 0, 0, OFFSET_NR))
    if machine == "x86_64":  # x32: the same ABI with this bit set in the number
        code += [(JGE_K, 0, 1, X32_SYSCALL_BIT), KILL]
    blocks = {numbers[name]: [ALLOW] for name in allowed(machine)}
    blocks |= {numbers[name]: block for name, block in RULES.items() if name in numbers}
    for number, block in sorted(blocks.items()):
        code.append((JEQ_K, 0, len(block), number))
        code += block
    return [*code, ENOSYS]


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
