"""Grading in CI: JUnit XML, GitHub Classroom, Gradescope (one module per platform)."""
