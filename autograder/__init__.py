"""attn-grade: auto-graded attention/transformer exercises with a sandboxed grader."""

__version__ = "0.1.0"
