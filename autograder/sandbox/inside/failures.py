"""How the child describes what went wrong in the notebook's code, for the parent: an
exception as plain data (type, message, the student's frames, the line of the cell), and the
stand-in for a function that stopped the process earlier. Runs in the child's process."""

from __future__ import annotations

import traceback


class StoppedEarlier(RuntimeError):
    """Raised by a function of the notebook that is not run again (see op_block)."""


def stopped_earlier(name: str, why: str):
    def stopped(*args, **kwargs):
        raise StoppedEarlier(f"{name}() was not run again: it {why}")

    stopped.__name__ = stopped.__qualname__ = name
    return stopped


def cell_filename(header: dict) -> str:
    """The code's file name as messages show it: "<cell 10 (softmax)>" for the label
    "cell 10 (softmax)" (the label already says "cell")."""
    label = str(header.get("label", "?"))
    return f"<{label}>" if label.startswith("cell ") else f"<cell {label}>"


def describe(error: BaseException) -> dict:
    frames = traceback.extract_tb(error.__traceback__)
    student = [frame for frame in frames if frame.filename.startswith("<cell")]
    lines = traceback.format_list(student[-5:]) if student else []
    line = None
    try:
        if isinstance(error, SyntaxError) and type(error).__str__ is SyntaxError.__str__:
            message, line = str(error.msg), error.lineno  # without "(<cell ...>, line 33)"
        else:
            message = str(error)
            # the line of the cell being run where it failed (the first frame in a cell)
            line = student[0].lineno if student else None
    except BaseException:  # noqa: BLE001 - a student's __str__ may do anything
        message = "<unprintable>"
    return {
        "type": type(error).__name__,
        "message": message[:2000],
        "traceback": "".join(lines)[-4000:],
        "line": line if isinstance(line, int) else None,
    }
