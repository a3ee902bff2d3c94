"""`python -m autograder.nbgrader_plugins.nbgrader_main ARGS` = `nbgrader ARGS`, started faster."""

import sys

from autograder.core.speedups import skip_slow_optional_imports

if __name__ == "__main__":
    skip_slow_optional_imports()
    from nbgrader.apps.nbgraderapp import main

    sys.exit(main())
