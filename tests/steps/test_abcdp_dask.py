"""ABCDP's simulations on a ``dask.distributed`` cluster through its executor hook: the same
draws for a seed as a run without one (issue 16, item 5). Needs the ``dask`` extra; run with
``-m dask`` (README)."""

import logging
import sys

import numpy as np
import pymc as pm
import pytest

import pymc_dp

pytestmark = pytest.mark.dask

def mixture_of_uniforms(rng, theta, size):
    """Park et al. eq. (10): a mixture of Uniform[i−1, i), i = 1..5, with weights θ."""
    theta = np.asarray(theta, dtype=float)
    component = rng.choice(theta.size, size=size, p=theta / theta.sum())
    return component + rng.random(size)


def _model():
    y = mixture_of_uniforms(np.random.default_rng(0), [0.25, 0.04, 0.33, 0.04, 0.34], 300)
    with pm.Model() as model:
        theta = pm.Dirichlet("theta", a=np.ones(5))
        pm.Simulator("y", mixture_of_uniforms, theta, observed=y)
    return model


def _draws(model, tmp_path, **kwargs):
    with model:
        step = pymc_dp.ABCDP(eps=1.0, threshold=0.25, chains=1, ledger_dir=tmp_path / "l",
                             **kwargs)
        idata = pymc_dp.sample(step=step, draws=4, chains=1, cores=1, random_seed=7,
                               progressbar=False)
    return idata.posterior["theta"].values, idata.sample_stats["prior_draws_chain"].values


def test_simulations_on_a_dask_cluster_give_the_local_draws(tmp_path):
    # A missing extra is a failure, not a skip: this test was asked for by name (-m dask).
    import cloudpickle

    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    # The workers are other processes: they get the simulator by value (this test module is
    # not importable there).
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    model = _model()
    local = _draws(model, tmp_path / "local")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        on_cluster = _draws(model, tmp_path / "cluster", executor=client.get_executor(),
                            chunk_size=16)
        # what the workers ran: every task the scheduler saw, by the function it called
        tasks = client.run_on_scheduler(
            lambda dask_scheduler: sum(
                sum(p.state_counts.values()) for p in dask_scheduler.task_prefixes.values()
            )
        )
    np.testing.assert_array_equal(on_cluster[0], local[0])
    np.testing.assert_array_equal(on_cluster[1], local[1])
    assert tasks > 0  # the simulations did run on the cluster
