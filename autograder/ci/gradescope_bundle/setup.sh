#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
# It installs the grader from the bundled wheel into $ROOT/venv (CPU PyTorch), then makes the
# installed grader (each exercise's reference, hidden checks and mistake catalogue) readable by
# root only.
#
# The extra package index for CPU PyTorch is the bundle's `torch_index` (attn-grade.json, from
# `attn-grade gradescope --torch-index URL|none`); ATTN_GRADE_TORCH_INDEX overrides it. It is
# used only if it answers within 15 s (else a warning, and pip installs without it), and pip
# gives up on an unreachable index after 2 retries of 15 s (pip's default is 5 per package).
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
  INDEX="${ATTN_GRADE_TORCH_INDEX:-$("$PYTHON" -c '
import json, sys
print(json.load(open(sys.argv[1])).get("torch_index", "none"))' "$ROOT/source/attn-grade.json")}"
  EXTRA=()
  if [ "$INDEX" != none ] && [ -n "$INDEX" ]; then
    if "$PYTHON" - "$INDEX" <<'EOF'
import os, sys, urllib.error, urllib.parse, urllib.request
url = sys.argv[1]
def unreachable(why):
    print(f"setup.sh: the package index {url} cannot be reached ({why}); installing without "
          "it (ATTN_GRADE_TORCH_INDEX or `attn-grade gradescope --torch-index` sets it)",
          file=sys.stderr)
    sys.exit(1)
if url.startswith("file:"):
    path = urllib.request.url2pathname(urllib.parse.urlparse(url).path)
    os.path.isdir(path) or unreachable("no such directory")
    sys.exit(0)
try:
    urllib.request.urlopen(url, timeout=15).close()
except urllib.error.HTTPError:
    pass  # the server answered
except (OSError, ValueError) as error:
    unreachable(error)
EOF
    then
      EXTRA=(--extra-index-url "$INDEX")
    fi
  fi
  "$PYTHON" -m venv "$ROOT/venv"
  "$ROOT/venv/bin/pip" install --retries 2 --timeout 15 ${EXTRA[@]+"${EXTRA[@]}"} \
    "$ROOT"/source/attn_grade-*.whl
fi
SITE="$("$ROOT/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ "$(id -u)" = 0 ]; then
  chown -R root:root "$ROOT/source" "$SITE/autograder"
fi
chmod -R go-rwx "$ROOT/source" "$SITE/autograder"
