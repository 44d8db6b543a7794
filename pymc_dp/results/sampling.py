""":func:`sample`: ``pm.sample`` with private steps, returning a result safe to share.
"""

from __future__ import annotations

import inspect
import uuid
import warnings

from collections.abc import Sequence

import numpy as np
import pymc as pm
import xarray as xr

from pymc.backends.arviz import DataTreeConverter
from pymc.model import modelcontext
from pymc.stats.convergence import log_warnings, run_convergence_checks
from pymc.util import drop_warning_stat

from pymc_dp.errors import warn
from pymc_dp.validation import check_int
from pymc_dp._progressbar import install as _install_progressbar
from pymc_dp.model import data_dependent_deterministics
from pymc_dp.steps.base import PrivateStep, check_runs_alone, flatten_steps
from pymc_dp.results.sharing import check_own_mechanism, releasable_names, release
from pymc_dp.results.report import PrivacyReport, run_report

__all__ = ['StuckChainWarning', 'TemperedTargetWarning', 'sample']

# PyMC 6.4's progress bar imports matplotlib, which nothing installs: without this, every
# pm.sample with the default progressbar=True fails on a fresh install (pymc_dp._progressbar).
_install_progressbar()


class TemperedTargetWarning(UserWarning):
    """The draws follow a tempered target (minibatch steps with ``tempering < 1``)."""


class StuckChainWarning(UserWarning):
    """A private chain accepted no proposal: its draws repeat its starting point."""




# ---------------------------------------------------------------------- steps
def _private_steps(step) -> list[PrivateStep]:
    if step is None:
        raise ValueError("pymc_dp.sample needs step=: a private step such as pymc_dp.DPPenalty(...).")
    steps = flatten_steps(step)
    check_runs_alone(steps)
    for s in steps:
        check_own_mechanism(s)
    return steps




# ---------------------------------------------------------------------- sample
def sample(
    *,
    step,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
    model=None,
    var_names: Sequence[str] | None = None,
    **kwargs,
) -> xr.DataTree:
    """Run ``pm.sample`` with private steps and return a result safe to share.

    The steps are planned for ``chains`` chains (default: the step's plan), every chain's
    spending is reserved against the step's budget before it reads the data, and the
    returned ``DataTree`` has

    * only what :func:`release` keeps: draws of free variables and of deterministics that
      read no data, the stats the step declares, the labels of the dimensions they use,
      per-person ones as positions (no ``observed_data``, ``constant_data`` or
      log-likelihood groups, no timings);
    * attrs ``dp_epsilon``, ``dp_delta`` (what this run cost) and ``dp_report`` (a JSON
      string: budget, planned against spent, per chain, the mechanism ledger, the step's
      class, n), which survive ``to_netcdf`` and ``to_zarr``.

    Parameters
    ----------
    step : PrivateStep
        The private step (exactly one: it covers every free variable); non-private steps,
        and subclasses of pymc_dp's steps defined elsewhere, are refused before anything
        runs.
    draws, tune, chains, var_names, **kwargs
        As for ``pm.sample`` (``random_seed``, ``cores``, ``progressbar``, …). ``draws`` or
        ``tune`` not given: the step's :meth:`~pymc_dp.steps.base.PrivateStep.default_length`
        for its budget (e.g. DPHMC as long as its gradients stay informative, DPBarker as
        long as its budget pays for, 1000 free draws from a private Laplace approximation). By default only free variables and deterministics
        that read neither data nor array constants are recorded.

    Raises
    ------
    PrivacyBudgetExceeded
        Besides the budget checks of the step: the chains' own privacy stats report a
        higher cost than the ledger reserved for the run. The draws are withheld.

    Notes
    -----
    ``random_seed`` makes a run reproducible, and for the same reason it must stay secret for
    anything published: with the seed, the privacy noise can be replayed. Use
    ``random_seed=None`` for releases (docs/private-mcmc.md, "Seeds are secrets").

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> y = np.random.default_rng(0).normal(size=500)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=y)
    ...     idata = pymc_dp.sample(step=pymc_dp.DPPenalty(eps=2.0, clip_bound=3.0),
    ...                            draws=200, tune=200, chains=2, random_seed=0,
    ...                            progressbar=False)
    >>> sorted(idata.children)
    ['posterior', 'sample_stats']
    >>> print(pymc_dp.privacy_report(idata))  # doctest: +ELLIPSIS
    (ε, δ) = (2, 0.0002)   [...]
    ...
    """
    model = modelcontext(model)
    steps = _private_steps(step)
    if kwargs.get("return_inferencedata") is False or kwargs.get("trace") is not None:
        raise ValueError("pymc_dp.sample returns a DataTree; use pm.sample for other outputs.")
    if kwargs.get("initvals") is not None:
        # (refused here, before the run's warm-up is reserved; the chains would refuse a
        # start away from the checked one only after it was)
        for s in steps:
            check = getattr(s, "refuse_unchecked_initvals", None)
            if check is not None:
                check(kwargs["initvals"])
    idata_kwargs = dict(kwargs.pop("idata_kwargs", None) or {})
    if idata_kwargs.get("log_likelihood"):
        raise ValueError("Log-likelihoods are exact functions of the data; they are never released.")
    known = _converter_settings()
    unknown = sorted(set(idata_kwargs) - known)
    if unknown:  # (before anything is reserved: the conversion runs after the chains)
        raise ValueError(
            f"idata_kwargs {unknown} are not settings of PyMC's conversion to a DataTree "
            f"({', '.join(sorted(known))})."
        )

    chains = steps[0].planned_chains if chains is None else chains
    if draws is None or tune is None:  # the step's length for its budget (public numbers)
        default_draws, default_tune = steps[0].default_length(check_int(chains, "chains"))
        draws = default_draws if draws is None else draws
        tune = default_tune if tune is None else tune

    private_names = set(data_dependent_deterministics(model))
    if var_names is None:
        var_names = releasable_names(model)
    else:
        unknown = sorted(set(var_names) - set(model.named_vars))
        if unknown:
            raise ValueError(f"var_names {unknown} are not variables of the model.")
        if private_names & set(var_names):
            raise ValueError(
                f"{sorted(private_names & set(var_names))} may hold data (computed from "
                "data, or as large as the data as written) and cannot be released."
            )

    # A run whose warm-up for all chains was paid for by an earlier call that then failed
    # (before any chain) goes on under that call's id: its report counts the warm-up.
    run_id = _unused_shared_warmup_run(steps) or uuid.uuid4().hex
    for s in steps:
        s.plan(chains, draws=draws, tune=tune)
        s.run_id = run_id

    # One warm-up for all chains where the step has one (in this process, before PyMC
    # starts the chains): the whole warm-up budget in one approximation instead of a
    # 1/chains share each. Reserved in the ledger before it reads any data, and
    # last, after every check of the arguments: a refused call spends nothing. (If
    # pm.sample then fails before any chain, the warm-up stays paid for: calling again
    # runs the chains on it, under the same run id.)
    warmup_rng = _warmup_generator(kwargs.get("random_seed"))
    for s in steps:
        run_warmup = getattr(s, "warm_up_for_run", None)
        if run_warmup is not None:
            run_warmup(warmup_rng, check_int(chains, "chains"), int(tune) + int(draws),
                       run_id=run_id)
    try:
        _let_chains_use_shared_warmups(steps, True)
        idata = _draws_and_stats(
            model, idata_kwargs, draws=draws, tune=tune, chains=chains, step=step,
            var_names=list(var_names), **kwargs,
        )
    finally:
        _let_chains_use_shared_warmups(steps, False)
    report = run_report(steps, run_id, idata, model)
    idata = release(idata, model=model)
    idata.attrs["dp_epsilon"] = report.epsilon
    idata.attrs["dp_delta"] = report.delta
    idata.attrs["dp_report"] = report.to_json()
    if "tempered" in report.details:
        idata.attrs["dp_tempered"] = report.details["tempered"]
    _warn_about_the_run(idata, report)
    return idata


def _draws_and_stats(model, idata_kwargs: dict, **kwargs) -> xr.DataTree:
    """``pm.sample``'s draws and sample stats as a ``DataTree``, and no group of data.

    ``pm.sample``'s own result copies the data into ``observed_data`` and
    ``constant_data``, with a label for every row: at n = 10⁶ that more than doubled a
    run's peak memory, for groups that :func:`release` then drops. So the chains' trace is
    converted here, group by group, and PyMC's convergence checks (which read the draws and
    stats only) run on it as ``pm.sample`` runs them.
    """
    checks = kwargs.pop("compute_convergence_checks", True)
    keep_warning_stat = kwargs.pop("keep_warning_stat", False)
    kwargs.pop("return_inferencedata", None)
    with warnings.catch_warnings():
        # (PyMC 6.4 deprecates return_inferencedata=False for users, and warns that a
        # MultiTrace keeps the tuning draws; the trace is what the conversion below needs,
        # which splits them off. If PyMC removes the option, this call fails loudly.)
        warnings.filterwarnings("ignore", "`return_inferencedata=False`", FutureWarning)
        warnings.filterwarnings("ignore", "Tuning samples will be included", UserWarning)
        trace = pm.sample(model=model, return_inferencedata=False,
                          compute_convergence_checks=False, **kwargs)
    # (idata_kwargs override, as pm.sample lets them)
    settings = {"model": model, "save_warmup": not kwargs.get("discard_tuned_samples", True),
                **idata_kwargs}
    converter = DataTreeConverter(trace=trace, **settings)
    groups = {**converter.posterior_to_xarray(), **converter.sample_stats_to_xarray()}
    idata = xr.DataTree.from_dict({f"/{k}": v for k, v in groups.items() if v is not None})
    if checks:
        found = run_convergence_checks(idata, model)
        if not kwargs.get("quiet", False):
            log_warnings(found)
    return idata if keep_warning_stat else drop_warning_stat(idata)


def _converter_settings() -> set[str]:
    """The ``idata_kwargs`` PyMC's conversion takes (``trace`` is the chains')."""
    return set(inspect.signature(DataTreeConverter.__init__).parameters) - {"self", "trace"}


#: Tags the warm-up's generator apart from the chains' (PyMC seeds those from random_seed).
_WARMUP_SEED_TAG = 0x57A2_3D0E


def _warmup_generator(random_seed) -> np.random.Generator:
    """The generator of a run's shared warm-up: reproducible from ``random_seed``, apart
    from the chains' streams (same seed, same result; ``None``: fresh entropy)."""
    if random_seed is None:
        return np.random.default_rng()
    if isinstance(random_seed, np.random.Generator):
        return random_seed.spawn(1)[0]
    if isinstance(random_seed, np.random.RandomState):
        return np.random.default_rng(random_seed.randint(0, 2**31, size=4))
    seeds = np.atleast_1d(np.asarray(random_seed, dtype=np.int64)).tolist()
    return np.random.default_rng([*seeds, _WARMUP_SEED_TAG])


def _unused_shared_warmup_run(steps) -> str | None:
    """The run id of a step's warm-up for all chains that no chain has used yet, if any."""
    for s in steps:
        run_id = getattr(s, "shared_warmup_run_id", None)
        if run_id is not None and not any(
            r.get("run_id") == run_id for r in s._chain_reservations()
        ):
            return run_id
    return None


def _let_chains_use_shared_warmups(steps, allowed: bool) -> None:
    # (copied into PyMC's worker processes with the step, as PyMC pickles it there)
    for s in steps:
        if hasattr(s, "_in_run_with_shared_warmup"):
            s._in_run_with_shared_warmup = allowed



def _warn_about_the_run(idata, report: PrivacyReport) -> None:
    """Warnings users act on, from released values only: tempering, chains that never moved.

    The accept decisions are released (they are computed from noisy values), so counting
    them costs nothing.
    """
    tempered = report.details.get("tempered")
    if tempered:
        warn(f"Tempered target: {tempered}.", TemperedTargetWarning)
    stats = idata.get("sample_stats") if hasattr(idata, "get") else None
    # (MCMC steps only: ABCDP's "accepted" marks prior draws that passed, a different thing)
    mcmc = stats is not None and ("dp_mu_chain" in stats or "dp_releases_chain" in stats)
    if not mcmc or "accepted" not in stats:
        return
    accepted = np.asarray(stats["accepted"].values, dtype=float)
    if accepted.ndim != 2 or accepted.shape[1] == 0:
        return
    stuck = [int(c) for c in np.flatnonzero(accepted.mean(axis=1) == 0.0)]
    if stuck:
        noise = {
            k: v
            for row in report.details.get("steps", [])
            for k, v in row.items()
            if "noise_multiplier" in k and isinstance(v, float)
        }
        shown = ", ".join(f"{k} = {v:.3g}" for k, v in noise.items())
        warn(
            f"Chain(s) {stuck} accepted no proposal in {accepted.shape[1]} draws: their draws "
            "all repeat one point and say nothing about the posterior. The noise of each "
            f"release{' (' + shown + ')' if shown else ''} is too large for the moves "
            "proposed. Each iteration costs privacy, so fewer iterations (draws + tune) "
            "get less noise each; a larger eps, a smaller proposal scale (scaling, S) or "
            "step size, a clip bound nearer the per-datum changes, or a start nearer the "
            "posterior also help (docs/private-mcmc.md, \"Choosing the settings\").",
            StuckChainWarning,
        )


