"""Calls made fresh: was something kept between calls?

When a check fails without naming a mistake, the plugin runs it once more with `FreshCalls`
active on the submission (`grading/diagnoses.py`). Then every call the check makes of a global
of the notebook (a function, a class) starts from a fresh run of the notebook's cells: the
child's `__main__` is replaced and the program run again in it, while the objects the grader
holds stay (a model handed to a training function, a cache, an nn.Module of torch). A forward
pass of a module the check built is made on the module built again the same way (its class
called with the same plain arguments, its weights loaded, put in eval mode). Nothing an earlier
call left behind (a module-level variable, a mutable default argument, a class attribute, a
cache, an attribute a forward pass set on its module) reaches the call. If the check passes
that way, its failure came from something kept between calls, which its message then says.

A module is not built again when it did not come from a call with plain-data arguments, or was
handed to a call that may have changed it (a model given to a training function): a forward
pass of it runs as it is. Nothing is reset while a check has the contract's stand-ins swapped
in (`authoring.upstream`): the swap lives in the namespace a reset would replace. Either way
the rerun can only fail where the first run failed, and no claim is made.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from autograder.grading.handle import Handle

# methods that set an object up: replayed when it is built again
SETUP = frozenset(
    {"load_state_dict", "eval", "train", "to", "float", "double", "requires_grad_", "zero_grad"}
)
# methods that only read an object: they neither run fresh nor spoil its recipe
READONLY = frozenset(
    {
        "state_dict",
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "__len__",
        "__repr__",
        "extra_repr",
    }
)
FORWARD = frozenset({None, "forward"})
MAX_RESETS = 80  # per rerun: a check that makes more calls than this is not diagnosed
MAX_PROGRAM_SECONDS = 2.0  # a program slower to run than this is not run again and again


class TooCostly(Exception):
    """The rerun would cost more than a diagnosis is worth: it is abandoned (no claim)."""


@dataclass(frozen=True)
class Step:
    target: dict  # {"$global": name} for the first step; a method's steps use the object itself
    method: str | None
    args: tuple
    kwargs: dict


@dataclass(frozen=True)
class Call:
    """A call a check made, and what came back (kept for the diagnosis of a failed check)."""

    target: dict
    method: str | None
    args: tuple
    kwargs: dict
    value: Any


def handles_in(value: Any) -> Iterator[Handle]:
    """The handles in a call's arguments or value (top level and inside lists, tuples, dicts)."""
    if isinstance(value, Handle):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from handles_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from handles_in(item)


@dataclass
class FreshCalls:
    submission: Any  # the Submission it belongs to (which imports this module)
    recipes: dict[int, list[Step]] = field(default_factory=dict)  # child id -> how it was made
    held: dict[int, list[Handle]] = field(default_factory=dict)  # child id -> handles to it
    resets: int = 0
    replaying: bool = False

    # -- before and after each call of the check (Submission._call) ---------------------------
    def before(self, target: dict, method: str | None, args: tuple, kwargs: dict) -> dict:
        """Start the call fresh where it can be; returns its target tag (a module built again
        has another)."""
        if self.replaying or self.submission.stand_ins.active():
            return target
        if "$global" in target:
            self._reset()
            return target
        own = self._handle_of(target)
        if own is None or method not in FORWARD or own.id not in self.recipes:
            return target
        self._reset()
        self._rebuild(own)
        return own.__agw_tag__()

    def after(
        self, target: dict, method: str | None, args: tuple, kwargs: dict, value: Any
    ) -> None:
        """Note how objects came to be (their recipes) and which may have changed."""
        if self.replaying:
            return
        passed = [*handles_in(list(args)), *handles_in(dict(kwargs))]
        for handle in handles_in(value):
            self.held.setdefault(handle.id, []).append(handle)
        if "$global" in target and isinstance(value, Handle) and not passed:
            self.recipes[value.id] = [Step(target, None, tuple(args), dict(kwargs))]
        elif "$handle" in target:
            own = int(target["$handle"])
            if method in SETUP and own in self.recipes and not passed:
                self.recipes[own].append(Step(target, method, tuple(args), dict(kwargs)))
            elif method not in SETUP | READONLY | FORWARD:
                self.recipes.pop(own, None)
        for handle in passed:  # handed to a call, it may have been changed there
            self.recipes.pop(handle.id, None)

    # -- helpers -----------------------------------------------------------------------------
    def _handle_of(self, target: dict) -> Handle | None:
        held = self.held.get(int(target.get("$handle", 0)), [])
        return held[0] if held else None

    def _reset(self) -> None:
        """A fresh `__main__` with the program run again; the objects the grader holds stay."""
        self.resets += 1
        if self.resets > MAX_RESETS:
            raise TooCostly(f"more than {MAX_RESETS} calls")
        submission = self.submission
        sandbox = submission._ensure()
        started = time.monotonic()
        sandbox.request({"op": "reset", "keep_objects": True}, timeout=submission._timeout(10.0))
        events = list(submission.events)
        submission._run_program()
        submission._block_stuck()
        submission.events[:] = events  # the program's notes were said the first time
        if time.monotonic() - started > MAX_PROGRAM_SECONDS:
            raise TooCostly("the notebook's cells take too long to run again")

    def _rebuild(self, handle: Handle) -> None:
        """Build the object again by its recipe and point every handle to it at the new one."""
        steps = self.recipes.pop(handle.id)
        old = handle.id
        self.replaying = True
        try:
            first = steps[0]
            name = str(first.target["$global"])
            rebuilt = self.submission.call(name, *first.args, **first.kwargs)
            if not isinstance(rebuilt, Handle):
                raise TooCostly(f"{name} made no object when called again")
            for step in steps[1:]:
                rebuilt.call(str(step.method), *step.args, **step.kwargs)
        finally:
            self.replaying = False
        redirected = self.held.pop(old, [handle])
        for held in redirected:
            held.id, held.generation = rebuilt.id, rebuilt.generation
        self.held.setdefault(rebuilt.id, []).extend(redirected)
        self.recipes[rebuilt.id] = [Step(first.target, None, first.args, first.kwargs)] + [
            Step({"$handle": rebuilt.id}, s.method, s.args, s.kwargs) for s in steps[1:]
        ]
