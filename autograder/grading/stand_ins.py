"""Stand-ins run by the grader: the parent's side of `sandbox/inside/remote.py`.

"One fault, charged once" swaps the contract's own version of a notebook function or class in
while the checks of what is built on it run (`authoring.upstream.on_the_contracts`). That
version is the exercise's reference, and its code stays here: the child gets a proxy made by
its runtime, whose calls arrive as callbacks (plain data: JSON and `.npy`) that `StandIns.serve`
answers by running the reference here. An object of the notebook handed to a stand-in (the
notebook's KVCache, say) stays in the child: the stand-in uses it through a `NotebookObject`,
whose every use is a request to the child. A stand-in nn.Module is built here on the `meta`
device (no memory), and its layers (nn.Linear, nn.Embedding, ...) are made in the child: the
forward pass runs here and calls each layer in the child, so hooks, weights and state_dict are
the child's.

Everything a callback sends, and what a stand-in may compute and keep, is bounded
(`grading/stand_in_limits.py`), so a notebook cannot make the grader compute or allocate without
end; a stand-in's errors go back to the child as one line of text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

from autograder.core.errors import GradedOutcome, StudentError
from autograder.grading.handle import Handle, Owner
from autograder.grading.stand_in_limits import (
    RETAINED_BYTES,
    Allocations,
    CallbackRefused,
    check_call,
    check_value,
    retained_bytes,
)
from autograder.sandbox.inside import wire

MAX_CALLBACKS = 20_000  # per submission
MAX_BYTES = 64 << 20  # blobs of one callback
MAX_MESSAGE = 200  # characters of an error's message sent back to the child

# The layers a stand-in module may hold, and what the child needs to make each (remote.LEAVES).
LEAVES: dict[type, Callable[[Any], list]] = {
    nn.Linear: lambda m: [m.in_features, m.out_features, m.bias is not None],
    nn.Embedding: lambda m: [m.num_embeddings, m.embedding_dim],
    nn.LayerNorm: lambda m: [list(m.normalized_shape), m.eps, m.elementwise_affine],
    nn.Dropout: lambda m: [m.p],
}


def kind_of(stand_in: Any) -> str:
    """How the child stands in for `stand_in`: "module", "class" or "function"."""
    if inspect.isclass(stand_in):
        return "module" if issubclass(stand_in, nn.Module) else "class"
    if callable(stand_in):
        return "function"
    raise TypeError(f"{stand_in!r} cannot stand in for a notebook name")


class NotebookObject:
    """An object of the notebook, used by a stand-in: attributes, calls and len() are requests
    to the child, whose answers come back as plain data (or as other notebook objects)."""

    def __init__(self, handle: Handle):
        object.__setattr__(self, "_handle", handle)

    def __agw_tag__(self) -> dict:
        return self._handle.__agw_tag__()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return adopt(self._handle.getattr(name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return adopt(self._handle(*args, **kwargs))

    def __len__(self) -> int:
        length = self._handle.call("__len__")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise TypeError("len() of an object of the notebook is not a non-negative int")
        return length


def adopt(value: Any) -> Any:
    """A value from the child as stand-in code uses it (handles become NotebookObjects),
    within the bounds of what a callback may send (`stand_in_limits`)."""
    if isinstance(value, Handle):
        return NotebookObject(value)
    check_value(value, (list,))
    if isinstance(value, list):
        return [adopt(item) for item in value]
    if isinstance(value, tuple):
        return tuple(adopt(item) for item in value)
    return value


@dataclass
class Shadow:
    """The grader's instance behind a proxy in the child."""

    value: Any
    stand_in: int  # the number of the stand-in that made it
    owner: Handle | None = None  # the child's proxy module, during its forward pass


class RemoteLayer:
    """A layer of a stand-in module as its forward pass here calls it: in the child."""

    def __init__(self, shadow: Shadow, name: str):
        self.shadow, self.name = shadow, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        owner = self.shadow.owner
        if owner is None:
            raise RuntimeError(f"the stand-in's layer {self.name} is called outside its forward")
        return adopt(owner.call("_agw_child", self.name, *args, **kwargs))


@dataclass
class StandIn:
    name: str
    value: Any


@dataclass
class StandIns:
    """The stand-ins swapped into one submission, and the objects they made."""

    owner: Owner
    _stand_ins: dict[int, StandIn] = field(default_factory=dict)
    _shadows: dict[int, Shadow] = field(default_factory=dict)
    _sid_of: dict[int, int] = field(default_factory=dict)  # id(value) -> shadow id
    _next: int = 1
    calls: int = 0

    # -- swapping ---------------------------------------------------------------------------
    def swap_in(self, name: str, stand_in: Any) -> int:
        """Register `stand_in` for the notebook's `name`; its number, for the child's proxy."""
        number = self._take_number()
        self._stand_ins[number] = StandIn(name, stand_in)
        return number

    def active(self) -> bool:
        """Whether a stand-in is swapped in now."""
        return bool(self._stand_ins)

    def swap_out(self, number: int) -> None:
        """Forget a stand-in and everything it made (its proxies in the child stop working)."""
        self._stand_ins.pop(number, None)
        for sid in [sid for sid, shadow in self._shadows.items() if shadow.stand_in == number]:
            shadow = self._shadows.pop(sid)
            self._sid_of.pop(id(shadow.value), None)

    def _take_number(self) -> int:
        number, self._next = self._next, self._next + 1
        return number

    def tag(self, value: Any) -> dict:
        """Encoder fallback: a stand-in's object goes to the child as its proxy there."""
        sid = self._sid_of.get(id(value))
        if sid is None or self._shadows[sid].value is not value:
            raise wire.ProtocolError(f"cannot send a value of type {type(value).__name__}")
        return {"$shadow": sid}

    # -- serving ----------------------------------------------------------------------------
    def serve(self, frame: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        """The reply to one callback frame from the child."""
        try:
            with Allocations():
                value = self._dispatch(frame, blobs)
            self._keep_within_bounds()
            encoder = wire.Encoder(fallback=self.tag)
            data = encoder.encode(value)
        except StudentError as error:  # the notebook's own code raised, called from here
            return _error_reply(error.type, error.message), []
        except GradedOutcome:  # the child died or the budget is spent: the request fails
            raise
        except (CallbackRefused, wire.ProtocolError) as error:
            return _error_reply("RuntimeError", f"the contract's stand-in refused: {error}"), []
        except Exception as error:  # noqa: BLE001 - the stand-in's own error, on the child's input
            return _error_reply(type(error).__name__, str(error)), []
        return {"reply": True, "ok": True, "value": data}, encoder.blobs

    def _keep_within_bounds(self) -> None:
        """Forget every object the stand-ins made once they keep more than the bound (the
        child's proxies stop working), and refuse the call that went past it."""
        values = [shadow.value for shadow in self._shadows.values()]
        if retained_bytes(values) > RETAINED_BYTES:
            self._shadows.clear()
            self._sid_of.clear()
            raise CallbackRefused(f"its objects keep over {RETAINED_BYTES >> 20} MiB")

    def _dispatch(self, frame: dict, blobs: list[bytes]) -> Any:
        self.calls += 1
        if self.calls > MAX_CALLBACKS:
            raise CallbackRefused(f"more than {MAX_CALLBACKS} calls")
        if sum(len(blob) for blob in blobs) > MAX_BYTES:
            raise CallbackRefused(f"more than {MAX_BYTES >> 20} MiB in one call")
        kind, target = frame.get("callback"), frame.get("target")
        if not isinstance(target, int):
            raise CallbackRefused("no target")
        args = self._decode(frame.get("args", []), blobs)
        kwargs = self._decode(frame.get("kwargs", {"$dict": {}}), blobs)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise CallbackRefused("malformed arguments")
        check_call(args, kwargs, (NotebookObject, *self._kinds()))
        if kind in ("call", "construct"):
            stand_in = self._stand_in(target)
            if kind == "call" and kind_of(stand_in.value) == "function":
                with torch.no_grad():
                    return stand_in.value(*args, **kwargs)
            if kind == "construct" and kind_of(stand_in.value) != "function":
                return self._construct(target, stand_in.value, args, kwargs)
            raise CallbackRefused(f"a {kind} of {stand_in.name}")
        shadow = self._shadow(target)
        name = frame.get("name")
        if kind == "forward":
            return self._forward(shadow, frame, blobs, args, kwargs)
        if not isinstance(name, str) or not (name.isidentifier() or name == "__len__"):
            raise CallbackRefused("a bad attribute name")
        if name.startswith("_") and name != "__len__":
            raise CallbackRefused(f"a private attribute ({name})")
        if kind == "method":
            with torch.no_grad():
                return getattr(shadow.value, name)(*args, **kwargs)
        if kind == "getattr":
            found = getattr(shadow.value, name)
            return {"$method": True} if callable(found) else found
        raise CallbackRefused(f"unknown callback {kind!r}")  # setattr too: no contract sets one

    def _kinds(self) -> tuple[type, ...]:
        """The classes of the stand-ins' objects (they may be passed back as arguments)."""
        return tuple({type(shadow.value) for shadow in self._shadows.values()})

    def _decode(self, data: Any, blobs: list[bytes]) -> Any:
        generation = self.owner.generation
        decoder = wire.Decoder(
            blobs,
            handle=lambda tag: NotebookObject(Handle(self.owner, tag, generation)),
            tensor=lambda array, dtype, _: wire.to_tensor(array, dtype),
            shadow=lambda tag: self._shadow(tag.get("$shadow")).value,
        )
        try:
            return decoder.decode(data)
        except (RecursionError, ValueError, TypeError) as error:
            raise CallbackRefused(f"malformed data ({type(error).__name__})") from None

    def _stand_in(self, number: Any) -> StandIn:
        found = self._stand_ins.get(number) if isinstance(number, int) else None
        if found is None:
            raise CallbackRefused("it is no longer swapped in")
        return found

    def _shadow(self, sid: Any) -> Shadow:
        found = self._shadows.get(sid) if isinstance(sid, int) else None
        if found is None:
            raise CallbackRefused("its object is no longer available")
        return found

    # -- objects and modules ----------------------------------------------------------------
    def _construct(self, number: int, cls: type, args: list, kwargs: dict) -> dict:
        value: Any
        if issubclass(cls, nn.Module):
            with torch.device("meta"), torch.no_grad():
                value = cls(*args, **kwargs)
        else:
            value = cls(*args, **kwargs)
        return self._describe(number, value)

    def _describe(self, number: int, value: Any) -> dict:
        """Register `value` (and, for a module, the stand-in modules inside it) and say how the
        child builds its proxy: class name, plain attributes, layers in their order."""
        sid = self._take_number()
        shadow = Shadow(value, number)
        self._shadows[sid] = shadow
        self._sid_of[id(value)] = sid
        described: dict[str, Any] = {"shadow": sid, "class": type(value).__name__}
        if not isinstance(value, nn.Module):
            return described
        own = [*value._parameters.values(), *value._buffers.values()]
        if any(item is not None for item in own):
            raise TypeError(f"{type(value).__name__}: a stand-in keeps its weights in its layers")
        described["attributes"] = {
            key: item
            for key, item in vars(value).items()
            if not key.startswith("_")
            and key != "training"
            and (item is None or isinstance(item, bool | int | float | str))
        }
        children = []
        for name, child in list(value._modules.items()):
            if child is None:
                continue
            if type(child) in LEAVES:
                spec: dict[str, Any] = {
                    "leaf": type(child).__name__,
                    "config": LEAVES[type(child)](child),
                }
            elif isinstance(child, nn.Module) and not type(child).__module__.startswith("torch"):
                spec = {"remote": self._describe(number, child)}
            else:
                raise TypeError(f"a stand-in cannot hold a {type(child).__name__}")
            children.append([name, spec])
            layers: dict[str, Any] = value._modules
            layers[name] = RemoteLayer(shadow, name)  # the layer is the child's
        described["children"] = children
        return described

    def _forward(
        self, shadow: Shadow, frame: dict, blobs: list[bytes], args: list, kwargs: dict
    ) -> Any:
        module = shadow.value
        if not isinstance(module, nn.Module):
            raise CallbackRefused("a forward of an object that is not a module")
        owner = self._decode(frame.get("owner"), blobs)
        if not isinstance(owner, NotebookObject):
            raise CallbackRefused("a forward without its module")
        previous, shadow.owner = shadow.owner, owner._handle
        module.training = bool(frame.get("training"))
        try:
            with torch.no_grad():
                return module.forward(*args, **kwargs)
        finally:
            shadow.owner = previous


def _error_reply(kind: str, message: str) -> dict:
    line = " ".join(str(message).split())[:MAX_MESSAGE]
    return {"reply": True, "ok": False, "error": {"type": str(kind)[:60], "message": line}}
