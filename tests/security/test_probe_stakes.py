"""The checks that use a probe's answer (evidence the child reports about its own objects), per
exercise. A notebook that takes over the child's request pipe can answer probes as it likes (an
independent attacker did, docs/security.md "What probes cannot prove"), so these are the points
such a notebook could forge; a value a check pays for is always compared in the grader. Each
exercise's list is kept by hand in its registry entry (`probe_checks`): a new check that uses a
probe must be added there on purpose."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

from autograder.core.registry import EXERCISES, declaration

PROBE_HELPERS = {"call_evaluating", "trained_in_batches", "_summary", "module_summary_of"}


def probing_checks(exercise: str) -> set[str]:
    """The checks of `exercise` whose code (or a function of the checks module it calls) asks
    the child for a probe, directly or through the check-author API's probe helpers."""
    module = importlib.import_module(f"autograder.exercises.{exercise}.checks")
    source = inspect.getsource(module)
    functions = {
        node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
    }

    def probes(name: str, seen: frozenset[str] = frozenset()) -> bool:
        node = functions.get(name)
        if node is None or name in seen:
            return name in PROBE_HELPERS
        if ".probe(" in (ast.get_source_segment(source, node) or ""):
            return True
        called = {
            call.func.id
            for call in ast.walk(node)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        }
        return any(probes(callee, seen | {name}) for callee in called)

    return {name for name in functions if name.startswith("test_") and probes(name)}


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_checks_that_rest_on_probes_are_the_listed_ones(exercise):
    assert probing_checks(exercise) == declaration(exercise).probe_checks
