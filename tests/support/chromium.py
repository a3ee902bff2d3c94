"""Render a local HTML page in headless Chromium: its DOM after load, and a screenshot."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def _chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def rendered_dom(page: Path) -> str:
    """The page's DOM as Chromium serialises it after loading."""
    return _chromium(page, "--dump-dom").stdout


def screenshot(page: Path, name: str, height: int = 4000) -> Path:
    """A PNG of the page (1200 px wide) kept under test-artifacts/ at the repository root."""
    ARTIFACTS.mkdir(exist_ok=True)
    out = ARTIFACTS / name
    out.unlink(missing_ok=True)
    _chromium(page, f"--screenshot={out}", f"--window-size=1200,{height}")
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), "no screenshot written"
    return out


def visible_text(dom: str) -> str:
    """The text of the DOM's body: tags and style removed, whitespace collapsed."""
    import html

    body = re.sub(r"<style.*?</style>", " ", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def images(dom: str) -> list[bytes]:
    """The decoded bytes of every <img> with a data: URI (PNG or SVG)."""
    found = []
    for kind, data in re.findall(r'<img[^>]*src="data:image/(png|svg\+xml);base64,([^"]+)"', dom):
        payload = base64.b64decode(data, validate=True)
        magic = b"\x89PNG\r\n\x1a\n" if kind == "png" else b"<svg"
        assert magic in payload[:200], f"a data: image that is not {kind}"
        found.append(payload)
    return found


# -- planted script (the feedback and formgrader pages must never run it) ----------------------
# A planted handler that runs adds an element of this name; escaped text never does.
MARKER = "pwned-marker"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    command = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def dump_dom(page: Path, profile: Path, size: str = "1200,2400") -> str:
    """The DOM after the page loaded (and any script in it ran), with a given profile dir, in
    a window of `size` ("width,height")."""
    return _run(page, profile, "--dump-dom", f"--window-size={size}").stdout


def screenshot_to(page: Path, profile: Path, out: Path, size: str = "1200,2400") -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(page, profile, f"--screenshot={out.resolve()}", f"--window-size={size}")
    return out


def planted(vector: str) -> str:
    """JavaScript that leaves a `<pwned-marker data-vector=...>` in the DOM when it runs."""
    return (
        f"var m=document.createElement('{MARKER}');m.setAttribute('data-vector','{vector}');"
        "document.body.appendChild(m)"
    )
