"""One pytest session per process and exercise, reused by every grading of that exercise.

`pytest.main` per grading made a new configuration, registered pytest's own plugins again,
started a session and collected the check module: about 0.1 s of CPU in the grading process,
for every notebook and every `only` grading (the mistakes of the catalogue are graded one check
at a time). Here that is done once, with the same options, and each grading runs its checks
through pytest's own per-test protocol (`pytest_runtest_protocol`: setup, call, teardown, with
the warnings and logging plugins as in `pytest.main`). The check module itself was imported once
per process before too (pytest's importlib mode keeps it in `sys.modules`).

What makes it the same as a session of its own per grading:
- the last check of a grading runs with no next item, so every fixture (the session-scoped
  `submission` and `mistakes` too) is torn down before the next grading: nothing a check set up
  for one submission is there for the next;
- the fixtures and hooks are the router's, and it answers with the grading in progress
  (`GradingPlugin`: its submission, seeds, catalogue, results), which a grading sets at its
  start and clears at its end;
- a collection error is reported to every grading, as each session collected it before;
- anything that escapes pytest's protocol (an interrupt, an internal error, an exception raised
  in a hook) ends the grading as `pytest.main` did (no results: GraderError), and the session is
  discarded, as its setup state is no longer known; a session with anything still set up is
  never used for another grading;
- what pytest keeps for the life of a session is cleared after each grading: the report
  sections of its items and the warnings the checks raised (a historic hook's calls).

One grading at a time per process (runner.GRADING_LOCK), as before. The pytest calls here are
`pytest.main`'s own steps (`_pytest.config._prepareconfig`, `Config._do_configure`,
`Session.from_config`), with the version range pinned in pyproject.toml.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _pytest.config import _prepareconfig
from _pytest.main import Session

from autograder.core.errors import GraderError
from autograder.core.registry import EXERCISES, checks_module_path, short_name
from autograder.grading.plugin import GradingPlugin


def pytest_arguments(path: Path) -> list[str]:
    """The options of every check session: the check module and nothing of the environment."""
    quiet = ["-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:stepwise", "--capture=no"]
    # pytest's unraisable-exception plugin runs gc.collect() ten times per session: with torch
    # loaded that was 0.35 s of every grading (nearly half of a quick one's time in the grader).
    # An unraisable exception in a check then reaches the process's own hook (the log), as it
    # would outside pytest. (The report's traceback style is set by the router.)
    quiet += ["-p", "no:unraisableexception", "-p", "no:threadexception"]
    # a session lives as long as the process: pytest's faulthandler plugin would keep the
    # process's fault handler on, writing to a copy of stderr it keeps open
    quiet += ["-p", "no:faulthandler"]
    # Only pytest's own plugins and ours: an installed plugin (xdist, or one that reorders or
    # reseeds tests) has no say in how checks run.
    quiet += ["--disable-plugin-autoload"]
    # plain asserts and no ini file: check code never reaches a message, whatever pytest finds
    isolated = ["--assert=plain", "--import-mode=importlib", "--rootdir", str(path.parent)]
    isolated += ["-c", os.devnull, "-W", "ignore::DeprecationWarning"]
    return [str(path), *quiet, *isolated]


class _Router:
    """The plugin pytest sees, registered once per session: its fixtures and hooks answer with
    the grading in progress."""

    def __init__(self) -> None:
        self.current: GradingPlugin | None = None
        self.collection_errors: list[str] = []

    def grading(self) -> GradingPlugin:
        if self.current is None:  # a check run outside a grading: a bug of this module
            raise RuntimeError("a check ran with no grading in progress")
        return self.current

    @pytest.fixture(scope="session")
    def submission(self):
        return self.grading().submission()

    @pytest.fixture
    def seed(self, request: pytest.FixtureRequest) -> int:
        return self.grading().seed_of(request.node.name)

    @pytest.fixture(autouse=True)
    def _verdicts_set_aside(self, request: pytest.FixtureRequest) -> Iterator[None]:
        with self.grading().verdicts_set_aside(request.node.name):
            yield

    @pytest.fixture(autouse=True)
    def _seeded_child(self, request: pytest.FixtureRequest, seed: int) -> None:
        self.grading().seed_child(seed)

    @pytest.fixture
    def rng(self, seed: int) -> np.random.Generator:
        return np.random.default_rng(seed)

    @pytest.fixture(scope="session")
    def mistakes(self):
        return self.grading().mistakes()

    def pytest_configure(self, config: pytest.Config) -> None:
        for marker in (*map(short_name, EXERCISES), "check(points, grade_id)"):
            config.addinivalue_line("markers", marker)
        # A failed check's message comes from its exception (GradingPlugin.record), never from
        # pytest's report, whose default traceback re-parses the check module for every frame
        # (about 0.1 s per failing check). The plain traceback is all the report then holds; a
        # collection error (the instructor's log) reads the same. `--tb` needs the terminal
        # plugin.
        config.option.tbstyle = "native"

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(f"collecting {report.nodeid}: {report.longreprtext}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        self.grading().record(item, call, outcome.get_result())


class CheckSession:
    """A configured pytest session with the exercise's checks collected."""

    def __init__(self, exercise: str):
        self.router = _Router()
        self.config = _prepareconfig(pytest_arguments(checks_module_path(exercise)), [self.router])
        self.configured = False
        try:
            self.config._do_configure()
            self.configured = True
            self.session = Session.from_config(self.config)
            self.config.hook.pytest_sessionstart(session=self.session)
            self.config.hook.pytest_collection(session=self.session)
        except BaseException:
            self.close()
            raise
        self.items: list[pytest.Item] = list(self.session.items)

    def run(self, grading: GradingPlugin) -> None:
        """Run `grading`'s checks (all, or its `only` and what they require)."""
        grading.internal_errors += self.router.collection_errors
        items = grading.select(self.items)
        self.router.current = grading
        try:
            for index, item in enumerate(items):
                for_this_run(item)
                following = items[index + 1] if index + 1 < len(items) else None
                item.ihook.pytest_runtest_protocol(item=item, nextitem=following)
        finally:
            self.router.current = None
            forget_warnings(self.config)

    def clean(self) -> bool:
        """Nothing is set up: the last grading's last check was torn down."""
        return not self.session._setupstate.stack

    def discard(self) -> None:
        """After a run that did not finish: tear down what it set up, and unconfigure."""
        with contextlib.suppress(Exception):
            self.session._setupstate.teardown_exact(None)
        self.close()

    def close(self) -> None:
        if self.configured:
            self.configured = False
            with contextlib.suppress(Exception):
                self.config._ensure_unconfigure()


def forget_warnings(config: pytest.Config) -> None:
    """pytest's warnings plugin reports each warning a check raised through a historic hook,
    which keeps every call for plugins registered later: one session of a whole batch would
    keep every student's warnings."""
    history = getattr(config.hook.pytest_warning_recorded, "_call_history", None)
    if isinstance(history, list):
        history.clear()


def for_this_run(item: pytest.Item) -> None:
    """What pytest keeps on an item from one run to the next: the report sections a plugin
    added (captured log text), which would grow with every grading and go into its reports."""
    item._report_sections = []


_SESSIONS: dict[tuple[int, str], CheckSession] = {}


def run_in_session(grading: GradingPlugin) -> None:
    """Run `grading`'s checks in this process's session for its exercise (made now if there is
    none). GraderError when pytest's protocol did not finish (the session is discarded)."""
    key = (os.getpid(), grading.exercise)  # a forked process makes its own
    session = _SESSIONS.get(key)
    if session is not None and not session.clean():
        _SESSIONS.pop(key, None)  # never run a grading on what another left set up
        session.discard()
        session = None
    try:
        if session is None:
            session = _SESSIONS[key] = CheckSession(grading.exercise)
        session.run(grading)
    except BaseException as error:
        _SESSIONS.pop(key, None)
        if session is not None:
            session.discard()
        raise GraderError(
            f"the checks of {grading.exercise} could not run: {type(error).__name__}: {error}"
        ) from error


def close_all() -> None:
    """Unconfigure every session (at exit: what pytest's configuration changed in the process,
    such as `pdb.set_trace`, is put back)."""
    while _SESSIONS:
        _SESSIONS.popitem()[1].close()


atexit.register(close_all)
