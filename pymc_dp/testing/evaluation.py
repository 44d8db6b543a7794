"""Evaluation of samplers against a reference sample: maximum mean discrepancy and
posterior moments.

The thesis (section 5.5) measures how far a (DP) MCMC sample is from the true posterior by
the maximum mean discrepancy (MMD, Gretton et al. 2012) with a Gaussian RBF kernel

    k(x, y) = exp(-||x - y||² / (2 σ²)),

where σ is chosen by the median heuristic: draw 50 points with replacement from each of the
two samples and set σ to the median of the distances between the points of these
subsamples (the subsampling makes the heuristic indifferent to the sizes of the samples).

:func:`mmd` returns the estimate plotted in the thesis' figures 6.2–6.4: the square root of
the absolute value of the **unbiased** (U-statistic) estimate of MMD², i.e.

    MMD² ≈ 1/(n(n-1)) Σ_{i≠j} k(x_i, x_j) + 1/(m(m-1)) Σ_{i≠j} k(y_i, y_j)
           − 2/(nm) Σ_{i,j} k(x_i, y_j),
    MMD  ≈ sqrt(|MMD²|).

(The thesis computes it with the ITE toolbox's ``BDMMD_UStat``, which returns exactly this.)
``squared=True`` returns the signed unbiased MMD² estimate instead, which is the quantity
with an unbiased, asymptotically normal sampling distribution (it is ≈ 0, possibly
negative, for two samples of one distribution).

:func:`posterior_distance` compares two ArviZ results parameter by parameter: how many
reference posterior sds the private posterior mean lies from the reference mean, the ratio
of the posterior sds, and the private run's R̂ (issue 13's benchmark targets).

Everything here is evaluation: it is never applied to private data by the library, and
costs no privacy when applied to released samples and public reference draws.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass

import arviz as az
import numpy as np
import xarray as xr

from pymc_dp.validation import check_positive

__all__ = ["PosteriorDistance", "median_heuristic_bandwidth", "mmd", "posterior_distance"]

#: Number of points drawn (with replacement) from each sample for the median heuristic.
MEDIAN_SUBSAMPLE = 50

# Largest number of kernel entries materialised at once (8 bytes each: 32 MB per block).
_BLOCK_ENTRIES = 4_000_000


def _as_2d(sample, name):
    arr = np.asarray(sample, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    elif arr.ndim != 2:
        raise ValueError(f"{name} must be a 1-d or 2-d array (points × dimensions), got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 points, got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values")
    return arr


def _sq_dists(a, b, a_sq, b_sq):
    """Squared Euclidean distances between the rows of ``a`` and ``b`` (clipped at 0)."""
    d2 = a_sq[:, None] + b_sq[None, :] - 2.0 * (a @ b.T)
    np.maximum(d2, 0.0, out=d2)
    return d2


def _kernel_sum(a, b, gamma):
    """Σ_ij exp(-gamma ||a_i - b_j||²), computed in row blocks to bound memory."""
    a_sq = np.einsum("ij,ij->i", a, a)
    b_sq = np.einsum("ij,ij->i", b, b)
    rows = max(1, _BLOCK_ENTRIES // max(1, b.shape[0]))
    total = 0.0
    for start in range(0, a.shape[0], rows):
        block = _sq_dists(a[start : start + rows], b, a_sq[start : start + rows], b_sq)
        block *= -gamma
        np.exp(block, out=block)
        total += float(block.sum())
    return total


def median_heuristic_bandwidth(x, y, *, rng=None, subsample=MEDIAN_SUBSAMPLE):
    """Bandwidth σ of the Gaussian kernel by the subsampled median heuristic (thesis 5.5).

    Draws ``subsample`` points with replacement from each sample, pools them, and returns
    the median of the distances between distinct pairs of pooled points (Gretton et al.
    2012, with the thesis' subsampling step so that samples of different sizes weigh
    equally).

    Parameters
    ----------
    x, y : array_like, shape (n, d) and (m, d), or 1-d
        The two samples (rows are points).
    rng : int, numpy.random.Generator or None
        Randomness of the subsampling.
    subsample : int
        Points drawn from each sample (50 in the thesis).

    Returns
    -------
    float
        The bandwidth; if every pooled distance is zero (degenerate samples) 1.0 is returned.
    """
    x = _as_2d(x, "x")
    y = _as_2d(y, "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y differ in dimension: {x.shape[1]} != {y.shape[1]}")
    gen = np.random.default_rng(rng)
    pooled = np.concatenate(
        [x[gen.integers(0, x.shape[0], subsample)], y[gen.integers(0, y.shape[0], subsample)]]
    )
    pooled = pooled - pooled.mean(axis=0)
    sq = np.einsum("ij,ij->i", pooled, pooled)
    d2 = _sq_dists(pooled, pooled, sq, sq)
    iu = np.triu_indices(pooled.shape[0], k=1)
    dist = np.sqrt(d2[iu])
    dist = dist[dist > 0]
    if dist.size == 0:
        return 1.0
    return float(np.median(dist))


def mmd(x, y, *, bandwidth=None, rng=None, max_points=20_000, squared=False):
    """Maximum mean discrepancy between two samples with a Gaussian kernel (thesis 5.5).

    Parameters
    ----------
    x, y : array_like, shape (n, d) and (m, d), or 1-d
        The two samples, one point per row (e.g. a chain's draws and exact posterior draws).
        They may differ in size but not in dimension.
    bandwidth : float or None
        σ of the kernel ``exp(-||x - y||² / (2σ²))``. ``None`` (default) chooses it by the
        subsampled median heuristic of the thesis (:func:`median_heuristic_bandwidth`),
        which is random: pass ``rng`` for a reproducible value, or a float to fix it.
    rng : int, numpy.random.Generator or None
        Randomness for the bandwidth heuristic and for thinning to ``max_points``.
    max_points : int or None
        A sample with more points is replaced by a uniform random subset of this size
        (without replacement) before the kernel sums; ``None`` never subsamples. The kernel
        sums run in blocks of a few MB, so memory stays bounded whatever the size; the time
        is quadratic in the number of points (10⁴ × 10⁴ takes a few seconds).
    squared : bool
        If True return the signed unbiased estimate of MMD²; otherwise (default, what the
        thesis plots) return ``sqrt(|MMD²_u|)``.

    Returns
    -------
    float
        The estimate. It is symmetric in ``x`` and ``y`` for a fixed bandwidth.

    Notes
    -----
    The estimator is the U-statistic (unbiased) estimate of MMD² of Gretton et al. (2012,
    Lemma 6): within-sample sums exclude the diagonal. Its square root is *not* unbiased for
    MMD, and for two samples of one distribution it is of order (1/n + 1/m)^{1/2}, not 0.
    The samples are centred on a common point before the kernel sums (MMD is translation
    invariant), which keeps the distance computation accurate for posteriors that are
    narrow relative to their location.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.testing.evaluation import mmd
    >>> rng = np.random.default_rng(0)
    >>> same = mmd(rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2)), rng=1)
    >>> shifted = mmd(rng.normal(size=(1000, 2)), rng.normal(1.0, size=(1000, 2)), rng=1)
    >>> bool(same < 0.1 < shifted)
    True
    >>> round(mmd([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], bandwidth=1.0, squared=True), 3)
    -0.367
    """
    x = _as_2d(x, "x")
    y = _as_2d(y, "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y differ in dimension: {x.shape[1]} != {y.shape[1]}")
    gen = np.random.default_rng(rng)
    if max_points is not None:
        if max_points < 2:
            raise ValueError("max_points must be at least 2")
        if x.shape[0] > max_points:
            x = x[gen.choice(x.shape[0], max_points, replace=False)]
        if y.shape[0] > max_points:
            y = y[gen.choice(y.shape[0], max_points, replace=False)]
    if bandwidth is None:
        bandwidth = median_heuristic_bandwidth(x, y, rng=gen)
    bandwidth = check_positive(float(bandwidth), "bandwidth")
    gamma = 1.0 / (2.0 * bandwidth**2)

    centre = 0.5 * (x.mean(axis=0) + y.mean(axis=0))
    x = x - centre
    y = y - centre
    n, m = x.shape[0], y.shape[0]
    # k(x, x) = 1 on the diagonal, which the U-statistic leaves out.
    kxx = (_kernel_sum(x, x, gamma) - n) / (n * (n - 1))
    kyy = (_kernel_sum(y, y, gamma) - m) / (m * (m - 1))
    kxy = _kernel_sum(x, y, gamma) / (n * m)
    mmd2 = kxx + kyy - 2.0 * kxy
    if squared:
        return float(mmd2)
    return float(np.sqrt(abs(mmd2)))


_SAMPLE_DIMS = ("chain", "draw")


@dataclass(frozen=True, eq=False)
class PosteriorDistance:
    """Distance of a posterior sample from a reference, one entry per scalar parameter.

    Attributes
    ----------
    labels : tuple of str
        One label per scalar component, e.g. ``"sigma"`` or ``"beta[x1]"`` (the
        coordinate values of the variable's other dimensions).
    mean_error : numpy.ndarray
        ``|mean_private − mean_reference| / sd_reference`` per component.
    sd_ratio : numpy.ndarray
        ``sd_private / sd_reference`` per component.
    rhat : numpy.ndarray
        Rank-normalised split R̂ of the private sample per component (``arviz.rhat``); NaN
        where it is undefined (a single chain, or a component that never varies).
    mean_error_median, mean_error_max : float
        Median and maximum of ``mean_error``.
    sd_ratio_min, sd_ratio_median, sd_ratio_max : float
        Minimum, median and maximum of ``sd_ratio``.
    rhat_max : float
        Maximum of ``rhat``; NaN if any component's R̂ is undefined.
    """

    labels: tuple[str, ...]
    mean_error: np.ndarray
    sd_ratio: np.ndarray
    rhat: np.ndarray
    mean_error_median: float
    mean_error_max: float
    sd_ratio_min: float
    sd_ratio_median: float
    sd_ratio_max: float
    rhat_max: float


def _posterior(result, name):
    if isinstance(result, xr.Dataset):
        ds = result
    else:
        try:
            ds = result["posterior"]
        except (KeyError, TypeError):
            raise ValueError(f"{name} has no posterior group") from None
        ds = ds.to_dataset() if isinstance(ds, xr.DataTree) else ds
    missing = [d for d in _SAMPLE_DIMS if d not in ds.dims]
    if missing:
        raise ValueError(f"the posterior of {name} lacks the dimensions {missing}")
    return ds


def _components(da):
    """Draws of a variable as (chain, draw, component) and one label per component."""
    other = [d for d in da.dims if d not in _SAMPLE_DIMS]
    da = da.transpose(*_SAMPLE_DIMS, *other)
    values = np.asarray(da.values, dtype=float).reshape(da.sizes["chain"], da.sizes["draw"], -1)
    if not other:
        return values, [da.name]
    axes = [da[d].values if d in da.coords else np.arange(da.sizes[d]) for d in other]
    labels = [f"{da.name}[{', '.join(str(v) for v in idx)}]" for idx in _product(axes)]
    return values, labels


def _product(axes):
    grids = np.meshgrid(*axes, indexing="ij")
    return zip(*(g.ravel() for g in grids))


def posterior_distance(private, reference, var_names=None):
    """How far a posterior sample lies from a reference posterior, in reference sds.

    For every scalar component θ_k of the compared variables it computes

    * the **mean error** ``|E_private[θ_k] − E_ref[θ_k]| / sd_ref(θ_k)``: the distance of the
      posterior means in reference posterior standard deviations;
    * the **sd ratio** ``sd_private(θ_k) / sd_ref(θ_k)``;
    * the private sample's rank-normalised split R̂ (``arviz.rhat``).

    Means and sds pool every chain and draw. Both arguments are released draws or public
    reference draws, so the comparison costs no privacy.

    Parameters
    ----------
    private, reference : xarray.DataTree or xarray.Dataset
        ArviZ results with a ``posterior`` group (or the posterior dataset itself), with
        dimensions ``chain`` and ``draw`` and any others. A compared variable must have the
        same dimensions and coordinate values in both.
    var_names : sequence of str, optional
        Variables to compare. Default: every variable present in both posteriors.

    Returns
    -------
    PosteriorDistance
        Per-component arrays with their labels, and the summaries ``mean_error_median``,
        ``mean_error_max``, ``sd_ratio_min``, ``sd_ratio_median``, ``sd_ratio_max`` and
        ``rhat_max``.

    Raises
    ------
    ValueError
        If a result has no posterior group or no ``chain``/``draw`` dimensions, a requested
        variable is missing, the variables' shapes or coordinates differ, or there is
        nothing to compare.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from pymc_dp.testing.evaluation import posterior_distance
    >>> rng = np.random.default_rng(0)
    >>> def result(loc, scale):
    ...     draws = loc + scale * rng.standard_normal((2, 4000, 2))
    ...     posterior = xr.Dataset({"beta": (("chain", "draw", "k"), draws)}, coords={"k": ["a", "b"]})
    ...     return xr.DataTree.from_dict({"posterior": posterior})
    >>> d = posterior_distance(result([1.0, 0.0], 2.0), result([0.0, 0.0], 1.0))
    >>> d.labels
    ('beta[a]', 'beta[b]')
    >>> np.round(d.mean_error, 1).tolist(), np.round(d.sd_ratio, 1).tolist()
    ([1.0, 0.0], [2.0, 2.0])
    >>> bool(d.rhat_max < 1.01)
    True
    """
    priv = _posterior(private, "private")
    ref = _posterior(reference, "reference")
    if var_names is None:
        var_names = [v for v in ref.data_vars if v in priv.data_vars]
    else:
        var_names = list(var_names)
        for v in var_names:
            for ds, name in ((priv, "private"), (ref, "reference")):
                if v not in ds.data_vars:
                    raise ValueError(f"variable {v!r} is not in the posterior of {name}")
    if not var_names:
        raise ValueError("the two posteriors have no variable in common")

    labels, errors, ratios, rhats = [], [], [], []
    with warnings.catch_warnings():
        # R̂ divides by a within-chain variance that is 0 for a chain that never moved.
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat_ds = az.rhat(priv[var_names], method="rank")
    for v in var_names:
        p_vals, p_labels = _components(priv[v])
        r_vals, r_labels = _components(ref[v])
        if p_labels != r_labels:
            raise ValueError(f"variable {v!r} differs in shape or coordinates between the two posteriors")
        p_flat = p_vals.reshape(-1, p_vals.shape[-1])
        r_flat = r_vals.reshape(-1, r_vals.shape[-1])
        ref_sd = r_flat.std(axis=0, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            errors.append(np.abs(p_flat.mean(axis=0) - r_flat.mean(axis=0)) / ref_sd)
            ratios.append(p_flat.std(axis=0, ddof=1) / ref_sd)
        other = [d for d in priv[v].dims if d not in _SAMPLE_DIMS]
        rhats.append(np.asarray(rhat_ds[v].transpose(*other).values, dtype=float).ravel())
        labels.extend(r_labels)

    mean_error = np.concatenate(errors)
    sd_ratio = np.concatenate(ratios)
    rhat = np.concatenate(rhats)
    return PosteriorDistance(
        labels=tuple(labels),
        mean_error=mean_error,
        sd_ratio=sd_ratio,
        rhat=rhat,
        mean_error_median=float(np.median(mean_error)),
        mean_error_max=float(np.max(mean_error)),
        sd_ratio_min=float(np.min(sd_ratio)),
        sd_ratio_median=float(np.median(sd_ratio)),
        sd_ratio_max=float(np.max(sd_ratio)),
        rhat_max=float(np.max(rhat)),
    )
