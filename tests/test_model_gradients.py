"""Per-datum clipped gradients of the model adapter (PrivateModel.clipped_gradient)."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pytensor.compile.mode import Mode
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.vm import VMLinker
from pytensor.scan.op import Scan

from pymc_dp.benchmark_models import banana, correlated_gaussian
from pymc_dp.errors import UnsupportedModelError
from pymc_dp.kernels.clipping import clipped_vector_sum
from pymc_dp.model import PrivateModel

HUGE = 1e12  # a clip bound that never binds


def _fd_per_datum_jacobian(pmodel, q, h=1e-6):
    """(n, d) per-datum gradients by central finite differences of the per-datum loglik."""
    cols = []
    for k in range(q.size):
        e = np.zeros_like(q)
        e[k] = h
        cols.append((pmodel.loglik(q + e) - pmodel.loglik(q - e)) / (2 * h))
    return np.stack(cols, axis=1)


def _fd_prior_grad(pmodel, q, h=1e-6):
    out = np.empty_like(q)
    for k in range(q.size):
        e = np.zeros_like(q)
        e[k] = h
        out[k] = (pmodel.logprior(q + e) - pmodel.logprior(q - e)) / (2 * h)
    return out


# ---------------------------------------------------------------------- models
def normal_model(n=40, seed=0):
    y = np.random.default_rng(seed).normal(1.0, 2.0, size=n)
    with pm.Model() as m:
        mu = pm.Normal("mu", 0, 10)
        sigma = pm.HalfNormal("sigma", 3)  # log-transformed on the value space
        pm.Normal("y", mu, sigma, observed=y)
    return m, y


def regression_model(n=60, p=3, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X @ np.arange(1.0, p + 1) + rng.normal(size=n)
    with pm.Model() as m:
        Xd = pm.Data("X", X)
        beta = pm.Normal("beta", 0, 5, shape=p)
        sigma = pm.HalfNormal("sigma", 2)
        pm.Normal("y", Xd @ beta, sigma, observed=y)
    return m, X, y


def test_normal_model_matches_the_closed_form_with_and_without_clipping():
    m, y = normal_model()
    pmodel = PrivateModel(m)
    q = np.array([0.7, np.log(1.5)])  # (μ, log σ)
    mu, sigma = q[0], np.exp(q[1])
    r = y - mu
    rows = np.stack([r / sigma**2, -1.0 + r**2 / sigma**2], axis=1)  # ∂ℓ_j/∂(μ, log σ)
    clipped, prior = pmodel.clipped_gradient(q, HUGE)
    np.testing.assert_allclose(clipped, rows.sum(axis=0), rtol=1e-10)
    for bound in (0.3, 1.0, 2.5):
        clipped, _ = pmodel.clipped_gradient(q, bound)
        np.testing.assert_allclose(clipped, clipped_vector_sum(rows, bound), rtol=1e-10)
        assert np.linalg.norm(clipped) <= y.size * bound + 1e-9
    # prior: N(0, 10) on μ; HalfNormal(3) on σ with the log Jacobian: 1 − σ²/9
    np.testing.assert_allclose(prior, [-mu / 100, 1 - sigma**2 / 9], rtol=1e-10)
    np.testing.assert_allclose(prior, _fd_prior_grad(pmodel, q), rtol=1e-6)


def test_regression_with_pm_data_matches_the_closed_form():
    m, X, y = regression_model()
    pmodel = PrivateModel(m)
    q = np.array([0.5, 1.5, 2.0, np.log(0.8)])
    beta, sigma = q[:3], np.exp(q[3])
    r = y - X @ beta
    rows = np.column_stack([X * (r / sigma**2)[:, None], -1.0 + r**2 / sigma**2])
    for bound in (HUGE, 0.5, 2.0):
        clipped, _ = pmodel.clipped_gradient(q, bound)
        np.testing.assert_allclose(clipped, clipped_vector_sum(rows, bound), rtol=1e-9)


def test_mvnormal_observed_matches_the_closed_form():
    bm = correlated_gaussian(n=300, rho=0.9, seed=2)
    pmodel = PrivateModel(bm.model)
    q = np.array([0.1, 2.9])
    cov = np.array([[1.0, 0.9], [0.9, 1.0]])
    rows = (bm.data - q) @ np.linalg.inv(cov)  # ∇_θ log N(x_j; θ, Σ) = Σ⁻¹(x_j − θ)
    for bound in (HUGE, 0.5, 3.0):
        clipped, _ = pmodel.clipped_gradient(q, bound)
        np.testing.assert_allclose(clipped, clipped_vector_sum(rows, bound), rtol=1e-9)


def test_banana_custom_prior_matches_finite_differences():
    bm = banana(n=200, d=3, seed=3)
    pmodel = PrivateModel(bm.model)
    q = np.array([0.01, 3.02, -0.05])
    rows = _fd_per_datum_jacobian(pmodel, q)
    for bound in (HUGE, 0.05, 0.5):
        clipped, prior = pmodel.clipped_gradient(q, bound)
        np.testing.assert_allclose(clipped, clipped_vector_sum(rows, bound), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(prior, _fd_prior_grad(pmodel, q), rtol=1e-5, atol=1e-9)


def test_clipping_gives_sensitivity_two_bound():
    # Replace one datum by an extreme one: the clipped sums differ by at most 2b (ℓ2).
    y = np.random.default_rng(4).normal(size=30)
    worst = 0.0
    bound = 0.4
    sums = []
    for outlier in (1e6, -1e6):
        y2 = y.copy()
        y2[7] = outlier
        with pm.Model() as m:
            mu = pm.Normal("mu")
            pm.Normal("y", mu, 1, observed=y2)
        sums.append(PrivateModel(m).clipped_gradient(np.array([0.0]), bound)[0])
    worst = float(np.linalg.norm(sums[0] - sums[1]))
    assert worst == pytest.approx(2 * bound, rel=1e-12)


def test_zero_gradients_give_zero_not_nan():
    # Every datum equal to μ: every per-datum gradient is exactly 0.
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=np.full(5, 0.25))
    pmodel = PrivateModel(m)
    clipped, prior = pmodel.clipped_gradient(np.array([0.25]), 1.0)
    assert np.all(np.isfinite(clipped)) and clipped[0] == 0.0
    assert np.all(np.isfinite(prior))


def test_a_non_finite_per_datum_gradient_contributes_zero():
    # ℓ_j = −√|y_j − μ| has an infinite slope at y_j = μ: that datum's gradient is not
    # finite and must contribute zero; the others are clipped as usual.
    y = np.array([0.0, 1.0, -2.0, 4.0])

    def logp(value, mu):
        return -pt.sqrt(pt.abs(value - mu))

    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=logp, observed=y)
    pmodel = PrivateModel(m)
    clipped, _ = pmodel.clipped_gradient(np.array([0.0]), 10.0)
    r = y[1:]
    expected = np.sum(np.sign(r) / (2 * np.sqrt(np.abs(r))))
    assert np.isfinite(clipped[0])
    assert clipped[0] == pytest.approx(expected, rel=1e-12)


def test_gradients_are_compiled_lazily():
    m, _ = normal_model()
    pmodel = PrivateModel(m)
    assert pmodel._gradient_fn is None  # construction (and DPPenalty) does not pay for it
    pmodel.compile_gradients()
    fn = pmodel._gradient_fn
    pmodel.compile_gradients()
    assert pmodel._gradient_fn is fn


def test_non_differentiable_model_is_refused():
    class NoGradient(Op):
        def make_node(self, value, mu):
            value, mu = pt.as_tensor(value), pt.as_tensor(mu)
            return Apply(self, [value, mu], [value.type()])

        def perform(self, node, inputs, outputs):
            value, mu = inputs
            outputs[0][0] = -0.5 * (value - mu) ** 2

    no_gradient = NoGradient()
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=lambda v, mu: no_gradient(v, mu), observed=np.zeros(3))
    pmodel = PrivateModel(m)
    np.testing.assert_allclose(pmodel.loglik(np.array([1.0])), -0.5)  # DPPenalty still works
    with pytest.raises(UnsupportedModelError, match="not differentiable"):
        pmodel.compile_gradients()


def test_bound_must_be_positive():
    m, _ = normal_model()
    with pytest.raises(ValueError, match="bound"):
        PrivateModel(m).clipped_gradient(np.zeros(2), 0.0)


# ---------------------------------------------------------------------- what is built
def _intermediate_sizes(pmodel, q):
    """Run the gradient graph on a Python VM and record the size of every intermediate."""
    sizes = []

    def record(node, thunk, storage_map, compute_map):
        for out in node.outputs:
            value = storage_map[out][0]
            if hasattr(value, "shape"):
                sizes.append((int(np.size(value)), np.shape(value), str(node.op)))

    mode = Mode(
        linker=VMLinker(allow_gc=False, use_cloop=False, callback=record, c_thunks=False),
        optimizer="fast_run",
    )
    inputs, outputs = pmodel._clipped_gradient_graph()
    fn = pytensor.function(inputs, outputs, mode=mode)
    result = fn(q, np.float64(1.0), *pmodel._data_values)
    np.testing.assert_allclose(result[0], pmodel.clipped_gradient(q, 1.0)[0], rtol=1e-10)
    return sizes


@pytest.mark.parametrize("which", ["normal", "regression", "mvnormal"])
def test_one_vectorised_pass_without_scan_or_n_by_n_intermediates(which):
    if which == "normal":
        m, _ = normal_model(n=500)
        width = 1
    elif which == "regression":
        m, *_ = regression_model(n=500, p=4)
        width = 4  # X has 4 columns per datum
    else:
        m = correlated_gaussian(n=500, seed=0).model
        width = 2
    pmodel = PrivateModel(m)
    n, d = pmodel.n_data, pmodel.dim
    q = pmodel.ravel(m.initial_point()) + 0.1
    sizes = _intermediate_sizes(pmodel, q)
    largest = max(s for s, *_ in sizes)
    # Nothing bigger than the data or the (n, d) Jacobian; an (n, n) array would be 250000.
    assert largest <= n * max(d, width), sorted(sizes, reverse=True)[:5]
    # The compiled production function has no Scan (no loop over data).
    pmodel.compile_gradients()
    ops = [node.op for node in pmodel._gradient_fn.maker.fgraph.apply_nodes]
    assert not any(isinstance(op, Scan) for op in ops)


def test_errors_from_the_compiled_functions_do_not_show_data():
    # PyTensor error messages may print input values; with the data among the inputs they
    # must not reach the user (or a log).
    m, y = normal_model()
    pmodel = PrivateModel(m)
    pmodel.compile_gradients()
    secret = f"{y[3]!r}"

    def leaky(*args):
        raise ValueError(f"bad input: {secret}")

    for name, call in (
        ("_gradient_fn", lambda: pmodel.clipped_gradient(np.zeros(2), 1.0)),
        ("_loglik_fn", lambda: pmodel.loglik(np.zeros(2))),
    ):
        original = getattr(pmodel, name)
        setattr(pmodel, name, leaky)
        with pytest.raises(RuntimeError, match="ValueError.*withheld") as info:
            call()
        assert secret not in str(info.value)
        assert info.value.__cause__ is None and info.value.__suppress_context__
        setattr(pmodel, name, original)
