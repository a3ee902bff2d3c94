"""The parent's view of a submission: its program (code cells) running in a sandbox.

Checks call student functions through `Submission`; values cross the boundary as plain data and
objects that are not plain data stay in the child behind `Handle`s. If the child dies (timeout,
memory, crash), it is restarted without the cell that killed it, at most `max_restarts` times.
"""

from __future__ import annotations

import contextvars
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from autograder.core.errors import StudentError, Unavailable
from autograder.core.status import Status, worse
from autograder.grading.budget import Budget
from autograder.grading.causes import CellFailure, cell_failure
from autograder.grading.fresh_calls import Call, FreshCalls
from autograder.grading.handle import Handle
from autograder.grading.notebook import ProgramCell
from autograder.grading.outputs import checked_outputs
from autograder.grading.stand_ins import StandIns
from autograder.sandbox.inside import wire
from autograder.sandbox.isolation import Isolation
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox, SandboxDied

MAX_NOTES = 20  # notes (ignored magics, ...) kept per cell
MAX_NOTE = 300  # characters per note
MAX_CALLS = 400  # calls of one check kept for its diagnosis


class Skipped(Unavailable):
    """A function (or method) of the submission killed its process earlier (a hang, memory,
    a crash): later calls to it are skipped, so only the checks that need it fail."""


def _tensor(array: np.ndarray, dtype: str, requires_grad: bool):
    """Tensors from the child come back without autograd state (it stays in the child)."""
    return wire.to_tensor(array, dtype)


@dataclass
class Submission:
    program: list[ProgramCell]
    limits: Limits = field(default_factory=Limits)
    budget: Budget = field(default_factory=Budget)
    sandbox: Sandbox | None = None
    generation: int = 0
    restarts: int = 0
    skipped: set[str] = field(default_factory=set)
    stuck: dict[str, str] = field(default_factory=dict)  # call target -> why it is skipped
    tampered: list[str] = field(default_factory=list)  # grader runtime parts the notebook changed
    cell_failures: dict[str, CellFailure] = field(default_factory=dict)  # label -> how it failed
    events: list[str] = field(default_factory=list)
    status: str = Status.OK
    isolation: str = ""
    started_at: float = field(default_factory=time.monotonic)
    unavailable: str | None = None  # set for a notebook that cannot run at all: every call fails
    level: Isolation | None = None  # None: isolation.choose()
    # An already started sandbox to run this program in (its `__main__` reset first) instead of
    # starting one: only for the grader's own trusted notebooks (the test suite shares one per
    # worker); a student's program could leave state behind for the next. Never closed here.
    shared: Sandbox | None = None
    _starter: threading.Thread | None = None
    _borrowed: Sandbox | None = None
    # the contract's stand-ins swapped in (they run here; the child calls them back)
    stand_ins: StandIns = field(init=False)
    # while a failed check runs again to diagnose it (grading/diagnoses.py): every call made
    # fresh, and the calls of the check being run
    fresh: FreshCalls | None = None
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stand_ins = StandIns(self)

    # -- life cycle ----------------------------------------------------------------------------
    def _record(self, died: SandboxDied, where: str) -> None:
        self.status = worse(self.status, died.status)
        self.events.append(f"{where}: {died.detail} [{died.status}]")

    def _check_tampering(self, response: dict) -> None:
        """The child reports grader code the notebook replaced or patched: never paid."""
        changed = response.get("tampered")
        if not changed or self.tampered:
            return
        self.tampered = (
            [str(name)[:80] for name in changed][:10] if isinstance(changed, list) else ["?"]
        )
        self.status = worse(self.status, Status.TAMPERED)
        self.events.append(
            "the notebook replaced or patched the grader's runtime ("
            + ", ".join(self.tampered)
            + "); no points are given and your instructor is told"
        )

    def start_in_background(self) -> None:
        """Start the sandbox and run the program while the caller does other work (the parent
        imports torch and the checks meanwhile); the first request waits for it."""
        if self.unavailable or self._starter is not None:
            return
        # in this thread's context: what the program's cells quote is charged to its budget
        context = contextvars.copy_context()
        self._starter = threading.Thread(
            target=context.run, args=(self._start_quietly,), daemon=True
        )
        self._starter.start()

    def _start_quietly(self) -> None:
        try:
            self._ensure(background=True)
        except Unavailable:
            pass  # raised again, to the caller, by the first request

    def remaining(self) -> float:
        """Seconds left of the whole grading budget."""
        return self.budget.total_seconds - (time.monotonic() - self.started_at)

    def _timeout(self, wanted: float) -> float:
        """A request's timeout within the budget; Unavailable (status timeout) once it is spent."""
        left = self.remaining()
        if left <= 0:
            self.status = worse(self.status, Status.TIMEOUT)
            raise Unavailable(f"the grading budget of {self.budget.total_seconds:g} s is spent")
        return min(wanted, left)

    def _ensure(self, background: bool = False) -> Sandbox:
        if self._starter is not None and not background:
            self._starter.join()
            self._starter = None
        if self.unavailable:
            raise Unavailable(self.unavailable)
        if self.shared is not None:
            self._adopt_shared()
        while self.sandbox is None or not self.sandbox.alive:
            if self.sandbox is not None:
                self.sandbox.close()
                if self.restarts - len(self.stuck) >= self.budget.max_restarts:
                    raise Unavailable(
                        f"the notebook's process was restarted {self.restarts} times; giving up"
                    )
                self.restarts += 1
            self._timeout(0)
            self.sandbox = Sandbox(self.limits, self.level)
            try:
                self.sandbox.start()
            except SandboxDied as died:
                self._record(died, "starting the sandbox")
                continue
            self._run_in(self.sandbox)
        return self.sandbox

    def _run_in(self, sandbox: Sandbox) -> None:
        """A started sandbox becomes this submission's: its handles a new generation, the
        program run, the functions that stopped an earlier process blocked."""
        self.sandbox = sandbox
        sandbox.on_callback = self.stand_ins.serve
        self.generation += 1
        self.isolation = sandbox.describe()  # the level, and whether the child was warm
        self._run_program()
        self._block_stuck()

    def _adopt_shared(self) -> None:
        """Run the program in the shared sandbox, once; if it is gone, start one as usual."""
        shared, self.shared = self.shared, None
        if shared is None or not shared.alive:
            return
        try:
            shared.request({"op": "reset"}, timeout=self._timeout(10.0))
        except SandboxDied:
            return  # the caller's loop starts a sandbox of its own
        self._borrowed = shared
        self._run_in(shared)

    def stuck_functions(self) -> dict[str, str]:
        """Global functions of the notebook that stopped its process: name -> why."""
        return {key: why for key, why in self.stuck.items() if key.isidentifier()}

    def _block_stuck(self) -> None:
        """One hang, one budget: in a restarted process, the functions that stopped the last
        one raise at once when anything calls them (a check, another function, a demo cell)."""
        stuck = self.stuck_functions()
        if not stuck or self.sandbox is None or not self.sandbox.alive:
            return
        names = {name: why.split(" ", 1)[1] if " " in why else why for name, why in stuck.items()}
        try:
            self.sandbox.request({"op": "block", "names": names}, timeout=self._timeout(10.0))
        except (SandboxDied, Unavailable):
            pass  # the next request restarts (or reports) as usual

    def _run_program(self) -> None:
        if self.sandbox is None:
            raise SandboxDied(Status.CRASHED, "the sandbox was not started")
        sandbox = self.sandbox
        for cell in self.program:
            if cell.label in self.skipped:
                continue
            try:
                response, _ = sandbox.request(
                    {"op": "exec", "source": cell.source, "label": cell.label},
                    timeout=self._timeout(self.budget.cell_timeout),
                )
                self._check_tampering(response)
                if not sandbox.alive:  # the cell killed the supervisor, yet answered
                    raise SandboxDied(
                        Status.CRASHED, "the notebook killed the sandbox's supervisor"
                    )
            except SandboxDied as died:
                # A cell past its time is a note on that cell (it is left out from now on, the
                # cells after it run), not the notebook's status: checks that need what it
                # defines say so themselves. Memory, crashes and kills still mark the notebook.
                if died.status != Status.TIMEOUT:
                    self._record(died, f"{cell.label}")
                self.skipped.add(cell.label)
                failure = CellFailure.stopped(cell.label, cell.source, died.status, died.detail)
                self.cell_failures.setdefault(cell.label, failure)
                return
            except Unavailable:
                return  # the budget is spent: every request from now on says so
            if not response.get("ok") and cell.label not in self.cell_failures:
                failure = cell_failure(cell.label, cell.source, response.get("error"))
                self.cell_failures[cell.label] = failure
            notes = response.get("notes")
            notes = [str(note)[:MAX_NOTE] for note in notes] if isinstance(notes, list) else []
            for note in notes[:MAX_NOTES]:
                self.events.append(f"{cell.label}: {note}")
            if len(notes) > MAX_NOTES:
                self.events.append(f"{cell.label}: ... and {len(notes) - MAX_NOTES} more notes")

    def start(self) -> None:
        self._ensure()

    def close(self) -> None:
        if self._starter is not None:
            self._starter.join()
            self._starter = None
        if self.sandbox is not None and self.sandbox is not self._borrowed:
            self.sandbox.close()
        self.sandbox = None

    def __enter__(self) -> Submission:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    def _decode(self, data, blobs: list[bytes]):
        generation = self.generation
        decoder = wire.Decoder(
            blobs, handle=lambda tag: Handle(self, tag, generation), tensor=_tensor
        )
        try:
            return decoder.decode(data)
        except (wire.ProtocolError, RecursionError, ValueError, TypeError) as error:
            raise StudentError(
                "the submission", {"type": "InvalidValue", "message": str(error)}
            ) from None

    def _request(
        self, header: dict, blobs=(), *, what: str, timeout: float | None = None, full: bool = False
    ):
        sandbox = self._ensure()
        try:
            response, out_blobs = sandbox.request(
                header, blobs, timeout=self._timeout(timeout or self.budget.call_timeout)
            )
        except SandboxDied as died:
            self._record(died, f"calling {what}")
            raise
        self._check_tampering(response)
        if not response.get("ok"):
            raise StudentError(what, response.get("error") or {})
        value = self._decode(response.get("value"), out_blobs)
        return (value, response) if full else value

    def _call(
        self,
        target: dict,
        method: str | None,
        args,
        kwargs,
        *,
        timeout=None,
        record_warnings: bool = False,
        what: str | None = None,
        owner: str | None = None,
    ):
        if self.fresh is not None:
            target = self.fresh.before(target, method, args, kwargs)
        encoder = wire.Encoder(fallback=self.stand_ins.tag)
        header = {
            "op": "call",
            "target": target,
            "method": method,
            "args": encoder.encode(list(args)),
            "kwargs": encoder.encode(dict(kwargs)),
            "record_warnings": record_warnings,
        }
        label = what or (f"{method}()" if method else "the call")
        key = self._call_key(target, method, owner)
        if key in self.stuck:
            raise Skipped(f"{label} was not called: {self.stuck[key]}")
        try:
            value, response = self._request(
                header, encoder.blobs, what=label, timeout=timeout, full=True
            )
        except SandboxDied as died:
            # One restart per function that kills the process is not counted against
            # max_restarts: later calls to it are skipped, and checks that never call it still
            # run (a hang in softmax must not cost score_variance its points).
            self.stuck[key] = f"{label} stopped the notebook's process earlier ({died.status})"
            self.events.append(f"{label} is skipped from now on")
            raise
        if self.fresh is not None:
            self.fresh.after(target, method, args, kwargs, value)
        if len(self.calls) < MAX_CALLS:
            self.calls.append(Call(target, method, args, kwargs, value))
        if record_warnings:
            return value, [str(w) for w in response.get("warnings") or []]
        return value

    @staticmethod
    def _call_key(target: dict, method: str | None, owner: str | None) -> str:
        """What a call runs, across restarts: a global's name, or an object's class and method
        (handles do not survive a restart, their classes do)."""
        name = str(target["$global"]) if "$global" in target else (owner or "an object")
        return f"{name}.{method}" if method else name

    def call(self, name: str, *args, timeout: float | None = None, **kwargs):
        """Call the student's function (or class) `name` with plain-data arguments."""
        return self._call({"$global": name}, None, args, kwargs, timeout=timeout, what=f"{name}()")

    def call_recording_warnings(self, name: str, *args, **kwargs) -> tuple[object, list[str]]:
        """Like `call`, under NumPy's default error state; also returns the warnings raised."""
        return self._call(
            {"$global": name}, None, args, kwargs, record_warnings=True, what=f"{name}()"
        )

    def module_setattr(self, name: str, value) -> None:
        """Rebind a global of the student's notebook (e.g. swap a function for a stub)."""
        encoder = wire.Encoder(fallback=self.stand_ins.tag)
        data = encoder.encode(value)
        self._request(
            {"op": "setattr", "target": {"$module": "__main__"}, "name": name, "value": data},
            encoder.blobs,
            what=f"setting {name}",
        )

    def module_getattr(self, name: str):
        return self._request(
            {"op": "getattr", "target": {"$module": "__main__"}, "name": name},
            what=f"reading {name}",
        )

    def seed(self, seed: int) -> None:
        """Seed Python's, NumPy's and (if imported) torch's global RNGs in the child."""
        self._request({"op": "seed", "seed": int(seed)}, what="seeding")

    def display(self, cell: ProgramCell, timeout: float | None = None) -> list[dict]:
        """Run a demo cell in the child; what it showed, checked and bounded (displays.py)."""
        sandbox = self._ensure()
        try:
            response, blobs = sandbox.request(
                {"op": "display", "source": cell.source, "label": cell.label},
                timeout=timeout or self.budget.cell_timeout,
            )
        except SandboxDied as died:
            self._record(died, cell.label)
            raise
        if not response.get("ok"):
            raise StudentError(cell.label, response.get("error") or {})
        return checked_outputs(response.get("outputs"), blobs)

    def probe(self, name: str, *args, timeout: float | None = None):
        """Run the runtime's probe `name` on `args` (a probe that calls the student's training
        function needs a training check's timeout)."""
        encoder = wire.Encoder(fallback=self.stand_ins.tag)
        data = encoder.encode(list(args))
        return self._request(
            {"op": "probe", "name": name, "args": data},
            encoder.blobs,
            what=f"inspecting ({name})",
            timeout=timeout,
        )
