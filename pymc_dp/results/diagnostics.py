"""What the clip diagnostics released, as a table (:class:`pymc_dp.ClipDiagnostics`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pymc_dp.errors import warn
from pymc_dp.steps.warmup import ClipDiagnosticsUnusedWarning

__all__ = ["clipped_fractions"]

_COLUMNS = [
    "chain", "window", "first_draw", "last_draw", "iterations", "clipped", "terms",
    "fraction", "fraction_sd",
]


def clipped_fractions(idata) -> pd.DataFrame:
    """The noisy fraction of clipped terms in each window of each chain.

    Reads the released values a step built with ``clip_diagnostics`` recorded in the
    result's sample stats (post-processing: free). One row per window with ``chain``,
    ``window`` (0-based), the window's ``first_draw`` and ``last_draw`` (draw indices after
    tuning), its ``iterations``, the noisy count of ``clipped`` terms, the ``terms`` its
    clipped sums examined (public: n, or the batch size, per release made), the noisy
    ``fraction`` = clipped / terms and its noise sd ``fraction_sd``. The fraction is
    unbiased; being noisy it can fall below 0 or above 1.

    A few per cent clipped is harmless; a large fraction means the clip bound cut the
    likelihood's information and the draws lean towards the prior, too narrow or shifted
    (docs/steps.md, "Clip diagnostics").

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        A result of :func:`pymc_dp.sample` or ``pm.sample`` (or its release).

    Returns
    -------
    pandas.DataFrame
        Empty (with these columns), with a warning saying why, if the run made no clip
        diagnostic release: the step had them off, or drew from the private Laplace
        approximation (:class:`pymc_dp.ClipDiagnosticsUnusedWarning`: nothing clipped,
        nothing released or spent).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> y = np.random.default_rng(1).normal(1.0, 1.0, size=2000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=y)
    ...     step = pymc_dp.DPPenalty(eps=50.0, clip_bound=4.0, warmup=False, chains=1,
    ...                              clip_diagnostics=2)
    ...     idata = pymc_dp.sample(step=step, draws=100, tune=50, chains=1,
    ...                            random_seed=1, progressbar=False)
    >>> table = pymc_dp.results.clipped_fractions(idata)
    >>> table[["chain", "window", "iterations"]].values.tolist()
    [[0, 0, 50], [0, 1, 50]]
    >>> bool((table["fraction"] < 0.05).all())  # |y_j − μ| > 4 (the slope bound): rare
    True
    """
    stats = idata["sample_stats"] if "sample_stats" in _groups(idata) else None
    if stats is None or "dp_clip_window" not in stats:
        warn(
            "clipped_fractions: this result holds no clip diagnostics (its step was built "
            "without clip_diagnostics, or it is not a pymc_dp result): the table is empty.",
            UserWarning,
        )
        return pd.DataFrame(columns=_COLUMNS)
    window = np.asarray(stats["dp_clip_window"].values, dtype=float)  # (chain, draw)
    if not np.isfinite(window).any():
        warn(
            "clipped_fractions: the step had clip_diagnostics on but released no window: "
            "its draws came from the private Laplace approximation, which clips nothing "
            "(nothing was released or spent for the diagnostics). The table is empty.",
            ClipDiagnosticsUnusedWarning,
        )
        return pd.DataFrame(columns=_COLUMNS)
    values = {
        name: np.asarray(stats[stat].values, dtype=float)
        for name, stat in (("clipped", "dp_clip_count"), ("terms", "dp_clip_terms"),
                           ("fraction", "dp_clip_fraction"),
                           ("fraction_sd", "dp_clip_fraction_sd"))
    }
    chains = np.asarray(stats["chain"].values)
    rows = []
    for c in range(window.shape[0]):
        first = 0
        for d in np.flatnonzero(np.isfinite(window[c])):
            rows.append({
                "chain": int(chains[c]), "window": int(window[c, d]),
                "first_draw": first, "last_draw": int(d), "iterations": int(d) - first + 1,
                **{name: float(v[c, d]) for name, v in values.items()},
            })
            first = int(d) + 1
    table = pd.DataFrame(rows, columns=_COLUMNS)
    return table.astype({"terms": "int64"}) if len(table) else table


def _groups(idata):
    children = getattr(idata, "children", None)
    return children if children is not None else idata.groups()
