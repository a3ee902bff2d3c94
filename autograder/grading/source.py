"""Static facts about a submission's source, read in the parent with `ast` (never executed)."""

from __future__ import annotations

import ast

MAX_PARSED_CHARS = 200_000  # a cell larger than this is not analysed (bounded parent work)


def without_ipython_lines(source: str) -> str:
    """Line magics and `!shell` lines blanked (a cell magic blanks the whole cell), so that
    `ast` can read the Python around them; linear in the size of the cell."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        return ""
    return "\n".join(
        " " * (len(line) - len(line.lstrip())) + "pass" if line.lstrip()[:1] in ("%", "!") else line
        for line in lines
    )


def _parse(sources: list[str]) -> list[ast.Module]:
    trees = []
    for source in sources:
        if len(source) > MAX_PARSED_CHARS:
            continue
        for text in (source, without_ipython_lines(source)):
            try:
                trees.append(ast.parse(text))
                break
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
    return trees


def module_aliases(sources: list[str], package: str) -> set[str]:
    """Names bound anywhere in the notebook to `package` or to something imported from it."""
    names: set[str] = set()
    for tree in _parse(sources):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package:
                        names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] == package:
                    names.update(alias.asname or alias.name for alias in node.names)
    return names


def _imports(node: ast.AST, package: str) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == package for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == package
    return False


def _top_level_functions(
    trees: list[ast.Module],
) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The last top-level definition of each function name (what the notebook ends up with)."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found[node.name] = node
    return found


def functions_using(sources: list[str], function: str, package: str) -> list[str]:
    """Functions reachable from `function` (through calls of the notebook's own top-level
    functions) whose bodies use `package` or import it. Empty when none do."""
    if any(len(source) > MAX_PARSED_CHARS for source in sources):
        # what cannot be analysed is not paid for: a constraint needs evidence
        return [f"a cell over {MAX_PARSED_CHARS:,} characters (not analysed)"]
    trees = _parse(sources)
    aliases = module_aliases(sources, package)
    functions = _top_level_functions(trees)
    offenders, queue, visited = [], [function], set()
    while queue:
        name = queue.pop()
        if name in visited or name not in functions:
            continue
        visited.add(name)
        for node in ast.walk(functions[name]):
            uses = (isinstance(node, ast.Name) and node.id in aliases) or _imports(node, package)
            if uses and name not in offenders:
                offenders.append(name)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                queue.append(node.func.id)
    return offenders
