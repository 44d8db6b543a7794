#!/usr/bin/env bash
# Build pymc_dp's sdist and wheel with `python -m build`, install the wheel into a new virtual
# environment (its dependencies from the package index, nothing from this checkout), and run a
# private step there: the wheel a user gets from `pip install pymc_dp` works on its own.
#   bash scripts/check_wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# (the interpreter bootstrap.sh found; a venv made from it is a new one on its base Python)
[ -x .venv/bin/python ] || bash scripts/bootstrap.sh
PY=.venv/bin/python
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" -m venv "$WORK/build-env"
"$WORK/build-env/bin/python" -m pip install -q build
"$WORK/build-env/bin/python" -m build -q --outdir "$WORK/dist" "$ROOT"
WHEEL=$(ls "$WORK"/dist/pymc_dp-*.whl)
ls "$WORK"/dist/pymc_dp-*.tar.gz >/dev/null
"$PY" -m venv "$WORK/fresh"
"$WORK/fresh/bin/python" -m pip install -q "$WHEEL"
cd "$WORK"  # (not the checkout: the installed wheel must be what runs)
PYMC_DP_LEDGER_DIR="$WORK/ledgers" "$WORK/fresh/bin/python" - <<'PYEOF'
import sys
import numpy as np, pymc as pm, pymc_dp
assert "fresh" in pymc_dp.__file__, pymc_dp.__file__
for extra in ("matplotlib", "pytest"):  # (a fresh install has neither)
    try:
        __import__(extra)
        sys.exit(f"{extra} is installed in the fresh environment")
    except ImportError:
        pass
y = np.random.default_rng(0).normal(1.0, 1.0, size=500)
with pm.Model():
    mu = pm.Normal("mu", 0.0, 5.0)
    pm.Normal("y", mu, 1.0, observed=y)
    idata = pymc_dp.sample(step=pymc_dp.DPHMC(eps=1.0), chains=2, random_seed=1)
report = pymc_dp.privacy_report(idata)
assert report.epsilon <= 1.0 + 1e-9
print(f"wheel {pymc_dp.__file__}: DPHMC(eps=1.0) ran, spent ε = {report.epsilon:.4f}")
PYEOF
echo "check_wheel.sh: OK ($(basename "$WHEEL"))"
