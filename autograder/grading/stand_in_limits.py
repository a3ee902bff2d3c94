"""What a notebook can make the grader's stand-ins do: bounded (`grading/stand_ins.py`).

A stand-in is the reference, run in the grader on inputs the notebook chose. Its cost there must
not depend on the notebook beyond fixed bounds, since the grader's process has no sandbox limits:
- arguments are plain data of the kinds the contract's functions take (numbers, None, tensors and
  arrays of bounded size, the notebook's objects, the stand-ins' own objects); no strings, lists
  or dicts (reference code could multiply them into any size);
- every tensor the stand-in computes is paid for before it is made: each PyTorch operation is
  first run on the `meta` device (shapes only) and refused when what it would allocate, added to
  what the call has allocated so far, is over `CALL_BYTES`;
- what the stand-ins' objects keep between calls (a KVCache's tensors) is at most
  `RETAINED_BYTES` in all.
A call past a bound raises `CallbackRefused`, which the child sees as a RuntimeError.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

MAX_ELEMENTS = 1 << 20  # of one tensor or array a callback sends (or the child returns to it)
MAX_AXIS = 1024  # length of any of its axes
MAX_INT = 1 << 62  # magnitude of an integer argument
CALL_BYTES = 256 << 20  # what one callback's PyTorch operations may allocate in all
RETAINED_BYTES = 128 << 20  # what the stand-ins' objects of one submission may keep


class CallbackRefused(Exception):
    """A callback that is not served: unknown target, an argument of the wrong kind or size,
    too many calls, or more memory than the bounds allow."""


def check_value(value: Any, allowed: tuple[type, ...] = (), depth: int = 0) -> None:
    """Refuse what a stand-in must not be given (or take back from the child): strings, lists
    and dicts of any size, integers past `MAX_INT`, tensors and arrays past the size bounds.
    `allowed`: further types that may pass (the notebook's and the stand-ins' objects)."""
    if depth > 8:
        raise CallbackRefused("nested too deeply")
    if value is None or isinstance(value, bool | float) or isinstance(value, allowed):
        return
    if isinstance(value, numbers.Integral):
        if abs(int(value)) > MAX_INT:
            raise CallbackRefused(f"an integer of {len(str(value))} digits")
        return
    if isinstance(value, torch.dtype):
        return
    if isinstance(value, torch.Tensor | np.ndarray):
        shape = tuple(value.shape)
        if int(np.prod(shape, dtype=np.int64)) > MAX_ELEMENTS or any(n > MAX_AXIS for n in shape):
            raise CallbackRefused(
                f"a tensor of shape {shape} (at most {MAX_ELEMENTS} elements, {MAX_AXIS} an axis)"
            )
        return
    if isinstance(value, tuple) and len(value) <= 16:
        for item in value:
            check_value(item, allowed, depth + 1)
        return
    raise CallbackRefused(f"an argument of type {type(value).__name__}")


def check_call(args: list, kwargs: dict, allowed: tuple[type, ...]) -> None:
    if len(args) > 16 or len(kwargs) > 16:
        raise CallbackRefused("too many arguments")
    for value in (*args, *kwargs.values()):
        check_value(value, allowed)


def _nbytes(found: Any) -> int:
    leaves, _ = tree_flatten(found)
    return sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))


def _meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value


class Allocations(TorchDispatchMode):
    """Counts what each PyTorch operation will allocate before it runs (on the meta device),
    and refuses an operation past the call's budget. An operation without a meta kernel (data
    dependent: nonzero, item) makes at most what its inputs hold."""

    def __init__(self, budget: int = CALL_BYTES):
        super().__init__()
        self.left = budget

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        key = _signature(func, args, kwargs)
        size = _SIZES.get(key) if key is not None else None
        if size is None:
            size = _allocated(func, args, kwargs)
            if key is not None:
                if len(_SIZES) >= MAX_SIZES:
                    _SIZES.clear()
                _SIZES[key] = size
        if size > self.left:
            raise CallbackRefused(
                f"{func} would allocate {size >> 20} MiB, over the {CALL_BYTES >> 20} MiB of a call"
            )
        self.left -= size
        return func(*args, **kwargs)


def _allocated(func, args: tuple, kwargs: dict) -> int:
    """What `func` will allocate on these arguments, from a run on the meta device."""
    try:
        return _nbytes(func(*tree_map(_meta, args), **tree_map(_meta, kwargs)))
    except Exception:  # noqa: BLE001 - no meta kernel: bounded by its inputs
        return _nbytes((args, kwargs))


# What an operation allocates depends only on its arguments' metadata and plain values: the
# sizes are kept per (operation, that signature), so a stand-in that repeats the same shapes
# (a KV cache's forward, token after token) runs each on the meta device once per process. The
# size is still charged to every call's budget. Bounded: emptied when full.
_SIZES: dict[tuple, int] = {}
MAX_SIZES = 4096
_PLAIN = (int, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


def _signature(func, args: tuple, kwargs: dict) -> tuple | None:
    """(func, the arguments' structure, tensors as metadata, plain values with their type), or
    None where an argument is of another kind (then the operation runs on meta every time)."""
    try:
        return (func, _shape_of(args, 0), _shape_of(tuple(sorted(kwargs.items())), 0))
    except _Unkeyed:
        return None


class _Unkeyed(Exception):
    pass


def _shape_of(value: Any, depth: int) -> Any:
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter) or value.is_sparse:
            raise _Unkeyed
        meta = (tuple(value.shape), value.stride(), value.storage_offset(), value.dtype)
        return ("tensor", *meta, value.device, value.layout)
    if type(value) is float:  # -0.0 and 0.0, the NaNs: told apart by their bits
        return (float, value.hex())
    if type(value) in _PLAIN:
        return (type(value), value)
    if depth < 8 and type(value) in (tuple, list, torch.Size):
        return (type(value), tuple(_shape_of(item, depth + 1) for item in value))
    raise _Unkeyed


def retained_bytes(values: list[Any]) -> int:
    """The tensors that plain objects (not modules) keep in their attributes, one level deep."""
    total = 0
    for value in values:
        if isinstance(value, torch.nn.Module):
            continue
        for item in vars(value).values() if hasattr(value, "__dict__") else ():
            if isinstance(item, torch.Tensor):
                total += item.numel() * item.element_size()
            elif isinstance(item, list | tuple):
                total += _nbytes(list(item))
    return total
