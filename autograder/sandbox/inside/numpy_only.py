"""Whether a "NumPy only" function really needs no PyTorch: it is called with PyTorch out of
reach, and whatever it still does with PyTorch is evidence against it.

For that one call: every `torch` module is unimportable (`import torch` and `importlib`,
however spelled, fail); every torch module object in the function's reach (the globals its code
names, its closures and default arguments, recursively through the notebook's functions,
methods, classes, instances and containers they reach) is replaced by a poison that raises
when used; and a PyTorch function mode and dispatch mode (pushed with torch's C functions
captured before student code ran) record and refuse every torch operation, so that a torch
function kept in a dict, a tuple, a partial or a tensor held at the top level is caught too.
Everything is restored afterwards: the rest of the notebook (its max_abs_diff_vs_torch) keeps
its torch.
"""

from functools import partial
from types import FunctionType, MethodType
from typing import Any

if __package__:
    from . import trusted
else:
    import trusted  # type: ignore[no-redef]

globals()["__builtins__"] = trusted.BUILTINS  # builtins as they were before student code ran

MAX_REACH = 20_000  # objects looked at, at most, for torch module objects
SHOWN = 5  # uses of PyTorch reported, at most


class Poison:
    """What the function finds where it kept a torch module: any use raises and is recorded."""

    __slots__ = ("_uses", "_what")

    def __init__(self, what: str, uses: list):
        object.__setattr__(self, "_what", what)
        object.__setattr__(self, "_uses", uses)

    def _refuse(self, how: str):
        what = object.__getattribute__(self, "_what")
        object.__getattribute__(self, "_uses").append(f"{what}{how}")
        raise ImportError(f"{what} is out of reach here: this function must use NumPy only")

    def __getattr__(self, name: str):
        return object.__getattribute__(self, "_refuse")(f".{name}")

    def __call__(self, *args, **kwargs):
        return object.__getattribute__(self, "_refuse")("(...)")

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_what')} out of reach>"


class FunctionGuard:
    """A torch function mode that records and refuses every torch function called."""

    def __init__(self, uses: list):
        self.uses = uses

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.uses.append(getattr(func, "__name__", "a PyTorch function"))
        raise RuntimeError("PyTorch is out of reach here: this function must use NumPy only")


class DispatchGuard:
    """A torch dispatch mode that records and refuses every tensor operation."""

    def __init__(self, uses: list):
        self.uses = uses

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.uses.append(str(func))
        raise RuntimeError("PyTorch is out of reach here: this function must use NumPy only")


def without_torch(function, *args, **kwargs) -> list:
    """[function(*args, **kwargs), the uses of PyTorch it attempted (at most 5)], the call made
    with PyTorch out of reach (see the module's docstring); what the function raises (PyTorch's
    refusal included) is raised."""
    k = trusted.kit()
    uses: list[str] = []
    saved = {
        name: module
        for name, module in list(dict.items(k.modules))
        if name == "torch" or name.startswith("torch.")
    }
    torch_modules = {id(module): name for name, module in saved.items() if module is not None}
    restore: list = []
    push_function, pop_function, function_depth = k.function_modes
    push_dispatch, pop_dispatch, dispatch_depth = k.dispatch_modes
    depths = function_depth(), dispatch_depth()
    try:
        _poison_reach(function, torch_modules, uses, restore)
        for name in saved:
            k.modules[name] = None  # "import fails"
        push_function(FunctionGuard(uses))
        push_dispatch(DispatchGuard(uses))
        value = function(*args, **kwargs)
    finally:
        while dispatch_depth() > depths[1]:
            pop_dispatch(None)
        while function_depth() > depths[0]:
            pop_function()
        dict.update(k.modules, saved)
        for undo in reversed(restore):
            undo()
    return [value, list(dict.fromkeys(uses))[:SHOWN]]


def _code_names(code) -> set[str]:
    """The global names a code object and the code nested in it (lambdas, comprehensions,
    inner functions) can read."""
    names, stack = set(), [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if type(c) is type(code))
    return names


def _poison_reach(function, torch_modules: dict, uses: list, restore: list) -> None:
    """Replace every torch module object the function can reach by a `Poison`, appending to
    `restore` what puts each back."""

    def poison(value) -> Poison:
        return Poison(torch_modules[id(value)], uses)

    queue: list[Any] = [function]

    def look(value, replace) -> None:
        if id(value) in torch_modules:
            replace()
        elif _walkable(value):
            queue.append(value)

    seen: set[int] = set()
    while queue and len(seen) < MAX_REACH:
        found = queue.pop()
        if id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, FunctionType):
            if dict.get(found.__globals__, "__name__") == "__main__":  # the notebook's own
                _function_reach(found, look, poison, torch_modules, restore)
        elif isinstance(found, MethodType):
            queue.extend((found.__func__, found.__self__))
        elif isinstance(found, partial):
            queue.extend((found.func, found.args, found.keywords))
        elif isinstance(found, dict):
            for key, value in list(dict.items(found)):
                look(value, lambda d=found, n=key: _in_dict(d, n, poison, restore))
        elif isinstance(found, list):
            for index, value in enumerate(list(found)):
                look(value, lambda lst=found, i=index: _in_list(lst, i, poison, restore))
        elif isinstance(found, tuple | set | frozenset):
            queue.extend(v for v in found if _walkable(v))  # the guards see what is used
        elif isinstance(found, type):
            for name, value in list(vars(found).items()):
                look(value, lambda c=found, n=name: _in_class(c, n, poison, restore))
        else:  # an instance of a notebook class: its attributes
            try:
                queue.append(object.__getattribute__(found, "__dict__"))
            except AttributeError:
                continue


def _function_reach(function, look, poison, torch_modules: dict, restore: list) -> None:
    """Look at what a function reaches: the globals its code names, its closure cells and
    its default arguments."""
    scope = function.__globals__
    for name in _code_names(function.__code__):
        if name in scope:
            value = dict.__getitem__(scope, name)
            look(value, lambda n=name: _in_dict(scope, n, poison, restore))
    for cell in function.__closure__ or ():
        try:
            held = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        look(held, lambda c=cell, h=held: _in_cell(c, h, poison, restore))
    for kind in ("__defaults__", "__kwdefaults__"):
        for value in _values(getattr(function, kind)):
            look(value, lambda n=kind: _in_defaults(function, n, torch_modules, poison, restore))


WALKED = (FunctionType, MethodType, partial, dict, list, tuple, set, frozenset)


def _walkable(value) -> bool:
    """Whether a value can lead to more: functions, methods, partials, containers, the
    notebook's classes and their instances (not modules, numbers, arrays or tensors). Only the
    notebook's own functions are looked into: a library's stay as they are (the guards see
    what they do with torch)."""
    if isinstance(value, WALKED):
        return True
    if isinstance(value, type):
        return value.__module__ == "__main__"
    return type(value).__module__ == "__main__"


def _values(held) -> list:
    if isinstance(held, dict):
        return list(dict.values(held))
    return list(held) if isinstance(held, tuple) else []


def _in_dict(mapping: dict, key, poison, restore: list) -> None:
    original = dict.__getitem__(mapping, key)
    dict.__setitem__(mapping, key, poison(original))
    restore.append(lambda: dict.__setitem__(mapping, key, original))


def _in_cell(cell, held, poison, restore: list) -> None:
    cell.cell_contents = poison(held)
    restore.append(lambda: setattr(cell, "cell_contents", held))


def _in_list(items: list, index: int, poison, restore: list) -> None:
    original = list.__getitem__(items, index)
    list.__setitem__(items, index, poison(original))
    restore.append(lambda: list.__setitem__(items, index, original))


def _in_class(cls, name: str, poison, restore: list) -> None:
    original = vars(cls)[name]
    type.__setattr__(cls, name, poison(original))
    restore.append(lambda: type.__setattr__(cls, name, original))


def _in_defaults(function, kind: str, torch_modules: dict, poison, restore: list) -> None:
    original = getattr(function, kind)
    if isinstance(original, dict):
        swapped: Any = {
            key: poison(value) if id(value) in torch_modules else value
            for key, value in original.items()
        }
    else:
        swapped = tuple(poison(v) if id(v) in torch_modules else v for v in original)
    setattr(function, kind, swapped)
    restore.append(lambda: setattr(function, kind, original))


PROBES: dict[str, Any] = {"without_torch": without_torch}
