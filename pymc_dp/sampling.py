"""Everything about results: :func:`sample`, :func:`release`, :func:`privacy_report`.

A result that users will share carries the posterior draws, the stats that pymc_dp's steps
declare and the privacy report, and nothing else: no observed or constant data, no
log-likelihoods, no deterministics computed from data, no stats of other samplers, no timings,
no coordinates but the labels of the dimensions released variables use, and labels of
per-person dimensions only as positions. :func:`release` builds such a result from a
whitelist and records what it released, so that a result extended afterwards (e.g. by
``pm.compute_log_likelihood``) is recognised as no longer safe to share.
"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
import uuid
import warnings

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pymc as pm
import xarray as xr

from pymc.model import modelcontext

from pymc_dp.accounting.validation import check_int
from pymc_dp import _progressbar
from pymc_dp.accounting.budget import Budget
from pymc_dp.accounting.events import GaussianEvent, event_from_dict
from pymc_dp.accounting.gaussian import gaussian_epsilon
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError
from pymc_dp.model import data_dependent_deterministics
from pymc_dp.steps.base import PrivateStep, check_runs_alone, flatten_steps
from pymc_dp.steps.subsampled import events_from_stats, shared_warmup_mu_from_stats

__all__ = [
    "NotReleasableWarning",
    "PrivacyReport",
    "declared_stats",
    "privacy_report",
    "release",
    "sample",
]

#: The only groups a released result keeps: draws and the stats of pymc_dp's steps. Every
#: other group (observed/constant data, log-likelihoods, predictive draws computed with the
#: data's covariates, …) is dropped.
RELEASED_GROUPS = ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats")
STATS_GROUPS = ("sample_stats", "warmup_sample_stats")
#: Group attributes that say how a result was made and nothing about the data. Any other
#: (e.g. ``sampling_time``: wall-clock time is a side channel that ε does not cover) is dropped.
PUBLIC_GROUP_ATTRS = (
    "created_at",
    "creation_library",
    "creation_library_version",
    "creation_library_language",
    "inference_library",
    "inference_library_version",
    "sample_dims",
    "tuning_steps",
)
#: The root attribute in which a release records the variables of each group it released.
RELEASED_ATTR = "dp_released"
#: Root attributes a released result keeps: the privacy report and the release record.
RELEASE_ATTRS = ("dp_epsilon", "dp_delta", "dp_report", "dp_tempered", RELEASED_ATTR)

REPORT_VERSION = 2

# PyMC 6.4's progress bar imports matplotlib, which nothing installs: without this, every
# pm.sample with the default progressbar=True fails on a fresh install (pymc_dp._progressbar).
_progressbar.install()


@dataclass(frozen=True)
class PrivacyReport:
    """What a result cost: (ε, δ) and how it was computed.

    ``details`` holds the planned budget, the spending per chain and the mechanism ledger;
    ``to_dict()`` / ``to_json()`` give it whole. ``str(report)`` is a readable summary.
    """

    epsilon: float
    delta: float
    source: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "source": self.source, **self.details}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @property
    def safe_to_share(self) -> bool:
        """False when the result this report read holds more than a release keeps."""
        return "not_safe_to_share" not in self.details

    def __str__(self) -> str:
        lines = [f"(ε, δ) = ({self.epsilon:.6g}, {self.delta:.3g})   [{self.source}]"]
        if not self.safe_to_share:
            lines.insert(0, f"NOT SAFE TO SHARE: {self.details['not_safe_to_share']}")
        budget = self.details.get("budget")
        if budget:
            plan = (
                f", planned chains = {budget['planned_chains']}"
                if "planned_chains" in budget
                else f", draws = {budget['draws']}"
                if "draws" in budget
                else ""
            )
            lines.append(f"budget: ε = {budget['epsilon']:.6g}, δ = {budget['delta']:.3g}{plan}")
        spent = self.details.get("spent")
        if spent:
            lines.append(
                f"spent by this run: ε = {spent['epsilon']:.6g}; by the step over its life: "
                f"ε = {spent['step_lifetime_epsilon']:.6g}"
            )
        remaining = self.details.get("remaining")
        if remaining:  # a pymc_dp.Budget's
            lines.append(f"remaining: ε = {remaining['epsilon']:.6g}")
        for kind, key in (("warm-up for all chains", "shared_warmup"), ("chain", "chains"),
                          ("release", "releases")):
            for row in self.details.get(key, []):
                shown = {k: v for k, v in row.items() if k != "events"}
                lines.append(f"  {kind} " + ", ".join(f"{k}={_fmt(v)}" for k, v in shown.items()))
        for row in _grouped_events(self.details.get("ledger", [])):
            lines.append("  event " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()))
        if self.details.get("tempered"):
            lines.insert(1, f"TEMPERED TARGET: {self.details['tempered']}")
        # PosteriorSampling's caveats; a Budget's witness of its hash chain
        for key in ("guarantee", "not_covered", "witness"):
            if self.details.get(key):
                lines.append(f"{key.replace('_', ' ')}: {self.details[key]}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):  # IPython
        p.text(str(self))


def _fmt(v):
    return f"{v:.6g}" if isinstance(v, float) else str(v)


#: Per-event numbers that add up over a group of events of one kind (for display).
_ADDITIVE = ("count", "mu")


def _grouped_events(rows: list[dict]) -> list[dict]:
    """Ledger rows that differ only in their numbers (one kind of release, made in several
    iterations), shown as one, in order of first appearance.

    ``count`` and ``mu`` add up; another number that differs within a group is shown as
    its range. For display only: the report's ``details["ledger"]`` keeps every row.
    """
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        words = tuple((k, v if not isinstance(v, int | float) else None) for k, v in row.items())
        groups.setdefault(words, []).append(row)
    shown = []
    for group in groups.values():
        row = dict(group[0])
        for key, value in row.items():
            if not isinstance(value, int | float) or len(group) == 1:
                continue
            values = [r[key] for r in group]
            if key in _ADDITIVE:
                row[key] = type(value)(sum(values))
            elif min(values) != max(values):
                row[key] = f"{min(values):.4g} … {max(values):.4g}"
        shown.append(row)
    return shown


# ---------------------------------------------------------------------- steps
def _private_steps(step) -> list[PrivateStep]:
    if step is None:
        raise ValueError("pymc_dp.sample needs step=: a private step such as pymc_dp.DPPenalty(...).")
    steps = flatten_steps(step)
    check_runs_alone(steps)
    for s in steps:
        check_own_mechanism(s)
    return steps


def _releasable_names(model) -> list[str]:
    """Free variables, and deterministics that read neither data nor array constants."""
    from pymc_dp.model import _array_constants

    private = set(data_dependent_deterministics(model))
    names = [rv.name for rv in model.free_RVs]
    for det in model.deterministics:
        graph = model.replace_rvs_by_values([det])
        if det.name not in private and not _array_constants(graph):
            names.append(det.name)
    return names


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
    idata_kwargs = dict(kwargs.pop("idata_kwargs", None) or {})
    if idata_kwargs.get("log_likelihood"):
        raise ValueError("Log-likelihoods are exact functions of the data; they are never released.")

    chains = steps[0].planned_chains if chains is None else chains
    if draws is None or tune is None:  # the step's length for its budget (public numbers)
        default_draws, default_tune = steps[0].default_length(check_int(chains, "chains"))
        draws = default_draws if draws is None else draws
        tune = default_tune if tune is None else tune

    private_names = set(data_dependent_deterministics(model))
    if var_names is None:
        var_names = _releasable_names(model)
    else:
        unknown = sorted(set(var_names) - set(model.named_vars))
        if unknown:
            raise ValueError(f"var_names {unknown} are not variables of the model.")
        if private_names & set(var_names):
            raise ValueError(
                f"{sorted(private_names & set(var_names))} are computed from data and cannot "
                "be released."
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
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            step=step,
            model=model,
            var_names=list(var_names),
            idata_kwargs=idata_kwargs,
            **kwargs,
        )
    finally:
        _let_chains_use_shared_warmups(steps, False)
    report = _run_report(steps, run_id, idata, model)
    idata = release(idata, model=model)
    idata.attrs["dp_epsilon"] = report.epsilon
    idata.attrs["dp_delta"] = report.delta
    idata.attrs["dp_report"] = report.to_json()
    if "tempered" in report.details:
        idata.attrs["dp_tempered"] = report.details["tempered"]
    _warn_about_the_run(idata, report)
    return idata


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


def _run_report(steps: list[PrivateStep], run_id: str, idata, model) -> PrivacyReport:
    """Compose the report of one run from the steps' reservations and the trace.

    Raises
    ------
    PrivacyBudgetExceeded
        The trace's own privacy stats say the run spent more than its reservations: the
        draws are withheld (see :func:`_check_trace_within_reserved`).
    """
    per_step = []
    warmups = []
    for s in steps:
        reservations = [r for r in s.guard.reservations() if r.get("run_id") == run_id]
        ledger = PrivacyLedger()
        chains = []
        for r in reservations:
            if r.get("kind") == "warm-up":  # one warm-up for all chains of the run
                events = [event_from_dict(e) for e in r["events"]]
                ledger.extend(events)
                warmups.append(
                    {
                        "step": type(s).__name__,
                        "epsilon": PrivacyLedger(events).epsilon(s.delta),
                        "events": [e.to_dict() for e in events],
                    }
                )
        for i, r in enumerate(r for r in reservations if r.get("kind") != "warm-up"):
            events = [event_from_dict(e) for e in r["events"]]
            ledger.extend(events)
            chain_ledger = PrivacyLedger(events)
            chains.append(
                {
                    "step": type(s).__name__,
                    "chain": i,
                    "tune": r["tune"],
                    "draws": r["draws"],
                    "epsilon": chain_ledger.epsilon(s.delta),
                    "events": [e.to_dict() for e in events],
                }
            )
        per_step.append((s, ledger, chains))

    epsilon = sum(ledger.epsilon(s.delta) for s, ledger, _ in per_step)
    delta = sum(s.delta for s, _, _ in per_step)
    lifetime = sum(s.guard.spent().epsilon(s.delta) for s in steps)
    from_trace = _trace_spent(steps, idata)
    _check_trace_within_reserved(from_trace, epsilon)
    details = {
        "report_version": REPORT_VERSION,
        "made_by": [_qualified_name(type(s)) for s in steps],
        "n_data": n_individuals(model),
        "budget": {
            "epsilon": sum(s.epsilon for s in steps),
            "delta": delta,
            "planned_chains": steps[0].planned_chains,
        },
        "spent": {
            "epsilon": epsilon,
            "step_lifetime_epsilon": lifetime,
            "from_trace": from_trace,
        },
        "accountant": "PrivacyLedger: exact Gaussian composition (summed μ) for plain "
        "Gaussian releases, dp-accounting for subsampled ones, basic composition with "
        "pure-DP releases and across steps",
        "steps": [{"step": type(s).__name__, **s.public_settings()} for s in steps],
        **_tempering_details(steps),
        "shared_warmup": warmups,
        "chains": [c for _, _, cs in per_step for c in cs],
        "ledger": [row for _, ledger, _ in per_step for row in ledger.summary()],
        "note": "ε counts every release of every chain, tuning included; chains reserve "
        "their whole cost before reading the data.",
    }
    return PrivacyReport(epsilon, delta, "pymc_dp.sample (reserved ledger of this run)", details)


def _tempering_details(steps: list[PrivateStep]) -> dict[str, Any]:
    """``{"tempered": text}`` when a step samples a tempered target, else nothing."""
    return _tempering_text(min(s.public_settings().get("tempering", 1.0) for s in steps))


def _tempering_text(temperature: float) -> dict[str, Any]:
    if not temperature < 1.0:
        return {}
    return {
        "tempered": (
            f"the draws follow the tempered target p(θ) p(x | θ)^T with T = {temperature:.4g}, "
            "not the posterior: its spread is about 1/√T times the posterior's"
        )
    }


def _warn_about_the_run(idata, report: PrivacyReport) -> None:
    """Warnings users act on, from released values only: tempering, chains that never moved.

    The accept decisions are released (they are computed from noisy values), so counting
    them costs nothing.
    """
    tempered = report.details.get("tempered")
    if tempered:
        warnings.warn(f"Tempered target: {tempered}.", TemperedTargetWarning, stacklevel=3)
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
        warnings.warn(
            f"Chain(s) {stuck} accepted no proposal in {accepted.shape[1]} draws: their draws "
            "all repeat one point and say nothing about the posterior. The noise of each "
            f"release{' (' + shown + ')' if shown else ''} is too large for the moves "
            "proposed. Each iteration costs privacy, so fewer iterations (draws + tune) "
            "get less noise each; a larger eps, a smaller proposal scale (scaling, S) or "
            "step size, a clip bound nearer the per-datum changes, or a start nearer the "
            "posterior also help (docs/private-mcmc.md, \"Choosing the settings\").",
            StuckChainWarning,
            stacklevel=3,
        )


def _batch_releases(events) -> int:
    """A minibatch chain's batch releases (its events less its own warm-up's)."""
    return sum(e.count for e in events if e.name != "warm-up")


def _shared_warmup_event(mu: float) -> list:
    """The shared warm-up's Gaussian releases as one event of the same μ (exact in every
    accountant: Gaussian RDP curves add like μ)."""
    if mu <= 0:
        return []
    return [GaussianEvent(name="warm-up for all chains", noise_multiplier=(2.0 * mu) ** -0.5)]


def _check_trace_within_reserved(from_trace: dict | None, reserved: float) -> None:
    """Refuse a run whose trace reports a higher cost than the ledger reserved for it.

    The privacy settings of a step are fixed once it is built, so the two agree; this
    checks it again from what the chains themselves recorded (defence in depth). The
    tolerance covers rounding only: the two sums add the same terms in another order.
    """
    if from_trace is not None and from_trace["epsilon"] > reserved * (1 + 1e-9):
        raise PrivacyBudgetExceeded(
            f"The chains' own privacy stats say this run cost ε = {from_trace['epsilon']:.6g}, "
            f"more than the ε = {reserved:.6g} reserved for it in the ledger: the steps ran "
            "with settings other than those their reservations paid for. The draws are "
            "withheld; the reserved budget is spent. Create new steps and sample again."
        )


def _trace_spent(steps: list[PrivateStep], idata) -> dict | None:
    """The run's cost recomputed from the trace's own privacy stats.

    Gaussian steps record μ per chain, minibatch steps their releases, pure ε-DP steps
    (ABCDP) ε per chain. Equal to the reserved cost when every chain ran to the end;
    smaller if a chain stopped early (its reservation is not given back). A warm-up shared
    by the run's chains ran before them: every draw records its μ
    (``dp_mu_shared_warmup``), counted once and shown apart.
    """
    stats = idata.children.get("sample_stats")
    shared = shared_warmup_mu_from_stats(stats)
    if stats is not None and "dp_releases_chain" in stats and len(steps) == 1:
        chain_events = events_from_stats(stats)  # minibatch steps: subsampled releases
        if chain_events is not None:
            ledger = PrivacyLedger(
                [e for events in chain_events for e in events] + _shared_warmup_event(shared)
            )
            spent = {
                "releases_per_chain": [_batch_releases(events) for events in chain_events],
                "epsilon": ledger.epsilon(steps[0].delta),
            }
            if shared:
                spent["mu_shared_warmup"] = shared
            return spent
    if stats is not None and "dp_epsilon_chain" in stats and len(steps) == 1:
        eps = np.ravel(stats["dp_epsilon_chain"].isel(draw=-1).values)
        return {"epsilon_per_chain": [float(e) for e in eps], "epsilon": float(eps.sum())}
    if stats is None or "dp_mu_chain" not in stats or len(steps) != 1:
        return None
    mu = np.ravel(stats["dp_mu_chain"].isel(draw=-1).values)
    spent = {"mu_per_chain": [float(m) for m in mu]}
    if shared:
        spent["mu_shared_warmup"] = float(shared)
    spent["epsilon"] = gaussian_epsilon(float(mu.sum()) + shared, steps[0].delta)
    return spent


# ---------------------------------------------------------------------- release
class NotReleasableWarning(UserWarning):
    """:func:`privacy_report` read a result that holds more than a release keeps."""


class TemperedTargetWarning(UserWarning):
    """The draws follow a tempered target (minibatch steps with ``tempering < 1``)."""


class StuckChainWarning(UserWarning):
    """A private chain accepted no proposal: its draws repeat its starting point."""


@functools.cache
def declared_stats() -> dict[str, dict[str, tuple]]:
    """The sample stats each of pymc_dp's steps declares: the only stats a release keeps.

    Read from the step classes themselves (``stats_dtypes_shapes`` of every concrete
    :class:`~pymc_dp.steps.base.PrivateStep` subclass in :mod:`pymc_dp.steps`), so that a
    new step's stats are released as soon as the step declares them, and nothing else is.
    Subclasses defined outside pymc_dp are not trusted.

    Returns
    -------
    dict
        ``{step class name: {stat name: (dtype, shape)}}``.

    Examples
    --------
    >>> sorted(declared_stats()["DPPenalty"])  # doctest: +NORMALIZE_WHITESPACE
    ['accept', 'accepted', 'clip_bound', 'dp_delta', 'dp_mu', 'dp_mu_chain',
     'dp_mu_shared_warmup', 'noise_multiplier', 'scaling']
    """
    return {cls.__name__: dict(cls.stats_dtypes_shapes) for cls in _own_step_classes()}


@functools.cache
def _own_step_classes() -> tuple[type, ...]:
    """The concrete private steps that pymc_dp defines (in :mod:`pymc_dp.steps`)."""
    import pymc_dp.steps as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    found, todo = [], list(PrivateStep.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith(f"{package.__name__}.") and cls.stats_dtypes_shapes:
            found.append(cls)
    return tuple(found)


def _own_mechanisms() -> tuple[type, ...]:
    """Every class whose results :func:`release` accepts: pymc_dp's steps and mechanisms."""
    from pymc_dp.posterior_sampling import PosteriorSampling

    return (*_own_step_classes(), PosteriorSampling)


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def check_own_mechanism(obj) -> None:
    """Refuse an object whose class pymc_dp does not define (e.g. a user's subclass).

    What a release keeps is checked by name (the stats pymc_dp's steps declare, the
    variables of the model), not by how it was computed: a subclass can record values
    computed from the data under a declared name, or add less noise than its parent while
    reporting the parent's cost. Only pymc_dp's own classes are known to do what their
    reports say.

    Raises
    ------
    UnsupportedModelError
        ``type(obj)`` is not one of pymc_dp's private steps or mechanisms.
    """
    cls = type(obj)
    if cls not in _own_mechanisms():
        bases = [_qualified_name(b) for b in cls.__mro__[1:] if b in _own_mechanisms()]
        parent = f" (a subclass of {bases[0]})" if bases else ""
        raise UnsupportedModelError(
            f"{_qualified_name(cls)} is defined outside pymc_dp{parent}. pymc_dp cannot "
            "check what a class it does not define records and releases: a subclass can "
            "record values computed from the data under the names pymc_dp's steps declare, "
            "or add less noise than its report says. Use pymc_dp's own steps and mechanisms. "
            "Nothing was run and no budget was reserved."
        )


def _stats_owner(idata) -> tuple[str, bool] | None:
    """Which pymc_dp step made the trace's sample stats, and whether its privacy stats are there.

    ``None`` if the trace has no sample stats. Raises if any stat is not one that a single
    pymc_dp step declares, with the declared shape: another sampler ran in the chains (PyMC
    stacks a stat that two samplers share along an extra dimension).
    """
    groups = [idata[g].to_dataset() for g in STATS_GROUPS if g in idata.children]
    shapes = {}
    for ds in groups:
        for name, da in ds.data_vars.items():
            shapes.setdefault(name, set()).add(da.ndim)
    if not groups:
        return None
    declared = declared_stats()
    fitting = [
        step
        for step, stats in declared.items()
        if all(
            name in stats and (stats[name][1] is None or ndims == {2 + len(stats[name][1])})
            for name, ndims in shapes.items()
        )
    ]
    for step in fitting:
        if {name for name in declared[step] if name.startswith("dp_")} <= set(shapes):
            return step, True
    if fitting:
        return fitting[0], False
    known = set().union(*declared.values())
    unknown = sorted(set(shapes) - known)
    if unknown:
        why = f"sample stats that no pymc_dp step declares ({unknown})"
    else:
        why = (
            "sample stats recorded by more than one sampler, or stats of different pymc_dp "
            f"steps together ({sorted(shapes)})"
        )
    raise ValueError(
        f"This trace holds {why}: another sampler ran in its chains, and its stats are exact "
        "functions of the data (a Metropolis step that never moves still records its "
        "acceptance ratio). Nothing of it can be released, and its privacy cost is not "
        "covered. Sample with one pymc_dp step only (pymc_dp.sample refuses other steps)."
    )


def _released_record(idata) -> dict[str, list[str]] | None:
    """The variables of each group that :func:`release` kept, or ``None`` if never released."""
    record = idata.attrs.get(RELEASED_ATTR)
    return None if record is None else json.loads(record)["groups"]


def n_individuals(model) -> int | None:
    """n, the number of individuals: the leading length of the model's observed values.

    Public under replace-one neighbouring (every report states it). ``None`` if the
    observed values do not share one leading length (private steps refuse such models).
    Only shapes are read, never values.
    """
    from pymc_dp.model import _numeric_value

    lengths = {
        np.shape(_numeric_value(model.rvs_to_values[rv]))[:1] for rv in model.observed_RVs
    }
    return lengths.pop()[0] if len(lengths) == 1 and () not in lengths else None


def _per_person_lengths(idata, model) -> frozenset[int] | None:
    """The lengths of per-person dimensions: n, from every source that states it.

    The model (given or in context), the report (``n_data``), a minibatch step's
    ``dp_n_data`` stats and an earlier release's record. ``None`` if none states it: every
    dimension is then treated as per-person.
    """
    found = set()
    if model is not None and (n := n_individuals(model)) is not None:
        found.add(n)
    stated = json.loads(idata.attrs.get("dp_report", "{}")).get("n_data")
    if stated:
        found.add(int(stated))
    for group in STATS_GROUPS:
        if group in idata.children and "dp_n_data" in idata[group].data_vars:
            found.update(int(v) for v in np.unique(idata[group]["dp_n_data"].values))
    if RELEASED_ATTR in idata.attrs:
        found.update(json.loads(idata.attrs[RELEASED_ATTR]).get("per_person_lengths") or ())
    return frozenset(found) or None


def _is_per_person(size: int, per_person: frozenset[int] | None) -> bool:
    return per_person is None or size in per_person


def _positions(ds: xr.Dataset, dim: str) -> np.ndarray:
    return np.arange(ds.sizes[dim])


def _unreleased_content(idata) -> list[str]:
    """What ``idata`` holds beyond what a release keeps (empty for a released result)."""
    record = _released_record(idata)
    found = [
        f"group {node.path.lstrip('/')!r}"
        for node in idata.subtree
        if node is not idata and node.path.lstrip("/") not in (record or RELEASED_GROUPS)
    ]
    if record is None:
        found.append("no record of a pymc_dp release (plain pm.sample keeps all it computed)")
        return found
    kept = json.loads(idata.attrs[RELEASED_ATTR])
    per_person = (
        frozenset(kept["per_person_lengths"]) if kept.get("per_person_lengths") else None
    )
    for group, names in record.items():
        if group in idata.children:
            ds = idata[group].to_dataset()
            extra = sorted(set(ds.data_vars) - set(names))
            found += [f"variable {v!r} of group {group!r}" for v in extra]
            found += [
                f"coordinate {c!r} of group {group!r}" for c in ds.coords if c not in ds.dims
            ]
            found += [
                f"labels of the per-person dimension {d!r} of group {group!r}"
                for d in ds.indexes
                if _is_per_person(ds.sizes[d], per_person)
                and not np.array_equal(ds[d].values, _positions(ds, d))
            ]
    return found


def release(idata, *, model=None, drop_vars: Iterable[str] = ()) -> xr.DataTree:
    """A new result with only what pymc_dp's private steps released, built from a whitelist.

    Keeps

    * the groups ``posterior``, ``sample_stats`` and their warm-up versions (so no
      ``observed_data``, ``constant_data``, ``log_likelihood``, nor predictive groups, which
      are computed with the data or its covariates);
    * in the posterior, free variables and deterministics that read neither data nor array
      constants (found from ``model``, or the model in context);
    * in the sample stats, the stats that pymc_dp's steps declare (:func:`declared_stats`);
    * the index coordinates (labels) of the dimensions a kept variable uses, and no other
      coordinate (one laid along a dimension, e.g. a data column, is dropped). Labels of a
      per-person dimension, one whose length is n, the number of individuals, become
      positions 0, …, n−1 (with a ``UserWarning``): identifiers, or a data column used as
      labels, would show who is in the data. n comes from the model, the report or a
      minibatch step's stats; if none states it, every dimension counts as per-person;
    * the group attributes in ``PUBLIC_GROUP_ATTRS`` (no timings) and the root attributes
      ``dp_epsilon``, ``dp_delta``, ``dp_report``;

    drops any ``drop_vars``, and records in the attribute ``dp_released`` what it kept.

    Parameters
    ----------
    idata : DataTree
        A result of ``pm.sample`` with a pymc_dp step, of :func:`pymc_dp.sample` or of
        :class:`pymc_dp.PosteriorSampling`.
    model : pm.Model, optional
        Required (given or in context) unless ``idata`` came from :func:`pymc_dp.sample`
        or was released before.
    drop_vars : iterable of str
        Further variables to leave out.

    Raises
    ------
    ValueError
        * the trace holds stats that no pymc_dp step declares, or stats of two samplers:
          another sampler ran in its chains;
        * nothing shows that a private step made the draws (no privacy stats, no report);
        * ``idata`` was released before and then extended with content computed from the
          data (``pm.compute_log_likelihood``,
          ``pm.sample_posterior_predictive(..., extend_inferencedata=True)``, added groups,
          variables or coordinates, labels of a per-person dimension);
        * its report does not name pymc_dp's own steps or mechanism as its maker (a
          subclass defined elsewhere, or a report of an older pymc_dp). A trace of plain
          ``pm.sample`` does not record its step's class: there, only the stats' names
          and shapes are checked.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> with pm.Model() as m:
    ...     mu = pm.Normal("mu")
    ...     _ = pm.Normal("y", mu, 1, observed=np.zeros(30))
    ...     step = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, chains=1)
    ...     idata = pm.sample(draws=5, tune=5, chains=1, step=step, progressbar=False,
    ...                       compute_convergence_checks=False)
    >>> sorted(idata.children)
    ['observed_data', 'posterior', 'sample_stats']
    >>> sorted(pymc_dp.release(idata, model=m).children)
    ['posterior', 'sample_stats']
    """
    if _released_record(idata) is not None:
        extra = _unreleased_content(idata)
        if extra:
            raise ValueError(
                f"This result was released by pymc_dp and then extended with {', '.join(extra)}: "
                "computed from the data without noise (e.g. by pm.compute_log_likelihood or "
                "pm.sample_posterior_predictive(..., extend_inferencedata=True)). It is not "
                "safe to share: share the result as it was released (keep a copy before "
                "extending it), or drop what was added."
            )
    owner = _stats_owner(idata)
    if "dp_report" not in idata.attrs and not (owner and owner[1]):
        raise ValueError(
            "Nothing shows that a pymc_dp step made these draws: the result has neither a "
            "privacy report (dp_report) nor the privacy stats of a pymc_dp step. Release only "
            "results of pymc_dp.sample, of pm.sample with a pymc_dp step (stats kept), or of "
            "pymc_dp.PosteriorSampling."
        )
    if model is None:
        try:
            model = modelcontext(None)
        except TypeError:
            if "dp_report" not in idata.attrs and _released_record(idata) is None:
                raise ValueError(
                    "release needs the model (model=... or a model context) to tell free "
                    "variables from deterministics computed from data."
                ) from None
    _check_made_by(idata)
    keep = None if model is None else set(_releasable_names(model))
    per_person = _per_person_lengths(idata, model)
    stats = set().union(*declared_stats().values())
    groups, record, relabelled = {}, {}, set()
    for group in RELEASED_GROUPS:
        if group not in idata.children:
            continue
        ds = idata[group].to_dataset()
        allowed = stats if group in STATS_GROUPS else keep
        names = [
            v
            for v in ds.data_vars
            if v not in set(drop_vars) and (allowed is None or v in allowed)
        ]
        groups[group], replaced = _public_dataset(ds, names, per_person)
        relabelled.update(replaced)
        record[group] = names
    if relabelled:
        why = (
            "they have one entry per individual (their length is n)"
            if per_person is not None
            else "the number of individuals n is unknown (no model, report or earlier "
            "release states it), so every dimension is treated as per-person"
        )
        warnings.warn(
            f"The labels of dimensions {sorted(relabelled)} were replaced by positions "
            f"0, 1, …: {why}, and labels of individuals (identifiers, data columns) would "
            "show who is in the data.",
            UserWarning,
            stacklevel=2,
        )
    out = xr.DataTree.from_dict(groups)
    out.attrs = {k: v for k, v in idata.attrs.items() if k in RELEASE_ATTRS}
    lengths = None if per_person is None else sorted(per_person)
    out.attrs[RELEASED_ATTR] = json.dumps({"groups": record, "per_person_lengths": lengths})
    return out


def _check_made_by(idata) -> None:
    """Refuse a report that names a class pymc_dp does not define (or names none)."""
    if "dp_report" not in idata.attrs:
        return
    made_by = json.loads(idata.attrs["dp_report"]).get("made_by")
    own = {_qualified_name(cls) for cls in _own_mechanisms()}
    if not made_by or not set(made_by) <= own:
        raise ValueError(
            "The privacy report of this result does not say it was made by pymc_dp's own "
            "steps or mechanisms (its 'made_by' names a class defined elsewhere, e.g. a "
            "subclass, or is missing: an older pymc_dp). pymc_dp cannot check what such a "
            "class recorded. Sample again with pymc_dp's own steps."
        )


def _public_dataset(
    ds: xr.Dataset, names: Sequence[str], per_person: frozenset[int] | None
) -> tuple[xr.Dataset, list[str]]:
    """The variables ``names`` of ``ds``, the labels of their dimensions, the public attributes.

    Built anew, so that no variable attribute, other coordinate or unused dimension comes
    along: only index coordinates (a dimension's labels) of dimensions that the variables
    use, never a coordinate laid along a dimension (a data column attached to the trace).
    Labels of a per-person dimension (length n) become positions: the identifiers of the
    individuals, or any data column, would show who is in the data.

    Returns the dataset and the dimensions whose labels were replaced.
    """
    used = dict.fromkeys(d for v in names for d in ds[v].dims)
    coords, replaced = {}, []
    for dim in used:
        if dim not in ds.indexes:
            continue
        labels = ds[dim].values
        if _is_per_person(ds.sizes[dim], per_person):
            if not np.array_equal(labels, _positions(ds, dim)):
                replaced.append(dim)
            labels = _positions(ds, dim)
        coords[dim] = labels
    data = {v: (ds[v].dims, ds[v].values) for v in names}
    attrs = {k: v for k, v in ds.attrs.items() if k in PUBLIC_GROUP_ATTRS}
    return xr.Dataset(data, coords=coords, attrs=attrs), replaced


# ---------------------------------------------------------------------- report
def privacy_report(obj, *, delta: float | None = None) -> PrivacyReport:
    """What a result, a step or a ledger cost in privacy.

    Parameters
    ----------
    obj : DataTree, PrivateStep, Budget or PrivacyLedger
        * a result of :func:`pymc_dp.sample`: its ``dp_report``;
        * a :class:`pymc_dp.Budget`: every release against its dataset (who, when, its
          events, its own cost), the composed ε spent and what remains, and the witness of
          its hash chain (:meth:`pymc_dp.Budget.report`);
        * a result of plain ``pm.sample`` with a Gaussian private step: recomputed from the
          per-draw stats ``dp_mu_chain`` (μ of each chain, tuning included) and ``dp_delta``;
        * a private step: everything it has spent over its life, all runs and processes;
        * a :class:`~pymc_dp.accounting.PrivacyLedger` (with ``delta``);
        * any object with a ``lifetime_privacy_report()`` method (e.g.
          :class:`pymc_dp.posterior_sampling.PosteriorSampling`): what it spent over its life.
    delta : float, optional
        δ at which to report a ledger (default: the step's or trace's δ).

    Notes
    -----
    For a result that holds more than a release keeps — a plain ``pm.sample`` trace not yet
    passed through :func:`release`, or a released result extended since (by
    ``pm.compute_log_likelihood``, ``pm.sample_posterior_predictive(...,
    extend_inferencedata=True)``, added groups or variables) — the cost is still reported,
    but a :class:`NotReleasableWarning` is issued, ``report.safe_to_share`` is False and
    ``str(report)`` opens with "NOT SAFE TO SHARE". A trace in which another sampler ran
    (stats that no pymc_dp step declares) raises ``ValueError``: its cost is not covered.

    Examples
    --------
    >>> from pymc_dp.accounting import GaussianEvent, PrivacyLedger
    >>> ledger = PrivacyLedger([GaussianEvent(name="mean", count=1, noise_multiplier=5.0)])
    >>> round(privacy_report(ledger, delta=1e-6).epsilon, 3)
    0.834
    """
    if isinstance(obj, Budget):
        return PrivacyReport(**obj.report())
    if isinstance(obj, PrivateStep):
        ledger = obj.guard.spent()
        d = obj.delta if delta is None else delta
        return PrivacyReport(
            ledger.epsilon(d),
            d,
            f"{type(obj).__name__} lifetime ledger",
            {
                "budget": {
                    "epsilon": obj.epsilon,
                    "delta": obj.delta,
                    "planned_chains": obj.planned_chains,
                },
                "ledger": ledger.summary(),
            },
        )
    if isinstance(obj, PrivacyLedger):
        if delta is None:
            raise ValueError("privacy_report(ledger) needs delta=")
        return PrivacyReport(
            obj.epsilon(delta), delta, "ledger", {"ledger": obj.summary()}
        )
    if isinstance(obj, xr.DataTree):
        _stats_owner(obj)  # refuses a trace in which another sampler ran: ε would not cover it
        if "dp_report" in obj.attrs:
            data = json.loads(obj.attrs["dp_report"])
            eps, d, source = data.pop("epsilon"), data.pop("delta"), data.pop("source")
            report = PrivacyReport(eps, d, source, data)
        else:
            report = _report_from_stats(obj, delta)
        return _flag_unreleased(report, obj)
    lifetime = getattr(obj, "lifetime_privacy_report", None)  # e.g. PosteriorSampling
    if callable(lifetime):
        return lifetime()
    raise TypeError(f"privacy_report does not know how to read a {type(obj).__name__}")


def _flag_unreleased(report: PrivacyReport, idata: xr.DataTree) -> PrivacyReport:
    """Mark, and warn about, a report whose result holds more than a release keeps.

    The cost is still reported (a plain ``pm.sample`` trace needs it before its release),
    but ``str(report)`` opens with "NOT SAFE TO SHARE" and ``report.safe_to_share`` is False.
    """
    found = _unreleased_content(idata)
    if not found:
        return report
    text = (
        f"this result holds {', '.join(found)}: computed from the data without noise, not covered "
        "by ε. Share only the output of pymc_dp.release(idata, model=model), or a result "
        "of pymc_dp.sample as it was returned."
    )
    warnings.warn(f"Not safe to share: {text}", NotReleasableWarning, stacklevel=3)
    return replace(report, details={**report.details, "not_safe_to_share": text})


def _report_from_stats(idata: xr.DataTree, delta: float | None) -> PrivacyReport:
    """Recompute a run's cost from the per-draw privacy stats of its trace.

    Gaussian steps record ``dp_mu_chain`` (μ of the chain so far, tuning included) and
    ``dp_delta``; pure ε-DP steps record ``dp_epsilon_chain``. Chains compose: μ adds up
    exactly, pure ε adds up.
    """
    stats = idata.children.get("sample_stats")
    if stats is not None and "dp_releases_chain" in stats.data_vars:
        report = _report_from_subsampled_stats(stats, delta)
        if report is not None:
            return report
    if stats is None or not ({"dp_mu_chain", "dp_epsilon_chain"} & set(stats.data_vars)):
        raise ValueError(
            "This result carries no privacy information: it was not produced by a pymc_dp "
            "step (no dp_report attribute, no dp_mu_chain or dp_epsilon_chain sample stat)."
        )
    chains, details = [], {}
    mu_total, pure_total = 0.0, 0.0
    if "dp_mu_chain" in stats:
        mu = np.ravel(stats["dp_mu_chain"].isel(draw=-1).values)
        shared = shared_warmup_mu_from_stats(stats)
        mu_total = float(mu.sum()) + shared
        details["mu_total"] = mu_total
        if shared:
            details["mu_shared_warmup"] = shared
        chains += [{"chain": i, "mu": float(m)} for i, m in enumerate(mu)]
        if delta is None:
            delta = float(np.max(stats["dp_delta"].values))
    if "dp_epsilon_chain" in stats:
        eps = np.ravel(stats["dp_epsilon_chain"].isel(draw=-1).values)
        pure_total = float(eps.sum())
        details["pure_epsilon_total"] = pure_total
        chains += [{"chain": i, "epsilon": float(e)} for i, e in enumerate(eps)]
    delta = 0.0 if delta is None else delta
    epsilon = pure_total + (gaussian_epsilon(mu_total, delta) if mu_total > 0 else 0.0)
    return PrivacyReport(
        epsilon,
        delta,
        "recomputed from the trace's privacy stats as given (exact Gaussian composition of "
        "dp_mu_chain; pure ε of dp_epsilon_chain added); unverified: a sliced or edited trace "
        "reports less",
        {"chains": chains, **details},
    )


def _report_from_subsampled_stats(stats, delta: float | None) -> PrivacyReport | None:
    """Recompute the cost of a minibatch step's run from its per-draw stats.

    The last draw of each chain gives the chain's releases (``dp_releases_chain``, tuning
    included), ``dp_batch_size``, ``dp_n_data``, ``dp_delta`` and the mechanism's noise
    (``dp_noise_multiplier`` of a subsampled Gaussian, or DP Barker's
    ``dp_noise_variance``); the chains' events are composed by the ledger (RDP).
    """
    chain_events = events_from_stats(stats)
    if chain_events is None:
        return None
    if delta is None:
        delta = float(np.max(stats["dp_delta"].values))
    ledger = PrivacyLedger(
        [e for events in chain_events for e in events]
        + _shared_warmup_event(shared_warmup_mu_from_stats(stats))
    )
    return PrivacyReport(
        ledger.epsilon(delta),
        delta,
        "recomputed from the trace's privacy stats as given (per-chain releases, batch size, "
        "n and noise of a minibatch step, composed by the ledger); unverified: a sliced or "
        "edited trace reports less",
        {
            "chains": [
                {"chain": i, "releases": _batch_releases(events)}
                for i, events in enumerate(chain_events)
            ],
            "ledger": ledger.summary(),
            **_tempering_text(
                float(np.min(stats["dp_tempering"].values)) if "dp_tempering" in stats else 1.0
            ),
        },
    )
