"""Privacy reports: :class:`PrivacyReport`, the one builder every report comes from, and
:func:`privacy_report`, which reads what a result, a step or a ledger cost.
"""

from __future__ import annotations

import functools
import json

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import xarray as xr

from pymc_dp.accounting.budget import Budget
from pymc_dp.accounting.events import event_from_dict
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.errors import PrivacyBudgetExceeded, warn
from pymc_dp.results.sharing import (
    NotReleasableWarning,
    n_individuals,
    own_step_class,
    qualified_name,
    stats_owner,
    unreleased_content,
)
from pymc_dp.steps.base import PrivateStep, shared_warmup_events

__all__ = ['PrivacyReport', 'REPORT_VERSION', 'build_report', 'privacy_report']

REPORT_VERSION = 2


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

    def ledger(self) -> PrivacyLedger:
        """The events this report's run reserved, as a ledger (e.g. to export them to
        dp-accounting: :func:`pymc_dp.accounting.export_json`).

        Raises
        ------
        ValueError
            The report lists no events (a report recomputed from a trace's stats, a
            lifetime or budget report: use the step's or budget's own ledger).
        """
        rows = [*self.details.get("shared_warmup", []), *self.details.get("chains", [])]
        if not rows or not all("events" in row for row in rows):
            raise ValueError("This report lists no events of its run.")
        return PrivacyLedger([event_from_dict(e) for row in rows for e in row["events"]])

    def releases(self, composed: bool = False) -> list[dict[str, Any]]:
        """Each release this report lists, with its own ε at the report's δ, in order.

        A run's report lists a warm-up its chains share, then each chain's sampling (tuning
        included); a :class:`pymc_dp.Budget`'s lists every reservation against the dataset,
        of every step or mechanism. Their ε do not add up to the report's ``epsilon``:
        that is their composition, which costs less than the sum for Gaussian and
        subsampled releases.

        Parameters
        ----------
        composed : bool
            Also give, for each release, the ε of it and every release before it composed
            by the accountant (:class:`~pymc_dp.accounting.PrivacyLedger`, at the report's
            δ); the last is the report's ``epsilon``. One composition per release (for
            subsampled releases, a fraction of a second each). Only for a report of one
            step's run or of a budget (steps of one run are composed step by step).

        Returns
        -------
        list of dict
            ``label`` (who released), ``kind`` (``"warm-up"``, ``"chain"`` or
            ``"release"``), ``epsilon`` (its own cost) and, if asked, ``composed``.

        Raises
        ------
        ValueError
            The report lists no release with its own cost (one recomputed from a trace's
            stats, or a ledger's or step's lifetime report).
        """
        rows = []
        events = []  # each row's events, for the composed costs
        for row in self.details.get("shared_warmup", []):
            rows.append({"label": f"{row['step']} warm-up (all chains)", "kind": "warm-up",
                         "epsilon": row.get("epsilon")})
            events.append(row.get("events"))
        for row in self.details.get("chains", []):
            name = f"{row['step']} chain {row['chain']}" if "step" in row else f"chain {row['chain']}"
            rows.append({"label": name, "kind": "chain", "epsilon": row.get("epsilon")})
            events.append(row.get("events"))
        for row in self.details.get("releases", []):  # a Budget's
            kind = ("warm-up" if row.get("kind") == "warm-up"
                    else "chain" if "draws" in row and "tune" in row else "release")
            label = f"#{row['seq']} {row['owner'] or 'release'}"
            rows.append({"label": label + ("" if kind == "release" else f" ({kind})"),
                         "kind": kind, "epsilon": row.get("epsilon")})
            events.append(row.get("events"))
        if not rows or any(r["epsilon"] is None for r in rows):
            raise ValueError(
                "This report lists no release with its own cost (a report recomputed from a "
                "trace's stats, or a ledger's or step's lifetime report): use the report of "
                "a result of pymc_dp.sample, or of a pymc_dp.Budget.")
        rows = [{**r, "epsilon": float(r["epsilon"])} for r in rows]
        if composed:
            if len(self.details.get("steps", [])) > 1 or any(e is None for e in events):
                raise ValueError("Composed costs are given for the report of one step's run "
                                 "or of a budget only.")
            so_far = PrivacyLedger()
            for row, found in zip(rows, events):
                so_far.extend(event_from_dict(e) for e in found)
                row["composed"] = so_far.epsilon(self.delta)
        return rows

    @classmethod
    def from_json(cls, text: str) -> PrivacyReport:
        """The report :meth:`to_json` wrote (as a result's ``dp_report`` attr holds it)."""
        data = json.loads(text)
        return cls(data.pop("epsilon"), data.pop("delta"), data.pop("source"), data)

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
        # which bound gave ε; PosteriorSampling's caveats; a Budget's witness of its hash chain
        for key in ("bound", "guarantee", "not_covered", "witness"):
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



def run_report(steps: list[PrivateStep], run_id: str, idata, model) -> PrivacyReport:
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
    return build_report(
        epsilon, delta, "pymc_dp.sample (reserved ledger of this run)",
        made_by=[type(s) for s in steps], model=model,
        budget={
            "epsilon": sum(s.epsilon for s in steps),
            "delta": delta,
            "planned_chains": steps[0].planned_chains,
        },
        spent={
            "epsilon": epsilon,
            "step_lifetime_epsilon": lifetime,
            "from_trace": from_trace,
        },
        accountant="PrivacyLedger: exact Gaussian composition (summed μ) for plain "
        "Gaussian releases, dp-accounting for subsampled ones (or, for batches drawn "
        "without replacement, the exact Gaussian composition without subsampling where "
        "that is smaller), basic composition with pure-DP releases and across steps",
        bound=_bounds((ledger, s.delta) for s, ledger, _ in per_step),
        steps=[{"step": type(s).__name__, **s.public_settings()} for s in steps],
        **_tempering_details(steps),
        shared_warmup=warmups,
        chains=[c for _, _, cs in per_step for c in cs],
        ledger=[row for _, ledger, _ in per_step for row in ledger.summary()],
        note="ε counts every release of every chain, tuning included; chains reserve "
        "their whole cost before reading the data.",
    )



def _bounds(ledgers) -> str:
    """Which bound gave each ledger's ε (:meth:`PrivacyLedger.bound`), once each, in order."""
    names = [ledger.bound(delta) for ledger, delta in ledgers]
    return ", ".join(dict.fromkeys(names))


def _tempering_details(steps: list[PrivateStep]) -> dict[str, Any]:
    """``{"tempered": text}`` when a step samples a tempered target, else nothing."""
    return _tempering_text(min(s.public_settings().get("tempering", 1.0) for s in steps))


def _tempering_text(temperature: float) -> dict[str, Any]:
    if not temperature < 1.0:
        return {}
    return {
        "tempered": (
            f"the draws follow the tempered target p(θ) p(x | θ)^T with T = {temperature:.4g}, "
            "not the posterior: where the data outweigh the prior its spread is about 1/√T "
            "times the posterior's"
        )
    }



def build_report(
    epsilon: float, delta: float, source: str, *, made_by=None, model=None, **details
) -> PrivacyReport:
    """The one place a :class:`PrivacyReport` is assembled.

    A report of a run (``made_by``: the classes that made it) opens with the report's
    format version, the classes and n (public under replace-one); lifetime, ledger and
    trace reports carry what they are given.
    """
    if made_by is not None:
        details = {
            "report_version": REPORT_VERSION,
            "made_by": [qualified_name(cls) for cls in made_by],
            "n_data": n_individuals(model),
            **details,
        }
    return PrivacyReport(epsilon, delta, source, details)


def _trace_cost(step_class, stats):
    """``(TraceCost, ledger)`` of a trace's chains and shared warm-up, read by the step
    class that declares the stats; ``None`` if its privacy stats are not there."""
    cost = None if stats is None else step_class.cost_from_stats(stats)
    if cost is None:
        return None
    ledger = PrivacyLedger([e for events in cost.chains for e in events]
                           + shared_warmup_events(stats))
    return cost, ledger


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

    Each step reads the stats it declares (:meth:`~pymc_dp.steps.base.PrivateStep.
    cost_from_stats`): Gaussian steps μ per chain, minibatch steps their releases, pure
    ε-DP steps (ABCDP) ε per chain. Equal to the reserved cost when every chain ran to the
    end; smaller if a chain stopped early (its reservation is not given back). A warm-up
    shared by the run's chains ran before them: every draw records its μ
    (``dp_mu_shared_warmup``), counted once and shown apart.
    """
    if len(steps) != 1:
        return None
    found = _trace_cost(type(steps[0]), idata.children.get("sample_stats"))
    if found is None:
        return None
    cost, ledger = found
    spent = {f"{k}_per_chain": v for k, v in cost.per_chain.items()}
    shared = sum(e.mu for e in ledger if e.name == "warm-up for all chains")
    if shared:
        spent["mu_shared_warmup"] = shared
    spent["epsilon"] = ledger.epsilon(steps[0].delta)
    return spent


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
    return _report_of(obj, delta)


# What privacy_report reads, one registered rule per type of object.
@functools.singledispatch
def _report_of(obj, delta: float | None) -> PrivacyReport:
    lifetime = getattr(obj, "lifetime_privacy_report", None)  # e.g. PosteriorSampling
    if callable(lifetime):
        return lifetime()
    raise TypeError(f"privacy_report does not know how to read a {type(obj).__name__}")


@_report_of.register(PrivateStep)
def _step_report(obj, delta: float | None) -> PrivacyReport:
    ledger = obj.guard.spent()
    d = obj.delta if delta is None else delta
    return build_report(
        ledger.epsilon(d), d, f"{type(obj).__name__} lifetime ledger",
        bound=ledger.bound(d),
        budget={
            "epsilon": obj.epsilon,
            "delta": obj.delta,
            "planned_chains": obj.planned_chains,
        },
        ledger=ledger.summary(),
    )


@_report_of.register(PrivacyLedger)
def _ledger_report(obj, delta: float | None) -> PrivacyReport:
    if delta is None:
        raise ValueError("privacy_report(ledger) needs delta=")
    return build_report(obj.epsilon(delta), delta, "ledger", bound=obj.bound(delta),
                        ledger=obj.summary())


@_report_of.register(Budget)
def _budget_report(obj, delta: float | None) -> PrivacyReport:
    if delta is not None:  # (not ignored in silence)
        raise ValueError("A Budget is reported at its own δ, the one every release drew "
                         "from: call privacy_report(budget) without delta=.")
    found = obj.report()
    return build_report(found["epsilon"], found["delta"], found["source"], **found["details"])


@_report_of.register(xr.DataTree)
def _result_report(obj, delta: float | None) -> PrivacyReport:
    stats_owner(obj)  # refuses a trace in which another sampler ran: ε would not cover it
    if "dp_report" in obj.attrs:
        report = PrivacyReport.from_json(obj.attrs["dp_report"])
    else:
        report = _report_from_stats(obj, delta)
    return _flag_unreleased(report, obj)


def _flag_unreleased(report: PrivacyReport, idata: xr.DataTree) -> PrivacyReport:
    """Mark, and warn about, a report whose result holds more than a release keeps.

    The cost is still reported (a plain ``pm.sample`` trace needs it before its release),
    but ``str(report)`` opens with "NOT SAFE TO SHARE" and ``report.safe_to_share`` is False.
    """
    found = unreleased_content(idata)
    if not found:
        return report
    text = (
        f"this result holds {', '.join(found)}: computed from the data without noise, not covered "
        "by ε. Share only the output of pymc_dp.release(idata, model=model), or a result "
        "of pymc_dp.sample as it was returned."
    )
    warn(f"Not safe to share: {text}", NotReleasableWarning)
    return replace(report, details={**report.details, "not_safe_to_share": text})




def _report_from_stats(idata: xr.DataTree, delta: float | None) -> PrivacyReport:
    """Recompute a run's cost from the per-draw privacy stats of its trace.

    The step that declares the trace's stats reads them (its schema's one owner:
    :meth:`~pymc_dp.steps.base.PrivateStep.cost_from_stats`); the chains' events and a
    warm-up they share are composed by the ledger, at the stats' own δ unless ``delta`` is
    given.
    """
    owner = stats_owner(idata)
    stats = idata.children.get("sample_stats")
    step_class = None if owner is None else own_step_class(owner[0])
    found = None if step_class is None else _trace_cost(step_class, stats)
    if found is None:
        raise ValueError(
            "This result carries no privacy information: it was not produced by a pymc_dp "
            "step (no dp_report attribute, no privacy sample stats of a pymc_dp step)."
        )
    cost, ledger = found
    if delta is None:
        delta = float(np.max(stats["dp_delta"].values)) if "dp_delta" in stats else 0.0
    shared = sum(e.mu for e in ledger if e.name == "warm-up for all chains")
    chains = [
        {"chain": i, **{k: v[i] for k, v in cost.per_chain.items()}}
        for i in range(len(cost.chains))
    ]
    return build_report(
        ledger.epsilon(delta),
        delta,
        "recomputed from the trace's privacy stats as given (each chain's releases as its "
        "step records them, composed by the ledger); unverified: a sliced or edited trace "
        "reports less",
        chains=chains,
        **({"mu_shared_warmup": shared} if shared else {}),
        bound=ledger.bound(delta),
        ledger=ledger.summary(),
        **_tempering_text(cost.details.get("tempering", 1.0)),
    )
