#!/usr/bin/env bash
# Create ./.venv with a Python >= 3.12 and install pymc_dp into it (editable).
# Usage: bash scripts/bootstrap.sh [EXTRA]   e.g. `bash scripts/bootstrap.sh test`
# Finds the interpreter itself: $PYTHON, then python3.13/python3.12/python3 on PATH, then pyenv.
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"

is_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; }

find_python() {
  local c
  for c in "${PYTHON:-}" python3.13 python3.12 python3; do
    [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && is_ok "$c" && { command -v "$c"; return; }
  done
  local root
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for c in $(ls -d "$root"/versions/3.1[2-9]*/bin/python 2>/dev/null | sort -rV); do
    is_ok "$c" && { echo "$c"; return; }
  done
  echo "pymc_dp needs Python >= 3.12: none found on PATH or under pyenv; set PYTHON=/path/to/python3.12" >&2
  exit 1
}

if [ ! -x .venv/bin/python ] || ! is_ok .venv/bin/python; then
  py=$(find_python)
  echo "Creating .venv with $py ($("$py" --version))"
  rm -rf .venv
  "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
spec="."
[ -n "$extra" ] && spec=".[$extra]"
.venv/bin/python -m pip install -q -e "$spec"
