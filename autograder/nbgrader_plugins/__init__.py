"""Classes nbgrader loads by dotted path from the course config: preprocessors, exporters,
intake."""
