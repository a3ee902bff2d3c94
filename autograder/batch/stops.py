"""Stopping a batch on SIGINT (Ctrl-C) or SIGTERM: at once, but never in the middle of
recording one submission.

While `StopSignals` is active, either signal raises `Stopped` in the batch's main thread,
except inside `deferred()`, which the batch holds while it places, merges and audits one
result: there the stop waits for the end of the block. The batch then kills its workers (what
they were grading is in scratch, not in the course), removes its scratch folder, says in one
line what was kept and exits 128 + the signal's number, as a shell reports a process killed by
it. A second signal while it stops is ignored: the stop takes a moment, not a minute. A signal
the batch was started ignoring (a job a script put in the background ignores SIGINT) stays
ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """The batch was told to stop by a signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class StopSignals:
    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None
        self.stopping = False
        self._saved: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # signals go there only
            for signum in SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:  # `nohup`, `cmd &` in a script
                    self._saved[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def _handle(self, signum: int, _frame: object) -> None:
        if self.stopping:
            return
        if self.depth:
            self.pending = signum
            return
        self.stopping = True
        raise Stopped(signum)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A stop that arrives in the block takes effect at its end."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        if not self.depth and self.pending is not None and not self.stopping:
            self.stopping = True
            raise Stopped(self.pending)
