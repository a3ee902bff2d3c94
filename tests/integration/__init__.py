"""End-to-end: the nbgrader cycle, batches, CI outputs, the CLI, the demo."""
