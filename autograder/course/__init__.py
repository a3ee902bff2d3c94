"""An nbgrader course: its paths (nbgrader's own layout), the gradebook, build, submitted files,
the demo."""
