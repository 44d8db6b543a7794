"""The analyst's side: a mechanism as a likelihood inside a PyMC model.

Each class is used like a PyMC distribution: ``LaplaceMechanism("s_dp", mu=stat, ...)``
declares the observed release ``s_dp`` as the mechanism applied to the model quantity
``stat`` (the confidential statistic as a function of parameters and, for data
augmentation, of latent confidential records). The returned variable is an ordinary PyMC
random variable (``pm.Laplace``, ``pm.Normal`` or ``pm.Binomial``), so its log density,
forward sampling and posterior predictive are PyMC's own.

Prefer ``from_release``: it takes the observed value *and* the noise parameters from the
:class:`~pymc_dp.mechanisms.release.Release`, so they cannot drift apart from the noise
that was actually added.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.validation import check_epsilon, check_int, check_positive
from pymc_dp.mechanisms.release import GAUSSIAN, INFECTION_CURVE, LAPLACE, Release

__all__ = [
    "GaussianMechanism",
    "InfectionCurveMechanism",
    "LaplaceMechanism",
    "mechanism_from_release",
]


def _check_release(release, kind: str, cls_name: str) -> Release:
    if not isinstance(release, Release):
        raise ValueError(f"{cls_name}.from_release needs a Release, got {type(release).__name__}")
    if release.kind != kind:
        raise ValueError(
            f"{cls_name} models {kind!r} releases, but release {release.name!r} is {release.kind!r}"
        )
    return release


def _check_shape(mu, release: Release, cls_name: str) -> None:
    """Refuse a statistic whose static shape cannot produce the release's shape."""
    shape = pt.as_tensor_variable(mu).type.shape
    target = release.value.shape
    if None in shape:
        return
    try:
        out = np.broadcast_shapes(shape, target)
    except ValueError:
        out = None
    if out != target:
        raise ValueError(
            f"{cls_name}: the statistic has shape {shape} but release {release.name!r} has "
            f"shape {target}"
        )


class LaplaceMechanism:
    """Likelihood of a Laplace release: ``observed ~ Laplace(mu, sensitivity / epsilon)``.

    Parameters
    ----------
    name : str
        Name of the observed variable.
    mu : tensor_like
        The confidential statistic, as a function of model variables.
    sensitivity : float
        ℓ1 sensitivity Δ₁ that the noise was calibrated with.
    epsilon : float
        ε of the release.
    observed : array_like, optional
        The released value.
    **kwargs
        Passed to :class:`pymc.Laplace` (``dims``, ``shape``, ...).

    Returns
    -------
    TensorVariable
        A ``pm.Laplace`` random variable.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_dp.mechanisms import LaplaceMechanism, laplace_release
    >>> rel = laplace_release(3.2, sensitivity=0.1, epsilon=1.0, rng=0)
    >>> with pm.Model() as model:
    ...     theta = pm.Normal("theta", 0, 10)
    ...     s_dp = LaplaceMechanism.from_release("s_dp", mu=theta, release=rel)
    >>> LaplaceMechanism.scale(sensitivity=1.0, epsilon=2.0)
    0.5
    """

    kind = LAPLACE

    def __new__(cls, name, mu, *, sensitivity, epsilon, observed=None, **kwargs):
        b = cls.scale(sensitivity, epsilon)
        return pm.Laplace(name, mu=mu, b=b, observed=observed, **kwargs)

    @classmethod
    def dist(cls, mu, *, sensitivity, epsilon, **kwargs):
        """The unregistered distribution (``pm.Laplace.dist``)."""
        return pm.Laplace.dist(mu=mu, b=cls.scale(sensitivity, epsilon), **kwargs)

    @staticmethod
    def scale(sensitivity, epsilon) -> float:
        """The Laplace scale ``b = sensitivity / epsilon`` (validated)."""
        return check_positive(sensitivity, "sensitivity") / check_epsilon(epsilon)

    @classmethod
    def from_release(cls, name, mu, release, **kwargs):
        """The likelihood of ``release``: its value is observed, its noise parameters used."""
        release = _check_release(release, cls.kind, cls.__name__)
        _check_shape(mu, release, cls.__name__)
        return cls(
            name, mu, sensitivity=release.sensitivity, epsilon=release.epsilon,
            observed=release.value, **kwargs,
        )


class GaussianMechanism:
    """Likelihood of a Gaussian release: ``observed ~ Normal(mu, sigma)``.

    Give ``sigma`` directly, or ``sensitivity`` and ``noise_multiplier`` (σ = z·Δ₂).

    Parameters
    ----------
    name : str
        Name of the observed variable.
    mu : tensor_like
        The confidential statistic.
    sigma : float, optional
        Noise standard deviation of the release.
    sensitivity, noise_multiplier : float, optional
        Alternative to ``sigma``.
    observed : array_like, optional
        The released value.
    **kwargs
        Passed to :class:`pymc.Normal`.

    Returns
    -------
    TensorVariable
        A ``pm.Normal`` random variable.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_dp.mechanisms import GaussianMechanism, gaussian_release
    >>> rel = gaussian_release([1.0, 2.0], sensitivity=1.0, sigma=0.5, rng=0)
    >>> with pm.Model():
    ...     theta = pm.Normal("theta", 0, 10)
    ...     s_dp = GaussianMechanism.from_release("s_dp", mu=theta, release=rel)
    """

    kind = GAUSSIAN

    def __new__(cls, name, mu, *, sigma=None, sensitivity=None, noise_multiplier=None,
                observed=None, **kwargs):
        sd = cls.scale(sigma=sigma, sensitivity=sensitivity, noise_multiplier=noise_multiplier)
        return pm.Normal(name, mu=mu, sigma=sd, observed=observed, **kwargs)

    @classmethod
    def dist(cls, mu, *, sigma=None, sensitivity=None, noise_multiplier=None, **kwargs):
        """The unregistered distribution (``pm.Normal.dist``)."""
        sd = cls.scale(sigma=sigma, sensitivity=sensitivity, noise_multiplier=noise_multiplier)
        return pm.Normal.dist(mu=mu, sigma=sd, **kwargs)

    @staticmethod
    def scale(*, sigma=None, sensitivity=None, noise_multiplier=None) -> float:
        """The noise standard deviation σ (validated)."""
        if sigma is not None:
            if noise_multiplier is not None:
                raise ValueError("give sigma, or sensitivity and noise_multiplier, not both")
            return check_positive(sigma, "sigma")
        if sensitivity is None or noise_multiplier is None:
            raise ValueError("give sigma, or both sensitivity and noise_multiplier")
        z = check_positive(noise_multiplier, "noise_multiplier")
        return check_positive(sensitivity, "sensitivity") * z

    @classmethod
    def from_release(cls, name, mu, release, **kwargs):
        """The likelihood of ``release``: its value is observed, its σ used."""
        release = _check_release(release, cls.kind, cls.__name__)
        _check_shape(mu, release, cls.__name__)
        return cls(name, mu, sigma=release.noise_scale, observed=release.value, **kwargs)


class InfectionCurveMechanism:
    """Likelihood of the binomial infection-curve release (Xiong, Ju & Zhang, Prop 4).

    ``observed_i ~ Binomial(n_trials, (infected_i + m) / (population + 2 m))``.

    Parameters
    ----------
    name : str
        Name of the observed variable.
    infected : tensor_like
        Infected counts I(t_i) at the release's time points (may be continuous, e.g. an
        ODE solution times K).
    population : float
        Population size K.
    n_trials : int
        Binomial trials n_s.
    m : float, optional
        Smoothing count; or give ``epsilon`` and ``m = n_trials · L / epsilon`` is used,
        with L the number of time points (the length of ``observed``).
    epsilon : float, optional
        Alternative to ``m``.
    observed : array_like, optional
        The released counts.
    **kwargs
        Passed to :class:`pymc.Binomial`.

    Returns
    -------
    TensorVariable
        A ``pm.Binomial`` random variable.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.mechanisms import InfectionCurveMechanism, infection_curve_release
    >>> rel = infection_curve_release([5, 80, 200], population=1000, n_trials=1000, m=300, rng=0)
    >>> with pm.Model():
    ...     scale = pm.HalfNormal("scale", 300)
    ...     curve = scale * np.array([0.02, 0.3, 0.7])
    ...     s = InfectionCurveMechanism.from_release("s", infected=curve, release=rel)
    """

    kind = INFECTION_CURVE

    def __new__(cls, name, infected, *, population, n_trials, m=None, epsilon=None,
                observed=None, **kwargs):
        n_points = None if observed is None else np.size(observed)
        p = cls.probability(infected, population=population, n_trials=n_trials, m=m,
                            epsilon=epsilon, n_points=n_points)
        return pm.Binomial(name, n=int(n_trials), p=p, observed=observed, **kwargs)

    @classmethod
    def dist(cls, infected, *, population, n_trials, m=None, epsilon=None, n_points=None, **kwargs):
        """The unregistered distribution (``pm.Binomial.dist``)."""
        p = cls.probability(infected, population=population, n_trials=n_trials, m=m,
                            epsilon=epsilon, n_points=n_points)
        return pm.Binomial.dist(n=int(n_trials), p=p, **kwargs)

    @staticmethod
    def probability(infected, *, population, n_trials, m=None, epsilon=None, n_points=None):
        """The success probability ``(infected + m) / (population + 2m)``."""
        population = check_positive(population, "population")
        n_trials = check_int(n_trials, "n_trials")
        if (m is None) == (epsilon is None):
            raise ValueError("give exactly one of m or epsilon")
        if m is None:
            if n_points is None:
                raise ValueError("deriving m from epsilon needs the number of time points")
            m = n_trials * n_points / check_epsilon(epsilon)
        m = check_positive(m, "m")
        return (pt.as_tensor_variable(infected) + m) / (population + 2.0 * m)

    @classmethod
    def from_release(cls, name, infected, release, **kwargs):
        """The likelihood of ``release``: its counts are observed, its K, n_s, m used."""
        release = _check_release(release, cls.kind, cls.__name__)
        _check_shape(infected, release, cls.__name__)
        return cls(
            name, infected, population=release.population, n_trials=release.n_trials,
            m=release.m, observed=release.value, **kwargs,
        )


_BY_KIND = {cls.kind: cls for cls in (LaplaceMechanism, GaussianMechanism, InfectionCurveMechanism)}


def mechanism_from_release(name, mu, release, **kwargs):
    """The mechanism likelihood matching ``release.kind``, observed at ``release.value``.

    Parameters
    ----------
    name : str
        Name of the observed variable.
    mu : tensor_like
        The confidential statistic (infected counts for an infection-curve release).
    release : Release
        The release to condition on.

    Returns
    -------
    TensorVariable
        The observed random variable.
    """
    if not isinstance(release, Release):
        raise ValueError(f"expected a Release, got {type(release).__name__}")
    return _BY_KIND[release.kind].from_release(name, mu, release, **kwargs)


def mechanism_dist(release: Release, mu):
    """The unregistered mechanism distribution of ``release`` around ``mu``."""
    if release.kind == LAPLACE:
        return pm.Laplace.dist(mu=mu, b=release.noise_scale)
    if release.kind == GAUSSIAN:
        return pm.Normal.dist(mu=mu, sigma=release.noise_scale)
    p = (mu + release.m) / (release.population + 2.0 * release.m)
    return pm.Binomial.dist(n=release.n_trials, p=p)


def mechanism_sample(release: Release, stat: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Apply the mechanism of ``release`` to statistic values ``stat`` (NumPy, any batch)."""
    stat = np.asarray(stat, dtype=float)
    if release.kind == LAPLACE:
        return stat + rng.laplace(0.0, release.noise_scale, size=stat.shape)
    if release.kind == GAUSSIAN:
        return stat + rng.normal(0.0, release.noise_scale, size=stat.shape)
    infected = np.clip(stat, 0.0, release.population)
    p = (infected + release.m) / (release.population + 2.0 * release.m)
    return rng.binomial(release.n_trials, p).astype(float)


def mechanism_quantile(release: Release, stat: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The mechanism of ``release`` applied to ``stat`` through its inverse CDF at ``u``.

    ``u`` (uniforms in (0, 1), the shape of ``stat``) drive the noise: with independent
    uniforms this is :func:`mechanism_sample`'s distribution; with a randomized quasi-Monte
    Carlo point set (scrambled Sobol) it is the "τ(u, s(x))" of Xiong, Ju & Zhang §3.4.
    """
    from scipy import stats

    stat = np.asarray(stat, dtype=float)
    u = np.broadcast_to(np.asarray(u, dtype=float), stat.shape)
    if release.kind == LAPLACE:
        return stat + stats.laplace.ppf(u, scale=release.noise_scale)
    if release.kind == GAUSSIAN:
        return stat + stats.norm.ppf(u, scale=release.noise_scale)
    infected = np.clip(stat, 0.0, release.population)
    p = (infected + release.m) / (release.population + 2.0 * release.m)
    return stats.binom.ppf(u, release.n_trials, p).astype(float)
