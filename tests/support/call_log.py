"""Every call a grading makes to the notebook, with the shapes of its arguments: does each
function and method of the contract get called more than once, with other calls between, on
different shapes (the second input class of the validity issue: state kept between calls shows
only then)?"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autograder.grading.handle import Handle
from autograder.grading.submission import Submission

SETUP = {"eval", "train", "load_state_dict", "state_dict", "requires_grad_", "parameters"}


def signature(value: Any) -> object:
    """What tells two inputs apart for this purpose: shapes of arrays, lengths of sequences."""
    if isinstance(value, torch.Tensor | np.ndarray):
        return ("array", tuple(value.shape))
    if isinstance(value, Handle):
        return ("object", value.name)
    if isinstance(value, list | tuple):
        return (type(value).__name__, len(value), tuple(signature(v) for v in value[:3]))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, signature(v)) for k, v in value.items())))
    return ("value", repr(value)[:40])


@dataclass
class CallLog:
    """name -> [(position in the grading, instance or None, signature of the arguments)]"""

    calls: dict[str, list[tuple[int, int | None, object]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    count: int = 0

    def record(self, target: dict, method: str | None, args: tuple, kwargs: dict, owner) -> None:
        self.count += 1
        if "$global" in target:
            name, instance = str(target["$global"]), None
        else:
            name = f"{str(owner or '?').rsplit('.', 1)[-1]}.{method or 'forward'}"
            instance = int(target["$handle"])
        if name.rsplit(".", 1)[-1] in SETUP:
            return
        arguments = (tuple(signature(a) for a in args), signature(dict(kwargs)))
        self.calls[name].append((self.count, instance, arguments))

    def interleaved(self, name: str) -> bool:
        """Called more than once, on different arguments (a method: on one object). The checks
        run one after another in one process, so calls of other checks and functions come
        between."""
        groups: dict[int | None, list] = defaultdict(list)
        for _, instance, arguments in self.calls.get(name, []):
            groups[instance].append(arguments)
        empty = ((), signature({}))  # a call without arguments (a constructor, len)
        return any(
            len(set(group)) >= 2 or (len(group) >= 2 and set(group) == {empty})
            for group in groups.values()
        )


@contextlib.contextmanager
def logged_calls() -> Iterator[CallLog]:
    """Calls of the notebook's functions and objects, and the calls probes make of a notebook
    function the checks hand them (`forward_modes`, `inputs_after`: a function read with
    `module_getattr`)."""
    log = CallLog()
    originals = (Submission._call, Submission.module_getattr, Submission.probe)
    names: dict[int, str] = {}  # handle id -> the global it was read from

    def call(self, target, method, args, kwargs, **options):  # type: ignore[no-untyped-def]
        log.record(target, method, args, kwargs, options.get("owner"))
        return originals[0](self, target, method, args, kwargs, **options)

    def module_getattr(self, name):  # type: ignore[no-untyped-def]
        value = originals[1](self, name)
        if isinstance(value, Handle):
            names[value.id] = name
        return value

    def probe(self, name, *args, **options):  # type: ignore[no-untyped-def]
        if args and isinstance(args[0], Handle) and args[0].id in names:
            log.record({"$global": names[args[0].id]}, None, tuple(args[1:]), {}, None)
        return originals[2](self, name, *args, **options)  # options: main's probe timeout

    Submission._call, Submission.module_getattr, Submission.probe = (  # type: ignore[method-assign]
        call,
        module_getattr,
        probe,
    )
    try:
        yield log
    finally:
        Submission._call, Submission.module_getattr, Submission.probe = originals  # type: ignore[method-assign]
