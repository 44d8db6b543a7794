"""The code passes the project's ruff rules (``[tool.ruff]`` in ``pyproject.toml``).

ruff is in the ``test`` extra: without it this test fails, it does not skip.
"""

import subprocess
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
