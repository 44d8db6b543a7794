"""The thesis' benchmark models as PyMC models, with exact posterior samplers.

Each builder returns a :class:`BenchmarkModel`: a ``pm.Model`` whose free variable is the
parameter vector ``theta`` (shape ``(d,)``) and whose single observed variable ``x`` holds the
data as an ``(n, d)`` array — one row per individual, so the leading axis is the datum axis
and a datum's log-likelihood is the sum over its row — together with the data, the true
parameter the data were drawn from, the tempering ``T`` and exact draws of the (tempered)
posterior.

Models (thesis chapter 5, Table 5.1; δ = 0.1/n is the experiments' choice, not the model's):

===========================  ===  =======  =====  ===  =====  ==============================
name                          d   n        n0     a    σ0²    builder
===========================  ===  =======  =====  ===  =====  ==============================
``flat-banana-2d``            2   100000          20   1000   :func:`banana`
``flat-banana-10d``           10  200000          20   1000   :func:`banana`
``tempered-banana-2d``        2   100000   1000   20   1000   :func:`banana`
``tempered-banana-10d``       10  200000   1000   20   1000   :func:`banana`
``gauss-30d``                 30  200000          0    1000   :func:`high_dim_gaussian`
``narrow-banana``             2   150000          350  1000   :func:`banana`
``correlated-gauss``          2   200000          0    100    :func:`correlated_gaussian`
``circle``                    2   100000          1e-5        :func:`circle`
===========================  ===  =======  =====  ===  =====  ==============================

Use :func:`thesis_model` to build one of them by name.

Banana (thesis Definition 10, Theorem 13)
-----------------------------------------
With ``g(y) = (y_1, y_2 − a(y_1 − m)² − b, y_3, …, y_d)`` the banana distribution
``Ban(μ, Σ, a, b, m)`` is the law of ``g(y)``, ``y ~ N(μ, Σ)``: only the *second* coordinate is
bent, as a parabola in the first. The model is

    θ ~ Ban(0, σ0² I, a, b, m),
    x_j1 ~ N(θ_1, σ_1²),  x_j2 ~ N(θ_2 + a(θ_1 − m)² + b, σ_2²),  x_ji ~ N(θ_i, σ_i²) (i > 2),

with σ² = (20, 2.5, 1, …, 1) and b = m = 0 in the thesis. Writing τ_i = 1/σ_i², τ_0 = 1/σ0²
and x̄ the column means of the data, the posterior tempered with T (likelihood raised to the
power T, prior untouched) is ``Ban(μ, Σ, a, b, m)`` with

    μ_i = T n τ_i x̄_i / (T n τ_i + τ_0),    Σ = diag(1 / (T n τ_i + τ_0)),

so exact draws are ``g(y)`` for ``y ~ N(μ, Σ)``. The prior is a ``pm.CustomDist`` whose log
density is that of ``N(0, σ0² I)`` at ``g⁻¹(θ)`` (the Jacobian of g is 1); with a = 0 it is a
plain ``pm.Normal``. The data are drawn from the likelihood at the true θ = (0, 3, 0, …, 0).

Tempering
---------
Tempering with T = n0/n is written into the model itself, without ``pm.Potential``: every
likelihood here has a *known* scale, and raising a Gaussian density with known variance v to
the power T is, up to a constant free of θ, the Gaussian density with variance v/T. So the
tempered models use ``sigma = σ_i / √T`` (``cov = Σ / T`` for the correlated Gaussian, ``a·T``
for the circle). Each datum's log-likelihood is then ``T · ln p(x_j | θ) + c_j(T)`` with c_j
independent of θ, hence every per-datum log-likelihood *ratio* and gradient a private
sampler computes is exactly T times the untempered one, and the posterior is exactly the
tempered posterior. A clip bound for a tempered model is therefore on the tempered ratios:
the thesis' bound b on untempered ratios corresponds to T·b here.

Gaussian models
---------------
``high_dim_gaussian`` is the thesis' 30-d Gaussian: the banana with a = 0 (σ0² = 1000,
σ² = (20, 2.5, 1, …)). ``correlated_gaussian`` has prior θ ~ N(0, σ0² I) with σ0² = 100 and
likelihood x_j ~ N(θ, Σ), Σ = [[1, ρ], [ρ, 1]], ρ = 0.999, n = 2·10⁵; its posterior is
Gaussian with precision ``I/σ0² + T n Σ⁻¹`` and mean ``cov_post · T n Σ⁻¹ x̄``.

Circle (thesis 5.3)
-------------------
ln p(r | θ) = −a(θ_1² + θ_2² − r²)² with a flat prior on θ and r_j ~ N(3, 1). The thesis
says the posterior is hard to sample exactly; it is not: the likelihood depends on θ only
through s = ‖θ‖², and in polar coordinates the flat prior has density ρ dρ dφ = ½ ds dφ, so
the posterior of (s, φ) is ``s ~ N(mean(r²), 1/(2 a T n))`` truncated to s > 0, independent of
``φ ~ U(0, 2π)``; exact draws are ``√s (cos φ, sin φ)``. Its mean is the origin.

Starting points (thesis 5.4)
----------------------------
:meth:`BenchmarkModel.start_points` draws the chains' starting points as the thesis did: a
Gaussian centred on the true parameter whose standard deviation is the mean of the
component-wise standard deviations of a sample of the true posterior (for the circle:
centred on (0, 1) with variance 1).
"""

from __future__ import annotations

import math

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from scipy import stats

from pymc_dp.model import public_data

__all__ = [
    "THESIS_MODELS",
    "BenchmarkModel",
    "banana",
    "circle",
    "correlated_gaussian",
    "high_dim_gaussian",
    "thesis_model",
]

#: Name of the parameter vector in every benchmark model.
THETA = "theta"
#: Name of the observed variable in every benchmark model.
OBSERVED = "x"


@dataclass(frozen=True, eq=False)
class BenchmarkModel:
    """A benchmark model, its data and its exact posterior.

    Attributes
    ----------
    name : str
        Short name (e.g. ``"flat-banana-2d"``).
    model : pymc.Model
        Free variable ``theta`` of shape ``(d,)``; observed variable ``x`` holding ``data``.
    data : numpy.ndarray
        The observed data, leading axis = individuals (``(n, d)``; ``(n,)`` for the circle).
    true_theta : numpy.ndarray or None
        The parameter the data were generated from (``None`` for the circle, whose data do
        not come from the model).
    tempering : float
        T = n0/n (1.0 when untempered); already expressed in ``model`` (see module docs).
    posterior_mean : numpy.ndarray
        Exact mean of the (tempered) posterior.
    params : dict
        The hyperparameters the model was built with.
    """

    name: str
    model: pm.Model
    data: np.ndarray
    true_theta: np.ndarray | None
    tempering: float
    posterior_mean: np.ndarray
    params: dict = field(default_factory=dict)
    _sampler: Callable[[int, np.random.Generator], np.ndarray] | None = field(default=None, repr=False)
    _loglik: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False)
    _start_centre: np.ndarray | None = field(default=None, repr=False)
    _start_sd: float | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Number of individuals (rows of ``data``)."""
        return int(self.data.shape[0])

    @property
    def dim(self) -> int:
        """Dimension d of θ."""
        return int(self.posterior_mean.shape[0])

    @property
    def var_name(self) -> str:
        """Name of the parameter vector in ``model`` (``"theta"``)."""
        return THETA

    def posterior_draws(self, size: int, rng=None) -> np.ndarray:
        """Independent exact draws of the (tempered) posterior, shape ``(size, d)``.

        Parameters
        ----------
        size : int
            Number of draws.
        rng : int, numpy.random.Generator or None
            Source of randomness.
        """
        return self._sampler(int(size), np.random.default_rng(rng))

    def loglik_per_datum(self, theta) -> np.ndarray:
        """Each individual's log-likelihood at ``theta`` as the model defines it, shape ``(n,)``.

        Computed in NumPy independently of PyMC (tempering included, normalising constants
        included), as a reference for the per-datum log-likelihoods a private sampler
        extracts from ``model``.
        """
        return self._loglik(np.asarray(theta, dtype=float))

    def start_points(self, chains: int, rng=None) -> np.ndarray:
        """Starting points of ``chains`` chains as in thesis 5.4, shape ``(chains, d)``.

        Gaussian around the true parameter with standard deviation equal to the mean of the
        component-wise standard deviations of 1000 exact posterior draws (circle: centred on
        (0, 1) with variance 1). The posterior sample and the points both come from ``rng``.
        """
        gen = np.random.default_rng(rng)
        if self._start_sd is not None:
            sd = self._start_sd
        else:
            sd = float(self.posterior_draws(1000, gen).std(axis=0, ddof=1).mean())
        return self._start_centre + sd * gen.standard_normal((int(chains), self.dim))

    def initvals(self, chains: int, rng=None) -> list[dict[str, np.ndarray]]:
        """:meth:`start_points` as a list of ``initvals`` dicts for ``pm.sample`` (one per chain)."""
        return [{THETA: p} for p in self.start_points(chains, rng)]

    def theta_draws(self, idata) -> np.ndarray:
        """The draws of θ in a sampling result, shape ``(chains, draws, d)``.

        Accepts an arviz ``DataTree``/``InferenceData`` (its ``posterior`` group) or a
        dataset-like object with a ``theta`` entry.
        """
        post = getattr(idata, "posterior", idata)
        return np.asarray(post[THETA].values, dtype=float)


def _rng(seed):
    return np.random.default_rng(seed)


def _tempering(n, n0):
    if n0 is None:
        return 1.0
    if not 0 < n0 <= n:
        raise ValueError(f"n0 must be in (0, n], got n0={n0}, n={n}")
    return float(n0) / float(n)


def _lik_var(lik_var, d):
    if lik_var is None:
        lik_var = (20.0, 2.5)
    arr = np.atleast_1d(np.asarray(lik_var, dtype=float))
    if arr.size == 1:
        arr = np.repeat(arr, d)
    elif arr.size < d:
        fill = 1.0 if arr.size <= 2 else arr[-1]
        arr = np.concatenate([arr, np.full(d - arr.size, fill)])
    elif arr.size > d:
        arr = arr[:d]
    if np.any(arr <= 0):
        raise ValueError("likelihood variances must be positive")
    return arr


def _banana_prior_logp(value, mu0, a, b, m, sigma0):
    u = value[..., 1] + a * (value[..., 0] - m) ** 2 + b
    y = pt.concatenate([value[..., :1], u[..., None], value[..., 2:]], axis=-1)
    return pm.logp(pm.Normal.dist(mu0, sigma0), y).sum(axis=-1)


def _banana_prior_random(mu0, a, b, m, sigma0, rng=None, size=None):
    mu0 = np.asarray(mu0)
    shape = mu0.shape if size is None else tuple(np.atleast_1d(size)) + mu0.shape[-1:]
    y = mu0 + sigma0 * rng.standard_normal(shape)
    y[..., 1] -= a * (y[..., 0] - m) ** 2 + b
    return y


def banana(
    n: int = 100_000,
    d: int = 2,
    *,
    a: float = 20.0,
    b: float = 0.0,
    m: float = 0.0,
    sigma0_sq: float = 1000.0,
    lik_var: float | Sequence[float] | None = None,
    n0: float | None = None,
    true_theta: Sequence[float] | None = None,
    seed=0,
    name: str | None = None,
) -> BenchmarkModel:
    """The Bayesian banana model of thesis Theorem 13, with its exact tempered posterior.

    Parameters
    ----------
    n : int
        Number of individuals (rows of data).
    d : int
        Dimension of θ (≥ 2).
    a, b, m : float
        Banana parameters: the mean of the second data coordinate is θ_2 + a(θ_1 − m)² + b.
        The thesis uses b = m = 0 and a = 20 (350 for the narrow banana).
    sigma0_sq : float
        Prior variance σ0²: θ ~ Ban(0, σ0² I, a, b, m).
    lik_var : float, sequence or None
        Likelihood variances σ_i². ``None`` gives the thesis' (20, 2.5, 1, …, 1); a shorter
        sequence of length ≤ 2 is filled with 1s, a longer one with its last value.
    n0 : float or None
        Tempering T = n0/n; ``None`` for no tempering (T = 1). See the module docs for how it
        is written into the model.
    true_theta : sequence or None
        Parameter the data are drawn from; default the thesis' (0, 3, 0, …, 0).
    seed : int, numpy.random.Generator or None
        Seed of the data generation.
    name : str or None
        Name of the result (default derived from the parameters).

    Returns
    -------
    BenchmarkModel

    Examples
    --------
    >>> from pymc_dp.testing.benchmark_models import banana
    >>> bm = banana(n=1000, seed=1)
    >>> bm.data.shape, bm.tempering
    ((1000, 2), 1.0)
    >>> bm.posterior_draws(5, rng=0).shape
    (5, 2)
    """
    n = int(n)
    d = int(d)
    if d < 2:
        raise ValueError("the banana needs d >= 2")
    if n < 1:
        raise ValueError("n must be positive")
    a, b, m, sigma0_sq = float(a), float(b), float(m), float(sigma0_sq)
    T = _tempering(n, n0)
    var = _lik_var(lik_var, d)
    sd = np.sqrt(var)
    theta_true = np.zeros(d)
    theta_true[1] = 3.0
    if true_theta is not None:
        theta_true = np.asarray(true_theta, dtype=float).reshape(d)
    gen = _rng(seed)

    # Data from the likelihood at the true parameter (thesis 5.4).
    mean_true = theta_true.copy()
    mean_true[1] += a * (theta_true[0] - m) ** 2 + b
    data = mean_true + sd * gen.standard_normal((n, d))

    # Posterior of y = g⁻¹(θ) (Theorem 13).
    tau = 1.0 / var
    tau0 = 1.0 / sigma0_sq
    prec = T * n * tau + tau0
    mu_post = T * n * tau * data.mean(axis=0) / prec
    sd_post = 1.0 / np.sqrt(prec)

    def g(y):
        theta = y.copy()
        theta[..., 1] -= a * (y[..., 0] - m) ** 2 + b
        return theta

    def sampler(size, rng):
        return g(mu_post + sd_post * rng.standard_normal((size, d)))

    # E[θ_2] = μ_2 − a((μ_1 − m)² + Σ_11) − b.
    post_mean = mu_post.copy()
    post_mean[1] -= a * ((mu_post[0] - m) ** 2 + sd_post[0] ** 2) + b

    lik_sd = sd / math.sqrt(T)

    def loglik(theta):
        mean = theta.copy()
        mean[1] += a * (theta[0] - m) ** 2 + b
        return stats.norm.logpdf(data, loc=mean, scale=lik_sd).sum(axis=1)

    with pm.Model() as model:
        if a == 0.0:
            theta = pm.Normal(THETA, mu=0.0, sigma=math.sqrt(sigma0_sq), shape=(d,))
            mean = theta
        else:
            theta = pm.CustomDist(
                THETA,
                np.zeros(d),
                a,
                b,
                m,
                math.sqrt(sigma0_sq),
                logp=_banana_prior_logp,
                random=_banana_prior_random,
                signature="(d),(),(),(),()->(d)",
                shape=(d,),
            )
            mean = pt.set_subtensor(theta[1], theta[1] + a * (theta[0] - m) ** 2 + b)
        # the scales are known: a public constant, not people's values
        sd_data = pm.Data("lik_sd", np.broadcast_to(lik_sd, (d,)).copy())
        public_data(sd_data)
        pm.Normal(OBSERVED, mu=mean, sigma=sd_data, observed=data)

    if name is None:
        kind = "gauss" if a == 0.0 else "banana"
        name = f"{'tempered' if n0 is not None else 'flat'}-{kind}-{d}d"
    return BenchmarkModel(
        name=name,
        model=model,
        data=data,
        true_theta=theta_true,
        tempering=T,
        posterior_mean=post_mean,
        params=dict(n=n, d=d, a=a, b=b, m=m, sigma0_sq=sigma0_sq, lik_var=var.tolist(), n0=n0),
        _sampler=sampler,
        _loglik=loglik,
        _start_centre=theta_true,
    )


def high_dim_gaussian(
    n: int = 200_000,
    d: int = 30,
    *,
    sigma0_sq: float = 1000.0,
    lik_var=None,
    n0=None,
    seed=0,
) -> BenchmarkModel:
    """The thesis' high-dimensional Gaussian: :func:`banana` with a = 0 (Table 5.1).

    θ ~ N(0, σ0² I), x_ji ~ N(θ_i, σ_i²) with σ² = (20, 2.5, 1, …, 1), true θ = (0, 3, 0, …).

    Examples
    --------
    >>> from pymc_dp.testing.benchmark_models import high_dim_gaussian
    >>> high_dim_gaussian(n=500, seed=0).posterior_draws(4, rng=0).shape
    (4, 30)
    """
    return banana(
        n, d, a=0.0, sigma0_sq=sigma0_sq, lik_var=lik_var, n0=n0, seed=seed,
        name=f"gauss-{int(d)}d" if n0 is None else f"tempered-gauss-{int(d)}d",
    )


def correlated_gaussian(
    n: int = 200_000,
    *,
    rho: float = 0.999,
    sigma0_sq: float = 100.0,
    true_theta: Sequence[float] = (0.0, 3.0),
    n0: float | None = None,
    seed=0,
) -> BenchmarkModel:
    """The thesis' highly correlated 2-d Gaussian (Table 5.1, "Correlated Gauss").

    θ ~ N(0, σ0² I) with σ0² = 100; x_j ~ N(θ, Σ), Σ = [[1, ρ], [ρ, 1]], ρ = 0.999. The
    (tempered) posterior is N(μ, C) with C = (I/σ0² + T n Σ⁻¹)⁻¹, μ = C T n Σ⁻¹ x̄.

    Examples
    --------
    >>> from pymc_dp.testing.benchmark_models import correlated_gaussian
    >>> bm = correlated_gaussian(n=1000, seed=0)
    >>> bool(abs(np.corrcoef(bm.posterior_draws(4000, rng=0).T)[0, 1] - 0.999) < 0.001)
    True
    """
    n = int(n)
    rho = float(rho)
    if not -1 < rho < 1:
        raise ValueError("rho must be in (-1, 1)")
    T = _tempering(n, n0)
    cov = np.array([[1.0, rho], [rho, 1.0]])
    theta_true = np.asarray(true_theta, dtype=float).reshape(2)
    gen = _rng(seed)
    chol = np.linalg.cholesky(cov)
    data = theta_true + gen.standard_normal((n, 2)) @ chol.T

    cov_inv = np.linalg.inv(cov)
    prec_post = np.eye(2) / float(sigma0_sq) + T * n * cov_inv
    cov_post = np.linalg.inv(prec_post)
    cov_post = 0.5 * (cov_post + cov_post.T)
    mu_post = cov_post @ (T * n * cov_inv @ data.mean(axis=0))
    chol_post = np.linalg.cholesky(cov_post)

    def sampler(size, rng):
        return mu_post + rng.standard_normal((size, 2)) @ chol_post.T

    lik_cov = cov / T

    def loglik(theta):
        return stats.multivariate_normal.logpdf(data, mean=theta, cov=lik_cov)

    with pm.Model() as model:
        theta = pm.Normal(THETA, mu=0.0, sigma=math.sqrt(float(sigma0_sq)), shape=(2,))
        # the likelihood's covariance is known: a public constant, not people's values
        cov_data = pm.Data("lik_cov", lik_cov)
        public_data(cov_data)
        pm.MvNormal(OBSERVED, mu=theta, cov=cov_data, observed=data)

    return BenchmarkModel(
        name="correlated-gauss" if n0 is None else "tempered-correlated-gauss",
        model=model,
        data=data,
        true_theta=theta_true,
        tempering=T,
        posterior_mean=mu_post,
        params=dict(n=n, rho=rho, sigma0_sq=float(sigma0_sq), n0=n0, posterior_cov=cov_post.tolist()),
        _sampler=sampler,
        _loglik=loglik,
        _start_centre=theta_true,
    )


def circle(
    n: int = 100_000,
    *,
    a: float = 1e-5,
    r_mean: float = 3.0,
    r_sd: float = 1.0,
    n0: float | None = None,
    seed=0,
) -> BenchmarkModel:
    """The thesis' circle model (section 5.3): ln p(r | θ) = −a(θ_1² + θ_2² − r²)², flat prior.

    The data r_j ~ N(3, 1) do not come from the model (thesis 5.3), so ``true_theta`` is
    ``None``; the exact posterior (see the module docs) has mean (0, 0). ``data`` has shape
    ``(n,)``: one scalar per individual.

    Examples
    --------
    >>> from pymc_dp.testing.benchmark_models import circle
    >>> draws = circle(n=1000, seed=0).posterior_draws(2000, rng=0)
    >>> bool(abs(np.sqrt((draws**2).sum(axis=1)).mean() - 3.16) < 0.1)
    True
    """
    n = int(n)
    a = float(a)
    if a <= 0:
        raise ValueError("a must be positive")
    T = _tempering(n, n0)
    gen = _rng(seed)
    data = r_mean + r_sd * gen.standard_normal(n)
    aT = a * T
    s_mean = float(np.mean(data**2))
    s_sd = 1.0 / math.sqrt(2.0 * aT * n)
    s_dist = stats.truncnorm((0.0 - s_mean) / s_sd, np.inf, loc=s_mean, scale=s_sd)

    def sampler(size, rng):
        s = s_dist.rvs(size=size, random_state=rng)
        phi = rng.uniform(0.0, 2.0 * np.pi, size)
        return np.sqrt(s)[:, None] * np.column_stack([np.cos(phi), np.sin(phi)])

    def loglik(theta):
        return -aT * (theta[0] ** 2 + theta[1] ** 2 - data**2) ** 2

    def logp(value, theta):
        return -aT * (theta[..., 0] ** 2 + theta[..., 1] ** 2 - value**2) ** 2

    with pm.Model() as model:
        theta = pm.Flat(THETA, shape=(2,))
        pm.CustomDist(OBSERVED, theta, logp=logp, signature="(k)->()", observed=data)

    return BenchmarkModel(
        name="circle" if n0 is None else "tempered-circle",
        model=model,
        data=data,
        true_theta=None,
        tempering=T,
        posterior_mean=np.zeros(2),
        params=dict(n=n, a=a, r_mean=r_mean, r_sd=r_sd, n0=n0),
        _sampler=sampler,
        _loglik=loglik,
        _start_centre=np.array([0.0, 1.0]),
        _start_sd=1.0,
    )


#: Table 5.1 of the thesis: name → (builder, keyword arguments).
THESIS_MODELS: dict[str, tuple[Callable[..., BenchmarkModel], dict]] = {
    "flat-banana-2d": (banana, dict(n=100_000, d=2, a=20.0, sigma0_sq=1000.0)),
    "flat-banana-10d": (banana, dict(n=200_000, d=10, a=20.0, sigma0_sq=1000.0)),
    "tempered-banana-2d": (banana, dict(n=100_000, d=2, a=20.0, sigma0_sq=1000.0, n0=1000)),
    "tempered-banana-10d": (banana, dict(n=200_000, d=10, a=20.0, sigma0_sq=1000.0, n0=1000)),
    "gauss-30d": (high_dim_gaussian, dict(n=200_000, d=30, sigma0_sq=1000.0)),
    "narrow-banana": (banana, dict(n=150_000, d=2, a=350.0, sigma0_sq=1000.0)),
    "correlated-gauss": (correlated_gaussian, dict(n=200_000, rho=0.999, sigma0_sq=100.0)),
    "circle": (circle, dict(n=100_000, a=1e-5)),
}


def thesis_model(name: str, *, seed=0, **overrides) -> BenchmarkModel:
    """Build a model of the thesis' Table 5.1 by name (see :data:`THESIS_MODELS`).

    Keyword ``overrides`` replace the table's values (e.g. ``n=1000`` for a quick test).

    Examples
    --------
    >>> from pymc_dp.testing.benchmark_models import thesis_model
    >>> bm = thesis_model("tempered-banana-2d", n=2000)
    >>> bm.name, bm.tempering
    ('tempered-banana-2d', 0.5)
    """
    try:
        builder, kwargs = THESIS_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {sorted(THESIS_MODELS)}") from None
    kwargs = {**kwargs, **overrides}
    bm = builder(seed=seed, **kwargs)
    if bm.name != name:
        object.__setattr__(bm, "name", name)
    return bm
