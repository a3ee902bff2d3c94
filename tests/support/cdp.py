"""Headless Chromium driven through its DevTools protocol over a pipe (`--remote-debugging-pipe`:
no port, no websocket library): open a page, run script in it, watch every request it makes.

One `Browser` per test session is enough: each `page()` is a fresh tab, and each `Browser` a
fresh profile. Requests to hosts other than 127.0.0.1 never leave the machine: a `route` may
answer them (the tests serve MathJax this way, as formgrader loads it from a CDN), else they fail.
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.chromium import FLAGS, chromium

# a route: URL -> (status, content type, body), or None to fail the request
Route = Callable[[str], "tuple[int, str, bytes] | None"]


class DevToolsError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


@dataclass
class Request:
    method: str
    url: str
    kind: str  # the resource type: Document, Script, XHR, Fetch, ...


@dataclass
class Browser:
    """A headless Chromium with a fresh profile (close() it, or use it as a context manager)."""

    routes: list[tuple[str, Route]] = field(default_factory=list)  # (URL prefix, route)
    requests: list[Request] = field(default_factory=list)  # every request any page made
    dialogs: list[str] = field(default_factory=list)  # alert/confirm/prompt messages
    block_navigation: bool = False  # while set, a page's navigations are aborted (and recorded)
    navigations: list[str] = field(default_factory=list)  # the URLs of the aborted ones

    def __post_init__(self) -> None:
        executable = chromium()
        assert executable, "Debian's chromium is required"
        self._profile = tempfile.TemporaryDirectory(prefix="cdp-profile-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()

        def pipes() -> None:  # in the child: fd 3 reads commands, fd 4 writes answers
            reading, writing = os.dup(to_browser_r), os.dup(from_browser_w)  # above 4
            os.dup2(reading, 3)
            os.dup2(writing, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self._process = subprocess.Popen(
            [
                executable,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                "about:blank",
            ],
            close_fds=False,  # Python's own descriptors are not inheritable; 3 and 4 are
            preexec_fn=pipes,  # only dup2 before exec
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if not os.environ.get("CDP_DEBUG") else None,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._out, self._in = to_browser_w, from_browser_r
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []

    # -- the protocol ------------------------------------------------------------------------
    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read(self, timeout: float) -> dict | None:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._in], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise DevToolsError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _dispatch(self, message: dict) -> None:
        """Events the browser waits on are answered at once; the others are kept."""
        method, params = message.get("method"), message.get("params", {})
        session = message.get("sessionId")
        if method == "Fetch.requestPaused":
            self._paused(params, session)
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(params.get("message", ""))
            self._send("Page.handleJavaScriptDialog", {"accept": False}, session)
        else:
            self._events.append(message)

    def call(
        self, method: str, params: dict | None = None, session: str | None = None, timeout=60.0
    ) -> dict:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(max(0.0, deadline - time.monotonic()))
            if message is None:
                raise DevToolsError(f"no answer to {method} in {timeout} s")
            if message.get("id") == wanted:
                if "error" in message:
                    raise DevToolsError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self._dispatch(message)

    def wait_for(self, method: str, session: str | None, timeout: float = 60.0) -> dict:
        """The next event `method` of `session` (kept events first)."""
        deadline = time.monotonic() + timeout
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == session:
                    return self._events.pop(index)["params"]
            message = self._read(max(0.0, deadline - time.monotonic()))
            if message is None:
                raise DevToolsError(f"no {method} in {timeout} s")
            if "method" in message:
                self._dispatch(message)

    def pump(self, seconds: float) -> None:
        """Answer the browser's events for `seconds` (requests in flight, dialogs)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            message = self._read(left)
            if message is not None and "method" in message:
                self._dispatch(message)

    def _paused(self, params: dict, session: str | None) -> None:
        request = params["request"]
        url = request["url"]
        self.requests.append(Request(request["method"], url, params.get("resourceType", "")))
        rid = params["requestId"]
        if self.block_navigation and params.get("resourceType") == "Document":
            self.navigations.append(url)
            self._send("Fetch.failRequest", {"requestId": rid, "errorReason": "Aborted"}, session)
            return
        if url.startswith(("http://127.0.0.1", "http://localhost", "file:", "data:")):
            self._send("Fetch.continueRequest", {"requestId": rid}, session)
            return
        answer = next((route(url) for prefix, route in self.routes if url.startswith(prefix)), None)
        if answer is None:
            self._send("Fetch.failRequest", {"requestId": rid, "errorReason": "Failed"}, session)
            return
        status, content_type, body = answer
        self._send(
            "Fetch.fulfillRequest",
            {
                "requestId": rid,
                "responseCode": status,
                "responseHeaders": [{"name": "Content-Type", "value": content_type}],
                "body": base64.b64encode(body).decode(),
            },
            session,
        )

    # -- pages -------------------------------------------------------------------------------
    def page(self, url: str, size: tuple[int, int] = (1280, 2400)) -> Page:
        """A new tab showing `url`, loaded (every request of the tab goes through `_paused`)."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session, target)
        self.call("Page.enable", session=session)
        self.call("Runtime.enable", session=session)
        self.call(
            "Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}, session
        )
        page.resize(*size)
        page.goto(url)
        return page

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self._process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        finally:
            os.close(self._out)
            os.close(self._in)
            self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Page:
    browser: Browser
    session: str
    target: str

    def call(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        return self.browser.call(method, params, self.session, timeout)

    def goto(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired", self.session)

    def resize(self, width: int, height: int) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def evaluate(self, expression: str, timeout: float = 60.0):
        """The JSON value of `expression` (awaited when it is a promise)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout,
        )
        if "exceptionDetails" in result:
            raise DevToolsError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_until(self, expression: str, timeout: float = 60.0) -> None:
        """Until `expression` is true in the page (the browser's events answered meanwhile)."""
        deadline = time.monotonic() + timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise DevToolsError(f"not true after {timeout} s: {expression}")
            self.browser.pump(0.2)

    def screenshot(self, out: Path, top: float | None = None) -> Path:
        """A PNG of the window, or of a window's height of the page from `top` (CSS px)."""
        params: dict = {"format": "png"}
        if top is not None:
            width, height = self.evaluate("[window.innerWidth, window.innerHeight]")
            clip = {"x": 0, "y": max(0.0, top), "width": width, "height": height, "scale": 1}
            params |= {"clip": clip, "captureBeyondViewport": True}
        data = self.call("Page.captureScreenshot", params)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(data["data"]))
        return out

    def close(self) -> None:
        self.browser.call("Target.closeTarget", {"targetId": self.target})
