"""Start-up time savings for our own processes.

jsonschema imports the optional `rfc3987_syntax` (pulled in by jupyter-events) when nbformat
loads; building its grammar costs about 2 s per process. It only validates the rarely used
`iri` string formats, which notebooks do not use, so our processes skip it.

nbgrader stamps a new gradebook with the revision printed by `alembic heads`, run as a
subprocess: a new interpreter that imports nbgrader (3 s of CPU on a 2-core machine, on every
`attn-grade build` of a new course). `stamp_new_gradebooks_in_process` reads the same revision
with alembic's own API in the process that already has nbgrader loaded.
"""

import sys


def skip_slow_optional_imports() -> None:
    # `import rfc3987_syntax` -> ImportError (None in sys.modules is the documented way)
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def stamp_new_gradebooks_in_process() -> None:
    """Make nbgrader's `get_alembic_version` (called when a Gradebook creates its database) ask
    alembic in this process; where that cannot answer (nbgrader's helper renamed, several
    heads), nbgrader's own subprocess does as before."""
    import nbgrader.api as api

    subprocess_version = api.get_alembic_version
    if getattr(subprocess_version, "in_process", False):
        return

    def get_alembic_version() -> str:
        try:
            from alembic.config import Config
            from alembic.script import ScriptDirectory

            with api._temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
                head = ScriptDirectory.from_config(Config(ini)).get_current_head()
        except Exception:  # noqa: BLE001 - nbgrader's own way still works
            head = None
        return head if isinstance(head, str) and head else subprocess_version()

    get_alembic_version.in_process = True  # type: ignore[attr-defined]
    api.get_alembic_version = get_alembic_version
