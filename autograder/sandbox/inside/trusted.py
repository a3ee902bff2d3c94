"""What the probes use from PyTorch and from Python, captured before any student code runs.

A notebook runs in the probes' process and can replace whatever it reaches:
`torch.is_grad_enabled` (an attacker's answered False to the probe's hook only),
`nn.Module.modules`, `torch.Tensor.__len__`, `builtins.isinstance`, `sys.modules[...]`. So the
child calls `capture()` before the notebook's first cell: it imports torch and keeps the C
functions, the tensor type's C descriptors (an immutable type: a notebook cannot change them)
and the dicts and code objects that nn.Module's dispatcher uses; the probes reach torch only
through `kit()`, and call builtins from a private copy (`BUILTINS`). `parts()` names all of it,
and the live names it came from, for the child's tamper snapshot: a notebook that replaces one
of them is `tampered`; one that replaces anything else cannot influence the probes.

A probe's hook counts a module call only when nn.Module's own dispatcher called it (`genuine`):
the notebook calling the hook itself, or a replaced `__call__` or `_call_impl`, shows nothing,
and a check that needs evidence then fails. Limit: a notebook that edits the probes' own state
while a probe runs (their hooks' closures, through gc, frames or ctypes) and restores it before
the request ends is not seen; only evidence kept outside the child's process would be.
"""

import builtins
import sys
from collections import OrderedDict
from typing import Any, NamedTuple

# The probes' and the child's functions look builtins up here (a function keeps the builtins of
# the module it was defined in): `builtins.isinstance = ...` in a notebook does not reach them.
BUILTINS: dict[str, Any] = dict(vars(builtins))
globals()["__builtins__"] = BUILTINS


class Kit(NamedTuple):
    """References taken from torch before any student code ran (see the module's docstring)."""

    torch: Any  # the module itself (for names only: its attributes are the notebook's)
    grad_enabled: Any  # torch._C.is_grad_enabled
    set_grad_enabled: Any  # torch._C._set_grad_enabled
    no_torch_function: Any  # torch._C.DisableTorchFunctionSubclass: subclasses' overrides off
    Tensor: Any  # torch._C.TensorBase: an immutable type, its methods are C descriptors
    functions: Any  # torch._C._VariableFunctions (read-only attributes): randn, cat, ones_like
    Generator: Any  # torch._C.Generator (immutable)
    engine: Any  # autograd's C engine (run_backward)
    Module: Any
    Embedding: Any
    instance_dict: Any  # nn.Module's `__dict__` descriptor: a module's own attributes
    pre_hooks: dict  # nn.Module's global forward pre-hooks and forward hooks
    post_hooks: dict
    call_impl_code: Any  # the code of nn.Module._call_impl and of its `inner`, which calls
    inner_code: Any  # the hooks (None where _call_impl calls them itself), and the globals
    dispatcher_globals: dict
    real_classes: tuple  # (class, dotted name, forward) of every nn.Module class of torch.nn
    getframe: Any
    modules: dict  # sys.modules (the interpreter's dict, whatever `sys.modules` names later)
    function_modes: tuple  # (push, pop, length) of torch's function-mode and dispatch-mode
    dispatch_modes: tuple  # stacks (for `numpy_only`)


_KIT: Kit | None = None


def capture() -> None:
    """Import torch and take the kit; the child calls this before the notebook's first cell.
    Where torch cannot be imported the kit stays empty (every probe that needs it then raises,
    and its check fails for want of evidence)."""
    global _KIT
    try:
        _KIT = _take()
    except Exception:  # noqa: BLE001 - no torch in this child: no kit
        _KIT = None


def captured() -> bool:
    """Whether the kit was taken (in a warm child: by its template, before any student code)."""
    return _KIT is not None


def _take() -> Kit:
    import torch
    import torch.nn as nn
    import torch.nn.modules.module as dispatcher
    from torch.autograd.variable import Variable

    call_impl = vars(nn.Module)["_call_impl"]
    C = torch._C
    return Kit(
        torch=torch,
        grad_enabled=C.is_grad_enabled,
        set_grad_enabled=C._set_grad_enabled,
        no_torch_function=C.DisableTorchFunctionSubclass,
        Tensor=C.TensorBase,
        functions=C._VariableFunctions,
        Generator=C.Generator,
        engine=Variable._execution_engine,
        Module=nn.Module,
        Embedding=nn.Embedding,
        instance_dict=vars(nn.Module)["__dict__"],
        pre_hooks=dispatcher._global_forward_pre_hooks,
        post_hooks=dispatcher._global_forward_hooks,
        call_impl_code=call_impl.__code__,
        inner_code=next((c for c in call_impl.__code__.co_consts if _named(c, "inner")), None),
        dispatcher_globals=call_impl.__globals__,
        real_classes=_real_classes(nn.Module),
        getframe=sys._getframe,
        modules=sys.modules,
        function_modes=(
            C._push_on_torch_function_stack,
            C._pop_torch_function_stack,
            C._len_torch_function_stack,
        ),
        dispatch_modes=(
            C._push_on_torch_dispatch_stack,
            C._pop_torch_dispatch_stack,
            C._len_torch_dispatch_stack,
        ),
    )


def _named(code, name: str) -> bool:
    return getattr(code, "co_name", None) == name


def _real_classes(module_class) -> tuple:
    """(class, dotted name, its forward) of every nn.Module class that torch.nn defines."""
    found = []
    for name, home in list(sys.modules.items()):
        if not name.startswith("torch.nn") or home is None:
            continue
        for attr, value in list(vars(home).items()):
            if isinstance(value, type) and issubclass(value, module_class):
                if value.__module__ == name and value.__qualname__ == attr:
                    found.append((value, f"{name}.{attr}", resolved(value, "forward")))
    return tuple(found)


def resolved(cls, name: str):
    """What `cls.name` resolves to along its MRO (the first class dict holding it), read from
    the type's own slots: no metaclass or class attribute is asked."""
    for base in type.__dict__["__mro__"].__get__(cls):
        held = type.__dict__["__dict__"].__get__(base)
        if name in held:
            return held[name]
    return None


def kit() -> Kit:
    """The kit, or an error where the child could not capture it (then no probe has evidence)."""
    if _KIT is None:
        raise RuntimeError("the grader's references to PyTorch were not captured")
    return _KIT


def _sources(k: Kit) -> dict[str, tuple[Any, str]]:
    """Where each captured reference lives in the runtime: name -> (namespace, attribute)."""
    torch, C = k.torch, k.torch._C
    module_class = k.Module
    return {
        "torch.is_grad_enabled": (torch, "is_grad_enabled"),
        "torch._C.is_grad_enabled": (C, "is_grad_enabled"),
        "torch._C._set_grad_enabled": (C, "_set_grad_enabled"),
        "torch._C.DisableTorchFunctionSubclass": (C, "DisableTorchFunctionSubclass"),
        "torch._C.TensorBase": (C, "TensorBase"),
        "torch._C._VariableFunctions": (C, "_VariableFunctions"),
        "torch._C.Generator": (C, "Generator"),
        "torch.nn.Module": (torch.nn, "Module"),
        "torch.nn.Embedding": (torch.nn, "Embedding"),
        "Module.__call__": (module_class, "__call__"),
        "Module._wrapped_call_impl": (module_class, "_wrapped_call_impl"),
        "Module._call_impl": (module_class, "_call_impl"),
        "_global_forward_pre_hooks": (k.dispatcher_globals, "_global_forward_pre_hooks"),
        "_global_forward_hooks": (k.dispatcher_globals, "_global_forward_hooks"),
        "sys._getframe": (sys, "_getframe"),
    }


def parts() -> dict[str, Any]:
    """The kit, the private builtins and the live names the kit came from, by name, for the
    child's tamper snapshot (compared by identity, and functions by their code)."""
    found: dict[str, Any] = {"trusted kit": _KIT, "trusted builtins": BUILTINS}
    for name, value in list(dict.items(BUILTINS)):
        found[f"builtins copy {name}"] = value
    if _KIT is None:
        return found
    for field, value in zip(Kit._fields, _KIT, strict=True):
        found[f"kit {field}"] = value
    for name, (owner, attr) in _sources(_KIT).items():
        namespace = owner if isinstance(owner, dict) else vars(owner)  # a dict or a mappingproxy
        found[f"live {name}"] = namespace.get(attr)
    return found


# -- reading the notebook's objects without calling their code -----------------------------------
def own(k: Kit, module) -> dict:
    """A module's own attribute dict (`_modules`, `_parameters`, `training`...), read through
    nn.Module's descriptor: a class that overrides `__dict__` or `__getattribute__` changes
    nothing here."""
    return k.instance_dict.__get__(module, k.Module)


def flag(k: Kit, module, name: str, default: bool) -> bool:
    """A module's own boolean attribute (`training`); `default` where it holds no bool there."""
    value = dict.get(own(k, module), name)
    return value if type(value) is bool else default


def named_modules(k: Kit, module, prefix: str = "", seen=None):
    """(name, module) of `module` and of every submodule, from the `_modules` dicts: a module
    that overrides named_modules(), modules() or get_submodule() cannot report what it has not."""
    seen = set() if seen is None else seen
    if id(module) in seen:
        return
    seen.add(id(module))
    yield prefix, module
    children = dict.get(own(k, module), "_modules")
    for name, child in list(dict.items(children)) if isinstance(children, dict) else []:
        if isinstance(child, k.Module):
            yield from named_modules(k, child, f"{prefix}.{name}" if prefix else name, seen)


def submodule(k: Kit, module, path: str):
    """The submodule at a dotted `path`, from the `_modules` dicts (LookupError where none is)."""
    for part in path.split(".") if path else []:
        children = dict.get(own(k, module), "_modules")
        child = dict.get(children, part) if isinstance(children, dict) else None
        if not isinstance(child, k.Module):
            raise LookupError(f"no submodule {path!r}")
        module = child
    return module


def named_parameters(k: Kit, module):
    """(dotted name, parameter) of every parameter, each once, from the `_parameters` dicts."""
    seen = set()
    for prefix, child in named_modules(k, module):
        held = dict.get(own(k, child), "_parameters")
        for name, parameter in list(dict.items(held)) if isinstance(held, dict) else []:
            if isinstance(parameter, k.Tensor) and id(parameter) not in seen:
                seen.add(id(parameter))
                yield (f"{prefix}.{name}" if prefix else name), parameter


def tensor(k: Kit, name: str):
    """The C method or attribute descriptor `name` of tensors (immutable)."""
    return vars(k.Tensor)[name]


def get(k: Kit, value, name: str):
    """A tensor's C attribute (`shape`, `grad`, `grad_fn`, `requires_grad`, `dtype`), with any
    subclass's `__torch_function__` switched off."""
    with k.no_torch_function():
        return tensor(k, name).__get__(value, k.Tensor)


def call(k: Kit, value, name: str, *args, **kwargs):
    """A tensor's C method, with any subclass's `__torch_function__` switched off."""
    with k.no_torch_function():
        return tensor(k, name)(value, *args, **kwargs)


def batch_rows(k: Kit, inputs) -> int:
    """The batch size of a module call: the first axis of its first input (0 where that is not
    a tensor with an axis)."""
    first = inputs[0] if isinstance(inputs, tuple) and inputs else None
    if not isinstance(first, k.Tensor):
        return 0
    shape = tuple(get(k, first, "shape"))
    return int(shape[0]) if shape else 0


def carries_a_graph(k: Kit, output) -> bool:
    """Whether a module's output (a tensor, or tensors in a tuple, list or dict) was computed
    with gradients recorded (it has a grad_fn)."""
    if isinstance(output, dict):
        items = list(dict.values(output))
    else:
        items = list(output) if isinstance(output, tuple | list) else [output]
    return any(isinstance(v, k.Tensor) and get(k, v, "grad_fn") is not None for v in items)


def genuine(k: Kit) -> bool:
    """Whether the hook that calls this was called by nn.Module's own dispatcher (`inner` of
    `_call_impl`, running with the dispatcher's globals, called by `_call_impl`; or
    `_call_impl` itself in torch versions without `inner`), not by the notebook's code or by a
    replaced dispatcher."""
    caller = k.getframe(2)
    if k.inner_code is None:
        return caller.f_code is k.call_impl_code and caller.f_globals is k.dispatcher_globals
    outer = caller.f_back
    return (
        caller.f_code is k.inner_code
        and caller.f_globals is k.dispatcher_globals
        and outer is not None
        and outer.f_code is k.call_impl_code
        and outer.f_globals is k.dispatcher_globals
    )


class Watching:
    """Global forward pre-hook and forward hook of nn.Module installed for a `with` block, in the
    dicts captured before student code ran (keys of their own: no module's hook can collide).
    The pre-hook runs after the global pre-hooks already there, the forward hook before every
    other forward hook: it sees a module's output as its forward returned it (a notebook's hook
    that detaches outputs cannot hide the graph from it)."""

    def __init__(self, k: Kit, before=None, after=None):
        self.k, self.before, self.after = k, before, after
        self.key = object()

    def __enter__(self):
        if self.before is not None:
            add_hook(self.k.pre_hooks, self.key, self.before)
        if self.after is not None:
            add_hook(self.k.post_hooks, self.key, self.after, first=True)
        return self

    def __exit__(self, *exc) -> None:
        for hooks in (self.k.pre_hooks, self.k.post_hooks):
            remove_hook(hooks, self.key)


def add_hook(hooks: dict, key, hook, first: bool = False) -> None:
    """hooks[key] = hook (`first`: before the others) through OrderedDict's own methods (torch's
    hook dicts are OrderedDicts, whose order a plain dict.__setitem__ would corrupt)."""
    if not isinstance(hooks, OrderedDict):
        raise TypeError(f"torch's hooks are in a {type(hooks).__name__}, not an OrderedDict")
    OrderedDict.__setitem__(hooks, key, hook)
    if first:
        OrderedDict.move_to_end(hooks, key, last=False)


def remove_hook(hooks: dict, key) -> None:
    if isinstance(hooks, OrderedDict):
        OrderedDict.pop(hooks, key, None)


class GradMode:
    """Gradients on or off for a `with` block, through the captured C function (torch.no_grad
    and torch.enable_grad are the notebook's to replace)."""

    def __init__(self, k: Kit, enabled: bool):
        self.k, self.enabled = k, enabled

    def __enter__(self):
        self.previous = self.k.grad_enabled()
        self.k.set_grad_enabled(self.enabled)
        return self

    def __exit__(self, *exc) -> None:
        self.k.set_grad_enabled(self.previous)
