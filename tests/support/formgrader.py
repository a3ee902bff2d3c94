"""nbgrader's formgrader as an instructor runs it (docs/instructors.md: `jupyter server` in the
course, then the Formgrader tab), on a copy of a built course, and the MathJax its pages load.

Formgrader's grading page loads MathJax 2.7 from a CDN (nbconvert's `mathjax()` macro with its
default URL, `latest.js?config=TeX-AMS_CHTML-full,Safe`). This machine reaches no CDN, so the
browser's requests for it are answered from Debian's libjs-mathjax (2.7.9, the version that URL
resolves to), the way `latest.js` loads `MathJax.js` from the same folder: the page typesets
as it does for an instructor online.
"""

from __future__ import annotations

import mimetypes
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.course.build import tool_env

MATHJAX = Path("/usr/share/javascript/mathjax")  # Debian's libjs-mathjax
CDN = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/"


def mathjax_route(url: str) -> tuple[int, str, bytes] | None:
    """A request under CDN, answered from Debian's MathJax (None: not found)."""
    path, _, query = url[len(CDN) :].partition("?")
    if path == "latest.js":  # as MathJax's latest.js does: load MathJax.js, same query
        loader = (
            "var s=document.createElement('script');"
            f"s.src='{CDN}MathJax.js?{query}';document.head.appendChild(s);"
        )
        return 200, "application/javascript", loader.encode()
    file = (MATHJAX / path).resolve()
    if not file.is_file() or MATHJAX.resolve() not in file.parents:
        return None
    kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return 200, kind, file.read_bytes()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Formgrader:
    """A running `jupyter server` with formgrader on `root` (a course), logged in by `token`."""

    root: Path
    port: int
    token: str
    process: subprocess.Popen
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str) -> Any:
        """GET `path` with the instructor's token; the decoded JSON."""
        import json

        request = urllib.request.Request(
            self.base + path, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:  # loopback only
            return json.loads(answer.read())

    def submission_id(self, exercise: str, student: str) -> str:
        rows = self.api(f"/formgrader/api/submitted_notebooks/{exercise}/{exercise}")
        assert isinstance(rows, list)
        return next(row["id"] for row in rows if row["student"] == student)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_formgrader(course: Path, where: Path) -> Formgrader:
    """`jupyter server` serving a copy of `course` (copied to `where/course`), as
    docs/instructors.md says, with Jupyter's runtime, config and data directories of its own
    under `where`."""
    root = where / "course"
    shutil.copytree(course, root, symlinks=True)
    env = {
        **tool_env(),
        "JUPYTER_RUNTIME_DIR": str(where / "runtime"),
        "JUPYTER_CONFIG_DIR": str(where / "config"),
        "JUPYTER_DATA_DIR": str(where / "data"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    port, token = free_port(), secrets.token_hex(16)
    log = where / "server.log"
    command = [
        sys.executable,
        "-m",
        "jupyter_server",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
        f"--IdentityProvider.token={token}",
    ]
    if os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=out)
    server = Formgrader(root, port, token, process, log)
    deadline = time.monotonic() + 120
    while True:
        try:
            server.api("/api/status")
            server.api("/formgrader/api/assignments")
            return server
        except OSError as error:
            if process.poll() is not None or time.monotonic() > deadline:
                server.stop()
                message = "formgrader did not start:\n" + log.read_text()[-3000:]
                raise AssertionError(message) from error
            time.sleep(0.5)
