"""`python -m autograder.nbgrader_plugins.nbgrader_main ARGS` = `nbgrader ARGS`, started faster."""

import sys

from autograder.nbgrader_plugins.speedups import (
    skip_slow_optional_imports,
    stamp_new_gradebooks_in_process,
)

if __name__ == "__main__":
    skip_slow_optional_imports()
    from nbgrader.apps.nbgraderapp import main

    stamp_new_gradebooks_in_process()

    sys.exit(main())
