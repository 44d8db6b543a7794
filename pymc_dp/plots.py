"""Pictures of what a run spent and bought: the budget spent per chain over its iterations
(:func:`plot_budget_spent`), a run's or a budget's releases (:func:`plot_ledger`) and the
privacy–utility curve of runs at several ε (:func:`plot_privacy_utility`).

An optional part of pymc_dp (``pip install 'pymc_dp[plots]'``, matplotlib): ``import pymc_dp``
never imports it. Every function draws only what a result releases — its trace, the privacy
stats the accountant counted, its report — and returns the matplotlib ``Axes`` it drew on
(pass ``ax=`` to draw on yours). The numbers come from the results layer, testable without
matplotlib: :func:`pymc_dp.results.epsilon_by_draw`, :meth:`pymc_dp.PrivacyReport.releases`,
:func:`pymc_dp.results.privacy_utility`.
"""

from __future__ import annotations

try:
    import matplotlib  # noqa: F401
except ImportError as err:  # (the message names the extra; nothing else is needed)
    raise ImportError(
        "pymc_dp.plots draws with matplotlib, which is not installed: "
        "pip install 'pymc_dp[plots]'"
    ) from err

import numpy as np
import xarray as xr

from pymc_dp.results.report import PrivacyReport, privacy_report
from pymc_dp.results.spending import epsilon_by_draw
from pymc_dp.results.utility import privacy_utility

__all__ = ["plot_budget_spent", "plot_ledger", "plot_privacy_utility"]

#: Colours of the kinds of release (matplotlib's default cycle).
_KIND_COLORS = {"warm-up": "C1", "chain": "C0", "release": "C2"}


def _axes(ax):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7, 4), layout="constrained")[1]


def plot_budget_spent(idata, *, budget: float | None = None, delta: float | None = None,
                      points: int | None = 200, ax=None):
    """The ε each chain had spent by each iteration, tuning included, against the budget.

    One line per chain, read from the chain's own privacy stats
    (:func:`pymc_dp.results.epsilon_by_draw`: what the progress bar shows, exact at each
    point), tuning shaded (it costs as much as sampling, even when its draws are
    discarded). Each chain's line includes a warm-up the chains share, paid before their
    first iteration (the dot at iteration 0: its own ε). The
    chains are composed with each other by the accountant: their ε do not add up to the
    run's, drawn as its own line ("all chains composed") next to the planned budget.

    Parameters
    ----------
    idata : xarray.DataTree
        A result of :func:`pymc_dp.sample`, or of ``pm.sample`` with a private step.
    budget : float, optional
        The planned ε to draw (default: the budget in the result's report, if it has one).
    delta : float, optional
        δ at which to compose each chain's releases (default: the step's). The run's
        composed ε is drawn only at the step's δ.
    points : int, optional
        Compute ε at no more than this many draws per chain, evenly spaced, first and last
        included (``None``: every draw). Minibatch steps compose with dp-accounting, a
        fraction of a second per point.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import tempfile, matplotlib, numpy as np, pymc as pm, pymc_dp
    >>> matplotlib.use("Agg")
    >>> from pymc_dp.plots import plot_budget_spent
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0.0, 5.0)
    ...     _ = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pymc_dp.DPPenalty(eps=2.0, clip_bound=2.0, ledger_dir=tempfile.mkdtemp())
    ...     idata = pymc_dp.sample(step=step, draws=30, tune=20, chains=2,
    ...                            progressbar=False, compute_convergence_checks=False)
    >>> ax = plot_budget_spent(idata)
    >>> [line.get_label() for line in ax.get_lines()]  # doctest: +NORMALIZE_WHITESPACE
    ['chain 0', 'chain 1', 'warm-up the chains share ε = 1.35', 'budget ε = 2',
     'all chains composed ε = 2']
    """
    spent = epsilon_by_draw(idata, delta=delta, points=points)
    report = privacy_report(idata)
    ax = _axes(ax)
    has_iterations = "iteration" in spent.coords
    x = spent["iteration"].values if has_iterations else spent["draw"].values
    for chain in spent["chain"].values:  # (chains of one step often spend alike: lines overlap)
        ax.plot(x, spent.sel(chain=chain).values, label=f"chain {chain}")
    shared = [row["epsilon"] for row in report.details.get("shared_warmup", [])]
    if has_iterations and len(shared) == 1 and delta is None:
        ax.plot([0], shared, marker="o", linestyle="none", color="k",
                label=f"warm-up the chains share ε = {shared[0]:.3g}")
    if has_iterations:
        tune = _tuning_iterations(idata)
        if tune:
            kept = "warmup_sample_stats" in idata.children
            ax.axvspan(0, tune, color="0.9", zorder=0,
                       label="tuning" if kept else "tuning (draws discarded)")
    planned = budget if budget is not None else report.details.get("budget", {}).get("epsilon")
    if planned is not None:
        ax.axhline(planned, color="k", linestyle="--", label=f"budget ε = {planned:.3g}")
    if delta is None and spent.sizes["chain"] > 0:
        ax.axhline(report.epsilon, color="0.4", linestyle=":",
                   label=f"all chains composed ε = {report.epsilon:.3g}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("iteration (tuning included)" if has_iterations else "draw")
    ax.set_ylabel(f"ε spent (δ = {report.delta if delta is None else delta:.3g})")
    ax.set_title("Privacy spent per chain")
    ax.legend(loc="lower right", fontsize="small")
    return ax


def _tuning_iterations(idata) -> int:
    """How many tuning iterations each chain ran (public: PyMC's ``tuning_steps``)."""
    if "warmup_sample_stats" in idata.children:
        return int(idata["warmup_sample_stats"].sizes["draw"])
    for group in ("sample_stats", "posterior"):
        if group in idata.children and "tuning_steps" in idata[group].attrs:
            return int(idata[group].attrs["tuning_steps"])
    return 0


def plot_ledger(obj, *, composed: bool = True, ax=None):
    """Each release of a run or a budget, its own ε, and what they compose to.

    A bar per release, in order: a warm-up the run's chains share, each chain's sampling,
    and, for a :class:`pymc_dp.Budget`, every release against the dataset (by any step or
    mechanism). A bar is that release's ε on its own (:meth:`pymc_dp.PrivacyReport.releases`).
    The bars do not add up to the total: the accountant composes Gaussian and subsampled
    releases more tightly than a sum. What the releases cost together is the step line
    (with ``composed``): the ε of each release and every one before it, composed, ending at
    the report's ε; its rise at a bar is what that release added. The planned budget is the
    dashed line.

    Parameters
    ----------
    obj : PrivacyReport, xarray.DataTree or pymc_dp.Budget
        A report (:func:`pymc_dp.privacy_report`), or what to report: a result of
        :func:`pymc_dp.sample` or a budget.
    composed : bool
        Draw the composed ε so far (one composition per release; for subsampled releases a
        fraction of a second each). Only for one step's run or a budget.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        The report lists no release with its own cost (one recomputed from a trace's
        stats, or a ledger's or step's lifetime report).

    Examples
    --------
    >>> import tempfile, os, matplotlib, pymc_dp
    >>> matplotlib.use("Agg")
    >>> from pymc_dp.accounting import GaussianEvent, LaplaceEvent
    >>> from pymc_dp.plots import plot_ledger
    >>> store = os.path.join(tempfile.mkdtemp(), "budgets.db")
    >>> census = pymc_dp.Budget("census", epsilon=2.0, delta=1e-6, store=store, create=True)
    >>> _ = census.reserve([LaplaceEvent(name="count", epsilon=0.5)], owner="a count")
    >>> for owner in ("a mean", "another mean"):
    ...     _ = census.reserve([GaussianEvent(name="mean", count=4, noise_multiplier=10.0)],
    ...                        owner=owner)
    >>> ax = plot_ledger(census)
    >>> [round(float(bar.get_height()), 3) for bar in ax.patches]  # each release alone
    [0.5, 0.834, 0.834]
    >>> [round(float(y), 3) for y in ax.get_lines()[0].get_ydata()]  # composed so far
    [0.5, 1.334, 1.712]
    """
    report = obj if isinstance(obj, PrivacyReport) else privacy_report(obj)
    rows = report.releases(composed=composed)
    ax = _axes(ax)
    x = np.arange(len(rows))
    shown = set()
    for i, row in enumerate(rows):
        kind = row["kind"]
        label = {"warm-up": "warm-up", "chain": "a chain's sampling",
                 "release": "other release"}[kind] + " (its own ε)"
        ax.bar(i, row["epsilon"], color=_KIND_COLORS[kind], width=0.7,
               label=None if kind in shown else label)
        shown.add(kind)
    if composed:
        ax.step(x, [row["composed"] for row in rows], where="mid", color="k",
                marker="o", label=f"composed so far (total ε = {report.epsilon:.3g})")
    planned = report.details.get("budget", {}).get("epsilon")
    if planned is not None:
        ax.axhline(planned, color="k", linestyle="--", linewidth=1,
                   label=f"budget ε = {planned:.3g}")
    ax.set_xticks(x, [row["label"] for row in rows], rotation=30, ha="right")
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"ε (δ = {report.delta:.3g})")
    ax.set_title("Releases and their composition")
    ax.legend(fontsize="small")
    return ax


def plot_privacy_utility(results, reference=None, *, var_names=None, combine: str = "max",
                         ax=None):
    """The privacy–utility curve: posterior distance to a reference, or posterior width,
    against ε, for runs of one model at several budgets.

    The numbers are :func:`pymc_dp.results.privacy_utility`'s: ε and δ from each result's
    own privacy report (not from labels), the distance ``|mean − reference mean| /
    reference sd`` of every scalar parameter (with ``reference``) or its posterior sd
    (without), combined over parameters by ``combine``. Width alone cannot tell a precise
    posterior from short private chains that hardly moved (their draws are narrower than
    the posterior): prefer a reference where you have one. Distances to a non-private
    reference are computed from the data without noise: use them to evaluate a method (on
    synthetic or public data), not as a release.

    Parameters
    ----------
    results : dict or list of xarray.DataTree, or xarray.Dataset
        Results of :func:`pymc_dp.sample` at several ε, or the table
        :func:`pymc_dp.results.privacy_utility` made of them.
    reference : xarray.DataTree, optional
        A non-private posterior of the same model (with a table: already used).
    var_names : list of str, optional
        Variables to compare (default: all of the reference's, or the first result's).
    combine : {"max", "mean"}
        How a run's parameters make one number: the worst or the average.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import tempfile, matplotlib, numpy as np, pymc as pm, pymc_dp
    >>> matplotlib.use("Agg")
    >>> from pymc_dp.plots import plot_privacy_utility
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 5.0)
    ...     _ = pm.Normal("y", mu, 1.0, observed=y)
    >>> runs = {}
    >>> for eps in (2.0, 4.0):
    ...     with model:
    ...         step = pymc_dp.DPPenalty(eps=eps, clip_bound=2.0, ledger_dir=tempfile.mkdtemp())
    ...         runs[f"ε = {eps}"] = pymc_dp.sample(
    ...             step=step, draws=30, tune=20, chains=2, progressbar=False,
    ...             compute_convergence_checks=False)
    >>> with model:  # non-private, for evaluation only
    ...     reference = pm.sample(draws=300, chains=2, progressbar=False,
    ...                           compute_convergence_checks=False)
    >>> ax = plot_privacy_utility(runs, reference)
    >>> [round(float(e), 6) for e in ax.get_lines()[0].get_xdata()]
    [2.0, 4.0]
    """
    if combine not in ("max", "mean"):
        raise ValueError(f"combine must be 'max' or 'mean', not {combine!r}")
    if isinstance(results, xr.Dataset):
        if reference is not None or var_names is not None:
            raise ValueError("a privacy_utility table was given: reference and var_names "
                             "were used when it was made")
        table = results
    else:
        table = privacy_utility(results, reference, var_names=var_names)
    measure = table.attrs.get("measure")
    if measure not in ("distance", "width") or measure not in table:
        raise ValueError("results must be results of pymc_dp.sample or a privacy_utility table")
    values = getattr(table[measure], combine)("parameter").values
    ax = _axes(ax)
    epsilon = table["epsilon"].values
    ax.plot(epsilon, values, marker="o", label=f"{combine} over parameters")
    ax.set_xscale("log")
    ax.set_xticks(epsilon, [f"{e:.3g}" for e in epsilon])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("ε (each run's privacy report)")
    ax.set_ylabel("|posterior mean − reference| / reference sd" if measure == "distance"
                  else "posterior sd")
    ax.set_ylim(bottom=0)
    ax.set_title("Privacy–utility" + (" (distance to the non-private posterior)"
                                      if measure == "distance" else " (posterior width)"))
    ax.legend(fontsize="small")
    return ax
