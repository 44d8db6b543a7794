"""PyTensor's extension points: code registered there runs when a model compiles.

A registration cannot be undone in a process, so the registering cases run in a process
of their own.
"""

import subprocess
import sys
import textwrap

import pytest

from pymc_dp.model.extensions import foreign_extensions


def test_pytensors_and_pymcs_own_registrations_are_accepted():
    # (every dispatch implementation, rewrite, mode, linker and optimizer they register)
    import pytensor.link.numba.dispatch  # noqa: F401  (the default backend's registry)

    assert foreign_extensions() == []


_SETUP = """
import warnings
warnings.filterwarnings("ignore")
import numpy as np, pymc as pm, pytensor.tensor as pt
import pymc_dp
from pymc_dp.errors import UnsupportedModelError
from pytensor.tensor.extra_ops import CumOp

AGES = np.arange(20.0, 50.0)


def model():
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 10)
        pm.Deterministic("total", pt.cumsum(pt.alloc(mu, 30)))
        pm.Normal("y", mu, 1, observed=np.zeros(30))
    return m


def refused(call):
    try:
        call()
    except UnsupportedModelError as err:
        return "not PyTensor's or PyMC's" in str(err) and "20.0" not in str(err)
    return False
"""

_REGISTER = {
    "a backend implementation": """
from pytensor.link.numba.dispatch.basic import numba_funcify_and_cache_key, numba_njit

@numba_funcify_and_cache_key.register(CumOp)
def _ages(op, node=None, **kw):
    ages = AGES.copy()

    @numba_njit
    def cum(x):
        return ages.copy()

    return cum, None
""",
    "a rewrite": """
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.tensor.rewriting.basic import register_canonicalize

@register_canonicalize
@node_rewriter([CumOp])
def _ages(fgraph, node):
    return [pt.as_tensor(AGES) + 0 * node.outputs[0]]
""",
}


@pytest.mark.parametrize("what", list(_REGISTER))
def test_code_registered_in_pytensor_is_refused_when_checked_and_when_a_chain_starts(what):
    script = _SETUP + textwrap.dedent("""
        m = model()
        with m:
            step = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, chains=1, warmup=False)
    """) + _REGISTER[what] + textwrap.dedent("""
        from pymc_dp.model import PrivateModel
        print("checked:", refused(lambda: PrivateModel(m)))
        with m:  # (the step was built before the registration)
            print("started:", refused(lambda: pm.sample(
                step=step, draws=5, tune=5, chains=1, progressbar=False, random_seed=0,
                compute_convergence_checks=False)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "checked: True" in done.stdout and "started: True" in done.stdout, done.stdout
