"""The wheel (issue 18 item 5): it holds every package, the data file and ``py.typed`` and no
tests, and once installed on its own (not from the source tree) it imports and runs a step.
``scripts/check_wheel.sh`` does the same in a new virtual environment that installs the
dependencies too."""

import subprocess
import sys
import sysconfig
import zipfile

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_the_package_and_runs_installed_alone(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    (wheel,) = tmp_path.glob("pymc_dp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {p.relative_to(ROOT).as_posix() + "/__init__.py"
                for p in (ROOT / "pymc_dp").rglob("*") if (p / "__init__.py").is_file()}
    packages.add("pymc_dp/__init__.py")
    assert packages <= set(names)
    assert {"pymc_dp/py.typed", "pymc_dp/data/vcorr.json"} <= set(names)
    assert not any(n.startswith(("tests/", "benchmarks/", "examples/")) for n in names)

    # Installed alone into a new directory; the dependencies come from this environment.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    code = (
        "import numpy as np, pymc as pm, pymc_dp, pymc_dp.model, pymc_dp.results\n"
        "assert pymc_dp.__file__.startswith(TARGET)\n"
        "with pm.Model():\n"
        "    mu = pm.Normal('mu', 0, 5)\n"
        "    pm.Normal('y', mu, 1, observed=np.random.default_rng(0).normal(size=200))\n"
        "    idata = pymc_dp.sample(step=pymc_dp.DPPenalty(eps=1.0), chains=1, draws=20,\n"
        "                           tune=20, random_seed=0, progressbar=False)\n"
        "print(pymc_dp.privacy_report(idata).epsilon)\n"
    )
    env = {"PYTHONPATH": f"{target}:{sysconfig.get_paths()['purelib']}", "PATH": "/usr/bin:/bin",
           "PYMC_DP_LEDGER_DIR": str(tmp_path / "ledgers"), "HOME": str(tmp_path)}
    code = f"TARGET = {str(target)!r}\n" + code
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert float(run.stdout.strip().splitlines()[-1]) <= 1.0 + 1e-9
