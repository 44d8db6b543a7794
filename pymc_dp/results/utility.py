"""The privacy–utility table of runs made at several ε (:func:`privacy_utility`).

ε is read from each result's own privacy report, never from the user's labels; the utility
from its posterior draws (a released result holds nothing else of the data).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from pymc_dp.results.report import privacy_report

__all__ = ["privacy_utility"]


def privacy_utility(results, reference=None, *, var_names=None) -> xr.Dataset:
    """How far each run's posterior is from a reference, or how wide it is, against its ε.

    Parameters
    ----------
    results : dict or list of xarray.DataTree
        Results of :func:`pymc_dp.sample` (or released ``pm.sample`` results) of one model
        at several budgets. Dict keys are labels only: each result's ε and δ are read from
        its privacy report (:func:`pymc_dp.privacy_report`).
    reference : xarray.DataTree, optional
        A non-private posterior of the same model (e.g. ``pm.sample`` on the same data, or
        the exact posterior of a benchmark). With it, each scalar parameter's distance is
        ``|mean − reference mean| / reference sd``; without, its width: the posterior sd.
        Distances to a non-private reference are computed from the data without noise:
        they evaluate a method (on synthetic or public data) and are not private releases.
    var_names : list of str, optional
        Variables to compare (default: every variable of the reference's posterior, or of
        the first result's).

    Returns
    -------
    xarray.Dataset
        Dims ``result`` (sorted by ε; coordinate: the labels) and ``parameter`` (one per
        scalar, ``"beta[1]"``); variables ``epsilon`` and ``delta`` (each result's own, from
        its report) and ``distance`` (with a reference) or ``width`` (without), per result
        and parameter. ``attrs["measure"]`` names which.

    Raises
    ------
    ValueError
        No results, a result without posterior or lacking a variable, shapes that differ
        from the reference's, or a reference parameter of zero spread.

    Examples
    --------
    >>> import tempfile, numpy as np, pymc as pm, pymc_dp
    >>> from pymc_dp.results import privacy_utility
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=2000)
    >>> runs = []
    >>> for eps in (2.0, 4.0):
    ...     with pm.Model():
    ...         mu = pm.Normal("mu", 0.0, 5.0)
    ...         _ = pm.Normal("y", mu, 1.0, observed=y)
    ...         step = pymc_dp.DPPenalty(eps=eps, clip_bound=2.0, ledger_dir=tempfile.mkdtemp())
    ...         runs.append(pymc_dp.sample(step=step, draws=20, tune=10, chains=1,
    ...                                    progressbar=False, compute_convergence_checks=False))
    >>> table = privacy_utility(runs)
    >>> table.attrs["measure"], [round(float(e), 6) for e in table.epsilon]
    ('width', [2.0, 4.0])
    """
    if isinstance(results, xr.DataTree):
        raise TypeError("privacy_utility compares several results: pass a list or dict of them")
    labels, trees = (
        ([str(k) for k in results], list(results.values()))
        if isinstance(results, Mapping) else ([str(i) for i in range(len(results))],
                                              list(results))
    )
    if not trees:
        raise ValueError("privacy_utility needs at least one result")
    for label, tree in zip(labels, trees):
        if not isinstance(tree, xr.DataTree) or "posterior" not in tree.children:
            raise ValueError(f"result {label!r} is not a result with a posterior group "
                             "(an xarray.DataTree of pymc_dp.sample)")
    if reference is not None and (not isinstance(reference, xr.DataTree)
                                  or "posterior" not in reference.children):
        raise ValueError("reference must be a result (xarray.DataTree) with a posterior group")
    source = reference if reference is not None else trees[0]
    names = list(source["posterior"].data_vars) if var_names is None else list(var_names)
    if not names:
        raise ValueError("no variables to compare")

    reports = [privacy_report(tree) for tree in trees]
    order = np.argsort([r.epsilon for r in reports], kind="stable")
    columns, ref = _scalars(source if reference is not None else None, names, "reference")
    measure = "distance" if reference is not None else "width"
    values = []
    for i in order:
        found, draws = _scalars(trees[i], names, f"result {labels[i]!r}")
        if columns is not None and found != columns:
            other = "the reference" if reference is not None else "the other results"
            raise ValueError(f"result {labels[i]!r} has other parameters than {other} "
                             f"(variables {names}: shapes differ)")
        columns = found
        if reference is None:
            values.append(draws.std(axis=0, ddof=1))
        else:
            sd = ref.std(axis=0, ddof=1)
            if not np.all(sd > 0):
                raise ValueError("a parameter of the reference posterior has no spread: "
                                 "distances in its sd are undefined")
            values.append(np.abs(draws.mean(axis=0) - ref.mean(axis=0)) / sd)
    return xr.Dataset(
        {
            "epsilon": ("result", [reports[i].epsilon for i in order]),
            "delta": ("result", [reports[i].delta for i in order]),
            measure: (("result", "parameter"), np.array(values)),
        },
        coords={"result": [labels[i] for i in order], "parameter": columns},
        attrs={"measure": measure},
    )


def _scalars(tree, names, what) -> tuple[list[str] | None, np.ndarray | None]:
    """Each scalar of the named posterior variables, as (labels, draws × scalars)."""
    if tree is None:
        return None, None
    posterior = tree["posterior"].to_dataset()
    missing = [n for n in names if n not in posterior.data_vars]
    if missing:
        raise ValueError(f"{what} has no posterior variable(s) {missing}")
    labels, blocks = [], []
    for name in names:
        da = posterior[name].transpose("chain", "draw", ...)
        shape = da.shape[2:]
        blocks.append(np.asarray(da.values, dtype=float).reshape(da.shape[0] * da.shape[1], -1))
        labels += [name if not shape else f"{name}[{','.join(map(str, idx))}]"
                   for idx in np.ndindex(*shape)]
    return labels, np.concatenate(blocks, axis=1)
