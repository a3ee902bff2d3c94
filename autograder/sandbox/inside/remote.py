"""Stand-ins that live in the grader: the child's side. Runs in the child's process.

While the checks of code built on a function or class of the notebook run, the grader may swap
that name for the contract's own version (`authoring.upstream.on_the_contracts`). The contract's
code never enters this process: what is swapped in here is a proxy made by this module (the
same for every exercise), whose calls cross the pipe to the grader as plain data, are answered
there by the grader's own version, and come back as plain data. Behaviour crosses; code does not.

- a function: `remote_function` -> a function whose call is a `call` callback;
- a class: `remote_class` -> a class whose instances forward constructor, attributes, methods
  and `len()` to the grader's instance;
- an nn.Module class: `remote_module_class` -> an nn.Module whose submodules are real PyTorch
  layers made here (nn.Linear, nn.Embedding, ...: their parameters, hooks and state_dict are
  this process's, so a check loads weights into them as into any module), and whose `forward`
  runs in the grader, which calls those layers back through the pipe.

A callback is a frame with a `callback` key written on the response pipe while a request is
being served; the grader answers with a `reply` frame, and may first send requests of its own
(calling a layer, reading the notebook's KVCache), which are served here, nested.
"""

import wire

CHANNEL = None  # set by child.main(): the Server, with its request and response pipes
PROXIES: dict = {}  # shadow id -> the proxy object here that stands for the grader's object
RAISABLE = (
    "ValueError",
    "TypeError",
    "RuntimeError",
    "IndexError",
    "KeyError",
    "AttributeError",
    "ZeroDivisionError",
    "NotImplementedError",
    "AssertionError",
)


class Channel:
    """The child's end of the callbacks: written and read between a request and its response."""

    def __init__(self, server, requests, responses):
        self.server = server
        self.requests = requests
        self.responses = responses

    def tag(self, value):
        """How a value that is not plain data goes to the grader: a proxy as the grader's own
        object, anything else as a handle on this process's object."""
        sid = _shadow_of(value)
        if sid is not None:
            return {"$shadow": sid}
        return self.server._handle_for(value)

    def call(self, kind, target, name=None, args=(), kwargs=None, owner=None, training=None):
        encoder = wire.Encoder(fallback=self.tag)
        header = {
            "callback": kind,
            "target": target,
            "name": name,
            "args": encoder.encode(list(args)),
            "kwargs": encoder.encode(dict(kwargs or {})),
        }
        if owner is not None:
            header["owner"] = self.server._handle_for(owner)
            header["training"] = bool(training)
        wire.write_frame(self.responses, header, encoder.blobs)
        while True:
            frame, blobs = wire.read_frame(self.requests)
            if frame.get("reply"):
                if frame.get("ok"):
                    return self.server.decode(frame.get("value"), blobs)
                raise _error(frame.get("error"))
            response, out_blobs = self.server.respond(frame, blobs)
            wire.write_frame(self.responses, response, out_blobs)


def _error(error) -> BaseException:
    error = error if isinstance(error, dict) else {}
    kind = str(error.get("type", "RuntimeError"))
    message = str(error.get("message", ""))[:300]
    import builtins

    cls = getattr(builtins, kind) if kind in RAISABLE else RuntimeError
    return cls(message if kind in RAISABLE else f"{kind}: {message}")


def _channel() -> Channel:
    if CHANNEL is None:
        raise RuntimeError("the grader's stand-ins are not connected")
    return CHANNEL


def _shadow_of(value):
    """The shadow id of a proxy made here (read without running any of the object's code)."""
    try:
        cls = type(value)
        if not (isinstance(value, RemoteInstance) or _is_remote_module(cls)):
            return None
        sid = object.__getattribute__(value, "__dict__").get("_agw_sid")
    except BaseException:  # noqa: BLE001 - an object of the notebook may do anything
        return None
    return sid if isinstance(sid, int) and PROXIES.get(sid) is value else None


def shadow(tag):
    """The proxy here for a `$shadow` tag from the grader."""
    sid = tag.get("$shadow")
    if not isinstance(sid, int) or sid not in PROXIES:
        raise wire.ProtocolError("unknown stand-in object")
    return PROXIES[sid]


# -- functions ------------------------------------------------------------------------------------
def remote_function(name, stand_in):
    """A function named `name` whose calls the grader's stand-in `stand_in` answers."""

    def function(*args, **kwargs):
        return _channel().call("call", stand_in, args=args, kwargs=kwargs)

    function.__name__ = function.__qualname__ = str(name)
    return function


# -- plain classes --------------------------------------------------------------------------------
class RemoteInstance:
    """An object whose state and methods are the grader's instance's."""

    _agw_stand_in = None  # set on each class made by remote_class

    def __init__(self, *args, **kwargs):
        described = _channel().call("construct", type(self)._agw_stand_in, args=args, kwargs=kwargs)
        _adopt(self, described)

    def __getattr__(self, name):
        if name.startswith("__") or name.startswith("_agw_"):
            raise AttributeError(name)
        sid = object.__getattribute__(self, "__dict__").get("_agw_sid")
        found = _channel().call("getattr", sid, name)
        if isinstance(found, dict) and found.get("$method") is True:
            return _method(sid, name)
        return found

    def __setattr__(self, name, value):
        if name.startswith("_agw_"):
            object.__setattr__(self, name, value)
            return
        sid = object.__getattribute__(self, "__dict__").get("_agw_sid")
        _channel().call("setattr", sid, name, args=(value,))

    def __len__(self):
        return _call_method(self, "__len__")

    def __repr__(self):
        return f"<{type(self).__name__} (the contract's)>"


def _adopt(proxy, described) -> None:
    if not isinstance(described, dict) or not isinstance(described.get("shadow"), int):
        raise RuntimeError("the grader did not make the stand-in")
    sid = described["shadow"]
    object.__setattr__(proxy, "_agw_sid", sid)
    PROXIES[sid] = proxy


def _call_method(proxy, name, *args, **kwargs):
    sid = object.__getattribute__(proxy, "__dict__").get("_agw_sid")
    return _channel().call("method", sid, name, args=args, kwargs=kwargs)


def _method(sid, name):
    def method(*args, **kwargs):
        return _channel().call("method", sid, name, args=args, kwargs=kwargs)

    method.__name__ = method.__qualname__ = str(name)
    return method


def remote_class(name, stand_in):
    """A class named `name` whose instances are the grader's stand-in `stand_in`'s."""
    return type(str(name), (RemoteInstance,), {"_agw_stand_in": stand_in, "__module__": "stand_in"})


# -- nn.Module classes ----------------------------------------------------------------------------
LEAVES: dict = {
    "Linear": lambda c: ("Linear", (int(c[0]), int(c[1])), {"bias": bool(c[2])}),
    "Embedding": lambda c: ("Embedding", (int(c[0]), int(c[1])), {}),
    "LayerNorm": lambda c: (
        "LayerNorm",
        (tuple(int(n) for n in c[0]),),
        {"eps": float(c[1]), "elementwise_affine": bool(c[2])},
    ),
    "Dropout": lambda c: ("Dropout", (float(c[0]),), {}),
}
_MODULE_BASE: list = []  # [the RemoteModule class], made once torch is imported


def _is_remote_module(cls) -> bool:
    return bool(_MODULE_BASE) and issubclass(cls, _MODULE_BASE[0])


def _module_base():
    if _MODULE_BASE:
        return _MODULE_BASE[0]
    import torch.nn as nn

    class RemoteModule(nn.Module):
        """An nn.Module whose forward runs in the grader, on this module's own layers."""

        _agw_stand_in = None

        def __init__(self, *args, **kwargs):
            super().__init__()
            described = _channel().call(
                "construct", type(self)._agw_stand_in, args=args, kwargs=kwargs
            )
            _build(self, described)

        def forward(self, *args, **kwargs):
            sid = object.__getattribute__(self, "__dict__").get("_agw_sid")
            training = bool(object.__getattribute__(self, "training"))
            return _channel().call(
                "forward", sid, args=args, kwargs=kwargs, owner=self, training=training
            )

        def _agw_child(self, name, *args, **kwargs):
            """Call submodule `name` (the grader's forward calls this module's layers)."""
            return getattr(self, name)(*args, **kwargs)

    _MODULE_BASE.append(RemoteModule)
    return RemoteModule


def _build(module, described) -> None:
    """Make `module`'s layers as the grader's instance describes them (in its order)."""
    import torch.nn as nn

    _adopt(module, described)
    for key, value in dict(described.get("attributes") or {}).items():
        if isinstance(key, str) and key.isidentifier() and not key.startswith("_"):
            object.__setattr__(module, key, value)
    for entry in list(described.get("children") or []):
        name, spec = entry
        if "remote" in spec:
            inner = spec["remote"]
            cls = _remote_module_type(str(inner.get("class", "Module")), None)
            child = cls.__new__(cls)
            nn.Module.__init__(child)
            _build(child, inner)
        else:
            kind, args, kwargs = LEAVES[spec["leaf"]](spec["config"])
            child = getattr(nn, kind)(*args, **kwargs)
        module.add_module(str(name), child)


def _remote_module_type(name, stand_in):
    return type(str(name), (_module_base(),), {"_agw_stand_in": stand_in, "__module__": "stand_in"})


def remote_module_class(name, stand_in):
    """An nn.Module class named `name` whose instances are the grader's stand-in's."""
    return _remote_module_type(name, stand_in)


def make(kind, name, stand_in):
    """The proxy for the grader's stand-in `stand_in` (a number) of `kind`."""
    makers: dict = {
        "function": remote_function,
        "class": remote_class,
        "module": remote_module_class,
    }
    if kind not in makers:
        raise ValueError(f"unknown stand-in kind {kind!r}")
    return makers[kind](name, int(stand_in))
