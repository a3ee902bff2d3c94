"""Every status is a `Status` (issue 18): no status spelled as a bare string outside its home,
no second list of statuses; the student's words for each come from core/status.py."""

from __future__ import annotations

import ast

from autograder.core.registry import EXERCISES_DIR, PACKAGE_DIR
from autograder.core.status import Status, student_words, worse

VALUES = {status.value for status in Status}
HOME = PACKAGE_DIR / "core" / "status.py"
INSIDE = PACKAGE_DIR / "sandbox" / "inside"  # runs in the child: cannot import the package


def _is_status(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in VALUES


def _bare_statuses(tree: ast.AST) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(map(_is_status, node.comparators)):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and _is_status(node.args[0]):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in ("SandboxDied", "Outcome", "_die", "Status"):
                found.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _is_status(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", getattr(t, "attr", "")) == "status" for t in targets):
                found.append(node.lineno)
        elif isinstance(node, ast.Dict):
            pairs = list(zip(node.keys, node.values, strict=True))
            if any(_is_status(v) for k, v in pairs if getattr(k, "value", None) == "status"):
                found.append(node.lineno)
            if sum(_is_status(k) for k in node.keys) >= 3:  # a second list of statuses
                found.append(node.lineno)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            if node.value.elts and _is_status(node.value.elts[0]):
                found.append(node.lineno)
    return found


def test_no_status_is_a_bare_string():
    bare = {
        f"{path.relative_to(PACKAGE_DIR)}:{line}"
        for path in PACKAGE_DIR.rglob("*.py")
        if path != HOME and INSIDE not in path.parents and EXERCISES_DIR not in path.parents
        for line in _bare_statuses(ast.parse(path.read_text()))
    }
    assert bare == set()


def test_the_detector_sees_bare_statuses():
    source = (
        'if status == "timeout": pass\nraise SandboxDied("crashed", "x")\nreport.status = "ok"\n'
        '{"status": "memory"}\n{"ok": 1, "crashed": 2, "memory": 3}\n'
    )
    assert sorted(_bare_statuses(ast.parse(source))) == [1, 2, 3, 4, 5]


def test_every_status_has_words_for_the_student_and_a_severity():
    for status in Status:
        assert isinstance(student_words(status), str) and (status == Status.OK) != bool(
            student_words(status)
        )
        assert worse(Status.OK, status) == status
    assert student_words("no such status") == "no such status"
