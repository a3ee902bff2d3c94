"""What the corpus tests need around a notebook: the host's bait (secrets, listeners, another
student's course files), the grading drivers per isolation level, and the checks that no
process of an entry survived."""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import site
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import autograder._reference.ex1_numpy_attention as reference_ex1
from autograder.core.registry import checks_module_path

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
ANSWER_TIMEOUT = 300.0  # seconds for one grading, far above the slowest entry


def processes_with(marker: str) -> list[int]:
    """Pids whose command line carries `marker` (a test's lingering processes)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Host:
    """Bait on the host for one entry, and what must hold afterwards."""

    base: Path
    marker: str = field(default_factory=lambda: f"attn-adv-{uuid.uuid4().hex}")
    secrets: list[str] = field(default_factory=list)
    overrides: dict[str, str] = field(default_factory=dict)  # placeholder -> value
    _closers: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        os.chmod(self.base, 0o755)
        token = lambda: f"attn-adv-secret-{uuid.uuid4().hex}"  # noqa: E731
        self.secret = self.base / "secret.txt"
        self.secret.write_text(token())
        self.secret.chmod(0o600)
        self.course = self.base / "course"
        other = self.course / "submitted" / "bob" / "ex1_numpy_attention"
        other.mkdir(parents=True)
        (other / "ex1_numpy_attention.ipynb").write_text(token())
        (self.course / "gradebook.db").write_text(token())
        for path in [self.course, *self.course.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # as a course usually is
        self.course_files = {p: _digest(p) for p in self.course.rglob("*") if p.is_file()}
        self.sockdir = self.base / "sockets"
        self.sockdir.mkdir(mode=0o755)
        self.stream = self._listen(
            socket.AF_UNIX, socket.SOCK_STREAM, str(self.sockdir / "host.sock")
        )
        self.dgram = self._bind(socket.AF_UNIX, socket.SOCK_DGRAM, str(self.sockdir / "dgram.sock"))
        for name in ("host.sock", "dgram.sock"):
            os.chmod(self.sockdir / name, 0o777)  # like D-Bus's or X11's sockets
        self.abstract_name = f"attn-adv-{uuid.uuid4().hex}"
        self.abstract = self._listen(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + self.abstract_name)
        self.tcp = self._listen(socket.AF_INET, socket.SOCK_STREAM, ("0.0.0.0", 0))
        self.udp = self._bind(socket.AF_INET, socket.SOCK_DGRAM, ("0.0.0.0", 0))
        self.cmdline_secret = token()
        sleeper = subprocess.Popen(
            [sys.executable, "-S", "-c", "import time; time.sleep(600)", self.cmdline_secret]
        )
        self._closers.append(sleeper.kill)
        self.secrets += [self.secret.read_text(), self.cmdline_secret]
        self.secrets += [p.read_text() for p in self.course_files]
        self.secrets += _hidden_file_lines()

    def _bind(self, family, kind, address) -> socket.socket:
        sock = socket.socket(family, kind)
        sock.bind(address)
        sock.setblocking(False)
        self._closers.append(sock.close)
        return sock

    def _listen(self, family, kind, address) -> socket.socket:
        sock = self._bind(family, kind, address)
        sock.listen()
        return sock

    def values(self) -> dict[str, str]:
        return {
            "@MARKER@": self.marker,
            "@SECRET@": str(self.secret),
            "@SOCKDIR@": str(self.sockdir),
            "@ABSTRACT@": self.abstract_name,
            "@TCP@": str(self.tcp.getsockname()[1]),
            "@UDP@": str(self.udp.getsockname()[1]),
            "@HOSTIP@": host_ip(),
            "@COURSE@": str(self.course),
            "@REFERENCE@": reference_ex1.__file__,
            "@CHECKS@": str(checks_module_path("ex1_numpy_attention")),
            "@PROJECT@": str(ROOT),
            "@SITE@": site.getsitepackages()[0],
            **self.overrides,
        }

    def fill(self, source: str) -> str:
        for key, value in self.values().items():
            source = source.replace(key, value)
        return source

    def what_reached_the_listeners(self) -> list[str]:
        reached = []
        for name, sock in (("unix", self.stream), ("abstract", self.abstract), ("tcp", self.tcp)):
            try:
                sock.accept()[0].close()
                reached.append(f"{name} listener accepted a connection")
            except BlockingIOError:
                pass
        for name, sock in (("unix datagram", self.dgram), ("udp", self.udp)):
            try:
                reached.append(f"{name} socket received {sock.recv(100)!r}")
            except BlockingIOError:
                pass
        return reached

    def changed_course_files(self) -> list[str]:
        return [
            str(path)
            for path, digest in self.course_files.items()
            if not path.exists() or _digest(path) != digest
        ]

    def files_written_outside(self) -> list[str]:
        tops = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), ROOT, self.course, self.base]
        tops += [Path("/root"), Path("/etc")]
        return [str(top / self.marker) for top in tops if (top / self.marker).exists()]

    def close(self) -> None:
        for close in self._closers:
            close()


def _hidden_file_lines() -> list[str]:
    """Distinctive lines of the hidden files: no report may quote them."""
    reference = Path(reference_ex1.__file__).read_text()
    checks = checks_module_path("ex1_numpy_attention").read_text()
    wanted = [
        "return float(np.max(np.abs(ours - theirs.numpy())))",
        "values = np.concatenate([matrix.ravel() for matrix in first])",
    ]
    assert wanted[0] in reference and wanted[1] in checks, "update the hidden-file baits"
    lines = wanted[:]
    if os.access("/etc/shadow", os.R_OK):
        lines += [line for line in Path("/etc/shadow").read_text().splitlines() if line][:1]
    return lines


def host_ip() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: picks the outgoing address
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


# -- grading drivers, one per level ---------------------------------------------------------------
class GradingFailed(AssertionError):
    pass


class Driver:
    """A `tests.support.driver` process; restarted after a hang or a crash."""

    def __init__(self, argv: list[str], env: dict[str, str], module: bool = True):
        self.argv, self.env = argv, env
        # as a script (not -m from the checkout) when the grader must come from an install
        self.target = (
            ["-m", "tests.support.driver"]
            if module
            else [str(Path(__file__).with_name("driver.py"))]
        )
        self.process: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [*self.argv, *self.target],
                cwd=ROOT if self.target[0] == "-m" else tempfile.gettempdir(),
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        return self.process

    def grade(self, path: Path, budget: dict, observe: str | None = None) -> dict:
        process = self._start()
        request = {"path": str(path), "budget": budget, "observe": observe}
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], ANSWER_TIMEOUT)
        line = process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise GradingFailed("the grading process hung or died (the notebook got through)")
        answer = json.loads(line)
        if "error" in answer:
            raise GradingFailed(f"grading raised {answer['error']}")
        return answer

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def json_answer(argv: list[str], env: dict[str, str] | None = None, timeout: float = 300):
    """Run a probe (`argv`, from the checkout) that prints its findings as JSON on its last
    line; what it found. The test fails with the probe's stderr when it exits with an error."""
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def layered_venv() -> Path:
    """A venv on Debian's world-readable python3.11 that sees this venv's packages (the `uid`
    level needs an interpreter the sandbox uid can read; this venv's lives under /root)."""
    directory = Path(tempfile.mkdtemp(prefix="attn-adv-venv-"))
    os.chmod(directory, 0o755)
    subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(directory)], check=True)
    packages = site.getsitepackages()[0]
    layer = directory / "lib" / "python3.11" / "site-packages" / "layer.pth"
    layer.write_text(f"import site; site.addsitedir({packages!r})\n")
    return directory


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
