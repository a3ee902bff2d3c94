"""Where a command's CPU goes, every process counted: the kernel's process accounting (`acct(2)`).

    python benchmarks/suite_census.py -- python -m pytest -n 4 --dist worksteal

runs the command with process accounting on (root, a kernel with BSD process accounting v3, as
this machine type has) and prints its wall time, the CPU of every process that ended during it
(jailed, forked and short-lived ones included, which sampling /proc misses: see
`cpu_accounting.py`) by command name and by size, and, for a pytest command, by test file: each
process goes to the test that was running on the pytest worker it descends from when it started
(a hook this script loads into pytest records each test's start and end). A process that outlives
its test (a worker's shared sandbox) counts for the test that started it. Processes still running
when the command ends (none, for a finished pytest run) are not counted.

The kernel stops accounting while the file system holding the record has under 2% free (it
resumes above 4%): the script says so when the record is empty.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

RECORD = 64  # sizeof(struct acct_v3)
HZ = 100  # AHZ: the unit of acct_v3's times
HOOK = """
import json, os, resource, time
import pytest

_out = []

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    started = time.time()
    own = resource.getrusage(resource.RUSAGE_SELF)
    yield
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime
    if not _out:
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out.append(open(os.path.join(os.environ["SUITE_CENSUS_DIR"], name + ".jsonl"), "a"))
    record = {"pid": os.getpid(), "test": item.nodeid, "start": started, "end": time.time()}
    record["cpu"] = cpu  # the worker's own CPU in the test (its setup and teardown included)
    _out[0].write(json.dumps(record) + "\\n")
    _out[0].flush()
"""


def comp_t(value: int) -> float:
    """acct's 16-bit float: 13-bit mantissa, 3-bit base-8 exponent, in AHZ ticks -> seconds."""
    return ((value & 0x1FFF) << (3 * (value >> 13))) / HZ


def records(path: Path) -> list[dict]:
    found = []
    data = path.read_bytes()
    for offset in range(0, len(data) - RECORD + 1, RECORD):
        raw = data[offset : offset + RECORD]
        if raw[1] != 3:  # ac_version
            continue
        pid, ppid, began = struct.unpack_from("<III", raw, 16)
        user, system = struct.unpack_from("<HH", raw, 32)
        found.append(
            {
                "pid": pid,
                "ppid": ppid,
                "began": began,
                "cpu": comp_t(user) + comp_t(system),
                "command": raw[48:64].split(b"\0", 1)[0].decode("latin-1"),
            }
        )
    return found


def accounting(path: Path | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(str(path).encode() if path else None) != 0:
        raise OSError(ctypes.get_errno(), "acct(2) failed (root and BSD process accounting needed)")


def by_test(found: list[dict], tests: list[dict], whole: bool = False) -> Counter[str]:
    """CPU by test file (by test with `whole`): each process to the test running on its worker
    when it started."""
    workers = {test["pid"] for test in tests}
    parent = {process["pid"]: process["ppid"] for process in found}
    windows = defaultdict(list)
    for test in tests:
        windows[test["pid"]].append(test)
    cpu: Counter[str] = Counter()
    for process in found:
        if process["pid"] in workers:
            cpu["(the pytest workers themselves)"] += process["cpu"]
            continue
        pid, hops = process["ppid"], 0
        while pid and pid not in workers and hops < 64:
            pid, hops = parent.get(pid, 0), hops + 1
        test = next(
            (
                t["test"]
                for t in windows.get(pid, [])
                if t["start"] - 1 <= process["began"] <= t["end"] + 1
            ),
            "(no test: the pytest controller, tools, or a reparented process)",
        )
        cpu[test if whole else test.split("::")[0]] += process["cpu"]
    return cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=25, help="rows per table")
    parser.add_argument("--keep", type=Path, help="copy the raw record and test windows here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    with tempfile.TemporaryDirectory(prefix="suite-census-") as folder:
        work = Path(folder)
        (work / "suite_census_hook.py").write_text(HOOK)
        record = work / "pacct"
        record.touch()
        env = dict(os.environ, SUITE_CENSUS_DIR=str(work))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work), env.get("PYTHONPATH")]))
        if "pytest" in command[:3]:
            command = [*command, "-p", "suite_census_hook"]
        accounting(record)
        started = time.monotonic()
        try:
            code = subprocess.run(command, env=env).returncode
        finally:
            wall = time.monotonic() - started
            accounting(None)
        found = records(record)
        tests = [json.loads(line) for f in work.glob("*.jsonl") for line in f.open()]
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / "processes.json").write_text(json.dumps(found))
            (args.keep / "tests.json").write_text(json.dumps(tests))
    if not found:
        print("no process was accounted: is the file system under 4% free?", file=sys.stderr)
        return 1
    total = sum(p["cpu"] for p in found)
    print(f"exit {code}; wall {wall:.0f} s; {len(found)} processes, {total:.0f} CPU-s")
    print(f"CPUs kept busy: {total / wall:.2f} of {os.cpu_count()}")
    names: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for process in found:
        names[process["command"]] += process["cpu"]
        counts[process["command"]] += 1
    print("\nCPU-s  processes  command name")
    for name, cpu in names.most_common(args.top):
        print(f"{cpu:7.1f} {counts[name]:9d}  {name}")
    print("\nCPU-s  processes  processes that used")
    for low, high in ((0, 0.5), (0.5, 1), (1, 3), (3, 10), (10, float("inf"))):
        chosen = [p["cpu"] for p in found if low <= p["cpu"] < high]
        print(f"{sum(chosen):7.1f} {len(chosen):9d}  {low}-{high} CPU-s")
    if tests:
        print(f"\nCPU-s  by test file ({len(tests)} tests)")
        for name, cpu in by_test(found, tests).most_common(args.top):
            print(f"{cpu:7.1f}  {name}")
        print(f"\nCPU-s  by test, the processes it started ({len(tests)} tests)")
        for name, cpu in by_test(found, tests, whole=True).most_common(args.top):
            print(f"{cpu:7.1f}  {name}")
    return code


if __name__ == "__main__":
    sys.exit(main())
