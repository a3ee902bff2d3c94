"""Hidden means hidden: no source, bytecode, code object or function of the grader (reference,
checks, mistakes, the contract's stand-ins, the parent's grading code) ever enters the student's
process, at any isolation level; only the runtime (`autograder/sandbox/inside/`) does. An
observer notebook (tests/support/observer.py) records everything its process can see while it
is graded, with every name that a check swaps for the contract's stand-in made to raise, so that
every swap happens and the reference code built on those names calls the stand-ins."""

from __future__ import annotations

import base64
import json
import os

import pytest

from autograder.core.registry import EXERCISES, short_name
from autograder.sandbox.isolation import WARM_VARIABLE
from autograder.sandbox.plumbing import RUNTIME_FILES
from tests.conftest import write_notebook
from tests.support.levels import LEVELS, missing
from tests.support.observer import (
    SEPARATOR,
    code_files,
    hidden_lines,
    hidden_pairs,
    observer_notebook,
    pairs,
    swapped_names,
)


def _params():
    for level in LEVELS:
        for exercise in EXERCISES:
            marks = [getattr(pytest.mark, short_name(exercise)), pytest.mark.xdist_group(level)]
            if (reason := missing(level)) is not None:
                marks.append(pytest.mark.skip(reason=reason))
            yield pytest.param(exercise, level, id=f"{level}-{short_name(exercise)}", marks=marks)


def _grader_file(name: str) -> bool:
    """A code object's file that is the grader's: what the child may run is the notebook's
    cells, the runtime, the standard library and packages."""
    if name.startswith("<"):
        return name == "<stand-in>" or "autograder" in name
    return "autograder" in name and name.rsplit("/", 1)[-1] not in RUNTIME_FILES


@pytest.mark.parametrize(("exercise", "level"), list(_params()))
def test_no_grader_code_enters_the_childs_process(exercise, level, drivers, tmp_path):
    notebook = observer_notebook(exercise)
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    answer = drivers(level).grade(path, {}, observe="_agw_observed")
    observed = base64.b64decode(answer["observed"]).decode("utf-8", "replace")
    # a root grader's child is forked from a template (warm start): its memory is the
    # template's too, and is what the observer sees
    warm = os.geteuid() == 0 and os.environ.get(WARM_VARIABLE, "").strip() != "0"
    assert answer["results"]["extra_data"]["isolation"].endswith("+warm") == warm
    items = set(observed.split(SEPARATOR))
    # the observer saw its process (else the test proves nothing): its own code, and the
    # runtime's proxy for every name that was swapped
    assert "qualname _agw_observed" in items
    if swapped_names(exercise):
        swaps = {
            "qualname remote_function.<locals>.function",  # the runtime's proxies
            "class remote.RemoteInstance",
            "class remote.RemoteModule",
            "compiled <stand-in>",  # grader 0.2.6-0.2.7 sent the stand-in's source
        }
        assert swaps & items, "no swap was seen"

    forbidden = hidden_pairs(exercise, notebook)
    assert len(forbidden) > 100
    leaked = sorted(forbidden & pairs(observed))
    assert not leaked, f"{len(leaked)} lines of grader code in the child, e.g. {leaked[:3]}"
    assert not sorted(name for name in code_files(observed) if _grader_file(name))

    shown = json.dumps(answer["results"], indent=1) + answer["text"] + answer["feedback"]
    assert not sorted(line for line in hidden_lines(exercise, notebook) if line in shown)
