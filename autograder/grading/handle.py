"""A handle on an object that lives in the sandbox child: calls, method calls and attribute
reads go through the submission that owns it, and fail once its process has restarted."""

from __future__ import annotations

from typing import Any, Protocol

from autograder.core.errors import Unavailable


class Owner(Protocol):
    """What a handle needs of its `Submission` (kept apart so that neither imports the other)."""

    generation: int

    def _call(
        self,
        target: dict,
        method: str | None,
        args: Any,
        kwargs: Any,
        *,
        timeout: Any = None,
        record_warnings: bool = False,
        what: str | None = None,
        owner: str | None = None,
    ) -> Any: ...

    def _request(
        self,
        header: dict,
        blobs: Any = (),
        *,
        what: str,
        timeout: float | None = None,
        full: bool = False,
    ) -> Any: ...


class Handle:
    """An object that lives in the child. Call it, call its methods, read its attributes."""

    def __init__(self, submission: Owner, tag: dict, generation: int):
        self._submission = submission
        self.id = int(tag["$handle"])
        self.type = str(tag.get("type", "?"))[:200]
        self.repr = str(tag.get("repr", ""))[:200]
        self.generation = generation

    def __agw_tag__(self) -> dict:
        if self.generation != self._submission.generation:
            raise Unavailable("an object of the submission was lost when its process restarted")
        return {"$handle": self.id}

    @property
    def name(self) -> str:
        """The object's class name, for messages."""
        return self.type.rsplit(".", 1)[-1]

    def __call__(self, *args, timeout: float | None = None, **kwargs):
        return self._submission._call(
            self.__agw_tag__(),
            None,
            args,
            kwargs,
            timeout=timeout,
            what=f"{self.name}(...)",
            owner=self.type,
        )

    def call(self, method: str, *args, timeout: float | None = None, **kwargs):
        return self._submission._call(
            self.__agw_tag__(),
            method,
            args,
            kwargs,
            timeout=timeout,
            what=f"{self.name}.{method}()",
            owner=self.type,
        )

    def call_recording_warnings(self, method: str | None, *args, **kwargs):
        """Like `call` (or calling the object itself when `method` is None), under NumPy's
        default error state; returns (value, warnings raised)."""
        what = f"{self.name}.{method}()" if method else f"{self.name}(...)"
        return self._submission._call(
            self.__agw_tag__(),
            method,
            args,
            kwargs,
            record_warnings=True,
            what=what,
            owner=self.type,
        )

    def getattr(self, name: str):
        return self._submission._request(
            {"op": "getattr", "target": self.__agw_tag__(), "name": name}, what=f".{name}"
        )

    def __repr__(self) -> str:
        return f"<Handle {self.type} #{self.id}>"
