"""What each chain of a result had spent by each of its draws (:func:`epsilon_by_draw`).

Read from the trace's own privacy stats (public numbers), by the step that declares them
(:meth:`~pymc_dp.steps.base.PrivateStep.epsilon_from_stats`, which the progress bar reads
too; minibatch steps show it there for a release count rounded up): no second accountant.
At a chain's last draw it is the chain's cost as :func:`~pymc_dp.privacy_report`
recomputes it from the trace.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from pymc_dp.results.sharing import STATS_GROUPS, own_step_class, stats_owner
from pymc_dp.validation import check_int

__all__ = ["epsilon_by_draw"]


def epsilon_by_draw(idata, *, delta: float | None = None, points: int | None = None) -> xr.DataArray:
    """The ε each chain had spent by each of its draws, tuning included.

    Parameters
    ----------
    idata : xarray.DataTree
        A result of :func:`pymc_dp.sample`, or of ``pm.sample`` with a private step
        (released or not): only its privacy sample stats are read. Tuning draws kept by
        ``discard_tuned_samples=False`` (group ``warmup_sample_stats``) come first.
    delta : float, optional
        δ at which to compose each chain's releases (default: the δ each draw records,
        the step's own).
    points : int, optional
        Compute ε at no more than this many draws per chain, evenly spaced, the first and
        last always included (default: every draw). The minibatch steps' costs are composed
        by dp-accounting, a fraction of a second per distinct release count; Gaussian and
        ABCDP costs are cheap.

    Returns
    -------
    xarray.DataArray
        ``epsilon`` with dims ``(chain, draw)`` (``draw``: position in the trace, tuning
        draws first when kept) and the coordinate ``iteration``: how many iterations the
        chain had run by that draw, tuning included (absent when the result says neither
        how many tuning iterations ran nor holds them). The chain's whole cost is the value
        at its last draw. Every chain also paid its share of a warm-up the run's chains
        share, counted in each chain's value; chains are composed with each other (and
        with that warm-up once) in :func:`pymc_dp.privacy_report`, not by adding these.

    Raises
    ------
    ValueError
        The result holds no privacy stats of a pymc_dp step.
    TypeError
        ``idata`` is not an ``xarray.DataTree``.

    Examples
    --------
    >>> import tempfile, numpy as np, pymc as pm, pymc_dp
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0.0, 5.0)
    ...     _ = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0, ledger_dir=tempfile.mkdtemp())
    ...     idata = pymc_dp.sample(step=step, draws=20, tune=10, chains=1,
    ...                            progressbar=False, compute_convergence_checks=False)
    >>> spent = epsilon_by_draw(idata)
    >>> spent.sizes["draw"], int(spent.iteration[-1])
    (20, 30)
    >>> bool(np.isclose(float(spent[0, -1]), pymc_dp.privacy_report(idata).epsilon))
    True
    """
    if not isinstance(idata, xr.DataTree):
        raise TypeError(f"epsilon_by_draw reads a result (an xarray.DataTree), not a "
                        f"{type(idata).__name__}")
    owner = stats_owner(idata)  # refuses stats of another sampler
    step_class = None if owner is None or not owner[1] else own_step_class(owner[0])
    if step_class is None:
        raise ValueError("This result holds no privacy stats of a pymc_dp step: it was not "
                         "sampled by one, or its sample stats were removed.")
    groups = [idata[g].to_dataset() for g in reversed(STATS_GROUPS) if g in idata.children]
    names = sorted(set.intersection(*(
        {k for k in ds.data_vars if k.startswith("dp_")} for ds in groups)))
    values = {k: np.concatenate([ds[k].transpose("chain", "draw").values for ds in groups],
                                axis=1) for k in names}
    n_chains, n_draws = values[names[0]].shape
    selected = np.arange(n_draws)
    if points is not None and check_int(points, "points") < n_draws:
        if points < 2:
            raise ValueError("points must be at least 2 (the first and the last draw)")
        selected = np.unique(np.linspace(0, n_draws - 1, points).round().astype(int))

    spent = np.empty((n_chains, selected.size))
    known: dict[tuple, float] = {}  # chains often share their numbers (same noise, same count)
    for c in range(n_chains):
        for i, j in enumerate(selected):
            draw = {k: values[k][c, j].item() for k in names}
            key = tuple(sorted(draw.items()))
            if key not in known:
                known[key] = step_class.epsilon_from_stats(draw, delta)
            spent[c, i] = known[key]

    coords = {"chain": groups[0]["chain"].values, "draw": selected}
    first = _first_iteration(idata, groups)
    if first is not None:
        coords["iteration"] = ("draw", selected + first)
    return xr.DataArray(spent, dims=("chain", "draw"), coords=coords, name="epsilon",
                        attrs={"step": owner[0],
                               **({} if delta is None else {"delta": float(delta)})})


def _first_iteration(idata, groups) -> int | None:
    """The iteration count (1-based, tuning included) of the trace's first draw."""
    if "warmup_sample_stats" in idata.children:
        return 1
    tune = groups[0].attrs.get("tuning_steps", idata["posterior"].attrs.get("tuning_steps")
                               if "posterior" in idata.children else None)
    return None if tune is None else int(tune) + 1
