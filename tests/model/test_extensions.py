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


def test_the_registrations_pymc_makes_for_a_users_custom_distribution_are_accepted():
    # (PyMC registers the user's logp= and dist= in its own dispatch registries, which
    # build the model's graphs, checked as graphs; they do not run when a graph compiles)
    import numpy as np
    import pymc as pm

    with pm.Model():
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=lambda v, mu: -((v - mu) ** 2), observed=np.zeros(5))
        pm.CustomDist("z", mu, dist=lambda mu, size: pm.Normal.dist(mu, 1, size=size),
                      observed=np.zeros(5))
    assert foreign_extensions() == []


def test_an_elemwise_naming_a_function_outside_numpy_runs_foreign_code(monkeypatch):
    import types

    import pytensor.scalar as ps
    import pytensor.tensor as pt

    from pytensor.tensor.elemwise import Elemwise

    from pymc_dp.model.row_locality import foreign_ops

    # (PyTensor imports an nfunc_spec by name and calls it when it computes in Python)
    module = types.ModuleType("pymc_dp_test_functions")
    module.mul = lambda a, b: a
    monkeypatch.setitem(sys.modules, module.__name__, module)
    x = pt.vector("x")
    assert foreign_ops([Elemwise(ps.mul, nfunc_spec=("pymc_dp_test_functions.mul", 2, 1))(x, x)])
    assert not foreign_ops([Elemwise(ps.mul, nfunc_spec=("multiply", 2, 1))(x, x),
                            pt.polygamma(1, x), pt.switch(x > 0, x, 1)])


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
    "a mode": """
import pytensor
from pytensor.compile import mode
from pytensor.graph.rewriting.basic import in2out, node_rewriter

@node_rewriter([CumOp])
def _ages(fgraph, node):
    return [pt.as_tensor(AGES) + 0 * node.outputs[0]]

# (the mode get_default_mode keeps for the configuration's name)
mode._CACHED_RUNTIME_MODES[("MODE", pytensor.config.linker)] = (
    mode.get_default_mode().register((in2out(_ages), 0.5)))
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
