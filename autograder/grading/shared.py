"""One sandbox reused by the gradings of the grader's own trusted notebooks (the test suite's
mistake catalogue and fake stubs, the mutation benchmark's mutants): each program runs in a fresh
`__main__` of the same child (`Submission.shared`), so the process start and the imports of
NumPy, PyTorch and Matplotlib are paid once per `USES` gradings instead of once per grading.
What is graded does not depend on the process: the checks still call the program's own functions
through the sandbox. Never for a student's notebook, which could leave state (patched modules,
threads, files) for the next one: those always get a sandbox of their own."""

from __future__ import annotations

from autograder.sandbox.process import Sandbox

USES = 25  # programs per child, so that its CPU-time and output limits never add up


class SharedSandbox:
    def __init__(self, uses: int = USES):
        self.uses = uses
        self.sandbox: Sandbox | None = None
        self.used = 0
        self.started = 0

    def get(self) -> Sandbox:
        """A started sandbox (a new one after `uses` programs or when the last one died)."""
        if self.sandbox is None or not self.sandbox.alive or self.used >= self.uses:
            self.close()
            self.sandbox = Sandbox()
            self.sandbox.start()
            self.started += 1
            self.used = 0
        self.used += 1
        return self.sandbox

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
