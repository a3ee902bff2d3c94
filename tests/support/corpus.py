"""The adversarial corpus: hostile or broken notebooks, each with its exact expected outcome.

An entry is the reference-filled source notebook of an exercise (`tests.conftest.source_notebook`)
with some solution cells replaced (`replace`) and hostile student cells added (`cells`), or a
raw file (`raw`, the broken-file cases). Its expected outcome is exact: every check of the
exercise scores its full points except the checks in `fails`, which score 0; the status is one
of `autograder.core.status.Status`; and no process carrying the entry's marker survives grading.

Cells may use these placeholders, filled per test from tests/support/harness.py `Host`:
@MARKER@ (a unique string; every process an entry starts carries it), @SECRET@ (a root-only 0600
file), @SOCKDIR@ (a 0755 directory holding world-writable UNIX sockets host.sock and dgram.sock),
@ABSTRACT@ (an abstract UNIX socket name), @TCP@ / @UDP@ (ports listening on all addresses),
@HOSTIP@ (the host's non-loopback address), @COURSE@ (a course dir with another student's
submission and a gradebook), @REFERENCE@ / @CHECKS@ (the hidden files of ex1), @PROJECT@ (the
project checkout), @SITE@ (the grader's site-packages).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.core.status import Status

EX1 = "ex1_numpy_attention"
EX4 = "ex4_gqa_analysis"

# -- expected failures, by check name -------------------------------------------------------------
MAKE_QKV = frozenset({"test_make_qkv_shapes_and_dtype", "test_make_qkv_seeded_standard_normal"})
VS_TORCH = frozenset(
    {"test_max_abs_diff_matches_its_definition", "test_max_abs_diff_compares_with_torch"}
)
SDPA_NUMPY_ONLY = frozenset({"test_sdpa_uses_numpy_only"})
# gqa_report calls kv_projection_params; where the notebook's raises, gqa_report's checks run
# on the contract's (one fault, charged once): kv_projection_params' own check alone fails
KV_PARAMS = frozenset({"test_kv_projection_params"})
# A cell limit that is short but leaves `import torch` time on a loaded machine
SHORT_CELLS = {"cell_timeout": 8}  # a hang costs the test 8 s (ex1's own cells need < 4 s)
ALL = None  # every check fails (see `Entry.expected_failures`)

# A stub of one ex1 function: the stealing entries replace it with the stolen reference.
STUB_VS_TORCH = {
    "max_abs_diff_vs_torch": "def max_abs_diff_vs_torch(Q, K, V, mask=None):\n"
    "    raise NotImplementedError"
}

# Every entry's first hostile cell starts with this: a detached (setsid, double fork) sleeper
# carrying the marker, alive while the hostile code runs, which must not outlive grading.
LINGER = """import os as _os, sys as _sys
if _os.fork() == 0:
    try:
        _os.setsid()
        if _os.fork() == 0:
            _os.execv(_sys.executable, [_sys.executable, "-S", "-c",
                      "import time; time.sleep(600)", "@MARKER@"])
    finally:
        _os._exit(0)
_os.wait()
"""


PARENT_SIDE = ("grading", "output", "tampering", "broken")


@dataclass(frozen=True)
class Entry:
    id: str
    category: str
    exercise: str
    cells: tuple[str, ...] = ()  # hostile student cells, appended in order
    replace: dict[str, str] = field(default_factory=dict)  # grade id -> source
    raw: str | None = None  # name of a raw-file builder in tests/support/raw.py
    fails: frozenset[str] | None = frozenset()  # checks scoring 0 (ALL: every check)
    status: Status = Status.OK
    budget: dict[str, float] = field(default_factory=dict)  # Budget overrides
    linger: bool = True  # prepend LINGER to the first cell
    fallback: bool = False  # also run at the `docker` level (no cgroups, no CAP_SYS_ADMIN)
    cli: bool = False  # also graded through `attn-grade grade` (exit code, text on stdout)
    known: dict[str, str] = field(default_factory=dict)  # level -> why it still gets through
    what: str = ""

    @property
    def levels(self) -> tuple[str, ...]:
        """Where it is graded. What the parent alone judges (reply frames, notebook parsing,
        report text, the checks) is the same code at every level: the jail only."""
        if self.category in PARENT_SIDE:
            return ("jail",)
        return ("jail", "uid", "docker") if self.fallback else ("jail", "uid")

    def source_cells(self) -> tuple[str, ...]:
        if self.cells and self.linger:
            return (LINGER + self.cells[0], *self.cells[1:])
        return self.cells


def _exfiltrate(body: str) -> str:
    """A cell that collects `found` (a list) and puts it into its own error message."""
    return "found = []\n" + body + "\nraise RuntimeError(repr(found)[:1900])\n"


_READ = _exfiltrate(
    "for path in {paths}:\n"
    "    try:\n"
    "        found.append(open(path, 'rb').read(300).decode('latin-1'))\n"
    "    except Exception as error:\n"
    "        found.append(type(error).__name__)\n"
)

_STEAL_EXEC = """import sys, importlib, glob
stolen = glob.glob("@SITE@/autograder/_reference/*.py") + glob.glob("@PROJECT@/reference/*.py")
for path in ["@REFERENCE@"] + stolen:
    try:
        exec(open(path).read(), globals())
    except Exception as error:
        print(type(error).__name__)
"""

_STEAL_IMPORT = """import sys
for root in ("@PROJECT@", "@SITE@"):
    sys.path.insert(0, root)
try:
    from autograder._reference.ex1_numpy_attention import max_abs_diff_vs_torch
except Exception as error:
    print(repr(error))
try:
    import autograder.exercises.ex1_numpy_attention.checks as leaked
    raise RuntimeError(open(leaked.__file__).read()[:1900])
except ImportError as error:
    print(repr(error))
"""

_STEAL_WALK = """import os
def _search(top, depth=0):
    try:
        entries = list(os.scandir(top))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False) and depth < 12:
                _search(entry.path, depth + 1)
            elif entry.name == "ex1_numpy_attention.py":
                text = open(entry.path).read()
                if "def max_abs_diff_vs_torch" in text:
                    exec(text, globals())
                else:
                    raise RuntimeError(text[:1900])
        except OSError:
            pass
for top in ("/", "/proc/1/root", "/proc/self/root", "/proc/1/cwd"):
    _search(top)
"""

_PROC_SNOOP = _exfiltrate(
    "import os\n"
    "for pid in os.listdir('/proc'):\n"
    "    if not pid.isdigit():\n"
    "        continue\n"
    "    for name in ('cmdline', 'environ', 'cwd', 'root'):\n"
    "        try:\n"
    "            path = f'/proc/{pid}/{name}'\n"
    "            text = (os.listdir(path)[:20] if name in ('cwd', 'root')\n"
    "                    else open(path, 'rb').read(4000).decode('latin-1'))\n"
    "            at = str(text).lower().find('secret')  # a token, a key, a password...\n"
    "            if at >= 0:\n"
    "                found.append((pid, name, str(text)[max(at - 16, 0):at + 60]))\n"
    "        except Exception:\n"
    "            pass\n"
)

_COURSE_TAMPER = _exfiltrate(
    "import glob, os\n"
    "for path in glob.glob('@COURSE@/**', recursive=True):\n"
    "    try:\n"
    "        if os.path.isfile(path):\n"
    "            found.append(open(path, 'rb').read(200).decode('latin-1'))\n"
    "            with open(path, 'r+b') as handle:\n"
    "                handle.write(b'ZEROED')\n"
    "    except Exception as error:\n"
    "        found.append(type(error).__name__)\n"
    "for path in glob.glob('@COURSE@/**/*.ipynb', recursive=True) + ['@COURSE@/gradebook.db']:\n"
    "    try:\n"
    "        os.unlink(path)\n"
    "    except Exception as error:\n"
    "        found.append(type(error).__name__)\n"
)

_WRITE_OUTSIDE = _exfiltrate(
    "import os\n"
    "for top in ('/tmp', '/var/tmp', '/dev/shm', '@PROJECT@', '@COURSE@', '/root', '/etc',\n"
    "            os.path.dirname('@SECRET@')):\n"
    "    try:\n"
    "        with open(os.path.join(top, '@MARKER@'), 'w') as handle:\n"
    "            handle.write('written from the sandbox')\n"
    "        found.append('wrote ' + top)\n"
    "    except Exception as error:\n"
    "        found.append(type(error).__name__)\n"
)

_NET = _exfiltrate(
    "import socket\n"
    "targets = [\n"
    "    (socket.AF_UNIX, socket.SOCK_STREAM, '@SOCKDIR@/host.sock'),\n"
    "    (socket.AF_UNIX, socket.SOCK_DGRAM, '@SOCKDIR@/dgram.sock'),\n"
    "    (socket.AF_UNIX, socket.SOCK_STREAM, '\\0@ABSTRACT@'),\n"
    "    (socket.AF_INET, socket.SOCK_STREAM, ('127.0.0.1', @TCP@)),\n"
    "    (socket.AF_INET, socket.SOCK_STREAM, ('@HOSTIP@', @TCP@)),\n"
    "    (socket.AF_INET, socket.SOCK_DGRAM, ('127.0.0.1', @UDP@)),\n"
    "    (socket.AF_INET, socket.SOCK_DGRAM, ('@HOSTIP@', @UDP@)),\n"
    "]\n"
    "for family, kind, address in targets[{which}]:\n"
    "    try:\n"
    "        sock = socket.socket(family, kind)\n"
    "        sock.settimeout(2)\n"
    "        if kind == socket.SOCK_DGRAM:\n"
    "            for _ in range(3):\n"
    "                sock.sendto(b'@MARKER@', address)\n"
    "            found.append(('sent', address))  # the listener says if it arrived\n"
    "            continue\n"
    "        else:\n"
    "            sock.connect(address)\n"
    "            sock.sendall(b'@MARKER@')\n"
    "        found.append(('reached', address))\n"
    "    except Exception as error:\n"
    "        found.append(type(error).__name__)\n"
)

# The one socket the child may make, aimed at the host's world-writable datagram socket: by
# sendto, by connect then send, by sendmsg, and from a stream pair by connect
_SOCKETPAIR = _exfiltrate(
    "import socket\n"
    "path = '@SOCKDIR@/dgram.sock'\n"
    "def attempts(sock):\n"
    "    yield 'sendto', lambda: sock.sendto(b'@MARKER@', path)\n"
    "    yield 'connect', lambda: (sock.connect(path), sock.send(b'@MARKER@'))\n"
    "    yield 'sendmsg', lambda: sock.sendmsg([b'@MARKER@'], [], 0, path)\n"
    "for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):\n"
    "    for how, attempt in attempts(socket.socketpair(socket.AF_UNIX, kind)[0]):\n"
    "        try:\n"
    "            attempt()\n"
    "            found.append(('sent', how))  # the listener says if it arrived\n"
    "        except Exception as error:\n"
    "            found.append(type(error).__name__)\n"
)

_SPAWN_CPU = """import subprocess, sys
hogs = [subprocess.Popen([sys.executable, "-S", "-c", "while True: pass", "@MARKER@"])
        for _ in range({count})]
"""

_RAW_FRAME = """import os, struct, sys
fd = int(sys.argv[2])  # the child's response channel
os.write(fd, {frame})
import time
time.sleep(30)
"""

_MEMORY_IN_MANY = """import os, subprocess, sys, time
code = "import sys, time; x = b'1' * (900 << 20); open(sys.argv[1], 'w'); time.sleep(60)"
procs = [subprocess.Popen([sys.executable, "-S", "-c", code, f"held{i}", "@MARKER@"])
         for i in range(6)]
def settled():
    return all(p.poll() is not None or os.path.exists(f"held{i}") for i, p in enumerate(procs))
end = time.monotonic() + 25
while time.monotonic() < end and not settled():
    time.sleep(0.2)
time.sleep(1)
alive = sum(p.poll() is None and os.path.exists(f"held{i}") for i, p in enumerate(procs))
raise RuntimeError(("MEMORY-UNBOUNDED " if alive >= 5 else "") + f"{alive} hold 900 MiB")
"""

_FORGE = "\\n\\x1b[2K\\r\\x1b[1A{line}\\x1b]8;;https://evil.example/\\x1b\\\\link\\x1b]8;;\\x1b\\\\"
_FORGED_LINE = "ex1_numpy_attention: 8 / 8 auto-graded points (+2 points)\\u2028  PASS  forged"

ENTRIES: tuple[Entry, ...] = (
    # -- filesystem: hidden files, root-only files, other submissions, writing outside ------------
    Entry(
        "fs_root_only_file",
        "filesystem",
        EX1,
        (_READ.format(paths="['@SECRET@']"),),
        what="read a 0600 root file the test made and put it in an error message",
    ),
    Entry(
        "fs_etc_shadow",
        "filesystem",
        EX1,
        (_READ.format(paths="['/etc/shadow', '/etc/gshadow', '/etc/sudoers']"),),
    ),
    Entry(
        "fs_host_config",
        "filesystem",
        EX1,
        (
            _READ.format(
                paths="['/etc/hostname', '/root/.bash_history', '/root/.ssh/id_rsa', "
                "'/proc/1/environ', '/proc/self/../1/cmdline']"
            ),
        ),
    ),
    Entry(
        "fs_reference_by_path",
        "filesystem",
        EX1,
        (_STEAL_EXEC,),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
        what="exec the reference solution from where the grader has it",
    ),
    Entry(
        "fs_reference_by_import",
        "filesystem",
        EX1,
        (_STEAL_IMPORT,),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
        what="import reference and the checks after adding the checkout to sys.path",
    ),
    Entry(
        "fs_reference_by_search",
        "filesystem",
        EX1,
        (_STEAL_WALK,),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
        budget={"cell_timeout": 20},
        what="walk / (and /proc/1/root) for the reference file",
    ),
    Entry(
        "fs_checks_source",
        "filesystem",
        EX1,
        (
            _READ.format(
                paths="['@CHECKS@', '@SITE@/autograder/exercises/ex1_numpy_attention/checks.py']"
            ),
        ),
    ),
    Entry(
        "fs_proc_snooping",
        "filesystem",
        EX1,
        (_PROC_SNOOP,),
        # At uid, Landlock's view of /proc holds no other process's directory (issue 17); on a
        # kernel without Landlock a host command line stays readable there (docs/security.md).
        what="cmdlines, environments, cwd and root of every process the child can see",
    ),
    Entry(
        "fs_other_submission_and_gradebook",
        "filesystem",
        EX1,
        (_COURSE_TAMPER,),
        what="read, overwrite and delete another student's notebook and the gradebook",
    ),
    Entry("fs_write_outside_workdir", "filesystem", EX1, (_WRITE_OUTSIDE,)),
    Entry(
        "fs_5000_nested_directories",
        "filesystem",
        EX1,
        (
            "import os\nhere = os.getcwd()\nfor _ in range(5000):\n    os.mkdir('d')\n"
            "    os.chdir('d')\nos.chdir(here)\nopen('@MARKER@', 'w').close()\n"
            "os.chmod('d', 0)\n",
        ),
        what="cleanup must remove a 5,000-deep tree the child made unreadable",
    ),
    Entry(
        "fs_symlinks_for_cleanup",
        "filesystem",
        EX1,
        (
            "import os\nfor name, target in (('shadow', '/etc/shadow'), ('secret', '@SECRET@'),"
            " ('course', '@COURSE@'), ('root', '/')):\n    os.symlink(target, name)\n"
            "os.mkdir('sub')\nos.symlink('@COURSE@', 'sub/link')\n",
        ),
        what="symlinks to host files in the work dir: the root cleanup must not follow them",
    ),
    # -- network ----------------------------------------------------------------------------------
    Entry(
        "net_unix_socket_path",
        "network",
        EX1,
        (_NET.format(which="0:1"),),
        fallback=True,
        what="connect to a world-writable UNIX socket the test listens on",
    ),
    Entry(
        "net_unix_datagram",
        "network",
        EX1,
        (_NET.format(which="1:2"),),
        fallback=True,
    ),
    Entry(
        "net_socketpair_to_host_datagram",
        "network",
        EX1,
        (_SOCKETPAIR,),
        fallback=True,
        what="a socketpair's socket given the host socket's path: at uid it got through",
    ),
    Entry("net_abstract_socket", "network", EX1, (_NET.format(which="2:3"),), fallback=True),
    Entry("net_tcp_loopback_and_host", "network", EX1, (_NET.format(which="3:5"),), fallback=True),
    Entry(
        "net_udp_loopback_and_host",
        "network",
        EX1,
        (_NET.format(which="5:7"),),
        fallback=True,  # docker: no network namespace, but the seccomp filter denies socket()
    ),
    # -- signals and processes --------------------------------------------------------------------
    Entry(
        "proc_kill_the_supervisor",
        "processes",
        EX1,
        ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(5)",),
        fallback=True,
    ),
    Entry(
        "proc_kill_every_visible_process",
        "processes",
        EX1,
        (
            "import os, signal\nme = os.getpid()\nfor pid in os.listdir('/proc'):\n"
            "    if pid.isdigit() and int(pid) != me:\n        try:\n"
            "            os.kill(int(pid), signal.SIGKILL)\n        except OSError:\n"
            "            pass\nos.kill(-1, signal.SIGKILL)\n",
        ),
        fallback=True,
        what="SIGKILL every pid in /proc, then kill(-1) (which spares the caller): the "
        "grader, the supervisor and other sandboxes live",
    ),
    Entry(
        "proc_stop_the_supervisor",
        "processes",
        EX1,
        ("import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n",),
        fallback=True,
    ),
    Entry(
        "proc_setsid_double_fork_lingerers",
        "processes",
        EX1,
        (
            "import subprocess, sys\nfor _ in range(5):\n"
            "    subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(600)', "
            "'@MARKER@'], start_new_session=True)\n",
        ),
        fallback=True,
    ),
    Entry(
        "proc_fork_bomb",
        "processes",
        EX1,
        (
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
            "        pass\n",
        ),
        # a cell past its time: a note on that cell, not the notebook's status (issue 20)
        budget=SHORT_CELLS,
        fallback=True,
    ),
    Entry(
        "proc_100_cpu_bound_background",
        "processes",
        EX1,
        (_SPAWN_CPU.format(count=100),),
        fallback=True,
        what="100 CPU-bound background processes left running after the cell",
    ),
    Entry(
        "proc_cpu_bound_in_every_call",
        "processes",
        EX4,
        (
            "import subprocess, sys\n_real = kv_projection_params\n"
            "def kv_projection_params(*args, **kwargs):\n"
            "    subprocess.Popen([sys.executable, '-S', '-c', 'while True: pass', '@MARKER@'])\n"
            "    return _real(*args, **kwargs)\n",
        ),
        fallback=True,
    ),
    Entry(
        "proc_background_thread_spins",
        "processes",
        EX1,
        (
            "import threading\ndef _spin():\n    while True:\n        pass\n"
            "threading.Thread(target=_spin, daemon=True).start()\n",
        ),
    ),
    Entry(
        "proc_exec_replaces_the_child",
        "processes",
        EX1,
        ("import os, sys\nos.execv('/bin/sleep', ['/bin/sleep', '600'])\n",),
        # a cell past its time: a note on that cell, not the notebook's status (issue 20)
        budget=SHORT_CELLS,
        fallback=True,
    ),
    Entry(
        "proc_sigalrm_ignoring_loop",
        "processes",
        EX1,
        ("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n",),
        # a cell past its time: a note on that cell, not the notebook's status (issue 20)
        budget=SHORT_CELLS,
    ),
    # -- resources --------------------------------------------------------------------------------
    Entry(
        "res_memory_one_allocation",
        "resources",
        EX1,
        ("import numpy as np\nhuge = np.ones(10**11)\n",),
        fallback=True,
    ),
    Entry(
        "res_memory_growing",
        "resources",
        EX1,
        ("chunks = []\nwhile True:\n    chunks.append(bytearray(10**8))\n",),
        fallback=True,
    ),
    Entry(
        "res_memory_in_many_processes",
        "resources",
        EX1,
        (_MEMORY_IN_MANY,),
        budget={"cell_timeout": 40},
        fallback=True,
        what="6 x 900 MiB in 6 processes: over the submission's 4 GiB",
        known={
            "docker": "without cgroups only per-process limits apply: 6 x 900 MiB = 5.3 GiB "
            "stay resident until the request ends",
        },
    ),
    Entry(
        "res_disk_fill",
        "resources",
        EX1,
        (
            "written = 0\ntry:\n    for i in range(24):\n"
            "        with open(f'fill{i}', 'wb') as handle:\n"
            "            for _ in range(60):\n"
            "                handle.write(b'x' * (1 << 20))\n"
            "                written += 1 << 20\n"
            "finally:\n    if written > (768 << 20):\n"
            "        raise RuntimeError(f'DISK-FILL-UNBOUNDED {written >> 20} MiB')\n",
        ),
        what="1.4 GiB in 60 MiB files (each under the file-size limit): over the work dir size",
        known={
            "uid": "the work dir is a plain host directory: only the per-file size limit "
            "applies, so a notebook can fill the host's disk",
            "docker": "as uid",
        },
        fallback=True,
    ),
    Entry(
        "res_tmp_fill",
        "resources",
        EX1,
        (
            "import tempfile\nwritten = 0\ntry:\n    for i in range(24):\n"
            "        with tempfile.NamedTemporaryFile(delete=False) as handle:\n"
            "            for _ in range(60):\n"
            "                handle.write(b'x' * (1 << 20))\n"
            "                written += 1 << 20\n"
            "finally:\n    if written > (768 << 20):\n"
            "        raise RuntimeError(f'DISK-FILL-UNBOUNDED {written >> 20} MiB')\n",
        ),
        known={"uid": "as res_disk_fill ($TMPDIR is in the work dir)", "docker": "as uid"},
        fallback=True,
    ),
    Entry(
        "res_output_flood",
        "resources",
        EX1,
        ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",),
        status=Status.OUTPUT_LIMIT,
        fallback=True,
    ),
    Entry(
        "res_file_size",
        "resources",
        EX1,
        (
            "import signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
            "with open('big', 'wb') as handle:\n    for _ in range(100):\n"
            "        handle.write(b'x' * (1 << 20))\n",
        ),
        status=Status.FILE_SIZE,
        fallback=True,
    ),
    Entry(
        "res_file_size_error_ignored",
        "resources",
        EX1,
        ("with open('big', 'wb') as handle:\n    handle.write(b'x' * (100 << 20))\n",),
        fallback=True,
    ),
    Entry(
        "res_fd_exhaustion",
        "resources",
        EX1,
        (
            "import os\ndef exhaust():\n    held = []\n    try:\n        while True:\n"
            "            held.append(os.open('/dev/null', os.O_RDONLY))\n    finally:\n"
            "        for fd in held:\n            os.close(fd)\nexhaust()\n",
        ),
        fallback=True,
        what="runs out of file descriptors (then closes them: kept, they fail later imports)",
    ),
    Entry(
        "res_thread_bomb",
        "resources",
        EX1,
        (
            "import threading, time\nthreads = []\ntry:\n    for _ in range(100000):\n"
            "        t = threading.Thread(target=time.sleep, args=(3,), daemon=True)\n"
            "        t.start()\n        threads.append(t)\nexcept RuntimeError:\n    pass\n"
            "for t in threads:\n    t.join()\n",
        ),
        fallback=True,
        what="as many threads as the limits allow (they end: kept, they starve later calls)",
    ),
    # -- the grading process itself ---------------------------------------------------------------
    Entry(
        "grade_reply_header_too_large",
        "grading",
        EX1,
        (_RAW_FRAME.format(frame="b'AGW1' + struct.pack('<I', 2**31)"),),
        status=Status.CRASHED,
    ),
    Entry(
        "grade_reply_of_empty_lists",
        "grading",
        EX1,
        ("def max_abs_diff_vs_torch(Q, K, V, mask=None):\n    return [[]] * 400_000\n",),
        fails=VS_TORCH,
        what="a 1.6 MB reply of 400,000 empty lists (under the 2 MiB header cap)",
    ),
    Entry(
        "grade_reply_deeply_nested",
        "grading",
        EX1,
        (
            _RAW_FRAME.format(
                frame="(lambda body: b'AGW1' + struct.pack('<I', len(body)) + body + "
                "struct.pack('<I', 0))(b'{\"ok\": true, \"notes\": ' + b'[' * 500000 + "
                "b']' * 500000 + b'}')"
            ),
        ),
        status=Status.CRASHED,
    ),
    Entry(
        "grade_reply_too_many_blobs",
        "grading",
        EX1,
        (
            _RAW_FRAME.format(
                frame="b'AGW1' + struct.pack('<I', 2) + b'{}' + struct.pack('<I', 10**9)"
            ),
        ),
        status=Status.CRASHED,
    ),
    Entry(
        "grade_small_value_inflates",
        "grading",
        EX1,
        (
            "import numpy as np, wire\n_encode = wire.Encoder.encode\n"
            "class Bomb:\n    pass\n"
            "def encode(self, value):\n    if isinstance(value, Bomb):\n"
            "        blob = self._blob(wire.array_to_npy(np.zeros(1 << 17)))\n"
            "        return [{'$ndarray': blob}] * 3000\n    return _encode(self, value)\n"
            "wire.Encoder.encode = encode\n"
            "def max_abs_diff_vs_torch(Q, K, V, mask=None):\n    return Bomb()\n",
        ),
        fails=ALL,  # patching the wire module is tampering: no points at all
        status=Status.TAMPERED,
        what="one 1 MiB array referenced 3,000 times in a 50 KB reply (3 GiB once decoded)"
        " (the parent's memory stays bounded: peak RSS checked)",
    ),
    Entry(
        "grade_tensor_dtype_inflates",
        "grading",
        EX1,
        (
            "import numpy as np, wire\n_encode = wire.Encoder.encode\n"
            "class Bomb:\n    pass\n"
            "def encode(self, value):\n    if isinstance(value, Bomb):\n"
            "        blob = self._blob(wire.array_to_npy(np.zeros(100 << 20, dtype=bool)))\n"
            "        return {'$tensor': blob, 'dtype': 'complex128'}\n"
            "    return _encode(self, value)\n"
            "wire.Encoder.encode = encode\n"
            "def max_abs_diff_vs_torch(Q, K, V, mask=None):\n    return Bomb()\n",
        ),
        fails=ALL,  # patching the wire module is tampering: no points at all
        status=Status.TAMPERED,
        what="a 100 MB bool array the parent is told to convert to complex128 (1.6 GB)"
        " (the parent's memory stays bounded: peak RSS checked)",
    ),
    Entry(
        "grade_npy_header_lies",
        "grading",
        EX1,
        (
            "import numpy as np, wire, io\n_encode = wire.Encoder.encode\n"
            "class Bomb:\n    pass\n"
            "def encode(self, value):\n    if isinstance(value, Bomb):\n"
            "        buffer = io.BytesIO()\n"
            "        np.lib.format.write_array_header_1_0(buffer, {'descr': '<f8', "
            "'fortran_order': False, 'shape': (10**12,)})\n"
            "        return {'$ndarray': self._blob(buffer.getvalue())}\n"
            "    return _encode(self, value)\n"
            "wire.Encoder.encode = encode\n"
            "def max_abs_diff_vs_torch(Q, K, V, mask=None):\n    return Bomb()\n",
        ),
        fails=ALL,  # patching the wire module is tampering: no points at all
        status=Status.TAMPERED,
        what="a 128-byte .npy whose header claims 8 TB"
        " (the parent's memory stays bounded: peak RSS checked)",
    ),
    Entry(
        "grade_magic_flood",
        "grading",
        EX1,
        ("\n".join(["!ls /", "%ls", "x = 1"] * 3000) + "\n#" + "f" * 1_000_000 + "\n",),
        linger=False,
        fails=SDPA_NUMPY_ONLY,  # a cell too large to analyse: the constraint is not paid
        # a cell past its time: a note on that cell, not the notebook's status (issue 20)
        budget=SHORT_CELLS,
        what="9,000 magic and !cmd lines plus a megabyte of filler: IPython's translation "
        "runs in the child, under the cell's time limit",
    ),
    Entry(
        "grade_deeply_nested_expression",
        "grading",
        EX1,
        ("x = " + "-" * 200_000 + "1\n", "y = " + "(" * 5000 + "1" + ")" * 5000 + "\n"),
        linger=False,
        fails=SDPA_NUMPY_ONLY,  # a cell too large to analyse: the constraint is not paid
    ),
    Entry(
        "grade_huge_cell_hides_torch",
        "grading",
        EX1,
        (
            "import torch as _t\n"
            "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
            "    q, k, v = (_t.from_numpy(np.asarray(x, dtype=float)) for x in (Q, K, V))\n"
            "    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5\n"
            "    if mask is not None:\n"
            "        s = s.masked_fill(~_t.from_numpy(np.asarray(mask, dtype=bool)), "
            "float('-inf'))\n"
            "    w = _t.softmax(s, dim=-1)\n    return (w @ v).numpy(), w.numpy()\n"
            "#" + "x" * 250_000 + "\n",
        ),
        fails=SDPA_NUMPY_ONLY,
        what="a torch sdpa in a cell too large for the parent's source analysis: what cannot "
        "be analysed is not paid for",
    ),
    Entry(
        "grade_torch_through_importlib",
        "grading",
        EX1,
        (
            "import importlib\n"
            "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
            "    t = importlib.import_module('to' + 'rch')\n"
            "    q, k, v = (t.from_numpy(np.asarray(x, dtype=float)) for x in (Q, K, V))\n"
            "    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5\n"
            "    if mask is not None:\n"
            "        s = s.masked_fill(~t.from_numpy(np.asarray(mask, dtype=bool)), "
            "float('-inf'))\n"
            "    w = t.softmax(s, dim=-1)\n    return (w @ v).numpy(), w.numpy()\n",
        ),
        fails=SDPA_NUMPY_ONLY,
        what="PyTorch reached without an import statement the parent's ast scan can see "
        "(caught by calling the function with torch unimportable)",
    ),
    Entry(
        "grade_sleeping_cells_over_budget",
        "grading",
        EX1,
        ("import time\ntime.sleep(4)",) * 4,
        fails=ALL,
        status=Status.TIMEOUT,
        budget={"cell_timeout": 8, "total_seconds": 10},
        what="4 x 4 s of sleep (each cell within its 8 s) against a 10 s budget",
    ),
    Entry(
        "grade_lone_surrogate_message",
        "grading",
        EX1,
        ("raise ValueError('half \\ud800 a surrogate \\udfff')",),
        cli=True,
    ),
    Entry(
        "grade_surrogate_in_function_error",
        "grading",
        EX4,
        ("def kv_projection_params(*args):\n    raise KeyError('\\ud800' * 50)\n",),
        fails=KV_PARAMS,
        cli=True,
    ),
    Entry(
        "grade_notebook_for_another_exercise",
        "grading",
        EX4,
        raw="claims_ex1_named_ex4",
        fails=ALL,
        what="a solved ex1 notebook submitted (by file name) for ex4: graded as ex4 (the trusted "
        "side decides), with a note; none of ex4's functions exist",
    ),
    # -- output injection -------------------------------------------------------------------------
    Entry(
        "out_escape_sequences_in_cell_error",
        "output",
        EX1,
        ("raise RuntimeError('" + _FORGE.format(line=_FORGED_LINE) + "')",),
        cli=True,
    ),
    Entry(
        "out_escape_sequences_in_check_message",
        "output",
        EX1,
        (
            "def max_abs_diff_vs_torch(Q, K, V, mask=None):\n    raise RuntimeError('"
            + _FORGE.format(line="  PASS  test_max_abs_diff_compares_with_torch  0.5 / 0.5")
            + "')\n",
        ),
        fails=VS_TORCH,
        cli=True,
    ),
    Entry(
        "out_forged_type_name",
        "output",
        EX1,
        (
            "Forged = type('Error\\n\\n  PASS  test_sdpa_uses_numpy_only  0.75 / 0.75\\x1b[0m', "
            "(Exception,), {})\nraise Forged('\\u202eecnetnes desrever\\u2029next line')\n",
        ),
        cli=True,
    ),
    Entry(
        "out_escapes_in_magic_notes",
        "output",
        EX1,
        ("%load_ext \x1b[2J\x1b[H" + _FORGED_LINE.replace("\\u2028", "\u2028") + "\n",),
        linger=False,
    ),
    Entry(
        "out_printed_escapes",
        "output",
        EX1,
        (
            "import sys\nprint('\\x1b[2J\\x1b[H" + _FORGED_LINE + "')\n"
            "sys.stderr.write('\\x1b]52;c;ZXZpbA==\\x07')\n",
        ),
    ),
    # -- in-process tampering (tests/security/test_tampering.py) ------------------------------
    Entry(
        "tamper_numpy_allclose",
        "tampering",
        EX1,
        (
            "import numpy as np\nnp.allclose = lambda *a, **k: True\n"
            "np.testing.assert_allclose = lambda *a, **k: None\n"
            "np.array_equal = lambda *a, **k: True",
        ),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
    ),
    Entry(
        "tamper_builtins",
        "tampering",
        EX1,
        (
            "import builtins\nbuiltins.isinstance = lambda *a: True\n"
            "builtins.abs = lambda x: 0\nbuiltins.len = lambda x: 0",
        ),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
        status=Status.CRASHED,  # the child's runtime uses len() too: it dies, then reruns
    ),
    Entry(
        "tamper_print_all_passed",
        "tampering",
        EX1,
        ("print('All checks passed! Score: 8/8')\nimport sys\nsys.stderr.write('8.0\\n')",),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
    ),
    Entry(
        "tamper_sys_exit",
        "tampering",
        EX1,
        ("import sys\nsys.exit(0)",),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
    ),
    Entry(
        "tamper_os_exit",
        "tampering",
        EX1,
        ("import os\nos._exit(0)",),
        replace=STUB_VS_TORCH,
        fails=VS_TORCH,
        status=Status.CRASHED,
    ),
    Entry(
        "tamper_lying_server",
        "tampering",
        EX4,
        (
            "import gc\nfor obj in gc.get_objects():\n"
            "    if type(obj).__name__ == 'Server':\n"
            "        obj.respond = lambda header, blobs: ({'ok': True, 'value': 7}, [])\n",
        ),
        replace={"kv_projection_params": "def kv_projection_params(*a):\n    return None"},
        fails=ALL,
        what="the child answers every later request 'ok, 7' (even the grader's probes)",
    ),
    # -- broken files -----------------------------------------------------------------------------
    Entry(
        "broken_cell_metadata_string_and_list",
        "broken",
        EX1,
        raw="cell_metadata_string_and_list",
        what="a solution cell's metadata is a string, another's a list",
    ),
    Entry(
        "broken_not_json", "broken", EX1, raw="not_json", fails=ALL, status=Status.INVALID_NOTEBOOK
    ),
    Entry(
        "broken_deep_json",
        "broken",
        EX1,
        raw="deep_json",
        fails=ALL,
        status=Status.INVALID_NOTEBOOK,
    ),
    Entry(
        "broken_too_large",
        "broken",
        EX1,
        raw="too_large",
        fails=ALL,
        status=Status.INVALID_NOTEBOOK,
    ),
    Entry(
        "broken_invalid_utf8",
        "broken",
        EX1,
        raw="invalid_utf8",
        fails=ALL,
        status=Status.INVALID_NOTEBOOK,
    ),
    Entry(
        "broken_source_not_text",
        "broken",
        EX1,
        raw="source_not_text",
        fails=ALL,
        status=Status.INVALID_NOTEBOOK,
    ),
    Entry(
        "broken_nbformat_3",
        "broken",
        EX1,
        raw="nbformat_3",
        fails=ALL,
        status=Status.INVALID_NOTEBOOK,
    ),
)


def categories() -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in ENTRIES:
        counts[entry.category] = counts.get(entry.category, 0) + 1
    return counts
