"""Benchmark: the Gradescope bundle built and run the way Gradescope does, in a rootful podman
container made from a minimal Debian root file system (no image registry needed): setup.sh
with its real pip install, once with the PyTorch CPU index (the default) and once without
(`--torch-index none`), then `run_autograder` on the reference, the demo's mistake, the blank
release, an explicit `jail` (refused) and a non-root user.

    python benchmarks/gradescope_container.py [--dir /tmp/attn-gs] [--exercise ex1]
        [--setup-sh PATH --setup-name NAME]

Needs root and `apt-get install podman runc mmdebstrap`. The root file system (bookworm
minbase with python3, python3-venv, python3-pip, ca-certificates) is built once with
mmdebstrap from the host's apt mirror and kept in --dir. The setup container gets the host's
network and its pip configuration read-only (pip.conf, PIP_* variables, and the local wheel
folders, file:// indexes, constraints and CA bundle they name), so pip installs from what the
host installs from. Runs use Docker's default capabilities and podman's seccomp profile (the
containers.conf of tests/support/podman.py). `--setup-sh` measures another setup.sh (e.g. an
older release's) as a third setup. Prints each figure as it is measured and rewrites
benchmarks/results/gradescope_container.json after each. Not a test (minutes, and the
network): tests/integration/test_gradescope_container.py is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.core.registry import resolve
from autograder.demo import student_notebook
from tests.support.podman import CONTAINERS_CONF, DOCKER_CAPABILITIES

RESULTS = Path(__file__).with_name("results") / "gradescope_container.json"
BASE_IMAGE = "attn-gs-bookworm"
PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"
METADATA = {"id": 1, "users": [{"email": "s@example.edu", "id": 4242, "name": "S"}],
            "previous_submissions": []}  # fmt: skip
SETUP = """set -e
mkdir -p /autograder/source /autograder/submission /autograder/results
cp -a /bundle/. /autograder/source/
cd /autograder/source && bash ./setup.sh
cp /autograder/source/run_autograder /autograder/run_autograder
chmod 755 /autograder/run_autograder
"""
RUN = """cp /in/notebook.ipynb /autograder/submission/{notebook}
cp /in/metadata.json /autograder/submission_metadata.json
cd /autograder && {prefix}./run_autograder; echo "run_autograder exit $?"
"""


class Figures:
    def __init__(self) -> None:
        self.data: dict = {"setup": {}, "runs": {}}

    def add(self, section: str, name: str, value: dict) -> None:
        self.data[section][name] = value
        print(f"{section} {name}: {json.dumps(value)}", flush=True)
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(self.data, indent=2) + "\n")


def podman(*args: str, check: bool = True, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, **options)
    if check and done.returncode != 0:
        raise SystemExit(f"podman {' '.join(args[:3])} failed:\n{done.stdout}{done.stderr}")
    return done


def apt_mirrors() -> list[str]:
    """`deb URI SUITE main` lines of the host's own apt sources (deb822 or one-line)."""
    lines = []
    for path in Path("/etc/apt").glob("sources.list.d/*.sources"):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(re.findall(r"^(\w+):\s*(.+)$", stanza, flags=re.M))
            for suite in fields.get("Suites", "").split():
                lines.append(f"deb {fields['URIs'].split()[0]} {suite} main")
    listed = Path("/etc/apt/sources.list")
    if listed.exists():
        lines += [line for line in listed.read_text().splitlines() if line.startswith("deb ")]
    return lines


def base_image(scratch: Path, figures: Figures) -> None:
    if podman("image", "exists", BASE_IMAGE, check=False).returncode == 0:
        return
    tarball = scratch / "bookworm-rootfs.tar"
    if not tarball.exists():
        started = time.monotonic()
        command = ["mmdebstrap", "--variant=minbase", f"--include={PACKAGES}", "bookworm"]
        partial = tarball.with_suffix(".partial.tar")
        done = subprocess.run([*command, str(partial), *apt_mirrors()], capture_output=True)
        if done.returncode != 0:
            raise SystemExit(f"mmdebstrap failed:\n{done.stderr.decode()[-3000:]}")
        partial.rename(tarball)
        seconds = round(time.monotonic() - started, 1)
        figures.add("setup", "mmdebstrap root file system", {"s": seconds})
    podman("import", "--change", 'CMD ["/bin/bash"]', str(tarball), BASE_IMAGE)


def pip_mounts() -> list[str]:
    """-v/-e options that give a container the host's pip configuration, read-only."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                          text=True)  # fmt: skip
    paths = {"/etc/pip.conf", "/etc/xdg/pip"}
    for value in re.findall(r"='([^']*)'", done.stdout):
        for word in value.split():
            path = word.removeprefix("file://").rstrip("/")
            # a PEP 503 index's pages link to files beside its simple/ folder
            paths.add(str(Path(path).parent) if path.endswith("/simple") else path)
    options = []
    for path in sorted(p for p in paths if p.startswith("/") and os.path.exists(p)):
        options += ["-v", f"{path}:{path}:ro"]
    for name, value in os.environ.items():
        if name.startswith("PIP_"):
            options += ["-e", f"{name}={value}"]
    return options


def setup(scratch: Path, exercise: str, name: str, options: list[str], figures: Figures,
          setup_sh: Path | None = None) -> str:  # fmt: skip
    """Build the bundle, run its setup.sh as Gradescope does; the committed image's name."""
    bundle = scratch / f"bundle-{name}"
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir()
    zipped = scratch / f"autograder-{name}.zip"
    command = [sys.executable, "-m", "autograder.cli.app", "gradescope", exercise]
    subprocess.run([*command, "--out", str(zipped), *options], check=True, capture_output=True)
    shutil.unpack_archive(zipped, bundle)
    if setup_sh is not None:
        shutil.copy(setup_sh, bundle / "setup.sh")
    image, container = f"attn-gs-{name}", f"attn-gs-setup-{name}"
    podman("rm", "-f", container, check=False)
    started = time.monotonic()
    done = podman("run", "--name", container, "--network=host", *pip_mounts(),
                  "-v", f"{bundle}:/bundle:ro", BASE_IMAGE, "bash", "-c", SETUP,
                  check=False)  # fmt: skip
    seconds = time.monotonic() - started
    log = done.stdout + done.stderr
    (scratch / f"setup-{name}.log").write_text(log)
    figures.add("setup", name, {
        "exit": done.returncode, "s": round(seconds, 1),
        "pip_retries": log.count("Retrying ("),
        "index_skipped": "cannot be reached" in log,
    })  # fmt: skip
    if done.returncode == 0:
        podman("commit", "-q", container, image)
    podman("rm", "-f", container, check=False)
    return image


def grade(scratch: Path, image: str, exercise: str, name: str, notebook: dict,
          options: list[str], figures: Figures, prefix: str = "") -> None:  # fmt: skip
    """One submission in a fresh container from `image`, as Gradescope runs it."""
    inputs = scratch / f"in-{name}"
    inputs.mkdir(exist_ok=True)
    (inputs / "notebook.ipynb").write_text(json.dumps(notebook))
    (inputs / "metadata.json").write_text(json.dumps(METADATA))
    container = f"attn-gs-run-{name}"
    podman("rm", "-f", container, check=False)
    script = RUN.format(notebook=f"{exercise}.ipynb", prefix=prefix)
    started = time.monotonic()
    done = podman("run", "--name", container, *options, "-v", f"{inputs}:/in:ro", image,
                  "bash", "-c", script, check=False)  # fmt: skip
    seconds = time.monotonic() - started
    copied = podman("cp", f"{container}:/autograder/results/results.json",
                    str(inputs / "results.json"), check=False)  # fmt: skip
    podman("rm", "-f", container, check=False)
    exit_code = re.findall(r"run_autograder exit (\d+)", done.stdout)
    figure: dict = {"container_s": round(seconds, 1), "exit": int(exit_code[-1]) if exit_code
                    else None, "stderr": done.stderr.strip()[-300:]}  # fmt: skip
    if copied.returncode == 0:
        results = json.loads((inputs / "results.json").read_text())
        extra = results.get("extra_data", {})
        figure |= {"score": results["score"], "status": extra.get("status"),
                   "isolation": extra.get("isolation"),
                   "execution_time": results.get("execution_time")}  # fmt: skip
    else:
        figure["results_json"] = "none"
    figures.add("runs", name, figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dir", default="/tmp/attn-gs", help="scratch (keeps the root fs)")
    parser.add_argument("--exercise", default="ex1")
    parser.add_argument("--setup-sh", type=Path, help="also measure this setup.sh")
    parser.add_argument("--setup-name", default="other setup.sh")
    args = parser.parse_args()
    for tool in ("podman", "runc", "mmdebstrap"):
        if shutil.which(tool) is None:
            raise SystemExit(f"needs {tool}: apt-get install podman runc mmdebstrap")
    exercise = resolve(args.exercise)
    scratch = Path(args.dir)
    scratch.mkdir(parents=True, exist_ok=True)
    conf = scratch / "containers.conf"
    conf.write_text(CONTAINERS_CONF.format(caps=", ".join(f'"{c}"' for c in DOCKER_CAPABILITIES)))
    os.environ["CONTAINERS_CONF"] = str(conf)
    figures = Figures()
    base_image(scratch, figures)
    image = setup(scratch, exercise, "torch-index-none", ["--torch-index", "none"], figures)
    setup(scratch, exercise, "torch-index-default", [], figures)
    if args.setup_sh:
        setup(scratch, exercise, args.setup_name, [], figures, args.setup_sh)
    course = scratch / "course"
    shutil.rmtree(course, ignore_errors=True)
    command = [sys.executable, "-m", "autograder.cli.app", "build", "--course", str(course)]
    subprocess.run([*command, exercise], check=True, capture_output=True)
    release = json.loads(next((course / "release").rglob(f"{exercise}.ipynb")).read_text())
    notebooks = {s: student_notebook(release, exercise, s) for s in ("alice", "bob", "carol")}
    for name, student, options, prefix in (
        ("reference", "alice", [], ""),
        ("demo mistake", "bob", [], ""),
        ("blank", "carol", [], ""),
        ("explicit jail", "alice", ["-e", "ATTN_GRADE_ISOLATION=jail"], ""),
        ("non-root", "alice", [], "setpriv --reuid=65534 --regid=65534 --clear-groups "),
    ):
        grade(scratch, image, exercise, name.replace(" ", "-"), notebooks[student], options,
              figures, prefix)  # fmt: skip


if __name__ == "__main__":
    main()
