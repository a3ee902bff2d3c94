"""Headless Chromium (Debian's `chromium`) for tests that load generated pages offline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# A planted handler that runs adds an element of this name; escaped text never does.
MARKER = "pwned-marker"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    command = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after the page loaded (and any script in it ran)."""
    return _run(page, profile, "--dump-dom").stdout


def screenshot(page: Path, profile: Path, out: Path, size: str = "1200,2400") -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(page, profile, f"--screenshot={out.resolve()}", f"--window-size={size}")
    return out


def planted(vector: str) -> str:
    """JavaScript that leaves a `<pwned-marker data-vector=...>` in the DOM when it runs."""
    return (
        f"var m=document.createElement('{MARKER}');m.setAttribute('data-vector','{vector}');"
        "document.body.appendChild(m)"
    )
