"""The cause, not the symptom: a check that meets `NameError: name 'f' is not defined` says
that `f` is undefined because the cell that defines it failed (and how), not only that it is
missing.

The child reports a failed cell as untrusted data (type, message, line); everything here is
built from that report and the cell's own source, as the grader sent it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autograder.core.student_text import TYPE_NAME, quoted

UNDEFINED = re.compile(r"NameError: name '([A-Za-z_]\w*)' is not defined")
# Top-level definitions, found without compiling (a cell with a SyntaxError does not parse).
DEFINES = re.compile(
    r"^(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_]\w*)|^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)",
    re.MULTILINE,
)


def defined_names(source: str) -> frozenset[str]:
    return frozenset(a or b for a, b in DEFINES.findall(source))


@dataclass(frozen=True)
class CellFailure:
    label: str  # "cell 10 (MultiHeadAttention)"
    type: str  # "SyntaxError"
    message: str  # "expected ':'"
    line: int | None  # the line of the cell where it failed (1-based), when known
    lines: int  # how many lines the cell has
    defines: frozenset[str]  # the names the cell defines at its top level

    @property
    def number(self) -> str:
        """ "cell 10" of "cell 10 (MultiHeadAttention)"."""
        return self.label.split(" (", 1)[0]

    @classmethod
    def stopped(cls, label: str, source: str, status: str, detail: str) -> CellFailure:
        """A cell that stopped the notebook's process (a timeout, memory, a crash)."""
        return cls(
            label,
            f"stop:{status}",
            detail[:300],
            None,
            source.count("\n") + 1,
            defined_names(source),
        )

    def what_happened(self) -> str:
        if self.type.startswith("stop:"):
            return (
                f"stopped the notebook's process ({self.type[5:]}: {self.message}); it was left "
                "out and the cells after it ran"
            )
        verb = "has" if self.type in ("SyntaxError", "IndentationError", "TabError") else "raised"
        at = f" at line {self.line}" if self.line else ""
        return f"{verb} a {self.type}{at}" + (f": {self.message}" if self.message else "")

    def note(self) -> str:
        """The line of the report's notes about this cell."""
        return f"{self.label} {self.what_happened()}"


def cell_failure(label: str, source: str, error: object) -> CellFailure:
    """A CellFailure from the child's error report (any shape: it is untrusted)."""
    error = error if isinstance(error, dict) else {}
    line = error.get("line")
    lines = source.count("\n") + 1
    return CellFailure(
        label=label,
        type=quoted(error.get("type", "Exception"), TYPE_NAME),
        message=quoted(error.get("message", "")),
        line=line
        if isinstance(line, int) and not isinstance(line, bool) and 0 < line <= lines
        else None,
        lines=lines,
        defines=defined_names(source),
    )


def explain_undefined(message: str, failures: list[CellFailure]) -> str:
    """`message` with the cause of each undefined name that a failed cell should have defined."""
    match = UNDEFINED.search(message)
    if match is None:
        return message
    name = match.group(1)
    failure = next((f for f in failures if name in f.defines), None)
    if failure is None:
        return message
    return (
        f"`{name}` is not defined because its cell ({failure.number}, lines 1-{failure.lines}) "
        f"{failure.what_happened()}"
    )
