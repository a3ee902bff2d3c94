"""axe-core's WCAG 2 A and AA rules on the pages a student or an instructor reads, in Debian's
chromium driven by puppeteer-core (both from npm, pinned in tests/support/axe/package-lock.json;
`npm ci --prefix tests/support/axe` installs them, as the README's test command does).

`audit(pages)` opens each page at each width in one browser, waits for the page's own MathJax
(formgrader's) to typeset, runs axe and returns what it found, with the requests the page tried
to send off the machine and a full-page screenshot under test-artifacts/. Without the npm
install a test is skipped on a developer's machine and fails under CI=true (CI must check it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.chromium import FLAGS, chromium

HERE = Path(__file__).with_name("axe")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TAGS = ("wcag2a", "wcag2aa")  # WCAG 2.0 A and AA (axe's wcag21/22 tags add to these)
WIDTHS = (1280, 390)  # an instructor's screen and a phone
INSTALL = "npm ci --prefix tests/support/axe"


@dataclass(frozen=True)
class Target:
    """A page to audit: `url` (after `login`, a URL that sets the session's cookie); `probe`:
    a JavaScript expression whose (JSON) value is kept too."""

    name: str
    url: str
    login: str | None = None
    widths: tuple[int, ...] = WIDTHS
    probe: str | None = None


@dataclass
class Audit:
    """What axe found on one page at one width."""

    name: str
    width: int
    violations: list[dict]
    offsite: list[str] = field(default_factory=list)  # requests the page made off the machine
    mathjax: str | None = None  # the page's MathJax version, when it has one
    shot: str | None = None
    probe: object = None  # the value of the target's probe

    def summary(self) -> list[str]:
        """One line per violating element: rule, impact, where, why."""
        return [
            f"{v['id']} ({v['impact']}) {' '.join(n['target'])}: {n['html'][:120]}"
            f" -- {n['summary'][:200]}"
            for v in self.violations
            for n in v["nodes"]
        ]


def missing() -> str | None:
    """Why axe cannot run here (None: it can)."""
    if shutil.which("node") is None:
        return "node is not installed (apt-get install nodejs npm)"
    if chromium() is None:
        return "Debian's chromium is not installed"
    for package in ("axe-core/axe.min.js", "puppeteer-core/package.json"):
        if not (HERE / "node_modules" / package).is_file():
            return f"{package.split('/')[0]} is not installed: run `{INSTALL}`"
    return None


def require_axe() -> None:
    """Skip the calling test without axe, or fail under CI=true: CI must run it."""
    reason = missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"axe cannot run, and CI must check the pages: {reason}")
    pytest.skip(reason)


def audit(targets: list[Target], route: tuple[str, Path] | None = None) -> list[Audit]:
    """Every target at each of its widths (module doc); `route`: a URL prefix answered from a
    local folder (formgrader's MathJax CDN, from Debian's libjs-mathjax)."""
    require_axe()
    job = {
        "chromium": chromium(),
        "args": [flag for flag in FLAGS if flag != "--headless"],
        "tags": list(TAGS),
        "route": {"prefix": route[0], "dir": str(route[1])} if route else None,
        "shots": str(ARTIFACTS / "axe"),
        "pages": [
            {
                "name": t.name,
                "url": t.url,
                "login": t.login,
                "widths": list(t.widths),
                "probe": t.probe,
            }
            for t in targets
        ],
    }
    done = subprocess.run(
        ["node", str(HERE / "run.mjs")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"axe's run failed:\n{done.stderr[-3000:]}"
    return [Audit(**found) for found in json.loads(done.stdout)]
