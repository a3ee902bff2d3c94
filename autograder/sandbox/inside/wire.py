"""The private channel between the grader (parent) and the sandbox child.

A frame is `magic, header length, header (JSON), blob count, (blob length, blob)*`. Values are
encoded as JSON with tagged objects: arrays and tensors travel as `.npy` blobs (written and read
with allow_pickle=False), anything else stays in the child behind a handle. Nothing is pickled.
A frame from the child with a `callback` key asks the grader to run a stand-in (remote.py); the
grader answers it with a `reply` frame.
"""

import io
import json
import struct
from collections.abc import Sequence

MAGIC = b"AGW1"
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class ProtocolError(Exception):
    """A frame or value that does not follow the protocol (or is over a limit)."""


def _read_exact(stream, count: int) -> bytes:
    chunks, remaining = [], count
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise EOFError("channel closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def write_frame(stream, header: dict, blobs: Sequence[bytes] = ()) -> None:
    data = json.dumps(header, allow_nan=True).encode()
    parts = [MAGIC, _U32.pack(len(data)), data, _U32.pack(len(blobs))]
    for blob in blobs:
        parts += [_U64.pack(len(blob)), blob]
    stream.write(b"".join(parts))
    stream.flush()


MAX_BLOBS = 4096
MAX_EQUAL_HASHES = 64  # dict keys of a reply that may share one hash (Decoder._items)


def read_frame(
    stream, max_bytes: int = 1 << 62, max_header: int = 1 << 62
) -> tuple[dict, list[bytes]]:
    """One frame from `stream`; ProtocolError if malformed, if its JSON header is larger than
    `max_header` or if the whole frame is larger than `max_bytes`."""
    if _read_exact(stream, 4) != MAGIC:
        raise ProtocolError("bad frame magic")
    (size,) = _U32.unpack(_read_exact(stream, 4))
    if size > min(max_bytes, max_header):
        raise ProtocolError(f"frame header of {size} bytes is over the limit")
    try:
        header = json.loads(_read_exact(stream, size))
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"frame header is not JSON: {type(error).__name__}") from None
    if not isinstance(header, dict):
        raise ProtocolError("frame header is not an object")
    (count,) = _U32.unpack(_read_exact(stream, 4))
    if count > MAX_BLOBS:
        raise ProtocolError(f"frame of {count} blobs is over the limit of {MAX_BLOBS}")
    blobs, total = [], size
    for _ in range(count):
        (length,) = _U64.unpack(_read_exact(stream, 8))
        total += length
        if total > max_bytes:
            raise ProtocolError(f"frame of more than {max_bytes} bytes")
        blobs.append(_read_exact(stream, length))
    return header, blobs


def array_to_npy(array) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def numeric_dtype(dtype) -> bool:
    """bool, integer, float or complex, plain (no fields, subarrays or objects), at most 16
    bytes an element: void, structured, string and object arrays never reach the parent's
    comparisons, where their size or repr can take gigabytes."""
    return (
        dtype.kind in "biufc"
        and dtype.fields is None
        and dtype.subdtype is None
        and not dtype.hasobject
        and dtype.itemsize <= 16
    )


def npy_to_array(blob: bytes):
    """The array in `blob`; its header must describe exactly the data that follows (numpy
    would otherwise allocate whatever size the header claims before reading)."""
    import numpy as np

    stream = io.BytesIO(blob)
    try:
        read_header = {
            (1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0,
        }.get(np.lib.format.read_magic(stream))
        if read_header is None:
            raise ValueError("unsupported .npy version")
        shape, fortran_order, dtype = read_header(stream)
        if not numeric_dtype(dtype):
            raise ValueError(f"only numeric arrays are accepted, not {dtype.str!r}")
        size = dtype.itemsize
        for extent in shape:
            size *= extent
        if size != len(blob) - stream.tell():
            raise ValueError("the header does not match the data")
        # the data as np.load would read it (its header is not parsed a second time): a
        # writable array of its own, in the header's order
        data = np.frombuffer(blob, dtype=dtype, offset=stream.tell())
        if fortran_order:
            return data.reshape(shape[::-1]).transpose().copy(order="K")
        return data.reshape(shape).copy()
    except (ValueError, OSError, EOFError, TypeError, MemoryError) as error:
        raise ProtocolError(f"invalid .npy blob: {error}") from None


def to_tensor(array, dtype: str):
    """A torch tensor holding a copy of `array`, converted to torch dtype `dtype` if named."""
    import torch

    tensor = torch.from_numpy(array.copy())
    target = getattr(torch, dtype, None)
    if isinstance(target, torch.dtype) and tensor.dtype != target:
        if target.itemsize > tensor.element_size():  # only ever narrowed (float32 -> bfloat16)
            raise ProtocolError(f"a {tensor.dtype} tensor cannot be sent as {target}")
        tensor = tensor.to(target)
    return tensor


class Encoder:
    """Encode Python values to JSON-able data plus blobs.

    `fallback(value)` returns the tag for a value that is not plain data (the child turns it
    into a handle); by default such values are an error.
    """

    def __init__(self, fallback=None):
        self.blobs: list[bytes] = []
        self.fallback = fallback

    def _blob(self, data: bytes) -> int:
        self.blobs.append(data)
        return len(self.blobs) - 1

    def encode(self, value):
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.encode(item) for item in value]
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(item) for item in value]}
        if isinstance(value, dict):
            if all(isinstance(key, str) for key in value):
                return {"$dict": {key: self.encode(item) for key, item in value.items()}}
            return {"$items": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        tagged = self._encode_array_like(value)
        if tagged is not None:
            return tagged
        if hasattr(value, "__agw_tag__"):
            return value.__agw_tag__()
        if self.fallback is not None:
            return self.fallback(value)
        raise ProtocolError(f"cannot send a value of type {type(value).__name__}")

    def _encode_array_like(self, value):
        module = type(value).__module__ or ""
        if module.startswith("numpy"):
            import numpy as np

            if isinstance(value, np.ndarray) and numeric_dtype(value.dtype):
                return {"$ndarray": self._blob(array_to_npy(value))}
            if isinstance(value, np.generic) and numeric_dtype(value.dtype):
                return {"$npscalar": value.dtype.str, "value": self.encode(value.item())}
        if module.startswith("torch"):
            import torch

            if isinstance(value, torch.Tensor):
                tensor = value.detach().cpu()
                dtype = str(tensor.dtype).removeprefix("torch.")
                if tensor.dtype in (torch.bfloat16, torch.float16):
                    tensor = tensor.float()
                return {
                    "$tensor": self._blob(array_to_npy(tensor.resolve_conj().numpy())),
                    "dtype": dtype,
                    "requires_grad": bool(value.requires_grad),
                }
            if isinstance(value, torch.dtype):
                return {"$torchdtype": str(value).removeprefix("torch.")}
        return None


class Decoder:
    """Decode data made by an Encoder. `handle(tag)` builds the object for a handle tag."""

    def __init__(self, blobs: list[bytes], handle=None, tensor=None, shadow=None):
        self.blobs = blobs
        self.handle = handle
        self.tensor = tensor
        self.shadow = shadow  # `$shadow` tags: a stand-in's object (remote.py)
        self.used: set[int] = set()

    def _blob(self, index):
        if not isinstance(index, int) or not 0 <= index < len(self.blobs):
            raise ProtocolError("blob index out of range")
        if index in self.used:  # each blob is decoded once: a frame cannot multiply its size
            raise ProtocolError("a blob is referenced twice")
        self.used.add(index)
        return self.blobs[index]

    def _items(self, pairs) -> dict:
        """A dict of non-string keys. Keys that share one hash (ints k * (2**61 - 1) all hash
        to 0) would make building the dict quadratic: 68,000 of them cost a minute of the
        grader's CPU outside every timeout. So a reply with many keys of one hash is refused."""
        if not isinstance(pairs, list) or not all(
            isinstance(pair, list) and len(pair) == 2 for pair in pairs
        ):
            raise ProtocolError("bad dict items")
        keys = [self.decode(key) for key, _ in pairs]
        counts: dict[int, int] = {}
        for key in keys:
            try:
                digest = hash(key)
            except TypeError:
                raise ProtocolError(f"an unhashable dict key ({type(key).__name__})") from None
            counts[digest] = counts.get(digest, 0) + 1  # hash(h) == h: no collisions here
        if counts and max(counts.values()) > MAX_EQUAL_HASHES:
            raise ProtocolError(f"over {MAX_EQUAL_HASHES} dict keys share one hash")
        return dict(zip(keys, (self.decode(value) for _, value in pairs), strict=True))

    def decode(self, data):
        if data is None or isinstance(data, bool | int | float | str):
            return data
        if isinstance(data, list):
            return [self.decode(item) for item in data]
        if not isinstance(data, dict) or len(data) == 0:
            raise ProtocolError(f"unexpected encoded value {str(data)[:80]}")
        if "$tuple" in data:
            return tuple(self.decode(item) for item in data["$tuple"])
        if "$dict" in data:
            return {str(key): self.decode(item) for key, item in data["$dict"].items()}
        if "$items" in data:
            return self._items(data["$items"])
        if "$ndarray" in data:
            return npy_to_array(self._blob(data["$ndarray"]))
        if "$npscalar" in data:
            import numpy as np

            try:
                dtype = np.dtype(str(data["$npscalar"])[:16])
                value = self.decode(data["value"])
                if dtype.kind not in "biufc" or dtype.shape or dtype.itemsize > 16:
                    raise TypeError(f"not a numeric scalar type: {dtype}")
                if not isinstance(value, bool | int | float):
                    raise TypeError("the scalar's value is not a number")
                return dtype.type(value)
            except (TypeError, ValueError, OverflowError) as error:
                raise ProtocolError(f"bad numpy scalar: {error}") from None
        if "$tensor" in data:
            array = npy_to_array(self._blob(data["$tensor"]))
            if self.tensor is not None:
                return self.tensor(
                    array, str(data.get("dtype", "")), bool(data.get("requires_grad"))
                )
            return array
        if "$torchdtype" in data:
            import torch

            torch_dtype = getattr(torch, str(data["$torchdtype"]), None)
            if not isinstance(torch_dtype, torch.dtype):
                raise ProtocolError("bad torch dtype")
            return torch_dtype
        if "$handle" in data and self.handle is not None:
            return self.handle(data)
        if "$shadow" in data and self.shadow is not None:
            return self.shadow(data)
        raise ProtocolError(f"unexpected encoded value {str(data)[:80]}")
