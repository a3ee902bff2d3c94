"""Tests of single modules, without grading a notebook end to end."""
