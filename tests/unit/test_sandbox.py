"""The sandbox and its channel: plain data only, limits from outside, a child that lies or
breaks the channel only hurts itself."""

from __future__ import annotations

import io
import os
import socket

import numpy as np
import pytest
import torch

from autograder.grading.submission import ProgramCell, StudentError, Submission
from autograder.sandbox import isolation
from autograder.sandbox.inside import wire
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox, SandboxDied


def roundtrip(value):
    encoder = wire.Encoder()
    data = encoder.encode(value)
    buffer = io.BytesIO()
    wire.write_frame(buffer, {"value": data}, encoder.blobs)
    buffer.seek(0)
    header, blobs = wire.read_frame(buffer)
    return wire.Decoder(blobs, tensor=lambda a, dtype, grad: torch.from_numpy(a)).decode(
        header["value"]
    )


def test_plain_values_roundtrip():
    value = {
        "t": (1, 2.5, "x", None, True),
        "a": np.arange(6.0).reshape(2, 3),
        "s": np.float32(1.5),
        "l": [np.int64(3)],
    }
    back = roundtrip(value)
    assert back["t"] == (1, 2.5, "x", None, True)
    assert np.array_equal(back["a"], value["a"]) and back["a"].dtype == np.float64
    assert back["s"] == np.float32(1.5) and type(back["s"]) is np.float32
    assert torch.equal(roundtrip(torch.arange(4)), torch.arange(4))


def test_dicts_of_other_keys_roundtrip():
    value = {1: "a", (2, "b"): [3.5], None: {"x": 1}, 2.5: True}
    assert roundtrip(value) == value


COLLIDING = (1 << 61) - 1  # every multiple of the modulus of Python's int hash hashes to 0


@pytest.mark.parametrize(
    "keys",
    [
        [k * COLLIDING for k in range(1, 1001)],
        [(k * COLLIDING, "same") for k in range(1, 1001)],
    ],
    ids=["ints", "tuples"],
)
def test_dict_keys_that_share_a_hash_are_refused(keys):
    """A reply of 68,500 int keys hashing to 0 cost the grader 66 s of CPU per call while it
    built the dict, outside every timeout (issue 18 review, attacker F2): refused unbuilt."""
    assert len({hash(key) for key in keys}) < 10
    items = [[wire.Encoder().encode(key), 0] for key in keys]
    with pytest.raises(wire.ProtocolError, match="share one hash"):
        wire.Decoder([]).decode({"$items": items})
    few = wire.Decoder([]).decode({"$items": items[: wire.MAX_EQUAL_HASHES]})
    assert len(few) == wire.MAX_EQUAL_HASHES


@pytest.mark.parametrize("items", [[[1, 2, 3]], "x", [[[1], 2]]], ids=["triple", "str", "list"])
def test_malformed_dict_items_are_a_protocol_error(items):
    with pytest.raises(wire.ProtocolError):
        wire.Decoder([]).decode({"$items": items})


@pytest.mark.parametrize(
    "dtype",
    [np.dtype("V8"), np.dtype("V1048576"), np.dtype([("a", "<i4"), ("b", "<f8")]), "U5", "S5"],
    ids=["void", "huge-void", "structured", "unicode", "bytes"],
)
def test_the_parent_accepts_numeric_arrays_only(dtype):
    """A void, structured or text array from the child never reaches the parent's comparisons
    (a void dtype with a large itemsize grew the grading process to 2.4 GB)."""
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3, dtype=dtype), allow_pickle=False)
    with pytest.raises(wire.ProtocolError, match="numeric"):
        wire.npy_to_array(buffer.getvalue())
    assert not wire.numeric_dtype(np.dtype(dtype))
    assert all(wire.numeric_dtype(np.dtype(t)) for t in ("?", "i1", "u8", "f2", "f8", "c16"))


def test_pickled_arrays_and_oversized_frames_are_refused():
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(wire.ProtocolError):
        wire.npy_to_array(buffer.getvalue())
    frame = io.BytesIO()
    wire.write_frame(frame, {"x": "y" * 1000}, [b"z" * 5000])
    frame.seek(0)
    with pytest.raises(wire.ProtocolError):
        wire.read_frame(frame, max_bytes=2000)
    with pytest.raises(wire.ProtocolError):
        wire.Encoder().encode(object())


def submission(*cells: str, **limits) -> Submission:
    program = [ProgramCell(f"cell {i}", source) for i, source in enumerate(cells, start=1)]
    return Submission(program, Limits(**limits))


def test_objects_stay_in_the_child_behind_handles():
    with submission(
        "import numpy as np\nclass Box:\n    def get(self):\n        return 4\n"
        "def objects():\n    return np.array([{'a': 1}], dtype=object)"
    ) as sub:
        box = sub.call("Box")
        assert box.type.endswith("Box") and box.call("get") == 4
        assert not isinstance(sub.call("objects"), np.ndarray)
        with pytest.raises(StudentError, match="NameError"):
            sub.call("missing")


def test_garbage_on_the_channel_is_a_crash_of_the_submission_only():
    with submission(
        "import os\ndef lie():\n    os.write(int(__import__('sys').argv[2]), "
        "b'AGW1' + b'\\xff' * 64)\n    import time; time.sleep(5)"
    ) as sub:
        with pytest.raises(SandboxDied) as died:
            sub.call("lie", timeout=10)
        assert died.value.status in ("crashed", "timeout")


def test_output_flood_is_stopped():
    with submission(
        "def flood():\n    while True:\n        print('x' * 10000)", output_bytes=1 << 20
    ) as sub:
        with pytest.raises(SandboxDied) as died:
            sub.call("flood", timeout=60)
        assert died.value.status == "output_limit"


def test_file_size_limit():
    with submission(
        "def big():\n    open('big.bin', 'wb').write(b'0' * (8 << 20))", file_size_bytes=1 << 20
    ) as sub:
        with pytest.raises((SandboxDied, StudentError)):
            sub.call("big")


def test_environment_is_scrubbed_and_threads_pinned(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    with submission(
        "import os\ndef env():\n    return dict(os.environ)\ndef cwd():\n    return os.getcwd()"
    ) as sub:
        env = sub.call("env")
        assert "SECRET_TOKEN" not in env
        assert env["OMP_NUM_THREADS"] == "1" and env["PYTHONHASHSEED"] == "0"
        cwd = sub.call("cwd")
        assert cwd == ("/sandbox" if sub.sandbox.isolation.jail else str(sub.sandbox.workdir))


@pytest.mark.skipif(
    not (isolation.detect().jail or isolation.detect().landlock_abi >= 4 or os.geteuid() == 0),
    reason="this host offers no network isolation to unprivileged processes",
)
def test_no_network_from_the_child():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        with submission(
            f"import socket\ndef connect():\n    socket.create_connection("
            f"('127.0.0.1', {port}), timeout=2)\n    return 'connected'"
        ) as sub:
            with pytest.raises(StudentError):
                sub.call("connect")
    finally:
        server.close()


def test_sandbox_start_and_close_leave_nothing_behind():
    sandbox = Sandbox()
    sandbox.start()
    workdir, group = sandbox.workdir, sandbox._group
    assert sandbox.alive
    assert (workdir is None) == sandbox.isolation.jail  # the jail's work dir is a tmpfs
    assert workdir is None or workdir.exists()
    sandbox.close()
    assert workdir is None or not workdir.exists()
    assert group is None or not any(path.exists() for path in group.paths)
    assert not sandbox.alive


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["?", "i1", "<u2", ">i4", "<f2", ">f8", "<c16"])
def test_an_array_from_the_wire_is_what_np_load_reads(dtype, order):
    """npy_to_array reads the data itself after checking the header (not np.load, which parsed
    the header again): the same dtype, shape, values and layout, writable and its own."""
    rng = np.random.default_rng(0)
    for shape in [(), (0,), (3,), (2, 3), (0, 4), (4, 0, 2), (2, 3, 4)]:
        array = np.asarray(rng.standard_normal(shape) * 100).astype(dtype)
        array = np.asfortranarray(array) if order == "F" else np.ascontiguousarray(array)
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, array, allow_pickle=False)
        read = wire.npy_to_array(buffer.getvalue())
        loaded = np.load(io.BytesIO(buffer.getvalue()), allow_pickle=False)
        assert (read.dtype, read.shape) == (loaded.dtype, loaded.shape)
        assert np.array_equal(read, loaded)
        assert read.flags.f_contiguous == loaded.flags.f_contiguous
        assert read.flags.c_contiguous == loaded.flags.c_contiguous
        assert read.flags.writeable and read.flags.owndata
