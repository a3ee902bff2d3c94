"""An observer notebook: records everything its own process can see while it is graded (audit
hooks on compile, exec, import, open and marshal; the strings and code objects `gc` reaches, in
functions, classes, dicts and lists; `sys.modules`; the frames of every call; linecache; its
`/proc/self`), so a test can prove that no code of the grader (reference, checks, mistakes,
stand-ins, the check-author API) ever enters the student's process: only the runtime
(`autograder/sandbox/inside/`) may.

`observer_notebook(exercise)` is the reference notebook with every name that a check swaps for
the contract's stand-in replaced by code that raises (so every swap happens, and the reference
code built on those names calls the stand-ins), plus the observer cell. The observer snapshots
on the first call of any function or method of the notebook and again whenever a global has
changed since (a swap), and `_agw_observed()` returns what it saw as UTF-8 bytes.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import re
from pathlib import Path

from autograder.core.registry import exercise_dir, reference_path
from tests.conftest import source_notebook, with_student_cells

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "autograder" / "sandbox" / "inside"
SEPARATOR = "\n\x00\n"
# Grader code that must never reach the child: each exercise's hidden files, and the grading and
# check-author packages that run in the parent.
GRADER_CODE = ("autograder/authoring", "autograder/grading", "autograder/core")
MIN_LINE = 28  # characters of a stripped line that count as a line of code seen

OBSERVER = r"""
import gc as _gc, linecache as _linecache, os as _os, sys as _sys, types as _types
import functools as _functools
import warnings as _warnings
import numpy as _np

_SEEN = set()
_CODES = set()
_STATES = set()


def _keep(text):
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    if isinstance(text, str) and len(text) >= 8:
        _SEEN.add(text[:400000])


def _code(code, depth=0):
    if id(code) in _CODES or depth > 40:
        return
    _CODES.add(id(code))
    _keep("file " + str(code.co_filename))
    _keep("qualname " + str(getattr(code, "co_qualname", code.co_name)))
    for const in code.co_consts:
        if isinstance(const, _types.CodeType):
            _code(const, depth + 1)
        elif isinstance(const, (str, bytes)):
            _keep(const)


def _audit(event, args):
    try:
        if event == "compile":
            _keep(args[0])
            _keep("compiled " + str(args[1]))
        elif event == "exec" and isinstance(args[0], _types.CodeType):
            _code(args[0])
        elif event == "marshal.loads":
            _keep(args[0])
        elif event in ("import", "open", "os.listdir", "os.scandir", "pickle.find_class"):
            _keep(event + " " + " ".join(str(arg) for arg in args))
    except BaseException:
        pass


_sys.addaudithook(_audit)


def _snapshot():
    for found in _gc.get_objects():
        try:
            if isinstance(found, _types.FunctionType):
                _code(found.__code__)
                _keep(found.__doc__)
            elif isinstance(found, _types.CodeType):
                _code(found)
            elif isinstance(found, type):
                _keep("class " + str(found.__module__) + "." + str(found.__qualname__))
                _keep(found.__doc__)
            elif isinstance(found, dict):
                for value in list(found.values()):
                    if isinstance(value, str) and len(value) >= 40:
                        _keep(value)
            elif isinstance(found, (list, tuple)):
                for value in list(found):
                    if isinstance(value, str) and len(value) >= 40:
                        _keep(value)
        except BaseException:
            pass
    frame = _sys._getframe()
    while frame is not None:
        _code(frame.f_code)
        frame = frame.f_back
    for name, module in list(_sys.modules.items()):
        _keep("module " + str(name) + " " + str(getattr(module, "__file__", "")))
    for name, entry in list(_linecache.cache.items()):
        _keep("linecache " + str(name))
        if len(entry) > 2 and entry[2] and (name.startswith("<") or "autograder" in name):
            _keep("".join(entry[2]))
    for path in ("/proc/self/maps", "/proc/self/environ", "/proc/self/cmdline"):
        try:
            with open(path, "rb") as handle:
                _keep(handle.read())
        except OSError:
            pass
    try:
        for fd in _os.listdir("/proc/self/fd"):
            try:
                _keep("fd " + _os.readlink("/proc/self/fd/" + fd))
            except OSError:
                pass
    except OSError:
        pass


def _origin(value):
    code = getattr(value, "__code__", None)
    return (getattr(value, "__module__", None), getattr(code, "co_filename", None))


def _maybe_snapshot():
    # once for each set of globals that come from elsewhere (the grader's swaps)
    state = frozenset(
        (k, _origin(v)) for k, v in list(globals().items()) if not k.startswith("_")
    )
    if state not in _STATES:
        _STATES.add(state)
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")
            _snapshot()


def _observed(function):
    @_functools.wraps(function)
    def observing(*args, **kwargs):
        _maybe_snapshot()
        return function(*args, **kwargs)

    return observing


for _name, _value in list(globals().items()):
    if _name.startswith("_"):
        continue
    if isinstance(_value, _types.FunctionType) and _value.__module__ == "__main__":
        globals()[_name] = _observed(_value)
    elif isinstance(_value, type) and _value.__module__ == "__main__":
        for _attr in ("__init__", "forward", "append", "__len__"):
            if isinstance(vars(_value).get(_attr), _types.FunctionType):
                setattr(_value, _attr, _observed(vars(_value)[_attr]))


def _agw_observed():
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        _snapshot()
    text = "\n\x00\n".join(sorted(_SEEN))
    return _np.frombuffer(text.encode("utf-8", "replace"), dtype=_np.uint8).copy()
"""


def swapped_names(exercise: str) -> list[str]:
    """The notebook names that the exercise's checks may swap for the contract's stand-in."""
    module = importlib.import_module(f"autograder.exercises.{exercise}.checks")
    names: list[str] = []
    for _, function in inspect.getmembers(module, inspect.isfunction):
        for name, _ in getattr(function, "swaps", ()):
            if name not in names:
                names.append(name)
    return names


def raising(exercise: str, name: str) -> str:
    """A cell defining `name` (a function or class of the reference) that raises when used."""
    reference = importlib.import_module(f"autograder._reference.{exercise}")
    if inspect.isclass(getattr(reference, name)):
        return (
            f"class {name}(nn.Module if '{name}' != 'KVCache' else object):\n"
            "    def __init__(self, *args, **kwargs):\n"
            "        raise NotImplementedError('observer: raises, so it is swapped')\n"
        )
    return (
        f"def {name}(*args, **kwargs):\n"
        "    raise NotImplementedError('observer: raises, so it is swapped')\n"
    )


def observer_notebook(exercise: str):
    names = swapped_names(exercise)
    notebook = source_notebook(exercise, replace={name: raising(exercise, name) for name in names})
    return with_student_cells(notebook, OBSERVER)


_IMPORT = re.compile(r"(from \S+ )?import ")
_QUOTED_NAME = re.compile(r"[\"'][\w .]*[\"'],?\)?,?")
_WORD = re.compile(r"[A-Za-z_]{3}")


@functools.lru_cache(maxsize=1 << 16)  # the same lines come again (every file, every test)
def _meaningful(line: str) -> bool:
    """A stripped line that says something: long enough, not an import, not only a name in
    quotes (check names are public), with a word in it."""
    return (
        len(line) >= MIN_LINE
        and not _IMPORT.match(line)
        and not _QUOTED_NAME.fullmatch(line)
        and _WORD.search(line) is not None
    )


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if _meaningful(line.strip())}


def pairs(text: str) -> set[tuple[str, str]]:
    """Each two consecutive non-blank stripped lines of `text`, at least one of them
    meaningful: code that leaks leaks as lines in their order, while one line of a library's
    text can equal one line of the grader's by chance."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return {(a, b) for a, b in itertools.pairwise(lines) if _meaningful(a) or _meaningful(b)}


def hidden_pairs(exercise: str, notebook) -> set[tuple[str, str]]:
    """Consecutive lines of grader code that the observer's notebook does not show itself: of
    the exercise's hidden files (reference, checks, mistakes) and the parent's grading
    packages, less those of the notebook (release text, the reference bodies it keeps) and of
    the runtime."""
    files = [reference_path(exercise), *sorted(exercise_dir(exercise).glob("*.py"))]
    for package in GRADER_CODE:
        files += sorted((ROOT / package).glob("*.py"))
    hidden: set[tuple[str, str]] = set()
    for path in files:
        hidden |= _file_pairs(path)
    shown = pairs("\n".join(str(cell.source) for cell in notebook.cells))
    for path in RUNTIME.glob("*.py"):
        shown |= _file_pairs(path)
    return hidden - shown


def _file_pairs(path: Path) -> frozenset[tuple[str, str]]:
    """`pairs` of a file, read again only when it changed (one run reads each grader file for
    every exercise and level)."""
    stat = path.stat()
    return _pairs_of(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=512)
def _pairs_of(path: Path, mtime_ns: int, size: int) -> frozenset[tuple[str, str]]:
    return frozenset(pairs(path.read_text()))


def hidden_lines(exercise: str, notebook) -> set[str]:
    """The meaningful single lines of `hidden_pairs` (what a message could quote)."""
    return {line for pair in hidden_pairs(exercise, notebook) for line in pair if _meaningful(line)}


def code_files(observed: str) -> set[str]:
    """The file names of every code object the observer saw."""
    return {item[len("file ") :] for item in observed.split(SEPARATOR) if item.startswith("file ")}
