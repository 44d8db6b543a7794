"""PyTensor's JAX backend for the per-datum functions (issue 14): the same values, the same posterior.

Needs the optional ``jax`` extra; deselected by default (marker ``jax``). Run with
``bash scripts/bootstrap.sh "test,jax" && .venv/bin/python -m pytest -m jax`` (README). Without
jax installed these tests fail, they do not skip: selecting them asks for the backend.
"""

import numpy as np
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.model import PrivateModel

pytestmark = pytest.mark.jax

JAX = {"mode": "JAX"}


def _regression(n=400):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    group = rng.integers(0, 4, n)
    y = X @ np.array([0.5, -1.0, 0.2]) + 0.3 * group + rng.normal(size=n)
    with pm.Model() as m:
        Xd = pm.Data("X", X)
        g = pm.Data("g", group)
        beta = pm.Normal("beta", 0, 1, shape=3)
        a = pm.Normal("a", 0, 1, shape=4)
        sigma = pm.HalfNormal("sigma", 1)
        pm.StudentT("y", nu=5, mu=Xd @ beta + a[g], sigma=sigma, observed=y)
    return m


def test_jax_is_the_backend_asked_for():
    import jax  # noqa: F401  (the extra: ImportError here means it is not installed)

    pmodel = PrivateModel(_regression(), compile_kwargs=JAX)
    assert "JAX" in type(pmodel._loglik_fn.maker.linker).__name__


def test_per_datum_functions_agree_with_the_default_backend():
    model = _regression()
    default, jaxed = PrivateModel(model), PrivateModel(model, compile_kwargs=JAX)
    q = 0.3 * np.random.default_rng(1).standard_normal(default.dim)
    np.testing.assert_allclose(np.asarray(jaxed.loglik(q)), default.loglik(q), rtol=1e-10)
    current = default.loglik(q + 0.1)
    for fn in ("clipped_ratio",):
        (a_rows, a_sum), (b_rows, b_sum) = (
            getattr(m, fn)(q, current, 0.5) for m in (default, jaxed)
        )
        np.testing.assert_allclose(np.asarray(b_rows), a_rows, rtol=1e-10)
        assert b_sum == pytest.approx(a_sum, rel=1e-10)
    for a, b in zip(default.clipped_gradient(q, 2.0), jaxed.clipped_gradient(q, 2.0)):
        np.testing.assert_allclose(np.asarray(b), a, rtol=1e-9, atol=1e-12)
    for a, b in zip(default.gradient_rows(q), jaxed.gradient_rows(q)):
        np.testing.assert_allclose(np.asarray(b), a, rtol=1e-9, atol=1e-12)
    batch = np.array([3, 0, 7])
    np.testing.assert_allclose(
        np.asarray(jaxed.loglik_rows(q, batch)), default.loglik_rows(q, batch), rtol=1e-10
    )


def _banana_8():
    from pymc_dp.testing.benchmark_models import banana

    return banana(n=300, d=8, seed=1).model


@pytest.mark.parametrize("build", [_regression, _banana_8], ids=["linear-outputs", "matrix-rows"])
def test_reverse_mode_agrees_with_the_default_backend(build):
    # Reverse mode through copies of X @ β and a[g], and rows formed as one (n, d) matrix
    # (d = 8): the same clipped sums in a basis on JAX as on the default backend.
    model = build()
    default, jaxed = PrivateModel(model), PrivateModel(model, compile_kwargs=JAX)
    for pmodel in (default, jaxed):
        pmodel.compile_gradients("reverse")
        assert pmodel.gradient_method == "reverse"
    rng = np.random.default_rng(2)
    q = default.ravel(model.initial_point()) + 0.2 * rng.standard_normal(default.dim)
    basis = np.linalg.qr(rng.normal(size=(default.dim, default.dim)))[0]
    for bound in (0.5, 50.0):
        for a, b in zip(default.clipped_gradient(q, bound, basis),
                        jaxed.clipped_gradient(q, bound, basis)):
            np.testing.assert_allclose(np.asarray(b), a, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("step", ["DPPenalty", "DPHMC", "DPBarker", "MinibatchDPPenalty"])
def test_every_step_runs_on_jax_with_the_posterior_of_the_default_backend(step):
    model = _regression()

    def run(kwargs):
        with model:
            s = getattr(pymc_dp, step)(eps=2.0, **kwargs)
            idata = pymc_dp.sample(step=s, draws=200, tune=40, chains=1, random_seed=5,
                                   progressbar=False, compute_convergence_checks=False)
        return s._warmup_result, idata["posterior"]["beta"].values[0]

    (warm_jax, draws_jax), (warm, draws) = run({"compile_kwargs": JAX}), run({})
    # The same releases with the same noise: the backends differ by rounding alone. The
    # warm-up's Newton iterations (curvature by finite differences) grow 1e-15 to about
    # 1e-4 over sixteen iterations, so compare in the posterior's own sds.
    sds = np.sqrt(np.diag(np.linalg.inv(warm.hessian)))
    assert np.max(np.abs(warm_jax.mean - warm.mean) / sds) < 1e-2
    np.testing.assert_allclose(np.diag(warm_jax.hessian), np.diag(warm.hessian), rtol=1e-2)
    assert warm_jax.clip == pytest.approx(warm.clip, rel=1e-2)
    # The chains that follow magnify such differences into other paths (an accept/reject
    # that goes the other way), so the draws are compared as a distribution.
    spread = draws.std(axis=0)
    assert np.all(np.abs(draws_jax.mean(axis=0) - draws.mean(axis=0)) < 0.5 * spread)
    assert np.all((draws_jax.std(axis=0) > 0.5 * spread) & (draws_jax.std(axis=0) < 2 * spread))


@pytest.mark.parametrize("step", ["DPPenalty", "DPHMC", "DPBarker", "MinibatchDPPenalty"])
def test_every_step_runs_its_mcmc_on_jax(step):
    # At ε = 2 with n = 400 every step draws from its private Laplace approximation
    # (method="auto"), so the test above runs no MCMC kernel on JAX. Here each one does:
    # DPHMC's chain once failed in PyMC's trace, which refused the jax.Array its leapfrog
    # carried from the compiled gradient (the adapter now hands back NumPy arrays).
    model = _regression()

    def run(kwargs):
        with model:
            # (the minibatch penalty refuses a chain its noise would freeze: more budget)
            eps = 400.0 if step == "MinibatchDPPenalty" else 20.0
            s = getattr(pymc_dp, step)(eps=eps, method="mcmc", **kwargs)
            idata = pymc_dp.sample(step=s, draws=50, tune=20, chains=1, random_seed=5,
                                   progressbar=False, compute_convergence_checks=False)
        return idata["posterior"]["beta"].values[0]

    draws_jax, draws = run({"compile_kwargs": JAX}), run({})
    assert np.all(np.isfinite(draws_jax))
    spread = np.maximum(draws.std(axis=0), draws_jax.std(axis=0))
    assert np.all(np.abs(draws_jax.mean(axis=0) - draws.mean(axis=0)) < 3 * spread + 1e-9)


def test_jax_without_x64_is_refused_before_any_data_is_read():
    # Found by the second review: PyTensor turns JAX's float64 on only if it first loads JAX
    # with floatX = float64; otherwise the float64 clamps and sums run in float32 and one
    # person can move a released sum by more than 2b. (A fresh process: the switch is global.)
    import subprocess
    import sys

    script = (
        "import numpy as np, pymc as pm\n"
        "from pymc_dp.errors import UnsupportedModelError\n"
        "from pymc_dp.model import PrivateModel\n"
        "with pm.Model() as m:\n"
        "    pm.Normal('y', pm.Normal('mu'), 1, observed=np.zeros(10, dtype='float32'))\n"
        "try:\n"
        "    PrivateModel(m, compile_kwargs={'mode': 'JAX'})\n"
        "except UnsupportedModelError as err:\n"
        "    print('refused:', 'jax_enable_x64' in str(err))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTENSOR_FLAGS": "floatX=float32"},
    )
    assert "refused: True" in out.stdout, out.stderr[-2000:]
