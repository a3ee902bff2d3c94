"""The dotted paths of nbgrader plugins in course configs written before attn-grade 0.2.0.

nbgrader imports the classes a course config names; configs written by the old layout name
`autograder.nbgrader_bridge.<module>.<Class>`. Each such module resolves to its new home in
`autograder.nbgrader_plugins`, so an old course keeps working; `attn-grade build` rewrites the
course's generated config (attn_grade_config.py) with the new paths.
"""

import importlib
import sys

MOVED = ("preprocessors", "feedback", "intake", "lms", "sanitize", "report_cell")

for _name in MOVED:
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(
        f"autograder.nbgrader_plugins.{_name}"
    )
