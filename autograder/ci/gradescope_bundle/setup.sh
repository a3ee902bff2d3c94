#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
# It installs the grader from the bundled wheel into $ROOT/venv (CPU PyTorch), then makes the
# installed grader (each exercise's reference, hidden checks and mistake catalogue) readable by
# root only.
set -euo pipefail
ROOT="${ATTN_GRADE_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${ATTN_GRADE_PYTHON:-python3.11}"
if [ ! -x "$ROOT/venv/bin/attn-grade" ] && ! command -v "$PYTHON" >/dev/null; then
  apt-get update
  apt-get install -y software-properties-common
  add-apt-repository -y ppa:deadsnakes/ppa
  apt-get update
  apt-get install -y python3.11 python3.11-venv
fi
if [ ! -x "$ROOT/venv/bin/attn-grade" ]; then
  "$PYTHON" -m venv "$ROOT/venv"
  "$ROOT/venv/bin/pip" install --extra-index-url https://download.pytorch.org/whl/cpu \
    "$ROOT"/source/attn_grade-*.whl
fi
SITE="$("$ROOT/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ "$(id -u)" = 0 ]; then
  chown -R root:root "$ROOT/source" "$SITE/autograder"
fi
chmod -R go-rwx "$ROOT/source" "$SITE/autograder"
