"""Per-datum clipped gradients of the model adapter (PrivateModel.clipped_gradient)."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pytensor.compile.mode import Mode
from pytensor.link.vm import VMLinker
from pytensor.scan.op import Scan

from pymc_dp.testing.benchmark_models import banana, correlated_gaussian
from pymc_dp.errors import UnsupportedModelError
from pymc_dp.kernels.clipping import clipped_vector_sum
from pymc_dp.model import PrivateModel, public_data

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


METHODS = ["reverse", "forward"]


def _compiled(model, method):
    pmodel = PrivateModel(model)
    pmodel.compile_gradients(method)
    assert pmodel.gradient_method == method
    return pmodel


@pytest.mark.parametrize("method", METHODS)
def test_normal_model_matches_the_closed_form_with_and_without_clipping(method):
    m, y = normal_model()
    pmodel = _compiled(m, method)
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


@pytest.mark.parametrize("method", METHODS)
def test_mvnormal_observed_matches_the_closed_form(method):
    bm = correlated_gaussian(n=300, rho=0.9, seed=2)
    pmodel = _compiled(bm.model, method)
    q = np.array([0.1, 2.9])
    cov = np.array([[1.0, 0.9], [0.9, 1.0]])
    rows = (bm.data - q) @ np.linalg.inv(cov)  # ∇_θ log N(x_j; θ, Σ) = Σ⁻¹(x_j − θ)
    for bound in (HUGE, 0.5, 3.0):
        clipped, _ = pmodel.clipped_gradient(q, bound)
        np.testing.assert_allclose(clipped, clipped_vector_sum(rows, bound), rtol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_banana_custom_prior_matches_finite_differences(method):
    bm = banana(n=200, d=3, seed=3)
    pmodel = _compiled(bm.model, method)
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


@pytest.mark.parametrize("method", METHODS)
def test_zero_gradients_give_zero_not_nan(method):
    # Every datum equal to μ: every per-datum gradient is exactly 0.
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=np.full(5, 0.25))
    pmodel = _compiled(m, method)
    clipped, prior = pmodel.clipped_gradient(np.array([0.25]), 1.0)
    assert np.all(np.isfinite(clipped)) and clipped[0] == 0.0
    assert np.all(np.isfinite(prior))


@pytest.mark.parametrize("method", METHODS)
def test_a_non_finite_per_datum_gradient_contributes_zero(method):
    # ℓ_j = −√|y_j − μ| has an infinite slope at y_j = μ: that datum's gradient is not
    # finite and must contribute zero; the others are clipped as usual.
    y = np.array([0.0, 1.0, -2.0, 4.0])

    def logp(value, mu):
        return -pt.sqrt(pt.abs(value - mu))

    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=logp, observed=y)
    pmodel = _compiled(m, method)
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
    # (A custom Op without a gradient is refused at construction now: the row-locality proof
    # has no rule for it. PyTensor's Bessel function has no gradient in its order.)
    def logp(v, mu):
        return -0.5 * (v - mu) ** 2 + pt.log(pt.iv(mu, 1.0 + 0 * v))

    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=logp, observed=np.zeros(3))
    pmodel = PrivateModel(m)
    assert np.all(np.isfinite(pmodel.loglik(np.array([1.0]))))  # DPPenalty still works
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

    # (without fusion: Python's Elemwise.perform takes at most 32 operands, and fusing the
    # warm-up basis into the columns gives more; each unfused step is an intermediate here)
    mode = Mode(
        linker=VMLinker(allow_gc=False, use_cloop=False, callback=record, c_thunks=False),
        optimizer="fast_run",
    ).excluding("fusion")
    inputs, outputs, _ = pmodel._clipped_gradient_graph(pmodel.gradient_method)
    fn = pytensor.function(inputs, outputs, mode=mode)
    result = fn(q, np.float64(1.0), np.eye(pmodel.dim), *pmodel._data_values)
    np.testing.assert_allclose(result[0], pmodel.clipped_gradient(q, 1.0)[0], rtol=1e-10)
    return sizes


@pytest.mark.parametrize(
    "which, method",
    [
        ("normal", "reverse"),
        ("regression", "forward"),
        ("regression", "reverse"),  # asked for: through a copy of X @ β per row
        ("index", "reverse"),  # asked for: through a copy of a[g] per row
        ("mvnormal", "reverse"),
        ("banana", "reverse"),
    ],
)
def test_one_vectorised_pass_without_scan_or_n_by_n_intermediates(which, method):
    if which == "normal":
        m, _ = normal_model(n=500)
        width = 1
    elif which == "regression":
        m, *_ = regression_model(n=500, p=4)
        width = 4  # X has 4 columns per datum
    elif which == "index":
        m = _index_model(n=500)
        width = 1
    elif which == "mvnormal":
        m = correlated_gaussian(n=500, seed=0).model
        width = 2
    else:
        m = banana(n=500, d=10, seed=0).model
        width = 10
    pmodel = PrivateModel(m)
    pmodel.compile_gradients("reverse" if which in ("regression", "index") else "auto")
    n, d = pmodel.n_data, pmodel.dim
    q = pmodel.ravel(m.initial_point()) + 0.1
    sizes = _intermediate_sizes(pmodel, q)
    largest = max(s for s, *_ in sizes)
    # Nothing bigger than the data or the (n, d) Jacobian; an (n, n) array would be 250000.
    assert largest <= n * max(d, width), sorted(sizes, reverse=True)[:5]
    # The compiled production function has no Scan (no loop over data).
    if which == "regression" and method == "forward":
        pmodel = PrivateModel(m)
        pmodel.compile_gradients()
        assert pmodel.gradient_method == "forward"
        sizes = _intermediate_sizes(pmodel, q)
        assert max(s for s, *_ in sizes) <= n * max(d, width)
    else:
        assert pmodel.gradient_method == method  # "auto" picks reverse mode where it applies
    ops = [node.op for node in pmodel._gradient_fn.maker.fgraph.apply_nodes]
    assert not any(isinstance(op, Scan) for op in ops)


# ---------------------------------------------------------------------- reverse or forward
def _index_model(n=80, seed=5):
    rng = np.random.default_rng(seed)
    with pm.Model() as m:
        g = pm.Data("g", rng.integers(0, 3, n))
        a = pm.Normal("a", 0, 1, shape=3)
        pm.Normal("y", a[g], 1, observed=rng.normal(size=n))
    return m


def _linear_outputs_data(n=90, seed=7):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 2)), rng.integers(0, 3, n), rng.normal(size=(n, 2))


def _linear_outputs_model(n=90, seed=7, data=None):
    # Two-column means from X @ W (W: a non-centred (2, 2) matrix) plus a (3, 2) matrix of
    # group effects gathered by g: both linear operations have an (n, 2) output. d = 11.
    x, groups, y = _linear_outputs_data(n, seed) if data is None else data
    with pm.Model() as m:
        X, g = pm.Data("X", x), pm.Data("g", groups)
        scale = pm.HalfNormal("scale", 1.0)
        W = pm.Deterministic("W", scale * pm.Normal("W_raw", 0, 1, shape=(2, 2)))
        a = pm.Normal("a", 0, 1, shape=(3, 2))
        pm.Normal("y", pt.dot(X, W) + a[g], 1, observed=y)
    return m


@pytest.mark.parametrize("extreme", [1e6, 1e300, np.inf])  # (inf: covariates only)
def test_copies_of_linear_outputs_keep_sensitivity_two_bound(extreme):
    # Issue 14: every datum's gradient through copies of X @ W and a[g] per row. Replacing
    # one datum (its covariates, group and outcome) moves the clipped sum, in a basis, by at
    # most 2b; a datum whose values are not finite contributes nothing; every sum is the
    # rule of kernels.clipping applied to the rows times the basis.
    rng = np.random.default_rng(21)
    bound = 0.7
    basis = np.linalg.qr(rng.normal(size=(11, 11)))[0] * rng.uniform(0.3, 3.0, 11)
    sums = []
    for variant in range(3):
        X, g, y = _linear_outputs_data()
        if variant == 1:  # the same datum replaced by an extreme one
            X[5], g[5], y[5] = extreme, 2, -1e6
        elif variant == 2:  # ... and by another group, covariates and outcome
            X[5], g[5], y[5] = (-1e3, extreme), 0, (40.0, 1e6)
        pmodel = PrivateModel(_linear_outputs_model(data=(X, g, y)))
        pmodel.compile_gradients("reverse")
        assert pmodel.gradient_method == "reverse"
        q = pmodel.ravel(pmodel._initial_point) + 0.2
        clipped = pmodel.clipped_gradient(q, bound, basis)[0]
        rows, _ = pmodel.gradient_rows(q)
        np.testing.assert_allclose(
            clipped, clipped_vector_sum(rows @ basis, bound), rtol=1e-9, atol=1e-9
        )
        sums.append(clipped)
    for other in sums[1:]:
        assert np.linalg.norm(other - sums[0]) <= 2 * bound * (1 + 1e-12)


def _two_index_model(n=80, seed=8):
    rng = np.random.default_rng(seed)
    with pm.Model() as m:
        g, h = pm.Data("g", rng.integers(0, 3, n)), pm.Data("h", rng.integers(0, 2, n))
        A = pm.Normal("A", 0, 1, shape=(3, 2))
        pm.Normal("y", A[g, h], 1, observed=rng.normal(size=n))
    return m


def _row_free_linear_output_model(n=30, seed=9):
    # Found by the review of the linear rules: ones((1, p)) @ W reads only the data's shape,
    # so its output has no datum axis; a copy per row would not fit it.
    rng = np.random.default_rng(seed)
    with pm.Model() as m:
        X = pm.Data("X", rng.normal(size=(n, 2)))
        W = pm.Normal("W", 0, 1, shape=(2, 3))
        pm.Normal("y", pt.dot(pt.ones((1, X.shape[1])), W), 1, observed=rng.normal(size=(n, 3)))
    return m


def _elementwise_logit_model(n=80, seed=6):
    rng = np.random.default_rng(seed)
    with pm.Model() as m:
        X = pm.Data("X", rng.normal(size=(n, 2)))
        b = pm.Normal("b", 0, 1, shape=2)
        pm.Bernoulli("y", logit_p=(X * b).sum(axis=1), observed=rng.integers(0, 2, n))
    return m


@pytest.mark.parametrize(
    "build, method",
    [
        (lambda: normal_model()[0], "reverse"),
        (_elementwise_logit_model, "reverse"),
        (lambda: banana(n=100, d=4, seed=1).model, "reverse"),
        (lambda: regression_model()[0], "forward"),  # X @ β: a matrix product meets the data
        (_index_model, "forward"),  # a[g]: an index meets the data
    ],
)
def test_auto_uses_reverse_mode_where_it_applies_and_both_agree(build, method):
    m = build()
    pmodel = PrivateModel(m)
    pmodel.compile_gradients()
    assert pmodel.gradient_method == method
    _agrees_with_forward_mode(m, pmodel)


@pytest.mark.parametrize(
    "build, applies",
    [
        (lambda: regression_model()[0], True),  # X @ β: a copy of the product per row
        (_index_model, True),  # a[g]: a copy of the gathered values per row
        (_linear_outputs_model, True),  # both, with two columns and a transform
        (_two_index_model, False),  # A[g, h]: no linear rule for two indices
        (_row_free_linear_output_model, False),  # the product has no datum axis
        # X @ β with 13 coordinates: an (n, d) matrix costs more than forward mode
        (lambda: regression_model(p=13)[0], False),
    ],
)
def test_reverse_mode_through_copies_of_linear_outputs_agrees_with_forward_mode(build, applies):
    # Issue 14: asked for, reverse mode copies the outputs of X @ β and a[g] per row.
    m = build()
    pmodel = PrivateModel(m)
    if not applies:
        with pytest.raises(ValueError, match="do not apply"):
            pmodel.compile_gradients("reverse")
        pmodel.compile_gradients()
        assert pmodel.gradient_method == "forward"
        pmodel.clipped_gradient(pmodel.ravel(m.initial_point()), 1.0)  # runs
        return
    pmodel.compile_gradients("reverse")
    assert pmodel.gradient_method == "reverse"
    _agrees_with_forward_mode(m, pmodel)


def _agrees_with_forward_mode(m, pmodel):
    reference = PrivateModel(m)
    reference.compile_gradients("forward")
    q = pmodel.ravel(m.initial_point()) + 0.05
    for bound in (HUGE, 0.5):
        np.testing.assert_allclose(
            pmodel.clipped_gradient(q, bound)[0], reference.clipped_gradient(q, bound)[0],
            rtol=1e-9, atol=1e-12,
        )


def _cancelling_cross_row_model(n=60, seed=9, y=None):
    # ℓ_j = N(y_j | μ, 1) + h(y_j)·(μ_shifted − μ): zero in value whatever the rows, but with
    # per-row copies of μ row j would receive h of row j − 1 (found by the session-2 review).
    if y is None:
        y = np.random.default_rng(seed).normal(size=n)

    def logp(value, mu):
        mu_rows = mu + pt.zeros_like(value)
        cross = 1e3 * value * (pt.roll(mu_rows, 1) - mu_rows)
        return -0.5 * (value - mu) ** 2 + cross

    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=logp, observed=y)
    return m


def _transposed_model(n=40, seed=10):
    # Each datum is an n-vector and the likelihood works on the transposed data, so the
    # parameter vector meets it along the datum axis's transpose: ℓ_j = −½Σ_i (y_ji − μ_j)².
    # With per-row copies of μ, row i would collect the gradients of every datum.
    y = np.random.default_rng(seed).normal(size=(n, n))

    def logp(value, mu):
        mu_vector = mu[0]  # PyMC hands the logp μ broadcast to the (n, n) shape of y
        return (-0.5 * (value.T - mu_vector[None, :]) ** 2).sum(axis=0)

    with pm.Model() as m:
        mu = pm.Normal("mu", shape=n)
        pm.CustomDist("y", mu, logp=logp, observed=y)
    return m


@pytest.mark.parametrize(
    "build",
    [
        _transposed_model,
        lambda: _hidden_permutation_model(np.random.default_rng(15).normal(size=260)),
        # The roll moves μ + zeros_like(y), whose values read only the shape of y: ℓ_j reads
        # y_j alone, so the likelihood is proven row-local. With per-row copies of μ, though,
        # the roll would give row j the gradient of row j − 1: reverse mode must not apply.
        _cancelling_cross_row_model,
    ],
)
def test_models_whose_rows_are_not_provably_apart_use_forward_mode(build):
    m = build()
    pmodel = PrivateModel(m)
    pmodel.compile_gradients()
    assert pmodel.gradient_method == "forward"
    with pytest.raises(ValueError, match="do not apply"):
        PrivateModel(m).compile_gradients("reverse")


def _hidden_permutation_model(y):
    # Found by the second review: reshapes to a leading length of int8(n) = 4 (n = 260) and
    # flips that permute the rows, inside a cross-row term that is exactly zero in value.
    # If the proof accepted it, reverse mode would give datum 0's gradient to two other rows.
    def reverse_blocks(v, inner):
        return v.reshape((pt.cast(v.shape[0], "int8"), *inner))[..., ::-1].reshape(v.shape)

    def permute_1(v):
        return reverse_blocks(reverse_blocks(v, (5, 13)), (13, 5))

    def permute_2(v):
        return permute_1(reverse_blocks(v, (-1,)))

    def logp(value, mu):
        mu_rows = mu + pt.zeros_like(value)
        cross = 1e3 * value * (permute_1(mu_rows) - mu_rows + permute_2(mu_rows) - mu_rows)
        return -0.5 * (value - mu) ** 2 + cross

    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=logp, observed=y)
    return m


def test_a_hidden_row_permutation_keeps_sensitivity_two_bound():
    # Neighbouring datasets that differ in datum 0; the rows whose cross terms would land on
    # row 0 are saturated so that nothing offsets the change. Reverse mode without the proof
    # moves the clipped sum by 4b here; the step must stay within 2b.
    bound, q = 0.3, np.array([0.0])
    sums, methods = [], set()
    for first in (-1.0, 1.0):
        y = np.zeros(260)
        y[12] = y[52] = 100.0
        y[0] = first
        pmodel = PrivateModel(_hidden_permutation_model(y))
        sums.append(pmodel.clipped_gradient(q, bound)[0])
        methods.add(pmodel.gradient_method)
    assert np.linalg.norm(sums[0] - sums[1]) <= 2 * bound + 1e-12
    assert methods == {"forward"}


def test_a_jacobian_entry_dropped_at_the_public_points_is_recomputed_in_forward_mode():
    # ∂φ/∂θ_2 is zero near the initial point (θ_2 < 5) and not beyond: reverse mode leaves
    # it out, and at θ_2 = 6 the step must fall back to forward mode, not lose the term.
    y = np.random.default_rng(11).normal(size=50)
    with pm.Model() as m:
        a = pm.Normal("a")
        b = pm.Normal("b")
        pm.Normal("y", a * pt.maximum(b, 5.0) / 5.0, 1, observed=y)
    pmodel = PrivateModel(m)
    pmodel.compile_gradients()
    assert pmodel.gradient_method == "reverse"
    fallback_calls = []
    fallback = pmodel._forward_gradient_fn  # compiled with the reverse function

    def counted(*args):
        fallback_calls.append(args[0].copy())
        return fallback(*args)

    pmodel._forward_gradient_fn = counted
    reference = PrivateModel(m)
    reference.compile_gradients("forward")
    for q in (np.array([0.3, 0.2]), np.array([0.3, 6.0])):
        for bound in (HUGE, 0.5):
            np.testing.assert_allclose(
                pmodel.clipped_gradient(q, bound)[0],
                reference.clipped_gradient(q, bound)[0],
                rtol=1e-10,
            )
    # the fallback ran at θ_2 = 6 only
    assert [c[1] for c in fallback_calls] == [6.0, 6.0]
    r = y - 0.3 * 6.0 / 5.0
    expected = np.array([np.sum(r * 6.0 / 5.0), np.sum(r * 0.3 / 5.0)])
    np.testing.assert_allclose(pmodel.clipped_gradient(np.array([0.3, 6.0]), HUGE)[0], expected)


def test_dense_jacobians_use_forward_mode():
    # Normal(A @ t): every entry of the mean depends on every parameter (d² terms, each a
    # product per row when the rows are formed column by column: d ≤ 6).
    d = 6
    A = np.random.default_rng(12).normal(size=(d, d))
    with pm.Model() as m:
        t = pm.Normal("t", shape=d)
        A_public = pm.Data("A", A)  # a NumPy matrix shared by every row must be declared
        public_data(A_public)
        pm.Normal(
            "y", pt.dot(A_public, t), 1, observed=np.random.default_rng(13).normal(size=(40, d))
        )
    pmodel = PrivateModel(m)
    pmodel.compile_gradients()
    assert pmodel.gradient_method == "forward"


def test_the_choice_of_method_does_not_read_the_data():
    # The choice is structural: data whose gradients overflow everywhere and ordinary data
    # get the same method.
    def build(y):
        with pm.Model() as m:
            mu = pm.Normal("mu")
            pm.Normal("y", mu, 1, observed=y)
        return m

    methods = set()
    for y in (np.full(30, 1e300), np.random.default_rng(8).normal(size=30)):
        pmodel = PrivateModel(build(y))
        pmodel.compile_gradients()
        methods.add(pmodel.gradient_method)
    assert methods == {"reverse"}


def test_bad_method_is_refused():
    m, _ = normal_model()
    with pytest.raises(ValueError, match="method"):
        PrivateModel(m).compile_gradients("central")


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


@pytest.mark.parametrize("d", [2, 5])
def test_the_fused_basis_gives_the_stacked_products_rows(d, monkeypatch):
    # Issue 14: in reverse mode the rows Bᵀ∇ℓ_j are formed column by column and fused with
    # the clip instead of through an (n, d) product; the released sums are the same.
    import pymc_dp.model.per_datum_gradients as model_module

    m = banana(n=300, d=d, seed=1).model
    q = PrivateModel(m).ravel(m.initial_point()) + 0.2
    basis = np.linalg.qr(np.random.default_rng(2).normal(size=(d, d)))[0] * 3.0
    fused = PrivateModel(m)
    fused.compile_gradients()  # (compiled lazily: before the switch below)
    monkeypatch.setattr(model_module, "_FUSED_BASIS_DIM", 0)
    stacked = PrivateModel(m)
    for bound in (0.5, 50.0):  # clipping most rows, and none
        a, b = fused.clipped_gradient(q, bound, basis), stacked.clipped_gradient(q, bound, basis)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-12)
    assert fused.gradient_method == stacked.gradient_method == "reverse"


@pytest.mark.parametrize("method", ["forward", "reverse"])
def test_gradients_in_a_basis_are_the_rows_times_the_basis_clipped(method):
    # The warm-up's metric B: forward mode takes its products along B's columns, reverse
    # mode combines the columns (issue 14); both must release Σ_j clip_b(Bᵀ∇ℓ_j), the rule
    # of kernels.clipping applied to the per-datum gradients times B.
    rng = np.random.default_rng(3)
    x = rng.normal(size=400)
    with pm.Model() as m:
        a, b = pm.Normal("a", 0, 1), pm.Normal("b", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", a + b * pm.Data("x", x), sigma, observed=1.0 - 2.0 * x + rng.normal(size=400))
    pmodel = PrivateModel(m)
    pmodel.compile_gradients(method)
    assert pmodel.gradient_method == method
    q = pmodel.ravel(m.initial_point()) + 0.3
    basis = np.linalg.qr(rng.normal(size=(3, 3)))[0] * np.array([0.5, 2.0, 3.0])
    rows, _ = pmodel.gradient_rows(q)
    for bound in (0.5, 5.0, 500.0):
        np.testing.assert_allclose(
            pmodel.clipped_gradient(q, bound, basis)[0], clipped_vector_sum(rows @ basis, bound),
            rtol=1e-9, atol=1e-9,
        )
