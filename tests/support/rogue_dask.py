"""A rogue Dask worker: a WorkerPlugin that makes a worker of a cluster answer attn-grade's
grading tasks as an attacker would, one way per student (the student's name says which).

Each pickle it sends, when unpickled, runs `echo $PPID >> MARKER`: the marker file names every
process that unpickled one. The plugin replaces the task function the batch submits by name
(`autograder.batch.dask_cluster.grade_on_worker`) and patches Dask's worker where an attack
needs it; the cluster it joins is the test's own, discarded afterwards.

- pickle:  the result is an object whose unpickling runs the command, sent with Dask's pickle
           serializer although the client asks for msgpack;
- forged:  a well-formed answer for the notebook, every check passed and worth ten times its
           points;
- types:   a well-formed answer with `passed` a string;
- notjson: bytes that are not JSON;
- raises:  the task raises; the exception Dask sends is the pickle;
- sneaky:  a sound answer (the checks failed, as they do on a blank notebook), but the type of
           the result that Dask reports is the pickle, and a "warn" event carries it too.
Its answers are made up (no grading on the worker): the notebooks are blank releases, whose
honest report fails every check.
"""

from __future__ import annotations

import json
import os
import pickle
import shlex

from distributed import WorkerPlugin

ROGUE = ("pickle", "forged", "types", "notjson", "raises", "sneaky")
REFUSED = ("pickle", "forged", "types", "notjson", "raises")  # graded on the batch's machine


class Payload:
    """Unpickling this runs the marker command in the process that unpickles it."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo $PPID >> {shlex.quote(self.marker)}",))


class RogueError(RuntimeError):
    pass


class RogueWorker(WorkerPlugin):
    name = "attn-grade-rogue"

    def __init__(self, marker: str):
        self.marker = marker

    def setup(self, worker) -> None:
        import importlib

        import distributed.worker as dask_worker
        from distributed.worker_state_machine import WorkerState

        from autograder.batch import dask_cluster

        # the module (distributed.protocol re-exports a function of the same name)
        serialize = importlib.import_module("distributed.protocol.serialize")
        marker, poisoned = self.marker, set()
        evil = pickle.dumps(Payload(marker))

        def rogue(exercise, student, notebook, level, checks_sha256):
            if student == "pickle":
                return Payload(marker)
            if student == "notjson":
                return b"\xff\xfe this is no JSON"
            if student == "raises":
                raise RogueError("rogue")
            if student == "sneaky":
                poisoned.add(worker.get_current_task())
                worker.log_event("warn", {"message": evil, "category": evil})
            return made_up(exercise, student, notebook, level, student)

        core = importlib.import_module("distributed.protocol.core")
        serialize_and_split = core.serialize_and_split

        def rogue_serialize_and_split(value, *args, **kwargs):  # the client asks for msgpack
            if isinstance(getattr(value, "data", value), Payload):  # (in a Serialize)
                kwargs["serializers"] = ("pickle",)  # a pickle, labelled as one
            return serialize_and_split(value, *args, **kwargs)

        error_message = dask_worker.error_message

        def rogue_error_message(error, status="error"):
            message = error_message(error, status)
            if isinstance(error, RogueError):
                message["exception"] = serialize.to_serialize(evil)
            return message

        finished = WorkerState._get_task_finished_msg

        def rogue_finished(state, ts, *args, **kwargs):
            message = finished(state, ts, *args, **kwargs)
            if ts.key in poisoned:
                message.type = evil
            return message

        dask_cluster.grade_on_worker = rogue
        core.serialize_and_split = rogue_serialize_and_split
        dask_worker.error_message = rogue_error_message
        WorkerState._get_task_finished_msg = rogue_finished


def made_up(exercise: str, student: str, notebook: bytes, level: str, how: str) -> bytes:
    """An answer for this very notebook (its report key), every declared check failed, or
    forged (`how`)."""
    from autograder.batch.dask_results import LEVEL_PREFIX, declared_checks
    from autograder.core.results import CheckResult, GradeReport
    from autograder.grading.notebook import program_of
    from autograder.nbgrader_plugins.preprocessors import report_key

    key = report_key(exercise, student, program_of(json.loads(notebook), exercise))
    checks = [
        CheckResult(name, grade_id, points, passed=False, message="not implemented")
        for name, (grade_id, points) in declared_checks(exercise).items()
    ]
    report = GradeReport(exercise, checks=checks, isolation=LEVEL_PREFIX[level]).to_dict()
    for check in report["checks"]:
        if how == "forged":
            check["passed"], check["max_points"] = True, check["max_points"] * 10
        elif how == "types":
            check["passed"] = "yes"
    return json.dumps({"key": key, "report": report, "reason": ""}).encode()
