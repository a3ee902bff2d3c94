"""The sandbox child: runs a notebook's code cells, then serves the grader's requests.

Started by the supervisor as `python -s child.py REQUEST_FD RESPONSE_FD` in a fresh working
directory, with limits already applied (or, warm, forked from a template that imported it:
template.py `run_child`). Requests and responses are wire frames; see wire.py.
"""

import builtins
import linecache
import os
import sys
import types
import warnings

import display
import failures
import module_probes
import numpy_only
import probes
import remote
import shell
import trusted
import wire
from failures import cell_filename, describe, stopped_earlier
from shell import Shell, ipython_to_python

# The server's and the snapshot's own builtins, as they were before any student code ran (a
# notebook's `builtins.sorted = ...` must not blind the tamper check).
globals()["__builtins__"] = trusted.BUILTINS

MAX_REPR = 200


def _runtime_parts() -> dict:
    """The grader's own code in this process, by name: the probes, the wire format and the
    server. A notebook that replaces or patches any of them is tampering with the grader."""
    names = (
        "display",
        "probes",
        "wire",
        "failures",
        "shell",
        "trusted",
        "module_probes",
        "numpy_only",
        "remote",
    )
    parts = {f"module {name}": sys.modules.get(name) for name in names}
    for module in (probes, trusted, module_probes, numpy_only):
        parts[f"{module.__name__}.__builtins__"] = vars(module).get("__builtins__")
    parts["child.__builtins__"] = globals().get("__builtins__")
    parts.update(trusted.parts())  # what the probes took from torch, and where it came from
    parts["probes.PROBES"] = probes.PROBES
    for name, probe in list(probes.PROBES.items()):
        parts[f"probe {name}"] = probe
    for owner in (
        display,
        probes,
        wire,
        failures,
        shell,
        trusted,
        module_probes,
        numpy_only,
        remote,
        Server,
    ):
        for name, value in list(vars(owner).items()):
            if callable(value) and not name.startswith("__"):
                parts[f"{owner.__name__}.{name}"] = value
            for attr, member in list(vars(value).items()) if isinstance(value, type) else []:
                if callable(member) and not attr.startswith("__"):
                    parts[f"{owner.__name__}.{name}.{attr}"] = member
    for name in (
        "describe",
        "cell_filename",
        "stopped_earlier",
        "main",
        "Integrity",
        "_runtime_parts",
        "_code_of",
    ):
        parts[name] = globals().get(name)
    # the snapshot's own checker: replacing it (`Integrity.changed = lambda self: []`) is
    # tampering too; the server also holds the original, bound before any student code ran
    for attr in ("__init__", "changed"):
        parts[f"Integrity.{attr}"] = vars(Integrity).get(attr)
    return parts


def _code_of(value):
    return getattr(value, "__code__", None)


class Integrity:
    """A snapshot of the runtime taken before any student code runs, compared after every
    request: the names of whatever was replaced or patched since."""

    def __init__(self):
        self._parts = _runtime_parts()
        self._codes = {name: _code_of(value) for name, value in self._parts.items()}

    def changed(self) -> list[str]:
        try:
            now = _runtime_parts()
        except BaseException:  # noqa: BLE001 - a broken runtime is a tampered one
            return ["the grader's runtime"]
        found = []
        for name, value in self._parts.items():
            current = now.get(name)
            if current is not value or _code_of(current) is not self._codes[name]:
                found.append(name)
        return sorted(found)[:10]


class Server:
    def __init__(self):
        self.notes: list[str] = []
        self._fresh_main()
        self.handles: dict[int, object] = {}
        self._handle_ids: dict[int, int] = {}  # id(object) -> its handle, while it is held
        self.next_handle = 1
        # set by main() before any student code runs: the bound method keeps the original
        # checker even when a notebook rebinds Integrity.changed (which the snapshot reports)
        self._integrity_changed = None

    def _fresh_main(self) -> None:
        """An empty `__main__` for the program's cells (with IPython's `get_ipython`)."""
        self.notes[:] = []
        self.module = types.ModuleType("__main__")
        self.namespace = self.module.__dict__
        self.namespace["__builtins__"] = builtins
        shell = Shell(self.namespace, self.notes)
        self.namespace["get_ipython"] = lambda: shell
        sys.modules["__main__"] = self.module

    # -- values -----------------------------------------------------------------------------
    def _handle_for(self, value) -> dict:
        handle = self._handle_ids.get(id(value))
        if handle is None or self.handles.get(handle) is not value:
            handle = self.next_handle
            self.next_handle += 1
            self.handles[handle] = value
            self._handle_ids[id(value)] = handle
        cls = type(value)
        try:
            text = repr(value)[:MAX_REPR]
        except BaseException:  # noqa: BLE001 - a student's __repr__ may do anything
            text = f"<{cls.__name__}>"
        return {"$handle": handle, "type": f"{cls.__module__}.{cls.__qualname__}", "repr": text}

    def _lookup_handle(self, tag):
        try:
            return self.handles[tag["$handle"]]
        except (KeyError, TypeError):
            raise wire.ProtocolError("unknown handle") from None

    @staticmethod
    def _tensor(array, dtype, requires_grad):
        return wire.to_tensor(array, dtype).requires_grad_(requires_grad)

    def decode(self, data, blobs):
        return wire.Decoder(
            blobs, handle=self._lookup_handle, tensor=self._tensor, shadow=remote.shadow
        ).decode(data)

    def _target(self, header, blobs):
        target = header.get("target")
        if isinstance(target, dict) and "$global" in target:
            name = target["$global"]
            if name not in self.namespace:
                raise NameError(f"name {name!r} is not defined")
            return self.namespace[name]
        if isinstance(target, dict) and target.get("$module") == "__main__":
            return self.module
        return self.decode(target, blobs)

    # -- operations -------------------------------------------------------------------------
    def op_ping(self, header, blobs):
        return {"pid": os.getpid()}

    def op_exec(self, header, blobs):
        filename = cell_filename(header)
        source = str(header["source"])
        try:
            code = compile(source, filename, "exec")
        except SyntaxError:
            source = ipython_to_python(source)  # magics and !shell become get_ipython() calls
            code = compile(source, filename, "exec")
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(code, self.namespace)
        notes, self.notes[:] = list(self.notes), []
        return {"notes": notes}

    def op_reset(self, header, blobs):
        """Forget the program (a fresh `__main__`, no handles, no figures) before the next one in
        a reused sandbox: only ever for the grader's own notebooks, never a student's. With
        `keep_objects`, only a fresh `__main__` for the same program to run again in (the
        diagnosis of a failed check, grading/fresh_calls.py): the objects the grader holds
        stay."""
        self._fresh_main()
        if header.get("keep_objects"):
            return {}
        self.handles.clear()
        self._handle_ids.clear()
        remote.PROXIES.clear()
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
        return {}

    def op_block(self, header, blobs):
        """Replace functions of the notebook that stopped the process earlier (a hang, memory)
        by ones that raise at once, so that a function calling them fails fast instead of
        spending another timeout. `names`: {global name: why}; unknown names are ignored."""
        names = header.get("names")
        for name, why in (names if isinstance(names, dict) else {}).items():
            if isinstance(name, str) and name.isidentifier() and name in self.namespace:
                self.namespace[name] = stopped_earlier(name, str(why)[:300])
        return {}

    def op_display(self, header, blobs):
        """Run a demo cell, capturing what Jupyter would show; PNGs travel as blobs."""
        filename = cell_filename(header)
        source = header["source"]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        shown = display.Display(self.namespace)
        shown.run(source, filename)
        notes, self.notes[:] = list(self.notes), []
        return {"outputs": shown.outputs, "notes": notes, "$blobs": shown.pngs}

    def op_call(self, header, blobs):
        target = self._target(header, blobs)
        if header.get("method"):
            target = getattr(target, header["method"])
        args = self.decode(header.get("args", []), blobs)
        kwargs = self.decode(header.get("kwargs", {"$dict": {}}), blobs)
        if not callable(target):
            raise TypeError(f"{type(target).__name__} object is not callable")
        if header.get("record_warnings"):
            return self._call_recording_warnings(target, args, kwargs)
        return {"value": target(*args, **kwargs)}

    def _call_recording_warnings(self, target, args, kwargs):
        import numpy as np

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with np.errstate(divide="warn", over="warn", under="ignore", invalid="warn"):
                value = target(*args, **kwargs)
        found = [f"{w.category.__name__}: {w.message}" for w in caught]
        return {"value": value, "warnings": found}

    def op_getattr(self, header, blobs):
        return {"value": getattr(self._target(header, blobs), header["name"])}

    def op_setattr(self, header, blobs):
        setattr(self._target(header, blobs), header["name"], self.decode(header["value"], blobs))
        return {}

    def op_seed(self, header, blobs):
        import random

        import numpy as np

        seed = int(header["seed"])
        random.seed(seed)
        np.random.seed(seed % 2**32)
        if "torch" in sys.modules:
            sys.modules["torch"].manual_seed(seed)
        return {}

    def op_probe(self, header, blobs):
        probe = probes.PROBES[header["name"]]
        return {"value": probe(*self.decode(header.get("args", []), blobs))}

    def op_release(self, header, blobs):
        for handle in header.get("handles", []):
            released = self.handles.pop(handle, None)
            if released is not None and self._handle_ids.get(id(released)) == handle:
                del self._handle_ids[id(released)]
        return {}

    # -- loop -------------------------------------------------------------------------------
    def respond(self, header, blobs) -> tuple[dict, list[bytes]]:
        operation = getattr(self, f"op_{header.get('op')}", None)
        try:
            if operation is None:
                raise wire.ProtocolError(f"unknown operation {header.get('op')!r}")
            result = operation(header, blobs)
            encoder = wire.Encoder(fallback=self._handle_for)
            response: dict[str, object] = {"ok": True}
            encoder.blobs.extend(result.pop("$blobs", []))
            for key, value in result.items():
                response[key] = encoder.encode(value) if key == "value" else value
            self._report_tampering(response)
            return response, encoder.blobs
        except BaseException as error:  # noqa: BLE001 - student code may raise anything
            response = {"ok": False, "error": describe(error)}
            self._report_tampering(response)
            return response, []

    def _report_tampering(self, response: dict) -> None:
        changed = self._integrity_changed() if self._integrity_changed is not None else []
        if changed:
            response["tampered"] = changed


def main() -> None:
    requests = os.fdopen(int(sys.argv[1]), "rb")
    responses = os.fdopen(int(sys.argv[2]), "wb")
    server = Server()
    remote.CHANNEL = remote.Channel(server, requests, responses)
    if not trusted.captured():  # a warm child's template captured them, running no student code
        trusted.capture()  # torch's references for the probes, before the notebook's first cell
    server._integrity_changed = Integrity().changed
    while True:
        try:
            header, blobs = wire.read_frame(requests)
        except EOFError:
            return
        response, out_blobs = server.respond(header, blobs)
        try:
            wire.write_frame(responses, response, out_blobs)
        except (BrokenPipeError, OSError):
            return
        except BaseException as error:  # noqa: BLE001 - e.g. a result JSON cannot carry
            wire.write_frame(responses, {"ok": False, "error": describe(error)}, [])


if __name__ == "__main__":
    main()
