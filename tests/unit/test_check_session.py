"""grading/check_session.py: one pytest session per process and exercise, reused by every
grading, behaves as a session of its own per grading did: nothing of one grading reaches the
next, a broken check module breaks every grading, and a grading that pytest's protocol did not
finish is a GraderError after which the next grading still runs."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.errors import GraderError
from autograder.grading import check_session
from autograder.grading.runner import grade_notebook, run_checks
from autograder.grading.submission import Submission
from tests.conftest import source_notebook, write_notebook

EX = "ex1_numpy_attention"
CHECK = "test_softmax_matches_reference"


@pytest.fixture
def own_sessions(monkeypatch):
    """This test's sessions only: none made by an earlier test, none left for a later one."""
    monkeypatch.setattr(check_session, "_SESSIONS", {})
    yield check_session._SESSIONS
    for session in check_session._SESSIONS.values():
        session.close()


@pytest.fixture
def module_as_checks(monkeypatch, tmp_path, own_sessions):
    """Make `text` the check module of EX for this test."""

    def use(text: str) -> None:
        # a name of its own: pytest keeps a module outside a package in sys.modules by its name
        path = tmp_path / f"checks_{abs(hash(str(tmp_path)))}.py"
        path.write_text(text)
        monkeypatch.setattr(check_session, "checks_module_path", lambda exercise: path)

    return use


def unavailable() -> Submission:
    return Submission([], unavailable="not run in this test")


def test_a_grading_gets_its_own_submission_not_the_previous_ones(
    tmp_path, shared_sandbox, own_sessions
):
    """`submission` is session-scoped for the checks: each grading's last check runs with no
    next one, so it is torn down and the next grading's checks get the next notebook."""
    mistake = next(m for m in catalogue_for(EX) if m.check == CHECK)
    correct = write_notebook(source_notebook(EX), tmp_path / f"{EX}.ipynb")
    wrong = write_notebook(
        source_notebook(EX, replace={mistake.target: mistake.source}),
        tmp_path / "wrong" / f"{EX}.ipynb",
    )
    verdicts = [
        grade_notebook(path, only=[CHECK], seed=3, shared=shared_sandbox.get()).checks[0].passed
        for path in (correct, wrong, correct, wrong)
    ]
    assert verdicts == [True, False, True, False]
    assert len(own_sessions) == 1, "the four gradings used one session"


def test_every_grading_of_a_broken_check_module_is_an_error(module_as_checks):
    module_as_checks("def test_broken(:\n")
    for _ in range(2):
        with pytest.raises(GraderError, match="collecting"):
            run_checks(EX, unavailable(), 1)


CHECKS = """
from autograder.authoring import check

SEEN = []


@check(points=1, grade_id="g")
def test_first(submission, seed):
    SEEN.append(seed)
    {body}
"""


@pytest.mark.parametrize(
    ("raised", "name"),
    [
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("__import__('pytest').exit('out')", "Exit"),
    ],
)
def test_a_run_pytest_did_not_finish_is_an_error_and_the_next_one_runs(
    module_as_checks, own_sessions, raised, name
):
    """What pytest's protocol lets through (an interrupt, pytest.exit) ends the grading with
    no results, as `pytest.main` did; anything else a check raises fails that check."""
    module_as_checks(CHECKS.format(body=f"if len(SEEN) == 1:\n        {raised}"))
    with pytest.raises(GraderError, match=name):
        run_checks(EX, unavailable(), 1)
    assert own_sessions == {}, "the session that did not finish is discarded"
    graded = run_checks(EX, unavailable(), 2)
    assert [result.passed for result in graded.results] == [True]
    assert len(own_sessions) == 1


def test_seeds_are_per_grading(module_as_checks):
    module_as_checks(CHECKS.format(body="pass"))
    seeds = [run_checks(EX, unavailable(), base).results[0].seed for base in (1, 2, 1)]
    assert seeds[0] == seeds[2] != seeds[1]


FAILS_THEN = """
from autograder.authoring import check, fail


@check(points=1, grade_id="g")
def test_first(submission, seed):
    if submission.fresh is not None:  # run again by a diagnosis of its failure
        {on_rerun}
    fail(f"seed {{seed}}")
"""


def test_what_escapes_a_hook_ends_the_grading_and_the_next_one_is_clean(
    module_as_checks, own_sessions, shared_sandbox, tmp_path
):
    """An exception raised while a report is made (here by a diagnosis that runs the check
    again) is not caught by pytest's protocol: the grading is an error, the session with the
    check still set up is discarded, and the next submission's checks get the next submission."""
    module_as_checks(FAILS_THEN.format(on_rerun="raise GeneratorExit"))
    path = write_notebook(source_notebook(EX), tmp_path / f"{EX}.ipynb")
    for seed in (1, 2):
        with pytest.raises(GraderError, match="GeneratorExit"):
            grade_notebook(path, seed=seed, shared=shared_sandbox.get())
        assert own_sessions == {}


@pytest.mark.parametrize("outcome", ["skip", "fail", "xfail"])
def test_a_check_failing_again_with_a_pytest_outcome_is_only_failing_again(
    module_as_checks, shared_sandbox, tmp_path, outcome
):
    module_as_checks(FAILS_THEN.format(on_rerun=f"__import__('pytest').{outcome}('again')"))
    path = write_notebook(source_notebook(EX), tmp_path / f"{EX}.ipynb")
    try:
        report = grade_notebook(path, seed=5, shared=shared_sandbox.get())
    except BaseException as error:  # noqa: BLE001 - an escaped skip would skip this test
        pytest.fail(f"the grading raised {type(error).__name__}: {error}")
    assert [(c.passed, c.message) for c in report.checks] == [
        (False, f"seed {report.checks[0].seed}")
    ]


def test_the_warnings_checks_raise_are_not_kept_between_gradings(module_as_checks, own_sessions):
    module_as_checks(CHECKS.format(body="__import__('warnings').warn('w', RuntimeWarning)"))
    for base in (1, 2, 3):
        run_checks(EX, unavailable(), base)
        (session,) = own_sessions.values()
        assert session.config.hook.pytest_warning_recorded._call_history == []
