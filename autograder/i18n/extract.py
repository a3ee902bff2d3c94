"""The texts a student reads, found in the grader's Python (a Babel extraction method, and
`python -m autograder.i18n.extract`, which brings each language's `.po` up to date).

A check's message is an f-string or a `+` of strings; its values become `{0}`, `{1}`, ... in
the msgid (the English text with the values taken out), which catalogues.py matches at grading
time. Which strings a student can read, per kind of file (`sources()`):
- an exercise's checks (`checks.py`) and the grader's modules that word results (FRAMEWORK):
  every string of two words or more outside docstrings, decorators and code run in the
  sandbox (a few instructor-only texts come along; translating them costs nothing);
- an exercise's mistakes (`mistakes.py`): each mistake's description;
- the pages' words (`nbgrader_plugins/page_text.py`'s PAGE_WORDS).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from autograder.i18n.catalogues import DOMAIN, LOCALE_DIR, po_path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_WORDS = re.compile(r"(?<![\w`])[A-Za-z]{2,}[,;:.!?)'\"]*\s+\(?[A-Za-z]{2,}\b(?![_(`])")
_WORD = re.compile(r"(?<![\w`.'{}])[A-Za-z][a-z]{3,}(?![\w`.({}])")  # not CamelCase
_CODE = re.compile(r"\n\s|^\s*(import|from|def|class|return)\b|[=;]\s*\w+\(")
FRAMEWORK = (
    "authoring/expect.py",
    "authoring/catalogue.py",
    "core/errors.py",
    "core/status.py",
    "grading/plugin.py",
    "grading/submission.py",
    "grading/stand_ins.py",
    "grading/stand_in_limits.py",
    "grading/source.py",
)
PAGE_WORDS_MODULE = "nbgrader_plugins/page_text.py"


def msgid(node: ast.expr) -> str | None:
    """The msgid of a string expression: literal text, values as `{0}`, `{1}`, ...; None for
    an expression that is not made of strings."""
    parts: list[str | None] = []  # None: a value

    def add(expr: ast.expr) -> bool:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            parts.append(expr.value)
        elif isinstance(expr, ast.JoinedStr):
            for piece in expr.values:
                if isinstance(piece, ast.Constant):
                    parts.append(str(piece.value))
                else:
                    parts.append(None)
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return add(expr.left) and add(expr.right)
        else:
            parts.append(None)
        return True

    if not (_is_text(node)):
        return None
    add(node)
    out, number = [], 0
    for part in parts:
        if part is None:
            out.append(f"{{{number}}}")
            number += 1
        else:
            out.append(part.replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def _is_text(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_text(node.left) or _is_text(node.right)
    return False


def _readable(text: str) -> bool:
    """Two words of prose, or one with a value (`{0} raised {1}`); never only identifiers."""
    fixed = re.sub(r"\{\d+\}", " ", text)
    if _CODE.search(fixed):
        return False
    if _WORDS.search(fixed):
        return True
    return "{0}" in text and bool(_WORD.search(text)) and not re.search(r"\w\(|=", fixed)


def _outermost_texts(tree: ast.AST, skip: set[int]) -> Iterator[ast.expr]:
    """String expressions not inside another (a `+` of strings is one text)."""
    if id(tree) in skip:
        return
    if isinstance(tree, ast.expr) and _is_text(tree):
        yield tree
        for value in _values_of(tree):  # `+ ("; it shows the transpose" if t else "")`
            yield from _outermost_texts(value, skip)
        return
    for child in ast.iter_child_nodes(tree):
        yield from _outermost_texts(child, skip)


def _values_of(node: ast.expr) -> Iterator[ast.expr]:
    """The parts of a text that are values (its placeholders' expressions)."""
    if isinstance(node, ast.JoinedStr):
        for piece in node.values:
            if isinstance(piece, ast.FormattedValue):
                yield piece.value
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for side in (node.left, node.right):
            if _is_text(side):
                yield from _values_of(side)
            else:
                yield side
    elif not isinstance(node, ast.Constant):
        yield node


def _docstrings_and_decorators(tree: ast.Module) -> set[int]:
    """Nodes whose strings no student reads: docstrings, decorators, code sent to run, texts
    compared with (`"cannot be multiplied" in error.message`) and word lists split into the
    inputs checks draw from (`"river lamp ...".split()`)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            skip.update(id(decorator) for decorator in node.decorator_list)
        if isinstance(node, ast.Call) and _name(node.func) in {"ProgramCell", "dedent", "call"}:
            skip.update(id(arg) for arg in node.args)
        if isinstance(node, ast.Attribute) and node.attr == "split":
            skip.add(id(node.value))
        if isinstance(node, ast.Compare):  # `"cannot be multiplied" in error.message`: a test
            skip.update(id(operand) for operand in (node.left, *node.comparators))
    return skip


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def texts_of(source: str, kind: str) -> Iterator[tuple[int, str]]:
    """(line, msgid) of every student-read text in a file of `kind` (module doc)."""
    tree = ast.parse(source)
    if kind == "page_words":
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "PAGE_WORDS" for t in node.targets
            ):
                for item in getattr(node.value, "elts", []):
                    if isinstance(item, ast.Constant) and isinstance(item.value, str):
                        yield item.lineno, item.value
        return
    if kind == "checks":
        for node in _outermost_texts(tree, _docstrings_and_decorators(tree)):
            if (text := msgid(node)) and _readable(text):
                yield node.lineno, text
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if kind == "mistakes" and name == "mistake" and len(node.args) >= 2:
            argument = node.args[1]
        else:
            continue
        if (text := msgid(argument)) is not None:
            yield argument.lineno, text


def _kind(path: Path) -> str | None:
    """How to read `path` (texts_of), None for a file with no student-read text."""
    if path.name in ("checks.py", "mistakes.py") and path.parent.parent.name == "exercises":
        return path.stem
    relative = path.relative_to(PACKAGE_DIR).as_posix()
    if relative == PAGE_WORDS_MODULE:
        return "page_words"
    return "checks" if relative in FRAMEWORK else None


def extract_messages(
    fileobj: Any, keywords: Any, comment_tags: Any, options: dict
) -> Iterator[tuple[int, str, str, list[str]]]:
    """Babel's extraction-method interface (babel.cfg names it)."""
    source = fileobj.read().decode("utf-8")
    for line, text in texts_of(source, options.get("kind", "checks")):
        yield line, "", text, []


def sources() -> Iterator[tuple[Path, str]]:
    """(file, kind) of every file whose texts the catalogues hold."""
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if (kind := _kind(path)) is not None:
            yield path, kind


def template() -> Catalog:
    """Every text of SOURCES, with where it is (a `.pot`)."""
    catalog = Catalog(domain=DOMAIN, project="attn-grade", charset="utf-8")
    for path, kind in sources():
        relative = path.relative_to(PACKAGE_DIR.parent).as_posix()
        for line, text in texts_of(path.read_text(), kind):
            flags = ("python-brace-format",) if "{0}" in text else ()
            if text in catalog:
                catalog[text].locations.append((relative, line))
            else:
                catalog.add(text, locations=[(relative, line)], flags=flags)
    return catalog


def update(lang: str) -> tuple[int, int]:
    """Bring `lang`'s `.po` up to date with the sources: new texts added untranslated, texts no
    longer used dropped (Babel keeps them as obsolete comments). Returns (entries, untranslated)."""
    path = po_path(lang)
    with path.open("rb") as handle:
        po = read_po(handle, locale=lang, domain=DOMAIN)
    po.update(template(), no_fuzzy_matching=True, update_header_comment=False)
    po.obsolete.clear()
    with path.open("wb") as handle:
        write_po(handle, po, width=100, sort_output=False, omit_header=False, no_location=False)
    entries = [entry for entry in po if entry.id]
    return len(entries), sum(1 for entry in entries if not entry.string)


def main(argv: list[str]) -> int:
    for lang in argv or sorted(p.name for p in LOCALE_DIR.iterdir() if po_path(p.name).is_file()):
        entries, untranslated = update(lang)
        where = po_path(lang).relative_to(PACKAGE_DIR.parent)
        print(f"{where}: {entries} texts, {untranslated} untranslated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
