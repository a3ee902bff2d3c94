"""The students' side of an nbgrader course: `nbgrader fetch_assignment` or `nbgrader submit` for
several students in one process.

`python -m tests.support.students` reads a JSON list of `[home, [nbgrader arguments]]` on stdin
and, for each in turn, changes into the student's home and runs nbgrader's own application with
those arguments, as `nbgrader ARGS` does (`NbGraderApp.launch_instance`: initialize, start).
What the instructor's side then finds in the exchange is the same; only the interpreter is
shared: one start-up of nbgrader instead of one per student and command (about 0.7 s of CPU
each, 6 to 8 per end-to-end cycle). The instructor's commands, where our code runs, stay
separate processes. The first command that fails ends the process with nbgrader's exit code and
its message.
"""

from __future__ import annotations

import json
import os
import sys


def run(jobs: list[tuple[str, list[str]]]) -> None:
    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp

    for home, arguments in jobs:
        os.chdir(home)
        NbGraderApp.clear_instance()  # traitlets singletons: a new app for every student
        app = NbGraderApp.instance()
        app.initialize(arguments)
        try:
            app.start()
        except NoStart:  # the subcommand ran (as jupyter_core's launch_instance treats it)
            pass
        finally:
            if app.subapp is not None:
                type(app.subapp).clear_instance()


if __name__ == "__main__":  # `-m tests.support.students`: tests/__init__.py skipped the slow import
    run([(home, list(arguments)) for home, arguments in json.load(sys.stdin)])
