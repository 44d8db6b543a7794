#!/usr/bin/env bash
# Create ./.venv with a Python >= 3.12 and install pymc_dp into it (editable).
# Usage: bash scripts/bootstrap.sh [EXTRA]   e.g. `bash scripts/bootstrap.sh test` (test extras,
# which include the docs extra) or `bash scripts/bootstrap.sh docs` (to build the site)
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
# The tests build the documentation site too: `test` installs the `docs` extra with it.
case ",$extra," in
  *,test,*) case ",$extra," in *,docs,*) ;; *) extra="$extra,docs" ;; esac ;;
esac
# Installs Debian packages where their programs are missing (as root, with apt-get).
apt_install() {  # apt_install WHAT PACKAGE...
  local what="$1"; shift
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian's $* ($what)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "Debian's $* missing and no root to install them: $what will FAIL." >&2
  fi
}
# The tests of the PostgreSQL budget store start a server of their own from Debian's
# postgresql package; the documentation site's test opens the built pages in Debian's
# chromium, driven through chromedriver.
case ",$extra," in
  *,test,*)
    if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
      apt_install "the documentation site's browser test" chromium chromium-driver
    fi
    if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
      apt_install "the PostgreSQL budget store's tests" postgresql
    fi
    ;;
esac
spec="."
[ -n "$extra" ] && spec=".[$extra]"
.venv/bin/python -m pip install -q -e "$spec"
