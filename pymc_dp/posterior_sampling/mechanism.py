r"""``PosteriorSampling``: draws of a tempered posterior, private by themselves.

Dimitrakakis et al. (2017), Thm 8 and Cor 10; ``docs/algorithms.md``, "Posterior sampling
mechanism". If every datum's log-likelihood ratio varies over the prior's support by at most
``2L`` (:mod:`pymc_dp.posterior_sampling.lipschitz`), one exact draw from the posterior is ``2L``-DP and N
independent exact draws are ``2NL``-DP — pure DP, δ = 0, no added noise. Tempering the
likelihood by T (``p(x|θ)^T``) scales L by T, so a budget ε for N draws needs
``T ≤ ε / (2NL)``.

The guarantee is for **exact** posterior draws. Here the draws come from NUTS run on the
tempered posterior and thinned; the MCMC approximation error is outside ε, and the release
says so. The run is checked for convergence (R-hat, ESS) from the tempered chain's draws
only, and nothing is released unless the check passes.
"""

from __future__ import annotations

import logging
import math
import uuid
import warnings

from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

from pymc.logprob.basic import logp as rv_logp
from pymc.model import Model, modelcontext
from pymc.model.fgraph import (
    ModelObservedRV,
    fgraph_from_model,
    model_from_fgraph,
    model_potential,
)

from pytensor.graph.fg import Output

from pymc_dp.accounting.events import PureDPEvent
from pymc_dp.accounting.budget import check_share
from pymc_dp.accounting.guard import BudgetGuard
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.validation import check_epsilon, check_int, check_positive
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError, warn
from pymc_dp.fixed_settings import FixedSettings
from pymc_dp.posterior_sampling.lipschitz import (
    LipschitzBound,
    check_data_within_bounds,
    lipschitz_bound,
)
from pymc_dp.model import PrivateModel
from pymc_dp.results.sharing import (
    check_own_mechanism,
    own_mechanism,
    releasable_names,
    release,
)
from pymc_dp.results.report import PrivacyReport, build_report

__all__ = ["NotConvergedError", "PosteriorSampling", "SAMPLE_KWARGS", "tempered_model"]

TEMPERED_POTENTIAL = "tempered_loglik"

#: Initialisations of NUTS that print nothing about the tempered model (ADVI and MAP report
#: losses and log densities).
_QUIET_INITS = frozenset(
    {"auto", "adapt_diag", "jitter+adapt_diag", "jitter+adapt_diag_grad", "adapt_full",
     "jitter+adapt_full"}
)
#: The ``pm.sample`` arguments :meth:`PosteriorSampling.sample` passes on: ``None`` (any
#: value) or the check of the value and why others are refused. They set how NUTS runs,
#: never what you see of it. Everything else (``callback``, ``trace``, ``idata_kwargs``,
#: ``keep_warning_stat``, ``discard_tuned_samples``, ``return_inferencedata``, ``step``, other
#: NUTS samplers, …) is refused: the tempered chain's only output is its N released draws.
SAMPLE_KWARGS = {
    "cores": None,
    "mp_ctx": None,
    "blas_cores": None,
    "quiet": None,
    "initvals": (
        lambda v: v is None,
        "the tempered chain's draws depend on where it starts, and a start given here cannot "
        "be shown public (one at the data's mean has the shape of any other); leave the "
        "start to PyMC",
    ),
    "jitter_max_retries": None,
    "target_accept": None,
    "max_treedepth": None,
    "progressbar": (
        lambda v: v is False,
        "the bar shows step sizes and divergences of the tempered chain; leave it unset",
    ),
    "init": (
        lambda v: isinstance(v, str) and v in _QUIET_INITS,
        f"ADVI and MAP report losses and log densities of the tempered model; use one of "
        f"{sorted(_QUIET_INITS)}",
    ),
}


GUARANTEE = (
    "Pure ε-DP (δ = 0) for exact, independent draws from the tempered posterior "
    "(Dimitrakakis et al. 2017, Thm 8 and Cor 10): each draw costs 2·T·L, where L bounds half "
    "the oscillation over the prior's support of one datum's log-likelihood ratio."
)
NOT_COVERED = (
    "The released draws are thinned from an MCMC (NUTS) run on the tempered posterior, not "
    "exact independent draws: the MCMC approximation error, and the pass/fail outcome of the "
    "convergence check (a function of the whole tempered chain), are outside ε."
)


class NotConvergedError(RuntimeError):
    """The tempered chain failed its convergence check; nothing was released.

    The message carries no diagnostic values (they are functions of the tempered chain).
    With ``return_diagnostics=True`` they are on the ``private_diagnostics`` attribute,
    for the data holder only.
    """

    private_diagnostics: dict | None = None


# ---------------------------------------------------------------------- tempered model
def tempered_model(model: Model, temperature: float) -> Model:
    """A copy of ``model`` whose likelihood is raised to the power ``temperature``.

    Every observed variable is removed and replaced by one ``pm.Potential`` named
    ``"tempered_loglik"`` equal to ``T · Σ log p(x | θ)`` over all observed elements; the free
    variables, their priors and transforms, deterministics and other potentials are cloned
    unchanged. PyMC's samplers then target ``prior(θ) · p(X | θ)^T``.

    The copy still reads the data (inside the potential): sample it, never share its raw
    results. :class:`PosteriorSampling` releases only thinned posterior draws.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model() as m:
    ...     p = pm.Uniform("p", 0.1, 0.9)
    ...     _ = pm.Bernoulli("y", p, observed=np.array([0, 1, 1]))
    >>> t = tempered_model(m, 0.5)
    >>> [v.name for v in t.free_RVs], t.observed_RVs, [v.name for v in t.potentials]
    (['p'], [], ['tempered_loglik'])
    """
    temperature = float(temperature)
    if not (math.isfinite(temperature) and 0 < temperature <= 1):
        raise ValueError(f"temperature must be in (0, 1], got {temperature!r}")
    fgraph, _ = fgraph_from_model(model, inlined_views=True)
    observed = [
        (i, out)
        for i, out in enumerate(fgraph.outputs)
        if out.owner is not None and isinstance(out.owner.op, ModelObservedRV)
    ]
    if not observed:
        raise UnsupportedModelError("The model has no observed variables: nothing to temper.")
    terms = []
    for _, out in observed:
        other_clients = [c for c, _ in fgraph.clients[out] if not isinstance(c.op, Output)]
        if other_clients:
            raise UnsupportedModelError(
                f"Observed variable {out.name!r} is used by other variables of the model; the "
                "tempered model cannot remove it. Build the model without that dependence."
            )
        rv, value = out.owner.inputs[:2]
        terms.append(pt.sum(rv_logp(rv, value)))
    loglik = terms[0] if len(terms) == 1 else pt.add(*terms)
    potential = model_potential(pt.as_tensor(temperature, dtype=loglik.dtype) * loglik,
                                TEMPERED_POTENTIAL)
    for i, _ in sorted(observed, reverse=True):
        fgraph.remove_output(i)
    fgraph.add_output(potential)
    return model_from_fgraph(fgraph, mutate_fgraph=True)


# ---------------------------------------------------------------------- the mechanism
def _check_no_assumption_2_delta(delta) -> None:
    """Refuse a positive δ: Assumption 2 / Corollary 9 gives no (ε, δ)-DP guarantee.

    Corollary 9 of Dimitrakakis et al. (2017) says the posterior is ``2L``-DP on the set of
    parameters whose Lipschitz constant is at most L, a set of *prior* mass
    ``≥ 1 − e^{−c(L − L₀)}``. Read as (ε, δ)-DP with ``ε = 2L``, ``δ = e^{−c(L − L₀)}`` it is
    false: the data can put much more *posterior* mass on the rest (their Lemma 19 model
    breaks it by a factor of 4 or more with exact posteriors;
    ``tests/posterior_sampling/test_assumption_2.py``). Called before the model is read.

    Raises
    ------
    UnsupportedModelError
        For any δ other than 0.
    ValueError
        For a δ that is not a number.
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.floating | np.integer):
        raise ValueError(f"delta must be a number, got a {type(delta).__name__}")
    if float(delta) != 0.0:
        raise UnsupportedModelError(
            f"PosteriorSampling(delta={delta!r}) is refused: posterior sampling is pure DP "
            "(δ = 0) here. The paper's (ε, δ) version under its Assumption 2 (Corollary 9) "
            "bounds the *prior* mass of the parameters where the likelihood is not "
            "L-Lipschitz, not the posterior mass the data can put there, and is not an "
            "(ε, δ)-DP guarantee. Trim the prior so that every parameter is L-Lipschitz "
            "(Assumption 1) and give eps alone; see docs/posterior-sampling.md, "
            "'No (ε, δ) version from Assumption 2'."
        )


@own_mechanism(former_names=("pymc_dp.posterior_sampling.PosteriorSampling",))
class PosteriorSampling(FixedSettings):
    r"""The posterior sampling mechanism: N draws of a tempered posterior, pure ε-DP.

    Given the number ``draws`` = N of draws to release and the budget ``eps``, the
    mechanism computes the Lipschitz constant L of one datum's log-likelihood from the
    declared data bounds and the priors' supports (:func:`pymc_dp.posterior_sampling.lipschitz.lipschitz_bound`;
    models it cannot bound are refused), tempers the likelihood by
    ``T = min(1, ε / (2NL))``, runs NUTS on ``prior(θ) p(X|θ)^T``, checks convergence, and
    releases exactly N draws thinned evenly from the pooled chains. Each exact draw would be
    ``2TL``-DP, so N draws cost at most ε (Dimitrakakis et al. 2017, Thm 8, Cor 10).

    The guarantee covers exact draws of the tempered posterior; the MCMC approximation error
    is outside ε, and the report says so. T depends on the model's structure, the declared
    bounds and (ε, N) only — never on the data.

    Parameters
    ----------
    eps : float
        The privacy budget ε (> 0), pure DP, for this object's whole life.
    draws : int
        N, the number of posterior draws the object will release (≥ 1). More draws mean a
        smaller T: a flatter tempered posterior.
    delta : float
        Only 0. The paper's (ε, δ) reading of posterior sampling under its Assumption 2
        (Corollary 9: ``2L``-DP "with probability ``1 − e^{−c(L − L₀)}``" over the prior) is
        not an (ε, δ)-DP guarantee, so a positive δ is refused before the model is read
        (``docs/posterior-sampling.md``, "No (ε, δ) version from Assumption 2").
    data_bounds : (low, high) or dict, optional
        The declared range of every datum: one pair for all observed variables or a dict
        ``{name: (low, high)}``. Required for Normal, Laplace and Exponential observations. The
        observed data must lie within them (checked; the error never shows values).
    metric : {"replace_one", "l1"}
        Neighbouring datasets differ in one datum replaced by any value within the bounds
        (default), or lie at ℓ1 distance ≤ 1 (e.g. one trial of a Binomial count).
    max_rhat : float
        The largest rank-normalised split R-hat the tempered chain may have (default 1.01).
    min_ess : float, optional
        The smallest bulk and tail ESS the tempered chain must reach (default
        ``max(400, N)``, so that N evenly thinned draws are nearly independent).
    model : pm.Model, optional
        The model (default: from context). Every free variable must be continuous.
    ledger_dir : str or Path, optional
        Where the budget's ledger file lives (see :class:`pymc_dp.accounting.guard.BudgetGuard`).
    budget : pymc_dp.Budget, optional
        A dataset's shared budget to draw from instead of a ledger of its own: the run's
        reservation must fit both in ``eps`` and in what is left of ``budget``
        (``docs/budget.md``).

    Attributes
    ----------
    lipschitz : LipschitzBound
        L and how it was computed, per observed variable.
    temperature : float
        T = min(1, ε / (2NL)), nudged down so that ``N · 2TL ≤ ε`` in floating point.
    epsilon_per_draw : float
        ``2 T L``.
    tempered : pm.Model
        The tempered model NUTS runs on.

    These, ``epsilon``, ``draws`` and every other setting (``privacy_settings``) are fixed
    once the object is built: setting one raises ``AttributeError``, so that the ledger
    reserves what the run costs.

    Notes
    -----
    Released: N draws of the free variables and of the deterministics that do not read
    data, as one chain, with attrs ``dp_epsilon``, ``dp_delta`` (= 0) and ``dp_report``.
    Not released: the other MCMC draws, sampler statistics (step sizes, energies, tree
    depths are functions of the tempered posterior's geometry), timings, and the R-hat /
    ESS values (functions of all the tempered chain's draws, not only of the N released).
    Nor shown while it runs: PyMC's log messages (divergences with their energy change,
    the run's wall time) and warnings, and the messages of errors raised inside NUTS.

    Subclasses are refused: a subclass could release more than the report says.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> from pymc_dp.posterior_sampling import PosteriorSampling
    >>> y = np.random.default_rng(0).binomial(1, 0.3, size=200)
    >>> with pm.Model():
    ...     p = pm.Uniform("p", 0.05, 0.95)
    ...     _ = pm.Bernoulli("y", p, observed=y)
    ...     mech = PosteriorSampling(eps=1.0, draws=10)
    ...     idata = mech.sample(chains=2, tune=500, random_seed=1,
    ...                         progressbar=False)
    >>> idata.posterior["p"].shape
    (1, 10)
    >>> idata.attrs["dp_epsilon"] <= 1.0, idata.attrs["dp_delta"]
    (True, 0.0)
    """

    #: Everything that defines the mechanism, its accounting or what it releases: fixed once
    #: the object is built (:class:`pymc_dp.fixed_settings.FixedSettings`).
    privacy_settings = (
        "epsilon",
        "delta",
        "draws",
        "max_rhat",
        "min_ess",
        "model",
        "lipschitz",
        "metric",
        "private_model",
        "deterministics_reading_data",
        "temperature",
        "epsilon_per_draw",
        "tempered",
        "guard",
    )
    _fixed_reason = (
        "the ledger reserves the cost these settings define, and the draws must be made "
        "with them."
    )

    def __init__(
        self,
        *,
        eps: float,
        draws: int,
        delta: float = 0.0,
        data_bounds=None,
        metric: str = "replace_one",
        max_rhat: float = 1.01,
        min_ess: float | None = None,
        model: Model | None = None,
        ledger_dir=None,
        budget=None,
    ):
        check_own_mechanism(self)  # a subclass could release more than its report says
        # Public arguments first: bad input fails before the model or its data is touched.
        self.epsilon = check_epsilon(eps, "eps")
        if budget is not None:
            check_share(budget, self.epsilon, None, owner=type(self).__name__,
                        ledger_dir=ledger_dir, pure=True)
        _check_no_assumption_2_delta(delta)
        self.delta = 0.0
        self.draws = check_int(draws, "draws")
        self.max_rhat = float(max_rhat)
        if not (math.isfinite(self.max_rhat) and self.max_rhat > 1.0):
            raise ValueError(f"max_rhat must be a finite number > 1, got {max_rhat!r}")
        self.min_ess = None if min_ess is None else check_positive(min_ess, "min_ess")

        model = modelcontext(model)
        self.model = model
        # L from the structure, the priors' supports and the declared bounds: no data values.
        self.lipschitz: LipschitzBound = lipschitz_bound(
            model, data_bounds=data_bounds, metric=metric
        )
        self.metric = self.lipschitz.metric
        # Validation of the model and its data (finite, one row per datum, priors and
        # potentials free of data, continuous free variables); nothing is released.
        self.private_model = PrivateModel(model, continuous=True)
        check_data_within_bounds(model, self.lipschitz)
        self.deterministics_reading_data = self.private_model.deterministics_reading_data
        if self.deterministics_reading_data:
            warn(
                f"Deterministics {self.deterministics_reading_data} may hold data (computed "
                "from data, holding arrays of values or code of their own, or as large as "
                "the data as written); they are left out of the release.",
                UserWarning,
            )

        self.temperature = self.lipschitz.temperature_for(self.epsilon, self.draws)
        self.epsilon_per_draw = self.lipschitz.epsilon_per_draw(self.temperature)
        self.tempered = tempered_model(model, self.temperature)
        if budget is not None:  # a share of the dataset's budget, in its store
            self.guard = budget.slice(self.epsilon, 0.0, owner=type(self).__name__)
        else:
            self.guard = BudgetGuard(
                self.epsilon, 0.0, ledger_dir=ledger_dir, owner=type(self).__name__
            )

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        *,
        draws: int | None = None,
        chains: int | None = None,
        tune: int = 1000,
        mcmc_draws: int | None = None,
        random_seed=None,
        return_diagnostics: bool = False,
        **kwargs,
    ):
        """Run NUTS on the tempered posterior and release ``draws`` thinned draws.

        Parameters
        ----------
        draws : int, optional
            How many draws to release (default: the N planned). More than planned is
            refused before any data is read; fewer cost proportionally less.
        chains : int, optional
            MCMC chains (≥ 2, for R-hat); default PyMC's.
        tune, mcmc_draws : int
            Tuning and kept iterations per chain (default ``mcmc_draws =
            max(1000, ⌈2·min_ess / chains⌉)``).
        random_seed
            As for ``pm.sample``; the thinning is deterministic.
        return_diagnostics : bool
            **Not private.** Also return the R-hat and ESS values of the tempered chain
            (functions of all its draws, not covered by ε) for the data holder's eyes only.
        **kwargs
            Passed to ``pm.sample``; only those in ``SAMPLE_KWARGS`` (``cores``,
            ``target_accept``, ``max_treedepth``, ``init`` without ADVI or MAP, ``quiet``,
            …; ``initvals`` only as None), and ``progressbar`` only as False. The run is always quiet: PyMC's
            loggers (``pymc`` and its children) are silenced and warnings dropped while it
            runs, whatever the user configured, and restored after. Anything that would show you
            the tempered chain beyond the N released draws (``callback``, ``trace``,
            ``discard_tuned_samples``, ``return_inferencedata``, ``idata_kwargs``,
            ``compute_convergence_checks``, ``keep_warning_stat``, ``step``, the progress
            bar with its step sizes and divergences, other NUTS samplers) is refused, before
            anything is reserved or read.

        Returns
        -------
        DataTree
            A result safe to share (see the class Notes), or ``(DataTree, dict)`` with
            ``return_diagnostics=True``.

        Raises
        ------
        ValueError
            A keyword argument outside ``SAMPLE_KWARGS`` (e.g. ``callback``), or an accepted
            one with a value that would show the tempered chain.
        PrivacyBudgetExceeded
            More draws than planned, or a second release from a spent object.
        NotConvergedError
            The tempered chain failed its convergence check. Nothing was released, but the
            budget is spent (it was reserved before the data was read): create a new
            object with a longer run.
        """
        k = self.draws if draws is None else check_int(draws, "draws")
        if k > self.draws:
            raise PrivacyBudgetExceeded(
                f"{k} draws asked, but this PosteriorSampling was calibrated for at most "
                f"{self.draws} (T = ε/(2NL) with N = {self.draws}). Create a new object for "
                "more draws; no data was read."
            )
        chains = _default_chains() if chains is None else check_int(chains, "chains")
        if chains < 2:
            raise ValueError("chains must be >= 2: convergence is checked with R-hat.")
        tune = check_int(tune, "tune", minimum=0)
        min_ess = self.min_ess if self.min_ess is not None else float(max(400, k))
        if mcmc_draws is None:
            mcmc_draws = max(1000, math.ceil(2 * min_ess / chains))
        mcmc_draws = check_int(mcmc_draws, "mcmc_draws")
        if chains * mcmc_draws < k:
            raise ValueError(
                f"The run keeps {chains * mcmc_draws} draws, fewer than the {k} to release."
            )
        _check_sample_kwargs(kwargs)

        if self.guard.reservations():
            raise PrivacyBudgetExceeded(
                "This PosteriorSampling has already released its draws (or tried to); its "
                "budget is spent. Create a new object with its own budget. No data was read."
            )
        run_id = uuid.uuid4().hex
        event = PureDPEvent(
            name="posterior_sampling",
            count=k,
            epsilon=self.epsilon_per_draw,
            description=(
                f"exact draw of the posterior tempered by T = {self.temperature:.6g}; "
                f"L = {self.lipschitz.L:.6g} ({self.metric}); 2TL per draw"
            ),
        )
        self.guard.reserve(
            [event],
            budget=(self.epsilon, self.delta),
            run_id=run_id,
            draws=k,
            temperature=self.temperature,
        )

        var_names = self._released_names()
        try:
            with _silenced_pymc():
                idata = pm.sample(
                    draws=mcmc_draws,
                    tune=tune,
                    chains=chains,
                    model=self.tempered,
                    var_names=var_names,
                    random_seed=random_seed,
                    compute_convergence_checks=False,
                    **{**kwargs, "progressbar": False, "quiet": True},
                )
        except Exception:
            # PyMC's messages carry values of the tempered chain (SamplingError lists log
            # densities at the starting point, which read the data).
            raise RuntimeError(
                "NUTS failed on the tempered posterior (details withheld: they contain values "
                "of the tempered chain, computed from the data). Nothing was released; the "
                "budget is spent."
            ) from None
        posterior = idata["posterior"].to_dataset()
        diagnostics = _diagnostics(posterior, [v.name for v in self.tempered.free_RVs])
        passed = (
            diagnostics["max_rhat"] <= self.max_rhat
            and diagnostics["min_ess_bulk"] >= min_ess
            and diagnostics["min_ess_tail"] >= min_ess
        )
        if not passed:
            error = NotConvergedError(
                f"The tempered chain did not pass its convergence check (R-hat ≤ "
                f"{self.max_rhat}, bulk and tail ESS ≥ {min_ess:g}). Nothing was released; "
                "the budget of this object is spent. Create a new PosteriorSampling and run "
                "longer (tune, mcmc_draws) or with more chains."
            )
            if return_diagnostics:
                error.private_diagnostics = _label_private(diagnostics)
            raise error

        released = _thin(posterior, var_names, k)
        report = self._report(run_id, k, chains, tune, mcmc_draws, min_ess)
        result = xr.DataTree.from_dict({"posterior": released})
        result.attrs["dp_epsilon"] = report.epsilon
        result.attrs["dp_delta"] = report.delta
        result.attrs["dp_report"] = report.to_json()
        result = release(result, model=self.model)
        if return_diagnostics:
            return result, _label_private(diagnostics)
        return result

    def _released_names(self) -> list[str]:
        return releasable_names(self.model)

    # ------------------------------------------------------------------ reports
    def _report(self, run_id, k, chains, tune, mcmc_draws, min_ess) -> PrivacyReport:
        reservations = [r for r in self.guard.reservations() if r.get("run_id") == run_id]
        ledger = PrivacyLedger()
        for r in reservations:
            ledger.extend(_events(r))
        spent = ledger.epsilon(0.0)
        return build_report(
            spent, 0.0, "pymc_dp.PosteriorSampling (posterior sampling mechanism, pure ε-DP)",
            made_by=[type(self)], model=self.model,
            mechanism="posterior sampling (Dimitrakakis et al. 2017, Thm 8, Cor 10)",
            budget={"epsilon": self.epsilon, "delta": 0.0, "draws": self.draws},
            spent={
                "epsilon": spent,
                "step_lifetime_epsilon": self.guard.spent().epsilon(0.0),
            },
            guarantee=GUARANTEE,
            not_covered=NOT_COVERED,
            neighbouring=_neighbouring_text(self.metric),
            lipschitz=self.lipschitz.to_dict(),
            temperature=self.temperature,
            epsilon_per_draw=self.epsilon_per_draw,
            draws_released=k,
            sampler={
                "name": "NUTS (PyMC) on prior(θ)·p(X|θ)^T",
                "chains": chains,
                "tune": tune,
                "draws_per_chain": mcmc_draws,
                "thinning": f"{k} draws evenly spaced over the {chains * mcmc_draws} pooled "
                "post-tuning draws (chain-major order)",
            },
            convergence={
                "check": "rank-normalised split R-hat and bulk/tail ESS of every free variable, "
                "computed from the draws of the tempered chains only (not from the data, "
                "log densities or sampler statistics)",
                "rhat_at_most": self.max_rhat,
                "ess_at_least": min_ess,
                "outcome": "passed (nothing is released otherwise)",
                "values": "not released: they are functions of every draw of the tempered "
                "chain, not only of the released ones",
            },
            ledger=ledger.summary(),
            note="ε is reserved before the data is read; a second release from this object "
            "is refused.",
        )

    def lifetime_privacy_report(self) -> PrivacyReport:
        """Everything this object has spent, over all processes (its ledger file)."""
        ledger = self.guard.spent()
        return build_report(
            ledger.epsilon(0.0), 0.0, "PosteriorSampling lifetime ledger",
            budget={"epsilon": self.epsilon, "delta": 0.0, "draws": self.draws},
            temperature=self.temperature,
            lipschitz=self.lipschitz.to_dict(),
            guarantee=GUARANTEE,
            not_covered=NOT_COVERED,
            ledger=ledger.summary(),
        )

    def __repr__(self) -> str:
        return (
            f"PosteriorSampling(eps={self.epsilon:g}, draws={self.draws}, "
            f"L={self.lipschitz.L:.6g}, temperature={self.temperature:.6g})"
        )


# ---------------------------------------------------------------------- helpers
@contextmanager
def _silenced_pymc():
    """PyMC's logging and all warnings off for the tempered run, whatever the user set.

    The tempered chain shows nothing but its N released draws. PyMC logs every divergence
    with its energy change (at DEBUG), the run's wall time and the run's warnings; a user
    who configured the ``pymc`` logger, or one of its children, would see them. Every
    ``pymc`` logger is raised above CRITICAL for the run (levels are checked where a record
    is made, so the children too), and restored after. Warnings are dropped, not replaced:
    even a value-free warning would say that the tempered chain did something.
    """
    manager = logging.Logger.manager
    names = ["pymc", *(n for n in list(manager.loggerDict) if n.startswith("pymc."))]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _events(reservation: dict):
    from pymc_dp.accounting.events import event_from_dict

    return [event_from_dict(e) for e in reservation["events"]]


def _neighbouring_text(metric: str) -> str:
    if metric == "replace_one":
        return (
            "replace-one: neighbouring datasets differ in one datum (one row of every observed "
            "variable), replaced by any value within the declared data bounds"
        )
    return "l1: neighbouring datasets lie at ℓ1 distance ≤ 1 (e.g. one trial of a count)"


def _diagnostics(posterior: xr.Dataset, names: Sequence[str]) -> dict[str, float]:
    """Worst R-hat and smallest bulk / tail (5%, 95% quantiles) ESS over every scalar of the named variables."""
    # (imported here: arviz 1.3 imports arviz_plots, and with it matplotlib where installed;
    # ``import pymc_dp`` imports no plotting library, tests/test_layout.py)
    import arviz as az

    rhats, bulk, tail = [], [], []
    for name in names:
        values = np.asarray(posterior[name].values, dtype=float)
        flat = values.reshape(values.shape[0], values.shape[1], -1)
        for j in range(flat.shape[-1]):
            x = flat[..., j]
            rhats.append(float(az.rhat(x)))
            bulk.append(float(az.ess(x, method="bulk")))
            tail.append(float(az.ess(x, method="tail", prob=(0.05, 0.95))))
    as_bad = lambda v, bad: bad if not np.isfinite(v) else v  # noqa: E731
    return {
        "max_rhat": max(as_bad(r, math.inf) for r in rhats),
        "min_ess_bulk": min(as_bad(e, 0.0) for e in bulk),
        "min_ess_tail": min(as_bad(e, 0.0) for e in tail),
    }


def _label_private(diagnostics: dict) -> dict[str, Any]:
    return {
        "NOT_PRIVATE": "functions of the whole tempered chain, not covered by ε: never share",
        **diagnostics,
    }


def _thin(posterior: xr.Dataset, names: Sequence[str], k: int) -> xr.Dataset:
    """``k`` draws evenly spaced over the pooled chains, as one chain; no other attrs."""
    n_chains = posterior.sizes["chain"]
    n_draws = posterior.sizes["draw"]
    total = n_chains * n_draws
    index = np.minimum(((np.arange(k) + 0.5) * total / k).astype(np.int64), total - 1)
    data_vars = {}
    coords: dict[str, Any] = {"chain": [0], "draw": np.arange(k)}
    for name in names:
        da = posterior[name]
        values = np.asarray(da.values)
        pooled = values.reshape(total, *values.shape[2:])[index]
        dims = ("chain", "draw", *da.dims[2:])
        data_vars[name] = (dims, pooled[None])
        for dim in da.dims[2:]:
            if dim in posterior.coords:
                coords[dim] = posterior.coords[dim].values
    return xr.Dataset(data_vars, coords=coords)


def _check_sample_kwargs(kwargs: dict) -> None:
    """Refuse any ``pm.sample`` argument outside :data:`SAMPLE_KWARGS`, or a refused value."""
    refused = sorted(set(kwargs) - set(SAMPLE_KWARGS))
    if refused:
        raise ValueError(
            f"PosteriorSampling.sample does not pass {refused} on to pm.sample: the tempered "
            "chain's only output is the N released draws, and these would show you more of it "
            f"(draws, tuning, statistics) or change what is returned. Accepted: "
            f"{sorted(SAMPLE_KWARGS)}."
        )
    for name, value in kwargs.items():
        rule = SAMPLE_KWARGS[name]
        if rule is not None and not rule[0](value):
            raise ValueError(f"PosteriorSampling.sample refuses this {name}= value: {rule[1]}.")


def _default_chains() -> int:
    from pymc_dp.steps.base import pymc_default_chains

    return pymc_default_chains()


