"""A throwaway PostgreSQL server for tests (Debian's `postgresql`): a data directory and a unix
socket in a temporary directory, no TCP, stopped and removed at teardown.

Use it by importing the fixture: `from tests.support.postgres import postgres`, then
`url = postgres.create_database("gradebook")` gives a SQLAlchemy URL for nbgrader."""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SUPERUSER = "postgres"  # the database superuser initdb creates; local connections are trusted
SERVER_ACCOUNT = "postgres"  # the system user that runs the server when the tests run as root


@dataclass(frozen=True)
class PostgresServer:
    socket_dir: Path
    pg_ctl: tuple[str, ...] = ()  # the server's pg_ctl -D DATA, run as its account
    options: str = ""  # its postgres options (socket only, no TCP)

    def stop(self) -> None:
        """Stop the server at once, as a crash would (`-m immediate`)."""
        _run([*self.pg_ctl, "-m", "immediate", "-w", "stop"])

    def start(self) -> None:
        log = self.socket_dir / "server.log"
        _run([*self.pg_ctl, "-l", str(log), "-o", self.options, "-w", "start"], log)

    def url(self, database: str) -> str:
        """SQLAlchemy URL of `database` on this server (psycopg 3, over the unix socket)."""
        return f"postgresql+psycopg://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(
            host=str(self.socket_dir), user=SUPERUSER, dbname="postgres", autocommit=True
        ) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)


def server_bin() -> Path | None:
    """The directory holding initdb and pg_ctl: Debian's newest version, else the PATH."""
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: float(p.parts[-3])
    )
    if debian:
        return debian[-1].parent
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and shutil.which("initdb") else None


def unavailable(reason: str) -> None:
    """Fail under CI (a test that silently skips there proves nothing), skip elsewhere."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


def run_as_server_account(root: Path) -> list[str]:
    """Command prefix that runs the server's tools as an unprivileged user: initdb and postgres
    refuse root, so a root test run hands `root` to the `postgres` system user."""
    if os.geteuid() != 0:
        return []
    try:
        account = pwd.getpwnam(SERVER_ACCOUNT)
    except KeyError:
        unavailable(f"no `{SERVER_ACCOUNT}` system user to run PostgreSQL as (tests run as root)")
    os.chown(root, account.pw_uid, account.pw_gid)
    return ["runuser", "-u", SERVER_ACCOUNT, "--"]


def _run(command: list[str], log: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        server_log = log.read_text() if log and log.is_file() else ""
        pytest.fail(
            f"{' '.join(command)} failed ({done.returncode}):\n"
            f"{done.stdout}{done.stderr}{server_log}",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A running PostgreSQL server, listening on a unix socket only."""
    bin_dir = server_bin()
    if bin_dir is None:
        unavailable("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    # Not under pytest's tmp dir: that is private to the test user (0700), so the server's
    # account could not reach it, and a unix socket path must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="attn-grade-pg-"))
    data, log = root / "data", root / "server.log"
    try:
        as_server = run_as_server_account(root)
        initdb = [str(bin_dir / "initdb"), "--no-sync", "--auth=trust", "--encoding=UTF8"]
        _run([*as_server, *initdb, f"--username={SUPERUSER}", "-D", str(data)])
        options = f"-c listen_addresses='' -c unix_socket_directories={shlex.quote(str(root))}"
        # fsync off: a throwaway server; crash safety is not what these tests are about.
        options += " -c fsync=off"
        pg_ctl = [*as_server, str(bin_dir / "pg_ctl"), "-D", str(data)]
        _run([*pg_ctl, "-l", str(log), "-o", options, "-w", "start"], log)
        try:
            yield PostgresServer(root, tuple(pg_ctl), options)
        finally:
            subprocess.run([*pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
