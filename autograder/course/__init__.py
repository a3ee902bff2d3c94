"""An nbgrader course: its paths (nbgrader's own layout), the gradebook, build and
submitted files."""
