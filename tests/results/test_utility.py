"""The privacy–utility table (pymc_dp.results.privacy_utility): ε from each result's own
report, never from its label; distance to a reference in the reference's sds, or width."""

import numpy as np
import pymc as pm
import pytest
import xarray as xr

import pymc_dp

from pymc_dp.results import privacy_utility

SAMPLE = dict(progressbar=False, cores=1, compute_convergence_checks=False, random_seed=2)
Y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)


def _model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 2.0, shape=2)  # a vector: scalars are labelled
        pm.Normal("y", mu, sigma[0], observed=Y)
    return model


@pytest.fixture(scope="module")
def runs():
    found = {}
    for eps in (4.0, 2.0):
        with _model():
            step = pymc_dp.DPPenalty(eps=eps, clip_bound=2.0)
            found[eps] = pymc_dp.sample(step=step, draws=20, tune=10, chains=2, **SAMPLE)
    with _model():
        reference = pm.sample(draws=200, tune=200, chains=2, **SAMPLE)
    return found, reference


def _flat(idata, name):
    values = idata.posterior[name].values
    return values.reshape(values.shape[0] * values.shape[1], -1)


def test_epsilon_comes_from_each_results_report_not_its_label(runs):
    found, _ = runs
    # labels that lie about ε: the table does not read them
    table = privacy_utility({"ε = 100": found[4.0], "ε = 0.1": found[2.0]})
    assert list(table["result"].values) == ["ε = 0.1", "ε = 100"]  # sorted by ε
    np.testing.assert_allclose(table["epsilon"].values, [
        pymc_dp.privacy_report(found[2.0]).epsilon, pymc_dp.privacy_report(found[4.0]).epsilon])
    np.testing.assert_allclose(table["epsilon"].values, [2.0, 4.0], rtol=1e-6)
    assert table["delta"].values[0] == pymc_dp.privacy_report(found[2.0]).delta
    assert table.attrs["measure"] == "width"
    assert list(table["parameter"].values) == ["mu", "sigma[0]", "sigma[1]"]
    expected = np.concatenate([_flat(found[2.0], "mu"), _flat(found[2.0], "sigma")], axis=1)
    np.testing.assert_allclose(table["width"].values[0], expected.std(axis=0, ddof=1))
    # a list is labelled by position
    assert list(privacy_utility([found[4.0], found[2.0]])["result"].values) == ["1", "0"]


def test_distance_is_in_reference_sds(runs):
    found, reference = runs
    table = privacy_utility(found, reference, var_names=["mu"])
    assert table.attrs["measure"] == "distance" and list(table["parameter"].values) == ["mu"]
    ref = _flat(reference, "mu")[:, 0]
    for i, eps in enumerate((2.0, 4.0)):
        mean = _flat(found[eps], "mu")[:, 0].mean()
        assert table["distance"].values[i, 0] == pytest.approx(
            abs(mean - ref.mean()) / ref.std(ddof=1), rel=1e-12)


def test_bad_input_is_refused_with_messages_that_hold_no_data(runs):
    found, reference = runs
    with pytest.raises(ValueError, match="at least one"):
        privacy_utility([])
    with pytest.raises(TypeError, match="several results"):
        privacy_utility(found[2.0])
    with pytest.raises(ValueError, match="no posterior variable.*'beta'"):
        privacy_utility(found, reference, var_names=["beta"])
    with pytest.raises(ValueError, match="not a result"):
        privacy_utility({"a": reference.posterior.to_dataset()})
    flat = reference.copy()
    flat["posterior"] = xr.DataTree(reference.posterior.to_dataset().assign(
        mu=reference.posterior["mu"] * 0 + 1.0))
    with pytest.raises(ValueError, match="no spread"):
        privacy_utility(found, flat, var_names=["mu"])
    other = reference.copy()
    other["posterior"] = xr.DataTree(reference.posterior.to_dataset()[["mu"]])
    with pytest.raises(ValueError, match="no posterior variable"):
        privacy_utility(found, other, var_names=["mu", "sigma"])
