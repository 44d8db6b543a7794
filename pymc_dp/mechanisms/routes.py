"""Inference from privatized releases: one model, several routes to its posterior.

The analyst's posterior given releases ``s_dp`` of a statistic of confidential records is

    π(θ | s_dp) ∝ π(θ) ∫ f(x | θ) η(s_dp | s(x)) dx        (Xiong, Ju & Zhang, eq. 2–3)

with ``f`` the model of the confidential records and ``η`` the (public) mechanism. You write
the model once, as a :class:`PrivatizedDataModel`:

* ``params()`` declares the parameters θ and their prior (PyMC variables);
* ``records(params, n)`` declares ``n`` confidential records as PyMC random variables
  (leading axis = record) and returns, for every release, the per-record contributions
  ``t(x_i)``; the released statistic is their sum or mean (``aggregate``);
* ``releases`` maps names to the :class:`~pymc_dp.mechanisms.release.Release` objects.

Each route turns it into a PyMC model that you sample with PyMC:

* :func:`data_augmentation_model` (``pm.sample``): the records are latent variables
  (Ju et al.'s DA-MCMC); exact.
* :func:`normal_approximation_model` (``pm.sample``): the summed statistic is
  ``N(n·m(θ), n·C(θ))`` (CLT; Bernstein & Sheldon), convolved with the mechanism;
  approximate, cost independent of n.
* :func:`smc_abc_model` (``pm.sample_smc``): SMC-ABC on the simulator of the confidential
  statistic followed by the mechanism, through ``pm.Simulator``; exact target with the
  default kernel.
* :func:`naive_plugin_model` (``pm.sample``): **comparator only**, the release treated as
  the exact statistic; wrong by design.

All of them are post-processing of the releases: sampling them costs no privacy.
"""

from __future__ import annotations

import numbers

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from pytensor.graph.replace import graph_replace
from pytensor.tensor.random.type import RandomGeneratorType
from scipy.stats import qmc

from pymc_dp.mechanisms.likelihood import mechanism_dist, mechanism_from_release, mechanism_sample
from pymc_dp.mechanisms.release import GAUSSIAN, INFECTION_CURVE, Release

__all__ = [
    "PrivatizedDataModel",
    "data_augmentation_model",
    "naive_plugin_model",
    "normal_approximation_model",
    "record_moments",
    "smc_abc_model",
]

_JITTER = 1e-9


@dataclass(frozen=True)
class PrivatizedDataModel:
    """A model of confidential records and of the privatized releases made from them.

    Written once, turned into a PyMC model by each route (:func:`data_augmentation_model`,
    :func:`normal_approximation_model`, :func:`smc_abc_model`, :func:`naive_plugin_model`).

    Parameters
    ----------
    params : callable
        ``params()`` is called inside a PyMC model context and declares the parameters θ
        with their priors. It may return a dict of the variables the records need;
        returning None passes every variable it created, by name.
    records : callable, optional
        ``records(params, n)`` is called inside the same context after ``params``. It
        declares ``n`` i.i.d. (given θ) confidential records as PyMC random variables with the
        record index on the leading axis, and returns a dict mapping every release name to
        the per-record contributions ``t(x_i)``: a tensor of shape ``(n, *release.shape)``
        whose sum (or mean, see ``aggregate``) over axis 0 is the confidential statistic the
        mechanism was applied to. Apply the same clamping as the data holder did (e.g.
        :func:`~pymc_dp.mechanisms.statistics.linear_regression_records`). The routes call it
        with other record counts too (quasi-random draws, simulation replicates), so
        ``t(x_i)`` must not depend on ``n``: leave the averaging to ``aggregate``.
    releases : mapping of str to Release
        The releases to condition on, by name.
    n : int
        Number of confidential records (public).
    aggregate : {"sum", "mean"} or mapping, default "sum"
        How the per-record contributions make the released statistic: their sum, or their
        mean (sum divided by ``n``); one value for all releases or one per release name.
    moments : callable, optional
        ``moments(params)`` returning the mean ``(K,)`` and covariance ``(K, K)`` of one
        record's contributions ``t(x_i)``, concatenated over releases in the order of
        ``releases`` (each flattened; before any averaging, as ``records`` returns them).
        Used by the normal approximation instead of the default randomized quasi-Monte
        Carlo estimate (needed when a record variable has no inverse CDF in PyMC, e.g. a
        discrete or multivariate one).
    simulator : callable, optional
        ``simulator(rng, params, size)`` with ``params`` a dict of NumPy values of the free
        parameters, returning a dict mapping each release name to ``size`` simulated
        confidential statistics, shape ``(size, *release.shape)``. An alternative to
        ``records`` for :func:`smc_abc_model` when the confidential data come from a
        simulator (the "triply intractable" case, e.g. a stochastic SIR model).

    Examples
    --------
    Ten records ``x_i ~ N(θ, 1)`` clamped to [−3, 3]; their sum released with Laplace noise:

    >>> import numpy as np, pymc as pm, pytensor.tensor as pt
    >>> from pymc_dp.mechanisms import PrivatizedDataModel, laplace_release, clamp
    >>> data = np.random.default_rng(0).normal(1.0, 1.0, size=10)
    >>> rel = laplace_release(clamp(data, lower=-3, upper=3).sum(), sensitivity=6.0,
    ...                       epsilon=1.0, rng=1)
    >>> def params():
    ...     pm.Normal("theta", 0.0, 2.0)
    >>> def records(params, n):
    ...     x = pm.Normal("x", params["theta"], 1.0, shape=n)
    ...     return {"s": pt.clip(x, -3, 3)}
    >>> spec = PrivatizedDataModel(params=params, records=records, releases={"s": rel}, n=10)
    >>> sorted(v.name for v in data_augmentation_model(spec).free_RVs)
    ['theta', 'x']
    """

    params: Callable
    records: Callable | None = None
    releases: Mapping[str, Release] = field(default_factory=dict)
    n: int = 0
    aggregate: str | Mapping[str, str] = "sum"
    moments: Callable | None = None
    simulator: Callable | None = None

    def __post_init__(self):
        if not callable(self.params):
            raise ValueError("params must be a callable declaring the parameters")
        if self.records is None and self.simulator is None:
            raise ValueError("give records (a PyMC model of the records) or a simulator")
        for name, fn in (("records", self.records), ("moments", self.moments),
                         ("simulator", self.simulator)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{name} must be callable")
        if not isinstance(self.releases, Mapping) or not self.releases:
            raise ValueError("releases must be a non-empty mapping of names to Release objects")
        for key, rel in self.releases.items():
            if not isinstance(key, str) or not isinstance(rel, Release):
                raise ValueError("releases must map str names to Release objects")
        if isinstance(self.n, bool) or not isinstance(self.n, numbers.Integral) or self.n < 1:
            raise ValueError(f"n must be an integer >= 1, got {self.n!r}")
        object.__setattr__(self, "releases", dict(self.releases))
        agg = self.aggregate
        if isinstance(agg, str):
            agg = {name: agg for name in self.releases}
        if not isinstance(agg, Mapping) or set(agg) != set(self.releases):
            raise ValueError("aggregate must be 'sum', 'mean', or a mapping with one per release")
        if any(a not in ("sum", "mean") for a in agg.values()):
            raise ValueError("aggregate values must be 'sum' or 'mean'")
        object.__setattr__(self, "aggregate", dict(agg))

    @property
    def names(self) -> list[str]:
        """Release names, in order."""
        return list(self.releases)

    @property
    def sizes(self) -> list[int]:
        """Number of entries of each release, in order."""
        return [rel.value.size for rel in self.releases.values()]

    @property
    def observed(self) -> np.ndarray:
        """All released values, flattened and concatenated in release order."""
        return np.concatenate([rel.value.ravel() for rel in self.releases.values()])

    def _need_records(self, route: str) -> None:
        if self.records is None:
            raise ValueError(f"{route} needs records (a PyMC model of the confidential records)")


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------


def _declare_params(spec: PrivatizedDataModel) -> dict:
    model = pm.modelcontext(None)
    before = set(model.named_vars)
    out = spec.params()
    if out is None:
        return {k: v for k, v in model.named_vars.items() if k not in before}
    if not isinstance(out, Mapping):
        raise ValueError("params() must return None or a dict of variables")
    return dict(out)


def _declare_records(spec: PrivatizedDataModel, params: dict, n: int) -> pt.TensorVariable:
    """Per-record contributions of all releases, shape (n, K), K = total release size.

    Scaled so that their sum over ``spec.n`` records is the released statistic (``n`` may
    differ from ``spec.n``: quasi-random draws, simulation replicates).
    """
    out = spec.records(params, n)
    if not isinstance(out, Mapping) or set(out) != set(spec.releases):
        raise ValueError(
            f"records() must return a dict with one entry per release: {sorted(spec.releases)}"
        )
    cols = []
    for name, rel in spec.releases.items():
        t = pt.as_tensor_variable(out[name])
        want = 1 + rel.value.ndim
        if t.ndim != want:
            want_shape = "(n" + "".join(f", {d}" for d in rel.value.shape) + ")"
            raise ValueError(
                f"records()[{name!r}] must have shape {want_shape} (the contribution of each "
                f"record to release {name!r}), got a tensor with {t.ndim} dimensions"
            )
        static = t.type.shape
        if None not in static[1:] and tuple(static[1:]) != rel.value.shape:
            raise ValueError(
                f"records()[{name!r}] has per-record shape {tuple(static[1:])}, but release "
                f"{name!r} has shape {rel.value.shape}"
            )
        t = pt.cast(t, "float64").reshape((n, rel.value.size))
        if spec.aggregate[name] == "mean":
            t = t / spec.n  # the released mean over the spec's n records
        cols.append(t)
    return pt.concatenate(cols, axis=1)


def _split(vector, spec: PrivatizedDataModel) -> dict:
    """Split a (..., K) tensor into the releases' (…, *shape) pieces."""
    out, start = {}, 0
    for name, rel in spec.releases.items():
        stop = start + rel.value.size
        piece = vector[..., start:stop]
        if rel.value.ndim:
            out[name] = piece.reshape((*piece.shape[:-1], *rel.value.shape))
        else:
            out[name] = piece[..., 0]
        start = stop
    return out


def _mechanism_likelihoods(spec: PrivatizedDataModel, stat_vector) -> None:
    for name, stat in _split(stat_vector, spec).items():
        mechanism_from_release(name, stat, spec.releases[name])


# --------------------------------------------------------------------------------------
# Data augmentation
# --------------------------------------------------------------------------------------


def data_augmentation_model(spec: PrivatizedDataModel) -> pm.Model:
    """The data-augmentation model: confidential records as latent variables.

    The joint posterior of (θ, x) given the releases, ``π(θ) f(x | θ) η(s_dp | s(x))``, is a
    PyMC model whose free variables are the parameters and the ``n`` latent records
    (Ju et al. 2022, DA-MCMC; Xiong, Ju & Zhang, section 2.3). Its θ-marginal is the exact
    posterior. Sample it with ``pm.sample`` (NUTS for continuous records; PyMC assigns
    Metropolis-type steps to discrete ones).

    Cost: ``n × record size`` extra dimensions; one gradient is O(n). Mixing degrades when
    the mechanism noise is small relative to the spread of the statistic (the records are
    then pinned near a manifold); use it for small to moderate ``n``.

    Parameters
    ----------
    spec : PrivatizedDataModel

    Returns
    -------
    pymc.Model
        Free variables: the parameters and the records. Observed: one variable per release,
        named as the release.

    Examples
    --------
    See :class:`PrivatizedDataModel`.
    """
    spec._need_records("data augmentation")
    with pm.Model() as model:
        params = _declare_params(spec)
        rows = _declare_records(spec, params, spec.n)
        _mechanism_likelihoods(spec, rows.sum(axis=0))
    return model


# --------------------------------------------------------------------------------------
# Normal approximation
# --------------------------------------------------------------------------------------


def record_moments(spec: PrivatizedDataModel, params: Mapping, *, draws: int = 4096, rng=0):
    """Mean and covariance of one record's contributions, as tensors in the parameters.

    Estimated by randomized quasi-Monte Carlo with common random numbers: every record
    variable is written as its inverse CDF at fixed scrambled-Sobol uniforms, so the
    estimate is a smooth, differentiable function of θ (clamping included), with an error
    typically far below plain Monte Carlo's ``1/√draws``. Uses ``spec.moments`` if given.

    Parameters
    ----------
    spec : PrivatizedDataModel
    params : mapping
        The parameter variables of the model being built (as returned by ``params()``).
    draws : int, default 4096
        Number of quasi-random records (rounded up to a power of 2).
    rng : int or numpy.random.Generator, default 0
        Seed of the Sobol scrambling (fixed by default: the moments are a deterministic
        approximation, not a source of privacy noise).

    Returns
    -------
    mean, cov : TensorVariable
        Shapes ``(K,)`` and ``(K, K)``, K = total size of the releases.

    Raises
    ------
    NotImplementedError
        If a record variable is not continuous, has no inverse CDF in PyMC, or does not have
        the record index on its leading axis; pass ``moments=`` to the spec instead.
    """
    if spec.moments is not None:
        mean, cov = spec.moments(params)
        mean, cov = pt.as_tensor_variable(mean), pt.as_tensor_variable(cov)
        # Scale as _declare_records does: a released mean is the sum of t(x_i) / n.
        w = np.concatenate([
            np.full(rel.value.size, 1.0 / spec.n if spec.aggregate[name] == "mean" else 1.0)
            for name, rel in spec.releases.items()
        ])
        return mean * w, cov * np.outer(w, w)
    spec._need_records("the normal approximation")
    draws = int(2 ** int(np.ceil(np.log2(max(int(draws), 2)))))
    with pm.Model(model=None) as scratch:
        scratch_params = _declare_params(spec)
        n_before = len(scratch.free_RVs)
        rows = _declare_records(spec, scratch_params, draws)
        record_rvs = scratch.free_RVs[n_before:]
        if scratch.observed_RVs or scratch.potentials:
            raise ValueError("records() must not declare observed variables or potentials")
    blocks = []
    for rv in record_rvs:
        if not rv.dtype.startswith("float"):
            raise NotImplementedError(
                f"record variable {rv.name!r} is discrete; the normal approximation needs "
                "continuous records, or pass moments= to PrivatizedDataModel"
            )
        shape = tuple(int(s) for s in rv.shape.eval())
        if not shape or shape[0] != draws:
            raise NotImplementedError(
                f"record variable {rv.name!r} does not have the record index on its leading "
                "axis; pass moments= to PrivatizedDataModel"
            )
        blocks.append((rv, shape, int(np.prod(shape[1:], dtype=int))))
    missing = set(scratch_params) - set(params)
    if missing:
        raise ValueError(f"params() declared {sorted(missing)} only on a second call")
    to_main = {scratch_params[k]: params[k] for k in scratch_params}
    dim = sum(b[2] for b in blocks)
    uniforms = qmc.Sobol(d=max(dim, 1), scramble=True, seed=rng).random(draws)
    uniforms = np.clip(uniforms, 1e-12, 1.0 - 1e-12)
    replace, col = {}, 0
    for rv, shape, size in blocks:
        u = uniforms[:, col:col + size].reshape(shape)
        col += size
        try:
            q = pm.icdf(rv, u)
        except NotImplementedError:
            raise NotImplementedError(
                f"record variable {rv.name!r} has no inverse CDF in PyMC; pass moments= to "
                "PrivatizedDataModel"
            ) from None
        # graph_replace (unlike clone_replace) keeps the model's own parameter variables
        # instead of cloning them, so the moments stay functions of the model's θ.
        replace[rv] = graph_replace(q, {**replace, **to_main}, strict=False)
    rows_q = graph_replace(rows, {**replace, **to_main}, strict=False)
    own = set(pm.modelcontext(None).basic_RVs)
    if any(v not in own for v in pm.pytensorf.rvs_in_graph(rows_q)):
        raise NotImplementedError(
            "records() draws randomness outside registered PyMC variables; pass moments= "
            "to PrivatizedDataModel"
        )
    mean = rows_q.mean(axis=0)
    centred = rows_q - mean
    cov = centred.T @ centred / draws
    return mean, cov


def _normal_sum(spec, params, draws, rng):
    mean, cov = record_moments(spec, params, draws=draws, rng=rng)
    k = int(spec.observed.size)
    cov_sum = spec.n * cov
    jitter = _JITTER * (pt.trace(cov_sum) / k + 1e-12)
    return spec.n * mean, cov_sum + jitter * pt.eye(k)


def normal_approximation_model(spec: PrivatizedDataModel, *, moment_draws: int = 4096,
                               rng=0, marginalize: bool = True,
                               parameterization: str = "auto") -> pm.Model:
    """The normal approximation: the summed statistic as a Gaussian latent variable.

    For ``n`` i.i.d. records, the confidential statistic ``s = Σ t_i`` is approximately
    ``N(n·m(θ), n·C(θ))`` with ``m, C`` the mean and covariance of one record's
    contributions (CLT; Bernstein & Sheldon 2018, 2019). ``s`` enters as a latent variable
    (non-centred: ``s = n·m + chol(n·C)·z``, ``z ~ N(0, I)``) and the mechanism likelihood
    is applied to it. A single Gaussian release is marginalised exactly
    (``s_dp ~ N(n·m, n·C + σ² I)``) when ``marginalize`` is True.

    Parameterisation of the latent sum: ``"centered"`` (``s`` itself is the latent
    variable) mixes best when the releases pin ``s`` down (little noise, e.g. ε = 10 in the
    regression example); ``"noncentered"`` (``z`` is latent) when the noise dominates and
    ``s`` is mostly determined by θ (ε = 1 and 0.1). ``"auto"`` compares, entry by entry,
    the noise variance with the statistic's variance given θ, averaged over prior draws:
    centred if the noise is smaller for some entry, non-centred otherwise.

    ``m, C`` come from :func:`record_moments` (clamping included) or ``spec.moments``.
    Cost per gradient: O(moment_draws · K²), independent of n; error: the CLT error of the
    sum (small for large n, visible for skewed statistics at small n) plus a tiny
    quasi-Monte Carlo error.

    Parameters
    ----------
    spec : PrivatizedDataModel
    moment_draws : int, default 4096
        Quasi-random records used for the moments.
    rng : int or numpy.random.Generator, default 0
        Seed of the Sobol scrambling.
    marginalize : bool, default True
        Integrate the latent sum out for a single Gaussian release.
    parameterization : {"auto", "centered", "noncentered"}, default "auto"
        Of the latent sum (see above).

    Returns
    -------
    pymc.Model
        Free variables: the parameters and ``normal_approx_sum`` (centred) or
        ``normal_approx_z`` (non-centred), unless marginalised; deterministics
        ``<release>_confidential`` (the latent statistic).
    """
    if parameterization not in ("auto", "centered", "noncentered"):
        raise ValueError("parameterization must be 'auto', 'centered' or 'noncentered'")
    with pm.Model() as model:
        params = _declare_params(spec)
        loc, cov = _normal_sum(spec, params, moment_draws, rng)
        rels = list(spec.releases.values())
        if marginalize and len(rels) == 1 and rels[0].kind == GAUSSIAN:
            rel = rels[0]
            noise = rel.noise_scale**2 * pt.eye(rel.value.size)
            pm.MvNormal(spec.names[0], mu=loc, cov=cov + noise, observed=rel.value.ravel())
            return model
        k = int(spec.observed.size)
        chol = pt.linalg.cholesky(cov, on_error="nan")
        if parameterization == "auto":
            parameterization = _auto_parameterization(spec, model, cov, rng)
        if parameterization == "centered":
            s = pm.MvNormal("normal_approx_sum", mu=loc, chol=chol, shape=k)
        else:
            z = pm.Normal("normal_approx_z", 0.0, 1.0, shape=k)
            s = loc + chol @ z
        for name, piece in _split(s, spec).items():
            pm.Deterministic(f"{name}_confidential", piece)
        _mechanism_likelihoods(spec, s)
    return model


def _noise_variance(rel: Release) -> np.ndarray:
    """Per-entry noise variance of a release, on the scale of the confidential statistic."""
    if rel.kind == GAUSSIAN:
        var = rel.noise_scale**2
    elif rel.kind == INFECTION_CURVE:
        # Binomial counts at p = 1/2, mapped back to the scale of the infected counts.
        var = 0.25 * (rel.population + 2.0 * rel.m) ** 2 / rel.n_trials
    else:
        var = 2.0 * rel.noise_scale**2
    return np.full(rel.value.size, var)


def _auto_parameterization(spec: PrivatizedDataModel, model: pm.Model, cov, rng) -> str:
    """Centred when a release pins some entry of the statistic down, else non-centred.

    Compares, entry by entry, the mechanism's noise variance with the statistic's
    conditional variance n·C(θ), averaged over 32 prior draws of θ. If noise dominates
    every entry, the latent sum is mostly determined by θ and the non-centred form mixes
    better; if some entry is measured more precisely than θ predicts it, the centred form
    does (regression example: ε = 10 centred, ε = 1 and 0.1 non-centred).
    """
    free = list(model.free_RVs)
    fn = pytensor.function(free, pt.diag(cov), mode="FAST_COMPILE", on_unused_input="ignore")
    draws = pm.draw(free, draws=32, random_seed=rng)
    stat_var = np.mean([fn(*[d[i] for d in draws]) for i in range(32)], axis=0)
    noise_var = np.concatenate([_noise_variance(rel) for rel in spec.releases.values()])
    share = noise_var / (noise_var + np.maximum(stat_var, 1e-300))
    return "centered" if float(np.min(share)) < 0.5 else "noncentered"


def naive_plugin_model(spec: PrivatizedDataModel, *, moment_draws: int = 4096, rng=0) -> pm.Model:
    """**Comparator only, wrong by design**: the release treated as the exact statistic.

    The normal-approximation likelihood of the confidential statistic,
    ``N(n·m(θ), n·C(θ))``, evaluated at the noisy released value as if no noise had been
    added. This is the "naive plug-in" posterior that Xiong, Ju & Zhang and Ju et al.
    show to be wrong: it is overconfident and can be badly biased. Use it only to show
    what ignoring the mechanism does.

    Parameters
    ----------
    spec : PrivatizedDataModel
    moment_draws, rng
        As in :func:`normal_approximation_model`.

    Returns
    -------
    pymc.Model
        One observed variable, ``naive_plugin``, holding all released values.
    """
    with pm.Model() as model:
        params = _declare_params(spec)
        loc, cov = _normal_sum(spec, params, moment_draws, rng)
        pm.MvNormal("naive_plugin", mu=loc, cov=cov, observed=spec.observed)
    return model


# --------------------------------------------------------------------------------------
# SMC-ABC
# --------------------------------------------------------------------------------------


class _RecordsSimulator:
    """NumPy simulator of the summed confidential statistic, compiled from ``records``."""

    def __init__(self, spec: PrivatizedDataModel, simulations: int):
        n, r = spec.n, simulations
        with pm.Model(model=None) as scratch:
            scratch_params = _declare_params(spec)
            self.free = list(scratch.free_RVs)
            rows = _declare_records(spec, scratch_params, r * n)
        sums = rows.reshape((r, n, rows.shape[-1])).sum(axis=1)
        inputs = [rv.type() for rv in self.free]
        sums = graph_replace(sums, dict(zip(self.free, inputs)), strict=False)
        self.fn = pm.pytensorf.compile(inputs, sums, random_seed=0)
        self.rngs = [v for v in self.fn.get_shared() if isinstance(v.type, RandomGeneratorType)]
        self.dtypes = [rv.dtype for rv in self.free]

    def __call__(self, rng, values: list[np.ndarray]) -> np.ndarray:
        pm.pytensorf.reseed_rngs(self.rngs, int(rng.integers(2**63)))
        return self.fn(*[np.asarray(v, dtype=d) for v, d in zip(values, self.dtypes)])


class _UserSimulator:
    def __init__(self, spec: PrivatizedDataModel, simulations: int, names: list[str]):
        self.spec, self.r, self.names = spec, simulations, names

    def __call__(self, rng, values):
        out = self.spec.simulator(rng, dict(zip(self.names, values)), self.r)
        if not isinstance(out, Mapping) or set(out) != set(self.spec.releases):
            raise ValueError("simulator must return a dict with one entry per release")
        cols = []
        for name, rel in self.spec.releases.items():
            arr = np.asarray(out[name], dtype=float)
            if arr.shape != (self.r, *rel.value.shape):
                raise ValueError(
                    f"simulator()[{name!r}] must have shape {(self.r, *rel.value.shape)}, "
                    f"got {arr.shape}"
                )
            cols.append(arr.reshape(self.r, -1))
        return np.concatenate(cols, axis=1)


def smc_abc_model(spec: PrivatizedDataModel, *, simulations: int = 100,
                  kernel: str = "mechanism", bandwidth=None) -> pm.Model:
    """SMC-ABC on the private-data simulator, through ``pm.Simulator``.

    The private-data simulator is the confidential simulator (``spec.records``, compiled to
    NumPy, or ``spec.simulator``) followed by the mechanism (Xiong, Ju & Zhang, section 3.1 and
    Algorithm 3). Each likelihood evaluation runs ``simulations`` replicates and averages
    the ABC kernel over them; ``pm.sample_smc`` keeps each particle's estimate, so the SMC
    is pseudo-marginal.

    Two kernels:

    ``kernel="mechanism"`` (default)
        The mechanism itself is the ABC kernel: the simulator stops at the confidential
        statistic ``s(x)`` and the kernel is the mechanism density ``η(s_dp | s(x))``. The
        average over replicates is an unbiased estimate of ``f(s_dp | θ)``, so the target is
        the **exact** posterior, with no tolerance to tune (Wilkinson 2013, "ABC gives exact
        results under the assumption of model error"; here the "error" is the DP noise). Its Monte Carlo variance grows
        as the noise shrinks relative to the spread of ``s(x)``: raise ``simulations``.
    ``kernel="gaussian"``
        The paper's SMC-ABC: the simulator applies the mechanism too, and a Gaussian kernel
        of the given ``bandwidth`` (scalar or one per released entry) compares simulated and
        observed releases. The target is the exact posterior of a release with extra
        Gaussian noise of standard deviation ``bandwidth``: wider than the true one.

    Parameters
    ----------
    spec : PrivatizedDataModel
    simulations : int, default 100
        Simulator replicates per likelihood evaluation.
    kernel : {"mechanism", "gaussian"}
    bandwidth : float or array_like, optional
        Required for ``kernel="gaussian"``.

    Returns
    -------
    pymc.Model
        The parameters and one ``pm.Simulator`` named ``abc`` (its observed value is the
        released vector repeated once per replicate). Sample with ``pm.sample_smc``.
    """
    if (isinstance(simulations, bool) or not isinstance(simulations, numbers.Integral)
            or simulations < 1):
        raise ValueError(f"simulations must be an integer >= 1, got {simulations!r}")
    r = int(simulations)
    if kernel not in ("mechanism", "gaussian"):
        raise ValueError(f"kernel must be 'mechanism' or 'gaussian', got {kernel!r}")
    obs = spec.observed
    k = obs.size
    if kernel == "gaussian":
        if bandwidth is None:
            raise ValueError("kernel='gaussian' needs a bandwidth (scalar or one per entry)")
        bw = np.broadcast_to(np.asarray(bandwidth, dtype=float), (k,)).copy()
        if not np.all(np.isfinite(bw) & (bw > 0)):
            raise ValueError("bandwidth must be finite and > 0")
    elif bandwidth is not None:
        raise ValueError("bandwidth is only used with kernel='gaussian'")

    with pm.Model() as model:
        _declare_params(spec)
        free = list(model.free_RVs)
        if spec.records is not None:
            sim = _RecordsSimulator(spec, r)
            if [rv.name for rv in sim.free] != [rv.name for rv in free]:  # pragma: no cover
                raise RuntimeError("params() declared different variables on a second call")
        else:
            sim = _UserSimulator(spec, r, [rv.name for rv in free])
        shapes = [tuple(int(s) for s in rv.shape.eval()) for rv in free]
        sizes = [int(np.prod(shape, dtype=int)) for shape in shapes]
        scalars = [rv.flatten()[i] for rv, size in zip(free, sizes) for i in range(size)]
        releases = list(spec.releases.values())
        seg = np.cumsum([0] + spec.sizes)

        def simulate(rng, *args):
            *flat, _size = args
            flat = np.array([np.asarray(a, dtype=float).reshape(()) for a in flat])
            values, start = [], 0
            for shape, size in zip(shapes, sizes):
                values.append(flat[start:start + size].reshape(shape))
                start += size
            stats = sim(rng, values)
            if kernel == "gaussian":
                pieces = zip(releases, seg[:-1], seg[1:])
                stats = np.concatenate(
                    [mechanism_sample(rel, stats[:, a:b], rng) for rel, a, b in pieces], axis=1
                )
            return stats

        def distance(_eps, observed, simulated):
            o = pt.as_tensor_variable(observed).reshape((r, k))[0]
            s = pt.as_tensor_variable(simulated).reshape((r, k))
            if kernel == "mechanism":
                per_rep = 0.0
                for rel, a, b in zip(releases, seg[:-1], seg[1:]):
                    lp = pm.logp(mechanism_dist(rel, s[:, a:b]), o[a:b])
                    per_rep = per_rep + lp.sum(axis=1)
            else:
                per_rep = -0.5 * (((o - s) / bw) ** 2).sum(axis=1)
            return pt.logsumexp(per_rep) - np.log(r)

        pm.Simulator(
            "abc", simulate, *scalars, distance=distance, sum_stat="identity", epsilon=1.0,
            observed=np.tile(obs, (r, 1)),
        )
    return model
