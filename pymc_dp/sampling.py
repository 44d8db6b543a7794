"""Everything about results: :func:`sample`, :func:`release`, :func:`privacy_report`.

A result that users will share carries the posterior draws, the sampler's public stats and
the privacy report, and nothing else: no observed or constant data, no log-likelihoods, no
deterministics computed from data, no data-dependent diagnostics.
"""

from __future__ import annotations

import json
import uuid

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pymc as pm
import xarray as xr

from pymc.model import modelcontext
from pymc.step_methods.compound import CompoundStep

from pymc_dp.accounting.events import event_from_dict
from pymc_dp.accounting.gaussian import gaussian_epsilon
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model import data_dependent_deterministics
from pymc_dp.steps.base import PrivateStep
from pymc_dp.steps.subsampled import events_from_stats

__all__ = ["PrivacyReport", "privacy_report", "release", "sample"]

#: The only groups a released result keeps: draws and the samplers' public stats. Every
#: other group (observed/constant data, log-likelihoods, predictive draws computed with the
#: data's covariates, …) is dropped.
RELEASED_GROUPS = ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats")
#: Sample stats that are exact functions of the data when a non-private step made them.
PRIVATE_STATS = ("lp", "model_logp", "log_likelihood", "energy", "energy_error", "clip_fraction")

REPORT_VERSION = 1


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

    def __str__(self) -> str:
        lines = [f"(ε, δ) = ({self.epsilon:.6g}, {self.delta:.3g})   [{self.source}]"]
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
        for row in self.details.get("chains", []):
            shown = {k: v for k, v in row.items() if k != "events"}
            lines.append("  chain " + ", ".join(f"{k}={_fmt(v)}" for k, v in shown.items()))
        for row in self.details.get("ledger", []):
            lines.append("  event " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()))
        for key in ("guarantee", "not_covered"):  # e.g. pymc_dp.PosteriorSampling's caveats
            if self.details.get(key):
                lines.append(f"{key.replace('_', ' ')}: {self.details[key]}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):  # IPython
        p.text(str(self))


def _fmt(v):
    return f"{v:.6g}" if isinstance(v, float) else str(v)


# ---------------------------------------------------------------------- steps
def _flatten_steps(step) -> list:
    if isinstance(step, CompoundStep):
        return [s for m in step.methods for s in _flatten_steps(m)]
    if isinstance(step, list | tuple):
        return [s for m in step for s in _flatten_steps(m)]
    return [step]


def _private_steps(step) -> list[PrivateStep]:
    if step is None:
        raise ValueError("pymc_dp.sample needs step=: a private step such as pymc_dp.DPPenalty(...).")
    steps = _flatten_steps(step)
    others = [type(s).__name__ for s in steps if not isinstance(s, PrivateStep)]
    if others:
        raise UnsupportedModelError(
            f"Non-private steps {others} would read the data without noise. pymc_dp.sample "
            "runs one private step, which covers every free variable."
        )
    if len(steps) != 1:
        raise UnsupportedModelError(
            "pymc_dp.sample runs exactly one private step: each covers every free variable."
        )
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
    draws: int = 500,
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

    * no ``observed_data``, ``constant_data`` or log-likelihood groups, no deterministics
      computed from data (see :func:`release`);
    * attrs ``dp_epsilon``, ``dp_delta`` (what this run cost) and ``dp_report`` (a JSON
      string: budget, planned against spent, per chain, the mechanism ledger), which
      survive ``to_netcdf`` and ``to_zarr``.

    Parameters
    ----------
    step : PrivateStep
        The private step (exactly one: it covers every free variable); non-private steps
        are refused.
    draws, tune, chains, var_names, **kwargs
        As for ``pm.sample`` (``random_seed``, ``cores``, ``progressbar``, …). ``tune=None``
        uses the step's short default. By default only free variables and deterministics
        that read neither data nor array constants are recorded.

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
    run_id = uuid.uuid4().hex
    for s in steps:
        s.plan(chains)
        s.run_id = run_id

    private_names = set(data_dependent_deterministics(model))
    if var_names is None:
        var_names = _releasable_names(model)
    elif private_names & set(var_names):
        raise ValueError(
            f"{sorted(private_names & set(var_names))} are computed from data and cannot be "
            "released."
        )

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
    report = _run_report(steps, run_id, idata)
    idata = release(idata, model=model)
    idata.attrs["dp_epsilon"] = report.epsilon
    idata.attrs["dp_delta"] = report.delta
    idata.attrs["dp_report"] = report.to_json()
    return idata


def _run_report(steps: list[PrivateStep], run_id: str, idata) -> PrivacyReport:
    """Compose the report of one run from the steps' reservations and the trace."""
    per_step = []
    for s in steps:
        reservations = [r for r in s.guard.reservations() if r.get("run_id") == run_id]
        ledger = PrivacyLedger()
        chains = []
        for i, r in enumerate(reservations):
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
    details = {
        "report_version": REPORT_VERSION,
        "budget": {
            "epsilon": sum(s.epsilon for s in steps),
            "delta": delta,
            "planned_chains": steps[0].planned_chains,
        },
        "spent": {
            "epsilon": epsilon,
            "step_lifetime_epsilon": lifetime,
            "from_trace": _trace_spent(steps, idata),
        },
        "accountant": "PrivacyLedger: exact Gaussian composition (summed μ) for plain "
        "Gaussian releases, dp-accounting for subsampled ones, basic composition with "
        "pure-DP releases and across steps",
        "steps": [{"step": type(s).__name__, **s.public_settings()} for s in steps],
        "chains": [c for _, _, cs in per_step for c in cs],
        "ledger": [row for _, ledger, _ in per_step for row in ledger.summary()],
        "note": "ε counts every release of every chain, tuning included; chains reserve "
        "their whole cost before reading the data.",
    }
    return PrivacyReport(epsilon, delta, "pymc_dp.sample (reserved ledger of this run)", details)


def _trace_spent(steps: list[PrivateStep], idata) -> dict | None:
    """The run's cost recomputed from the trace's own per-draw μ (Gaussian steps only).

    Equal to the reserved cost when every chain ran to the end; smaller if a chain stopped
    early (its reservation is not given back).
    """
    stats = idata.children.get("sample_stats")
    if stats is not None and "dp_releases_chain" in stats and len(steps) == 1:
        chain_events = events_from_stats(stats)  # minibatch steps: subsampled releases
        if chain_events is not None:
            ledger = PrivacyLedger([e for events in chain_events for e in events])
            return {
                "releases_per_chain": [events[0].count for events in chain_events],
                "epsilon": ledger.epsilon(steps[0].delta),
            }
    if stats is None or "dp_mu_chain" not in stats or len(steps) != 1:
        return None
    mu = np.ravel(stats["dp_mu_chain"].isel(draw=-1).values)
    return {
        "mu_per_chain": [float(m) for m in mu],
        "epsilon": gaussian_epsilon(float(mu.sum()), steps[0].delta),
    }


# ---------------------------------------------------------------------- release
def release(idata, *, model=None, drop_vars: Iterable[str] = ()) -> xr.DataTree:
    """A copy of ``idata`` without anything computed from the private data without noise.

    Keeps only the groups ``posterior``, ``sample_stats`` and their warm-up versions (so no
    ``observed_data``, ``constant_data``, ``log_likelihood``, nor predictive groups, which are
    computed with the data's covariates); drops the sample stats ``lp``, ``model_logp``,
    ``energy``, ``energy_error`` and ``clip_fraction``; keeps in the posterior only free
    variables and deterministics that read neither data nor array constants (found from
    ``model``, or the model in context); and drops any ``drop_vars``.

    ``model`` is required (given or in context) unless ``idata`` already came from
    :func:`pymc_dp.sample`.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> with pm.Model() as m:
    ...     mu = pm.Normal("mu")
    ...     _ = pm.Normal("y", mu, 1, observed=np.zeros(3))
    ...     idata = pm.sample_prior_predictive(draws=5, random_seed=0)
    >>> "observed_data" in pymc_dp.release(idata, model=m).children
    False
    """
    out = idata.copy(deep=False)
    out = out.drop_nodes([g for g in out.children if g not in RELEASED_GROUPS])
    if model is None:
        try:
            model = modelcontext(None)
        except TypeError:
            if "dp_report" not in idata.attrs:
                raise ValueError(
                    "release needs the model (model=... or a model context) to tell free "
                    "variables from deterministics computed from data."
                ) from None
    keep = None if model is None else set(_releasable_names(model))
    for group in list(out.children):
        ds = out[group].to_dataset()
        to_drop = [v for v in ds.data_vars if v in set(drop_vars)]
        if group.endswith("posterior") and keep is not None:
            to_drop += [v for v in ds.data_vars if v not in keep]
        if group.endswith("sample_stats"):
            to_drop += [v for v in ds.data_vars if v in PRIVATE_STATS]
        if to_drop:
            out[group] = ds.drop_vars(sorted(set(to_drop)))
    return out


# ---------------------------------------------------------------------- report
def privacy_report(obj, *, delta: float | None = None) -> PrivacyReport:
    """What a result, a step or a ledger cost in privacy.

    Parameters
    ----------
    obj : DataTree, PrivateStep or PrivacyLedger
        * a result of :func:`pymc_dp.sample`: its ``dp_report``;
        * a result of plain ``pm.sample`` with a Gaussian private step: recomputed from the
          per-draw stats ``dp_mu_chain`` (μ of each chain, tuning included) and ``dp_delta``;
        * a private step: everything it has spent over its life, all runs and processes;
        * a :class:`~pymc_dp.accounting.PrivacyLedger` (with ``delta``);
        * any object with a ``lifetime_privacy_report()`` method (e.g.
          :class:`pymc_dp.posterior_sampling.PosteriorSampling`): what it spent over its life.
    delta : float, optional
        δ at which to report a ledger (default: the step's or trace's δ).

    Examples
    --------
    >>> from pymc_dp.accounting import GaussianEvent, PrivacyLedger
    >>> ledger = PrivacyLedger([GaussianEvent(name="mean", count=1, noise_multiplier=5.0)])
    >>> round(privacy_report(ledger, delta=1e-6).epsilon, 3)
    0.834
    """
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
        if "dp_report" in obj.attrs:
            data = json.loads(obj.attrs["dp_report"])
            eps, d, source = data.pop("epsilon"), data.pop("delta"), data.pop("source")
            return PrivacyReport(eps, d, source, data)
        return _report_from_stats(obj, delta)
    lifetime = getattr(obj, "lifetime_privacy_report", None)  # e.g. PosteriorSampling
    if callable(lifetime):
        return lifetime()
    raise TypeError(f"privacy_report does not know how to read a {type(obj).__name__}")


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
        mu_total = float(mu.sum())
        details["mu_total"] = mu_total
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
    ledger = PrivacyLedger([e for events in chain_events for e in events])
    return PrivacyReport(
        ledger.epsilon(delta),
        delta,
        "recomputed from the trace's privacy stats as given (per-chain releases, batch size, "
        "n and noise of a minibatch step, composed by the ledger); unverified: a sliced or "
        "edited trace reports less",
        {
            "chains": [
                {"chain": i, "releases": events[0].count} for i, events in enumerate(chain_events)
            ],
            "ledger": ledger.summary(),
        },
    )
