"""The README's main example runs as written, with PyMC's default progress bar, on an install
without matplotlib (which neither PyMC nor pymc_dp installs)."""

import os
import re
import subprocess
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A fresh install: matplotlib cannot be imported, whatever this machine has.
NO_MATPLOTLIB = "import sys\nsys.modules['matplotlib'] = None\n"
# The other way in: a private step under plain pm.sample, default progress bar.
PLAIN_PM_SAMPLE = """
with model:
    step = pymc_dp.DPPenalty(eps=1.0, clip_bound=2.0, chains=1)
    plain = pm.sample(draws=20, tune=10, chains=1, step=step)
released = pymc_dp.release(plain, model=model)
print("plain pm.sample:", round(pymc_dp.privacy_report(released).epsilon, 6))
"""


def readme_example() -> str:
    """The first Python block of README.md, as written."""
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


def test_readme_example_runs_with_the_default_progress_bar_without_matplotlib(tmp_path):
    code = NO_MATPLOTLIB + readme_example() + PLAIN_PM_SAMPLE
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "PYMC_DP_LEDGER_DIR": str(tmp_path / "ledgers"),
    }
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "(ε, δ) = (1, " in run.stdout  # the README's privacy report
    assert "plain pm.sample: 1.0" in run.stdout
