"""The suite. Its processes (pytest's workers, the corpus's drivers, the kernel measurements)
skip jsonschema's optional `rfc3987_syntax` as the grader's own processes do: building its
grammar costs about 1 s of CPU in every process that loads nbformat
(autograder/nbgrader_plugins/speedups.py)."""

from autograder.nbgrader_plugins.speedups import skip_slow_optional_imports

skip_slow_optional_imports()
