"""GitHub Classroom, both halves: the student repo template, collecting, pushing feedback.

`init` writes a student repository: the release notebook and a workflow that runs only the
visible checks (`student_repo/`), nothing of the grader. `collect` clones or fetches each
student's repository (any git URL) as a bare mirror and copies the notebook into nbgrader's
`submitted/<student>/<exercise>/`, with the commit time as `timestamp.txt`, so the hidden
checks run on the instructor's side only. `push_feedback` commits nbgrader's feedback HTML to
a `feedback` branch of each repository.

Student repositories are untrusted: the notebook is read from git objects (never through the
file system, so a committed symlink cannot point at the instructor's files), must be a plain
blob (mode 100644, or 100755 with the executable bit; a link, submodule or folder is refused
and named, `student_tree.git_mode_refusal`) under the notebook size limit, and no hooks or
submodules of a student repo ever run.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from autograder.core.registry import resolve
from autograder.core.student_tree import git_mode_refusal
from autograder.grading.notebook import MAX_NOTEBOOK_BYTES

STUDENT_REPO = Path(__file__).with_name("student_repo")
FEEDBACK_BRANCH = "feedback"
_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "attn-grade",
    "GIT_AUTHOR_EMAIL": "attn-grade@localhost",
    "GIT_COMMITTER_NAME": "attn-grade",
    "GIT_COMMITTER_EMAIL": "attn-grade@localhost",
}


class CollectError(RuntimeError):
    """A roster line or a student repository that cannot be collected."""


@dataclass(frozen=True)
class RosterEntry:
    student: str
    url: str


def init_repo(exercise: str, target: Path, *, lang: str = "en") -> list[Path]:
    """Write the student repository template for `exercise` into `target`."""
    from autograder.course.build import build_course

    exercise = resolve(exercise)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        release = build_course(Path(scratch), [exercise], lang=lang)[0]
        notebook = target / f"{exercise}.ipynb"
        shutil.copyfile(release, notebook)
    helpers = target / ".github" / "attn-grade"
    workflows = target / ".github" / "workflows"
    helpers.mkdir(parents=True, exist_ok=True)
    workflows.mkdir(parents=True, exist_ok=True)
    written = [notebook]
    for name in ("visible_checks.py", "requirements.txt"):
        written.append(Path(shutil.copyfile(STUDENT_REPO / name, helpers / name)))
    workflow = (STUDENT_REPO / "classroom.yml").read_text().replace("NOTEBOOK", notebook.name)
    (workflows / "classroom.yml").write_text(workflow)
    written.append(workflows / "classroom.yml")
    return written


def read_roster(path: Path) -> list[RosterEntry]:
    """`student,git-url` per line (`#` starts a comment)."""
    entries = []
    with path.open(newline="") as handle:
        for row in csv.reader(line for line in handle if not line.lstrip().startswith("#")):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 2 or not _STUDENT_ID.match(row[0].strip()):
                raise CollectError(f"roster line {row!r}: expected `student,git-url`")
            entries.append(RosterEntry(row[0].strip(), row[1].strip()))
    return entries


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> bytes:
    env = {**os.environ, **_GIT_ENV}
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args],
        cwd=cwd,
        env=env,
        input=input,
        capture_output=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise CollectError(f"git {args[0]} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout


def mirror(entry: RosterEntry, cache: Path) -> Path:
    """A bare copy of the student's repository, cloned once and fetched afterwards."""
    path = cache / f"{entry.student}.git"
    if path.exists():
        git("fetch", "--prune", "origin", "+refs/heads/*:refs/heads/*", cwd=path)
    else:
        cache.mkdir(parents=True, exist_ok=True)
        git("clone", "--bare", "--no-recurse-submodules", "--", entry.url, str(path))
    return path


def committed_notebook(
    repo: Path, exercise: str, ref: str = "HEAD"
) -> tuple[bytes, datetime | None]:
    """The bytes of `<exercise>.ipynb` at `ref` and the commit's time (UTC)."""
    name = f"{exercise}.ipynb"
    listing = git("ls-tree", "-l", ref, "--", name, cwd=repo).decode().split()
    if len(listing) < 5:
        raise CollectError(f"no regular file {name} at {ref}")
    refusal = git_mode_refusal(listing[0]) or (None if listing[1] == "blob" else "not a file")
    if refusal:
        raise CollectError(f"no regular file {name} at {ref}: it is {refusal}, not collected")
    if int(listing[3]) > MAX_NOTEBOOK_BYTES:
        raise CollectError(f"{name} is larger than {MAX_NOTEBOOK_BYTES} bytes")
    blob = git("cat-file", "blob", listing[2], cwd=repo)
    seconds = int(git("log", "-1", "--format=%ct", ref, cwd=repo).decode().strip())
    return blob, commit_time(seconds)


# A commit's time is whatever the student's git said. One outside this range (a date in the
# year 33658 stopped the whole collect) is not believed: the collection time stands in for it.
EARLIEST_COMMIT = datetime(2000, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)


def commit_time(seconds: int, now: datetime | None = None) -> datetime | None:
    """The commit time as a UTC datetime, or None when it is outside [2000, now + 1 day]."""
    now = now or datetime.now(UTC)
    try:
        when = datetime.fromtimestamp(seconds, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return when if EARLIEST_COMMIT <= when <= now + FUTURE_SLACK else None


def collect(
    roster: list[RosterEntry], exercise: str, course: Path, cache: Path | None = None
) -> dict[str, str]:
    """Copy each student's notebook into `course/submitted/<student>/<exercise>/`; returns
    student -> "collected" or the reason it was not."""
    exercise = resolve(exercise)
    cache = cache or course / "classroom-repos"
    outcome = {}
    for entry in roster:
        try:
            blob, when = committed_notebook(mirror(entry, cache), exercise)
        except CollectError as error:
            outcome[entry.student] = str(error)
            continue
        folder = course / "submitted" / entry.student / exercise
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{exercise}.ipynb").write_bytes(blob)
        outcome[entry.student] = "collected"
        if when is None:
            when = datetime.now(UTC)
            outcome[entry.student] = (
                "collected; its commit time is not believable (before 2000 or in the future): "
                "the collection time stands for it"
            )
        (folder / "timestamp.txt").write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f %Z"))
    return outcome


def push_feedback(
    roster: list[RosterEntry], exercise: str, course: Path, cache: Path | None = None
) -> dict[str, str]:
    """Commit `course/feedback/<student>/<exercise>/*.html` to each repository's `feedback`
    branch (built with git plumbing: no work tree, nothing of the student's checked out)."""
    exercise = resolve(exercise)
    cache = cache or course / "classroom-repos"
    outcome = {}
    for entry in roster:
        pages = sorted((course / "feedback" / entry.student / exercise).glob("*.html"))
        if not pages:
            outcome[entry.student] = "no feedback"
            continue
        repo = mirror(entry, cache)
        rows = []
        for page in pages:
            sha = git("hash-object", "-w", "--stdin", cwd=repo, input=page.read_bytes())
            rows.append(f"100644 blob {sha.decode().strip()}\t{page.name}\n")
        tree = git("mktree", cwd=repo, input="".join(rows).encode()).decode().strip()
        parents = []
        if git("branch", "--list", FEEDBACK_BRANCH, cwd=repo).strip():
            parents = ["-p", f"refs/heads/{FEEDBACK_BRANCH}"]
        message = f"Feedback on {exercise}".encode()
        commit = git("commit-tree", tree, *parents, cwd=repo, input=message).decode().strip()
        git("update-ref", f"refs/heads/{FEEDBACK_BRANCH}", commit, cwd=repo)
        git("push", "origin", f"{commit}:refs/heads/{FEEDBACK_BRANCH}", cwd=repo)
        outcome[entry.student] = "pushed"
    return outcome
