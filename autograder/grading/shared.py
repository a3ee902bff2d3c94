"""One sandbox reused by the gradings of the grader's own trusted notebooks (the test suite's
mistake catalogue and fake stubs, the mutation benchmark's mutants): each program runs in a fresh
`__main__` of the same child (`Submission.shared`), so the process start and the imports of
NumPy, PyTorch and Matplotlib are paid once per `USES` gradings instead of once per grading.
What is graded does not depend on the process: the checks still call the program's own functions
through the sandbox. Never for a student's notebook, which could leave state (patched modules,
threads, files) for the next one: those always get a sandbox of their own."""

from __future__ import annotations

from autograder.sandbox.process import Sandbox

# Programs per child, so that its limits, which count over the child's life, never add up: 80
# trusted programs in a row (the references and catalogued mistakes of ex3, ex5 and ex8)
# took 13 of its 900 CPU-s, printed 217 bytes of 4 MiB and left its address space at
# 690 MB of 4 GiB; a start costs 1.5-2 CPU-s (NumPy, PyTorch, Matplotlib), more than most
# programs. A child that has printed half its output limit is replaced all the same.
USES = 100


class SharedSandbox:
    def __init__(self, uses: int = USES):
        self.uses = uses
        self.sandbox: Sandbox | None = None
        self.used = 0
        self.started = 0

    def get(self) -> Sandbox:
        """A started sandbox (a new one after `uses` programs, once the last one has printed half
        its output limit, or when it died)."""
        if self.sandbox is None or not self.sandbox.alive or self._spent(self.sandbox):
            self.close()
            self.sandbox = Sandbox()
            self.sandbox.start()
            self.started += 1
            self.used = 0
        self.used += 1
        return self.sandbox

    def _spent(self, sandbox: Sandbox) -> bool:
        return (
            self.used >= self.uses or sandbox.output_bytes_used > sandbox.limits.output_bytes // 2
        )

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
