"""Probes of nn.Modules: what a module holds, and what happened to it while a notebook's
function ran (calls, modes, batches, gradients).

They reach torch only through `trusted.kit()` (taken before any student code ran) and read a
module's state from its own attribute dict, so a notebook that replaces torch functions,
nn.Module methods or builtins cannot change what they report; their hooks count only calls made
by nn.Module's own dispatcher (`trusted.genuine`), so a module or function that goes around the
dispatcher leaves no evidence, and a check that needs evidence fails.
"""

from typing import Any

if __package__:  # the grader's own tests import the runtime as a package
    from . import trusted
else:  # in the child, the runtime's files are top-level modules
    import trusted  # type: ignore[no-redef]

globals()["__builtins__"] = trusted.BUILTINS  # builtins as they were before student code ran
Kit = trusted.Kit


def _real_class(k: Kit, cls) -> tuple | None:
    """(class, dotted name, forward) of the most derived PyTorch nn.Module class in `cls`'s MRO,
    by identity with the classes torch.nn defined before student code ran: a class that only
    names itself `torch.nn....TransformerEncoder`, or is put in torch's module, is not one."""
    real = {id(entry[0]): entry for entry in k.real_classes}
    for base in type.__dict__["__mro__"].__get__(cls):
        if base is not k.Module and id(base) in real:
            return real[id(base)]
    return None


def _real_class_name(k: Kit, cls) -> str:
    """The dotted name of `_real_class`, else the notebook class's own name marked as such."""
    found = _real_class(k, cls)
    return found[1] if found else f"notebook.{type.__dict__['__qualname__'].__get__(cls)}"


def _runs_as(k: Kit, module) -> str | None:
    """The dotted name of the PyTorch class whose own forward this module runs: its real class
    (`_real_class`), where neither a class in its MRO nor the module itself replaced that
    forward, and torch's class still holds it; None otherwise (a subclass, or a class whose
    MRO names the real one, with a forward of its own is not what it names)."""
    found = _real_class(k, type(module))
    if found is None or "forward" in trusted.own(k, module):
        return None
    cls, name, forward = found
    ok = trusted.resolved(type(module), "forward") is forward is trusted.resolved(cls, "forward")
    return name if ok else None


def module_summary(module) -> dict:
    """Class, parameter counts and `batch_first` of an nn.Module and its named submodules."""
    k = trusted.kit()
    if not isinstance(module, k.Module):
        raise TypeError(f"expected an nn.Module, got {type(module).__name__}")
    submodules, parameters = [], {}
    names: dict[int, list[str]] = {}
    for name, child in trusted.named_modules(k, module):
        state = trusted.own(k, child)
        submodules.append(
            {
                "name": name,
                "class": _real_class_name(k, type(child)),
                "runs": _runs_as(k, child),
                "batch_first": _plain(dict.get(state, "batch_first")),
                "num_layers": _plain(dict.get(state, "num_layers")),
            }
        )
        held = dict.get(state, "_parameters")
        for key, parameter in list(dict.items(held)) if isinstance(held, dict) else []:
            if isinstance(parameter, k.Tensor):
                parameters[id(parameter)] = parameter
                names.setdefault(id(parameter), []).append(f"{name}.{key}" if name else key)
    counts = [
        (trusted.call(k, p, "numel"), trusted.get(k, p, "requires_grad"))
        for p in parameters.values()
    ]
    return {
        # parameters held under several names (tied weights: the same Parameter object)
        "shared_parameters": [sorted(held) for held in names.values() if len(held) > 1],
        "submodules": submodules,
        "trainable_parameters": sum(int(n) for n, trainable in counts if trainable is True),
        "parameters": sum(int(n) for n, _ in counts),
        "training": trusted.flag(k, module, "training", True),
    }


def _plain(value):
    """A bool or an int as itself (not a subclass), anything else as None."""
    return value if type(value) in (bool, int) else None


def batch_recorder(model):
    """`model` wrapped in an nn.Module that records the rows of every input it sees in training
    mode (as lists of ints), in `seen`: how a training loop batches and shuffles its data."""
    k = trusted.kit()

    class BatchRecorder(k.Module):  # type: ignore[name-defined]
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.seen = []

        def forward(self, x, *args, **kwargs):
            if trusted.flag(k, self, "training", True) and isinstance(x, k.Tensor):
                rows = trusted.batch_rows(k, (x,))
                flat = trusted.call(k, trusted.call(k, x, "detach"), "reshape", rows, -1)
                list.extend(trusted.own(k, self)["seen"], trusted.call(k, flat, "tolist"))
            return self.inner(x, *args, **kwargs)

    return BatchRecorder(model)


def _inputs_through(k: Kit, function, model, path: str, args: tuple) -> tuple[Any, list]:
    """(function(model, *args), the first input of every call of `model`'s submodule `path`
    made by nn.Module's dispatcher while the function ran)."""
    target = trusted.submodule(k, model, path)
    seen: list = []

    def record(module, inputs):
        if trusted.genuine(k) and module is target:
            list.append(seen, inputs[0] if isinstance(inputs, tuple) and inputs else None)

    with trusted.Watching(k, before=record):
        result = function(model, *args)
    return result, seen


def positions_through(function, model, path, *args):
    """[function(model, *args), n]: n is the number of token positions (per batch row: the
    second-to-last axis of each input) that went through `model`'s submodule `path` (a dotted
    name such as "attn.W_k") while the function ran, seen by a forward pre-hook."""
    k = trusted.kit()
    result, seen = _inputs_through(k, function, model, path, args)
    shapes = [tuple(trusted.get(k, x, "shape")) for x in seen if isinstance(x, k.Tensor)]
    return [result, sum(int(shape[-2]) for shape in shapes if len(shape) >= 2)]


def runs_through(model, path, *args) -> int:
    """How many token positions went through `model`'s submodule `path` during model(*args):
    whether forward really uses that submodule (0 when it never runs)."""
    return positions_through(lambda module, *inputs: module(*inputs), model, path, *args)[1]


def inputs_through(model, path, *args) -> dict:
    """What `model`'s submodule `path` received during model(*args): {"class", "runs": its
    class and the class whose forward it runs (as module_summary names them), "inputs": a copy
    of its first input at every call made by nn.Module's dispatcher}."""
    k = trusted.kit()
    _, seen = _inputs_through(k, lambda module, *xs: module(*xs), model, path, args)
    copies = [
        trusted.call(k, trusted.call(k, x, "detach"), "clone")
        for x in seen
        if isinstance(x, k.Tensor)
    ]
    target = trusted.submodule(k, model, path)
    kind = _real_class_name(k, type(target))
    return {"class": kind, "runs": _runs_as(k, target), "inputs": copies}


def gradients(module) -> dict:
    """Each parameter's .grad (None where there is none): for diagnosing a training loop."""
    k = trusted.kit()
    found = {}
    for name, parameter in trusted.named_parameters(k, module):
        grad = trusted.get(k, parameter, "grad")
        found[name] = None if grad is None else trusted.call(k, grad, "clone")
    return found


def weights_reaching_the_output(model, x) -> dict:
    """name -> whether the output depends on that weight matrix: every 2-D parameter outside
    an nn.Embedding (embedding rows of absent tokens get no gradient) gets a non-zero gradient
    from a random projection of model(x), computed by autograd's own engine (no .grad is
    touched). A layer that is built but whose output is thrown away gets none."""
    k = trusted.kit()
    embedded = {
        id(p)
        for _, child in trusted.named_modules(k, model)
        if isinstance(child, k.Embedding)
        for _, p in trusted.named_parameters(k, child)
    }
    weights = [
        (name, p)
        for name, p in trusted.named_parameters(k, model)
        if trusted.call(k, p, "dim") == 2
        and trusted.get(k, p, "requires_grad") is True
        and id(p) not in embedded
    ]
    with trusted.GradMode(k, True):
        out = model(x)
        if not isinstance(out, k.Tensor):
            raise TypeError(f"the model returned {type(out).__name__}, not a tensor")
        with k.no_torch_function():
            generator = k.Generator()
            generator.manual_seed(0)
            projection = k.functions.randn(tuple(trusted.get(k, out, "shape")), generator=generator)
            projection = trusted.call(k, projection, "to", trusted.get(k, out, "dtype"))
            total = k.functions.sum(k.functions.mul(out, projection))
            grads = k.engine.run_backward(
                (total,),
                (k.functions.ones_like(total),),
                False,
                False,
                tuple(p for _, p in weights),
                True,
                False,
            )
    return {
        name: grad is not None and trusted.call(k, k.functions.any(grad), "item") is True
        for (name, _), grad in zip(weights, grads, strict=True)
    }


def widened(module, extra: int):
    """`module` with a forward hook that appends `extra` features to its output (the first
    `extra` repeated): its own forward runs unchanged, and only a shape measured on its output
    shows the change."""
    k = trusted.kit()

    def widen(m, inputs, out):
        with k.no_torch_function():
            return k.functions.cat([out, k.functions.narrow(out, -1, 0, extra)], -1)

    trusted.add_hook(trusted.own(k, module)["_forward_hooks"], object(), widen)
    return module


def perturbed(model, seed: int = 0):
    """`model` itself, every floating parameter moved by a little noise (std 0.05): a model
    whose initialisation hides a dependence (a gate or an output head initialised to zero)
    shows it, and a structure that ignores something still ignores it."""
    k = trusted.kit()
    generator = k.Generator()
    generator.manual_seed(seed)
    with trusted.GradMode(k, False), k.no_torch_function():
        for _, parameter in trusted.named_parameters(k, model):
            if trusted.call(k, parameter, "is_floating_point"):
                shape = tuple(trusted.get(k, parameter, "shape"))
                noise = k.functions.randn(shape, generator=generator)
                noise = trusted.call(k, noise, "to", trusted.get(k, parameter, "dtype"))
                trusted.call(k, parameter, "add_", noise, alpha=0.05)
    return model


def training_batches(function, model, args, kwargs):
    """[function(model, *args, **kwargs), sizes]: the batch size (first axis of the first input)
    of every training-mode call of the first of `model`'s modules the function called (the
    model itself, or its first submodule when the function calls model.forward or a helper
    method): how a training loop batches its data. A global forward pre-hook sees every call
    made by nn.Module's dispatcher; the function is handed the model itself, not a wrapper."""
    k = trusted.kit()
    ours = {id(m) for _, m in trusted.named_modules(k, model)}
    entry: list[int] = []
    sizes: list[int] = []

    def record(module, inputs):
        if not trusted.genuine(k) or id(module) not in ours:
            return
        entry[:] = entry or [id(module)]
        if id(module) == entry[0] and trusted.flag(k, module, "training", True):
            sizes.append(trusted.batch_rows(k, inputs))

    with trusted.Watching(k, before=record):
        result = function(model, *args, **dict(kwargs))
    return [result, list(sizes)]


def forward_modes(function, model, *args):
    """[function(model, *args), {"calls", "training", "with_gradients", "rows_evaluated"}]: how
    many calls of `model` or of one of its submodules the function made, how many of them in
    training mode, and how many with gradients on (the grad mode when the call began, read
    from torch's C function, or an output that carries an autograd graph: a forward that
    switched gradients on itself); and `rows_evaluated`, the batch rows that went, in eval mode
    without gradients, into the first module class called (the model, or its first submodule
    when the function calls model.forward). Only calls made by nn.Module's dispatcher count,
    however the module is called; a module that holds parameters of its own but is not one of
    `model`'s (a copy of the model, or one rebuilt from its state_dict) counts too.
    `rows_without_gradients` is `rows_evaluated` in either mode."""
    k = trusted.kit()
    ours = {id(m) for _, m in trusted.named_modules(k, model)}
    counts = {"calls": 0, "training": 0, "with_gradients": 0}
    counts |= {"rows_evaluated": 0, "rows_without_gradients": 0}
    entry: list[type] = []  # the class of the first module called: the way into the model
    open_calls: list[list] = []  # [module id, gradients, rows, training] of calls under way

    def counted(module) -> bool:
        if id(module) in ours:
            return True
        own = dict.get(trusted.own(k, module), "_parameters")
        return isinstance(own, dict) and any(p is not None for p in dict.values(own))

    def before(module, inputs):
        if not trusted.genuine(k) or not counted(module):
            return
        training = trusted.flag(k, module, "training", True)
        gradients = bool(k.grad_enabled())
        counts["calls"] += 1
        counts["training"] += training
        counts["with_gradients"] += gradients
        entry[:] = entry or [type(module)]
        rows = trusted.batch_rows(k, inputs) if type(module) is entry[0] and not gradients else 0
        counts["rows_without_gradients"] += rows
        counts["rows_evaluated"] += 0 if training else rows
        open_calls.append([id(module), gradients, rows, training])

    def after(module, inputs, output):
        if not trusted.genuine(k) or not counted(module):
            return
        while open_calls and open_calls[-1][0] != id(module):
            open_calls.pop()  # a call that raised before its forward hooks ran
        if not open_calls:
            return
        _, gradients, rows, training = open_calls.pop()
        if not gradients and trusted.carries_a_graph(k, output):
            counts["with_gradients"] += 1
            counts["rows_without_gradients"] -= rows
            counts["rows_evaluated"] -= 0 if training else rows

    with trusted.Watching(k, before=before, after=after):
        result = function(model, *args)
    return [result, counts]


PROBES: dict[str, Any] = {
    "module_summary": module_summary,
    "batch_recorder": batch_recorder,
    "positions_through": positions_through,
    "runs_through": runs_through,
    "inputs_through": inputs_through,
    "gradients": gradients,
    "weights_reaching_the_output": weights_reaching_the_output,
    "widened": widened,
    "perturbed": perturbed,
    "training_batches": training_batches,
    "forward_modes": forward_modes,
}
