"""Read-only inspectors the grader may ask the child to run on objects that stay in the child.

They return plain data only. They run on the student's objects, so their answers are only as
trustworthy as those objects: the parent treats them like any other output of the submission.
"""

import sys
from collections.abc import Callable
from typing import Any


def _text(items) -> list[str]:
    return [item.get_text() for item in items]


def _major_ticks(axis) -> list[dict]:
    """Each major tick of an x or y axis with its two labels (bottom/left, top/right) paired."""
    axis.get_majorticklabels()  # places the ticks and sets their labels' text, as drawn
    return [
        {
            "location": float(tick.get_loc()),
            "label1": tick.label1.get_text(),
            "label1_visible": bool(tick.label1.get_visible()),
            "label2": tick.label2.get_text(),
            "label2_visible": bool(tick.label2.get_visible()),
        }
        for tick in axis.get_major_ticks()
    ]


def _mappable_summary(artist) -> dict:
    import numpy as np

    summary = {
        "kind": type(artist).__name__,
        "has_colorbar": getattr(artist, "colorbar", None) is not None,
        "array": np.ma.filled(np.ma.asarray(artist.get_array(), dtype=float), np.nan),
    }
    if hasattr(artist, "get_extent"):
        summary["extent"] = [float(value) for value in artist.get_extent()]
        summary["origin"] = str(getattr(artist, "origin", "upper"))
    if hasattr(artist, "get_coordinates"):
        summary["coordinates"] = np.asarray(artist.get_coordinates(), dtype=float)
    return summary


def figure_summary(figure) -> dict:
    """Axes, images/meshes (values, extent, origin), ticks and labels of a matplotlib figure.

    `xmajorticks` / `ymajorticks` pair every major tick with its labels; `xticks` and
    `xticklabels` (the visible labels, bottom/left ones first) are kept for older readers."""
    from matplotlib.figure import Figure

    if not isinstance(figure, Figure):
        raise TypeError(f"expected a matplotlib Figure, got {type(figure).__name__}")
    figure.draw_without_rendering()
    axes_list = []
    for axes in figure.axes:
        mappables = [*axes.images, *[c for c in axes.collections if hasattr(c, "get_coordinates")]]
        axes_list.append(
            {
                "is_colorbar": hasattr(axes, "_colorbar"),
                "mappables": [_mappable_summary(artist) for artist in mappables],
                "xticks": [float(tick) for tick in axes.get_xticks()],
                "yticks": [float(tick) for tick in axes.get_yticks()],
                "xticklabels": _text(axes.get_xticklabels()),
                "yticklabels": _text(axes.get_yticklabels()),
                "xmajorticks": _major_ticks(axes.xaxis),
                "ymajorticks": _major_ticks(axes.yaxis),
                "xlim": [float(value) for value in axes.get_xlim()],
                "ylim": [float(value) for value in axes.get_ylim()],
                "title": axes.get_title(),
                "titles": [axes.get_title(loc) for loc in ("center", "left", "right")],
                "xlabel": axes.get_xlabel(),
                "ylabel": axes.get_ylabel(),
            }
        )
    return {"axes": axes_list}


def _real_class_name(cls) -> str:
    """The dotted name of the most derived real PyTorch class in `cls`'s MRO (a class whose
    module really holds it under that name), else the notebook class's own name marked as
    such: a class that only names itself `torch.nn....TransformerEncoder` is not one."""
    for base in cls.__mro__:
        name = f"{base.__module__}.{base.__qualname__}"
        if not name.startswith("torch.") or base.__qualname__ == "Module":
            continue
        home = sys.modules.get(base.__module__)
        if home is not None and vars(home).get(base.__qualname__) is base:
            return name
    return f"notebook.{cls.__qualname__}"


def _named_modules(module, prefix: str = "", seen=None):
    """nn.Module's own traversal, read from each module's `_modules` dict directly: a module
    that overrides named_modules(), modules() or parameters() cannot report what it has not."""
    seen = set() if seen is None else seen
    if id(module) in seen:
        return
    seen.add(id(module))
    yield prefix, module
    children = object.__getattribute__(module, "_modules")
    for name, child in list(dict.items(children)):
        if child is not None:
            yield from _named_modules(child, f"{prefix}.{name}" if prefix else name, seen)


def module_summary(module) -> dict:
    """Class, parameter counts and `batch_first` of an nn.Module and its named submodules."""
    import torch.nn as nn

    if not isinstance(module, nn.Module) or nn.Module not in type(module).__mro__:
        raise TypeError(f"expected an nn.Module, got {type(module).__name__}")
    submodules, parameters = [], {}
    names: dict[int, list[str]] = {}
    for name, child in _named_modules(module):
        submodules.append(
            {
                "name": name,
                "class": _real_class_name(type(child)),
                "batch_first": getattr(child, "batch_first", None),
                "num_layers": getattr(child, "num_layers", None),
            }
        )
        for key, parameter in dict.items(object.__getattribute__(child, "_parameters")):
            if parameter is not None:
                parameters[id(parameter)] = parameter
                names.setdefault(id(parameter), []).append(f"{name}.{key}" if name else key)
    return {
        # parameters held under several names (tied weights: the same Parameter object)
        "shared_parameters": [sorted(held) for held in names.values() if len(held) > 1],
        "submodules": submodules,
        "trainable_parameters": sum(p.numel() for p in parameters.values() if p.requires_grad),
        "parameters": sum(p.numel() for p in parameters.values()),
        "training": bool(object.__getattribute__(module, "training")),
    }


def returns(value):
    """A function that ignores its arguments and returns `value` (a stub to swap in)."""
    return lambda *args, **kwargs: value


PROBES: dict[str, Callable[..., Any]] = {
    "figure_summary": figure_summary,
    "module_summary": module_summary,
    "returns": returns,
}


def batch_recorder(model):
    """`model` wrapped in an nn.Module that records the rows of every input it sees in training
    mode (as lists of ints), in `seen`: how a training loop batches and shuffles its data."""
    import torch.nn as nn

    class BatchRecorder(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.seen = []

        def forward(self, x, *args, **kwargs):
            if self.training:
                self.seen.extend(x.detach().reshape(len(x), -1).tolist())
            return self.inner(x, *args, **kwargs)

    return BatchRecorder(model)


def positions_through(function, model, path, *args):
    """[function(model, *args), n]: n is the number of token positions (per batch row: the
    second-to-last axis of each input) that went through `model`'s submodule `path` (a dotted
    name such as "attn.W_k") while the function ran, seen by a forward hook on that submodule."""
    seen = [0]

    def count(module, inputs):
        shape = tuple(getattr(inputs[0], "shape", ())) if inputs else ()
        seen[0] += int(shape[-2]) if len(shape) >= 2 else 0

    hook = model.get_submodule(path).register_forward_pre_hook(count)
    try:
        result = function(model, *args)
    finally:
        hook.remove()
    return [result, seen[0]]


def gradients(module) -> dict:
    """Each parameter's .grad (None where there is none): for diagnosing a training loop."""
    return {
        name: None if p.grad is None else p.grad.detach().clone()
        for name, p in module.named_parameters()
    }


def _batch_rows(inputs: tuple) -> int:
    """The batch size of a module call: the first axis of its first input (0 where that is not
    a tensor with an axis)."""
    import torch

    first = inputs[0] if inputs else None
    return len(first) if isinstance(first, torch.Tensor) and first.dim() else 0


def weights_reaching_the_output(model, x) -> dict:
    """name -> whether the output depends on that weight matrix: every 2-D parameter outside
    an nn.Embedding (embedding rows of absent tokens get no gradient) gets a non-zero gradient
    from a random projection of model(x). A layer that is built but whose output is thrown
    away gets none."""
    import torch
    import torch.nn as nn

    embedded = {
        id(p)
        for module in model.modules()
        if isinstance(module, nn.Embedding)
        for p in module.parameters(recurse=False)
    }
    model.zero_grad(set_to_none=True)
    with torch.enable_grad():
        out = model(x)
        projection = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
        (out * projection.to(out.dtype)).sum().backward()
    found = {
        name: bool(p.grad is not None and bool(p.grad.abs().sum() > 0))
        for name, p in model.named_parameters()
        if p.dim() == 2 and p.requires_grad and id(p) not in embedded
    }
    model.zero_grad(set_to_none=True)
    return found


def widened(module, extra: int):
    """`module` with a forward hook that appends `extra` features to its output (the first
    `extra` repeated): its own forward runs unchanged, and only a shape measured on its output
    shows the change."""
    import torch

    module.register_forward_hook(lambda m, i, out: torch.cat([out, out[..., :extra]], dim=-1))
    return module


def perturbed(model, seed: int = 0):
    """`model` itself, every floating parameter moved by a little noise (std 0.05): a model
    whose initialisation hides a dependence (a gate or an output head initialised to zero)
    shows it, and a structure that ignores something still ignores it."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.is_floating_point():
                noise = torch.randn(parameter.shape, generator=generator)
                parameter.add_(0.05 * noise.to(parameter.dtype))
    return model


def training_batches(function, model, args, kwargs):
    """[function(model, *args, **kwargs), sizes]: the batch size (first axis of the first input)
    of every training-mode call of the first of `model`'s modules the function called (the
    model itself, or its first submodule when the function calls model.forward or a helper
    method): how a training loop batches its data. A global forward pre-hook sees every call;
    the function is handed the model itself, not a wrapper."""
    import torch.nn as nn
    from torch.nn.modules.module import register_module_forward_pre_hook

    ours = {id(m) for m in nn.Module.modules(model)}
    entry: list[int] = []
    sizes: list[int] = []

    def record(module, inputs):
        if id(module) not in ours:
            return
        entry[:] = entry or [id(module)]
        if id(module) == entry[0] and bool(object.__getattribute__(module, "training")):
            sizes.append(_batch_rows(inputs))

    handle = register_module_forward_pre_hook(record)
    try:
        result = function(model, *args, **dict(kwargs))
    finally:
        handle.remove()
    return [result, list(sizes)]


def without_torch(function, *args, **kwargs):
    """Call `function` with PyTorch unimportable (`import torch`, however spelled, fails):
    whether a "NumPy only" function really needs no torch."""
    import sys

    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    try:
        for name in saved:
            sys.modules[name] = None  # type: ignore[assignment]  # None: "import fails"
        return function(*args, **kwargs)
    finally:
        sys.modules.update(saved)


def uniform_attention_class():
    """A stand-in for a notebook's MultiHeadAttention (same constructor and forward contract)
    whose attention weights are all 1/L: a function built on the notebook's class must then
    return exactly those weights."""
    import torch
    import torch.nn as nn

    class UniformAttention(nn.Module):
        def __init__(self, d_model, num_heads, *args, **kwargs):
            super().__init__()
            self.d_model, self.num_heads = d_model, num_heads
            self.head_dim = d_model // num_heads
            for name in ("W_q", "W_k", "W_v", "W_o"):
                setattr(self, name, nn.Linear(d_model, d_model))

        def forward(self, x, mask=None, return_attention=False):
            length = x.shape[-2]
            shape = (*x.shape[:-2], self.num_heads, length, length)
            weights = torch.full(shape, 1.0 / length, dtype=x.dtype)
            return (x, weights) if return_attention else x

    return UniformAttention


def inputs_after(function, args, kwargs):
    """[function(*args, **kwargs), args]: the arguments as they are after the call, for a
    contract that says a function leaves its inputs as they were."""
    result = function(*args, **kwargs)
    return [result, list(args)]


def forward_modes(function, model, *args):
    """[function(model, *args), {"calls", "training", "with_gradients"}]: how many calls of
    `model` or of one of its submodules the function made, how many of them in training mode,
    and how many with gradients on (`torch.is_grad_enabled()`, False under torch.no_grad() and
    torch.inference_mode()): whether a function that should evaluate "in eval mode, without
    gradients" does; and `rows_evaluated`, the batch rows that went, in eval mode without
    gradients, into the first module class called (the model, or its first submodule when the
    function calls model.forward). A global forward pre-hook sees every call, however the
    module is called;
    a module that holds parameters of its own but is not one of `model`'s (a copy of the model,
    or one rebuilt from its state_dict) counts too."""
    import torch
    import torch.nn as nn
    from torch.nn.modules.module import register_module_forward_pre_hook

    ours = {id(m) for m in nn.Module.modules(model)}
    counts = {"calls": 0, "training": 0, "with_gradients": 0, "rows_evaluated": 0}
    entry: list[type] = []  # the class of the first module called: the way into the model

    def counted(module) -> bool:
        if id(module) in ours:
            return True
        own = dict.values(object.__getattribute__(module, "_parameters"))
        return any(p is not None for p in own)

    def record(module, inputs):
        if counted(module):
            training = bool(object.__getattribute__(module, "training"))
            counts["calls"] += 1
            counts["training"] += training
            counts["with_gradients"] += torch.is_grad_enabled()
            entry[:] = entry or [type(module)]
            if type(module) is entry[0] and not training and not torch.is_grad_enabled():
                counts["rows_evaluated"] += _batch_rows(inputs)

    handle = register_module_forward_pre_hook(record)
    try:
        result = function(model, *args)
    finally:
        handle.remove()
    return [result, counts]


PROBES["forward_modes"] = forward_modes
PROBES["inputs_after"] = inputs_after
PROBES["uniform_attention_class"] = uniform_attention_class
PROBES["batch_recorder"] = batch_recorder
PROBES["without_torch"] = without_torch
PROBES["gradients"] = gradients
PROBES["perturbed"] = perturbed
PROBES["training_batches"] = training_batches
PROBES["widened"] = widened
PROBES["weights_reaching_the_output"] = weights_reaching_the_output
PROBES["positions_through"] = positions_through


def runs_through(model, path, *args) -> int:
    """How many token positions went through `model`'s submodule `path` during model(*args):
    whether forward really uses that submodule (0 when it never runs)."""
    return positions_through(lambda module, *inputs: module(*inputs), model, path, *args)[1]


PROBES["runs_through"] = runs_through


def stand_in(kind, name, number):
    """The proxy for the grader's stand-in `number`: the contract's own version of a function or
    class, which the grader swaps into the notebook while the checks of what is built on it run
    (`authoring.upstream.on_the_contracts`). Only the proxy is made here (remote.py, the same for
    every exercise); the contract's code runs in the grader, never in this process."""
    import remote

    return remote.make(kind, name, number)


PROBES["stand_in"] = stand_in
