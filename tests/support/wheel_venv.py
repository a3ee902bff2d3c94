"""A fresh venv with attn-grade installed from its wheel, without downloading anything.

The venv's dependencies are hard links to this venv's site-packages (copies across file
systems): the same layout as a real install, so Landlock's read list and the child's imports
behave as they would. attn-grade's own editable install is left out; then pip installs the
wheel with `--no-deps`.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

_SKIP = ("__editable__", "attn_grade", "__pycache__")


def _link_tree(source: Path, target: Path) -> None:
    for entry in source.iterdir():
        if entry.name.startswith(_SKIP):
            continue
        if entry.is_dir() and not entry.is_symlink():
            for folder, _, files in os.walk(entry):
                destination = target / Path(folder).relative_to(source)
                destination.mkdir(parents=True, exist_ok=True)
                for name in files:
                    _link(Path(folder) / name, destination / name)
        else:
            _link(entry, target / entry.name)


def _link(source: Path, target: Path) -> None:
    """A hard link, or a copy when the two venvs are on different file systems (slower)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        shutil.copy2(source, target, follow_symlinks=False)


def _copy_scripts(source_bin: Path, target_bin: Path) -> None:
    """Console scripts of the dependencies (nbgrader runs `alembic` from PATH)."""
    old = f"#!{source_bin}/python".encode()
    for script in source_bin.iterdir():
        if script.name.startswith(("python", "activate", "attn-grade", "pip")):
            continue
        text = script.read_bytes()
        if script.is_file() and text.startswith(old):
            target = target_bin / script.name
            target.write_bytes(b"#!" + str(target_bin / "python").encode() + text[len(old) :])
            target.chmod(0o755)


def install_wheel(wheel: Path, venv: Path) -> Path:
    """A venv at `venv` with `wheel` installed; returns its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    _link_tree(Path(sysconfig.get_paths()["purelib"]), site)
    share = Path(sys.prefix) / "share"  # data files of the dependencies (nbconvert templates)
    if share.is_dir():
        (venv / "share").mkdir()
        _link_tree(share, venv / "share")
    _copy_scripts(Path(sys.executable).parent, venv / "bin")
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    return venv / "bin"
