"""A Dask client that reads nothing a worker pickled (imported only with Dask installed).

Dask's client unpickles more than results: a task's exception and traceback, the type of each
result, and the warnings a worker sends as events. Any worker of the cluster chooses those
bytes, so a pickle there runs code in the batch. This client, created with msgpack as its only
deserializer for results (dask_cluster.connect), also keeps the exception as a sentence, the
type unread and warnings unsubscribed. It does not make an untrusted worker harmless (Dask's
protocol carries pickles between members elsewhere too): authentication keeps such workers
out; this keeps a trusted worker's bad answer from being more than a bad answer.
"""

from __future__ import annotations

from distributed import Client

TASK_ERRED = "the task raised an exception on its worker (sent as a pickle: not read)"


class PlainClient(Client):
    def subscribe_topic(self, topic, handler):
        """Not Dask's default handlers of the "print" and "warn" events (which unpickle the
        payloads a worker sends)."""
        if handler in Client._default_event_handlers.values():
            return
        super().subscribe_topic(topic, handler)

    def _handle_task_erred(self, key=None, exception=None, traceback=None, **_):
        super()._handle_task_erred(key=key, exception=TASK_ERRED, traceback=None)

    def _handle_key_in_memory(self, key=None, type=None, workers=None, **_):
        super()._handle_key_in_memory(key=key, type=None, workers=workers)


def workers_of(client: Client, future) -> str:
    """The address of the worker that holds, or failed, `future` (as the scheduler knows it)."""
    try:
        held = client.who_has([future]).get(future.key) or ()
        if not held:
            key = future.key

            def erred_on(dask_scheduler) -> list[str]:
                task = dask_scheduler.tasks.get(key)
                return sorted(task.erred_on or ()) if task is not None else []

            held = client.run_on_scheduler(erred_on)
    except Exception:  # noqa: BLE001 - naming the worker must not stop the batch
        held = ()
    return ", ".join(str(address) for address in held) or "an unknown worker"
