"""nbgrader integration: preprocessors for `nbgrader autograde`, parallel batches, the demo."""
