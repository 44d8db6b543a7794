"""The private warm-up of the Gaussian steps: start, shape and clip bounds from the data.

:func:`pymc_dp.sample` runs one warm-up for all chains of a run before they start
(:meth:`PrivateWarmup.warm_up_for_run`); under plain ``pm.sample`` each chain, at its first
iteration (after its whole cost is reserved), runs its own. Either way a run spends a share
of its budget on a private Laplace approximation of the posterior
(:func:`pymc_dp.kernels.warmup.laplace_warmup`: noisy clipped Newton iterations, planned by
:class:`pymc_dp.accounting.plan.WarmupPlan`). What it releases sets the sampler up:

* the chain starts at the private mode θ̂;
* the sampler works in the whitened coordinates u of ``θ = θ̂ + B u``, ``B Bᵀ = Ĥ⁻¹`` for
  the private curvature Ĥ (:class:`AffineView`), where the posterior is close to N(0, I):
  one proposal scale and one clip bound suit every direction, whatever the model's units;
* the clip bounds are the released high quantile of the per-datum gradient norms in that
  metric, ``‖∇ℓ_j‖_{Ĥ⁻¹} = ‖Bᵀ∇ℓ_j‖``: a bound on a datum's log-likelihood slope per unit
  of ``‖u' − u‖`` near the mode (mean value theorem), which is what DPPenalty's and DPHMC's
  clipping needs.

All of it is post-processing of Gaussian releases, accounted as ledger events beside the
sampler's (so the whole run, warm-up included, stays inside (ε, δ)). Clip bounds change the
sensitivity but not the noise multiplier, so the privacy cost does not depend on them.

A setting the user gives wins: a clip bound given by hand is in θ's own units, so with one
the sampler stays in θ coordinates and the warm-up (if on) gives only the start and, unless
given too, the proposal sds or mass matrix (the diagonal of Ĥ⁻¹).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pymc_dp.accounting.plan import WarmupPlan
from pymc_dp.validation import check_positive
from pymc_dp.errors import PrivacyBudgetExceeded, UnsupportedModelError, warn
from pymc_dp.kernels.warmup import (
    LaplaceWarmup,
    laplace_warmup,
    tempered_approximation,
    whitened_norm_quantile,
    whitening,
)
from pymc_dp.steps.surrogate import surrogate_posterior, surrogate_target

__all__ = [
    "AffineView",
    "DEFAULT_WARMUP",
    "LaplaceApproximationWarning",
    "WarmupNotConvergedWarning",
    "MCMC_MIN_MOVES",
    "METHODS",
    "PrivateWarmup",
    "expected_moves",
]

#: How a step turns its budget into draws: "auto" (MCMC when the budget can move a chain,
#: else the private Laplace approximation), "mcmc" (refuse a run that would freeze), or
#: "laplace" (the whole budget on the approximation; draws from it).
METHODS = ("auto", "mcmc", "laplace")

#: The clip bound's square in units of its expectation d/n in the whitened metric (a high
#: quantile of a norm whose square is about χ²_d / n): a planning figure, read no data,
#: for a step without a warm-up plan (:meth:`PrivateWarmup._clip_squared`).
_CLIP_RATIO_SQUARED = 4.0


#: ``method="auto"`` runs MCMC only when the sampler's budget buys at least this many
#: independent draws per chain (:func:`expected_moves`), else it draws from the private
#: Laplace approximation. Not 1: the estimate is a best case (a random walk at its optimal
#: scale, noise at its planned level). In the realistic-models benchmark chains with ~40
#: expected moves did not mix (R̂ 2–3), and with 150–340 still had R̂ 1.3–2.9 (DPHMC's
#: worst), while the approximation met the targets on the same models.
MCMC_MIN_MOVES = 1000.0


#: Independent draws per iteration of a random walk at its optimal scale on a d-dimensional
#: Gaussian, times d (Roberts & Rosenthal 2001: about 0.33/d for Metropolis). A planning
#: figure: however little noise the budget leaves, a chain of k iterations cannot make more
#: than ``0.33 k / d`` independent draws.
RANDOM_WALK_EFFICIENCY = 0.33

#: The longest chain (tuning included) the default length gives a random-walk step, so that
#: it can make the draws its budget buys (:meth:`PrivateWarmup._mcmc_length`).
MAX_DEFAULT_ITERATIONS = 20_000


#: Curvature noise (in the warm-up's metric, over its last iterations) above which the
#: approximation is flagged: on the benchmark's models it stays below 1.3 (ε ≥ 1, n = 10⁴);
#: with 30 groups of unequal size it reached 4–8 while a slope stayed at its start.
NOISY_CURVATURE = 2.0


#: The plan's figure for the warm-up's mode where every person informs a parameter, in
#: posterior sds, above which the plan says that the iterates can wander (public numbers). In
#: ``benchmarks/realistic_models.py`` it was 1.5–1.6 at n = 2000, ε = 1, where 1 of 14 runs
#: met issue 13's targets, 0.68–0.8 at n = 10⁴, ε = 1, and 0.48 at n = 2000, ε = 4 (10 of
#: 14 runs met the ε = 4 targets there).
WANDERING_MODE_NOISE = 1.0


class LaplaceApproximationWarning(UserWarning):
    """The draws come from the private Laplace approximation, not from MCMC."""


class ClipDiagnosticsUnusedWarning(UserWarning):
    """A step built with ``clip_diagnostics`` draws from the private Laplace approximation:
    nothing is clipped, so no clip diagnostic is released and none of the budget is spent
    on them."""


#: Its message (public: it depends on the step's settings only, never on the data).
CLIP_DIAGNOSTICS_UNUSED = (
    "{step}: clip_diagnostics is on, but the draws come from the private Laplace "
    "approximation, which clips nothing: no clip diagnostics are released, and none of the "
    "budget is spent on them (it all goes to the approximation)."
)


class WarmupNotConvergedWarning(UserWarning):
    """The private warm-up's last Newton steps were still long: it may be far from the mode."""


def expected_moves(mu: float, n: int, dim: int, clip_squared: float | None = None) -> float:
    """About how many independent posterior draws a random walk buys with Gaussian μ.

    A penalty release for a move of whitened length ‖Δu‖ with noise σ ≈ 1 (where proposals
    still pass) costs μ ≈ 2 b² ‖Δu‖² with clip b² = c / n (``clip_squared`` = c; default
    κ² d with κ² = 4); a random walk needs Σ ‖Δu‖² ≈ d per independent draw in d
    dimensions. So the budget buys about ``μ n / (2 c d)`` draws, whatever the chain's
    length (longer chains only take smaller steps). Public numbers only; a planning figure,
    not a guarantee.

    >>> round(expected_moves(0.009, 10_000, 5), 2)
    0.45
    """
    c = _CLIP_RATIO_SQUARED * int(dim) if clip_squared is None else float(clip_squared)
    return float(mu) * int(n) / (2.0 * c * int(dim))

#: The default warm-up: half of each chain's μ over sixteen noisy Newton iterations,
#: clip bounds at the 0.999 quantile (see docs/private-mcmc.md, "Settings chosen privately").
#: Sixteen rather than twelve: from PyMC's start some models (a scale far from its
#: residuals, a mixture) need more than twelve noisy steps to settle, and once settled the
#: extra iterations cost little, as the mode averages the targets of all settled ones
#: (``benchmarks/realistic_models.py --repeats``: eight did far worse, see the docs).
DEFAULT_WARMUP = WarmupPlan()  # (WarmupPlan's defaults: one home)


class AffineView:
    """The private model seen in the coordinates u of ``θ = mean + basis · u`` (public).

    Offers what the kernels call (``loglik``, ``clipped_ratio``, ``logprior``,
    ``clipped_gradient``) as functions of u; ``basis`` is invertible. The log prior in u
    differs from θ's by the constant log-Jacobian, which cancels in every ratio.
    """

    def __init__(self, pmodel, mean: np.ndarray | None = None, basis: np.ndarray | None = None):
        self.pmodel = pmodel
        dim = pmodel.dim
        self.mean = np.zeros(dim) if mean is None else np.asarray(mean, dtype=float)
        self.basis = np.eye(dim) if basis is None else np.asarray(basis, dtype=float)
        self._inverse = np.linalg.inv(self.basis)
        self.whitened = basis is not None

    def theta(self, u: np.ndarray) -> np.ndarray:
        return self.mean + self.basis @ u

    def u(self, theta: np.ndarray) -> np.ndarray:
        return self._inverse @ (np.asarray(theta, dtype=float) - self.mean)

    def loglik(self, u: np.ndarray) -> np.ndarray:
        return self.pmodel.loglik(self.theta(u))

    def clipped_ratio(self, u: np.ndarray, current: np.ndarray, bound: float, count=False):
        # (count only when asked: the model's function is called as before otherwise)
        extra = {"count": True} if count else {}
        return self.pmodel.clipped_ratio(self.theta(u), current, bound, **extra)

    def logprior(self, u: np.ndarray) -> float:
        return self.pmodel.logprior(self.theta(u))

    def loglik_rows(self, u: np.ndarray, rows) -> np.ndarray:
        return self.pmodel.loglik_rows(self.theta(u), rows)

    def clipped_gradient(self, u: np.ndarray, bound: float, count: bool = False):
        extra = {"count": True} if count else {}
        return self.pmodel.clipped_gradient(self.theta(u), bound, self.basis, **extra)


def _check_warmup(warmup) -> WarmupPlan | None:
    if warmup is None or warmup is True:
        return DEFAULT_WARMUP
    if warmup is False:
        return None
    if isinstance(warmup, WarmupPlan):
        return warmup
    raise ValueError(
        "warmup must be True (the default plan), False (no warm-up: give every setting) or "
        f"a pymc_dp.WarmupPlan, got {type(warmup).__name__}"
    )


class PrivateWarmup:
    """Mixin of a :class:`~pymc_dp.steps.gaussian.GaussianPrivateStep` with a private warm-up.

    The step calls :meth:`_init_warmup` before the base constructor (public arguments only),
    :meth:`_check_warmup_model` after it, uses :meth:`_sampling_mu_allotment` in its
    calibration and :meth:`_warmup_events` in its events, and calls :meth:`_warm_up` at a
    chain's first iteration (after the base class reserved the chain's cost). The view the
    kernels use is ``self._view``.
    """

    #: the warm-up's settings and what it reserved (fixed as every step's privacy settings)
    privacy_settings = (
        "warmup", "method", "_laplace", "_shared_warmup", "_shared_warmup_events",
        "shared_warmup_run_id",
    )
    #: whether the step can draw from the private Laplace approximation instead of MCMC
    laplace_capable = False
    #: whether ``method="mcmc"`` refuses a run whose noise would leave its chains frozen
    _refuse_frozen = True

    def _init_clip_bound(
        self, clip_bound, S, warmup, method: str = "mcmc", mcmc_asked: bool = False
    ) -> None:
        """Set ``clip_bound`` (None: the warm-up chooses it) and the warm-up (public args).

        For the penalty steps, whose one clip bound and proposal sds ``S`` are in θ's units
        when given: ``S`` without a clip bound, or no warm-up without one, is refused.
        """
        hand_clipped = clip_bound is not None
        if not hand_clipped and (warmup is False or S is not None):
            raise ValueError(
                f"{type(self).__name__} chooses clip_bound privately in its warm-up, in the "
                "warm-up's own coordinates. Give clip_bound too when you give S (both in θ's "
                "units), and when you turn the warm-up off (warmup=False)."
            )
        self.clip_bound = check_positive(clip_bound, "clip_bound") if hand_clipped else None
        self._init_warmup(warmup, hand_clipped=hand_clipped, method=method, mcmc_asked=mcmc_asked)

    def _init_warmup(
        self, warmup, *, hand_clipped: bool, method: str = "mcmc", mcmc_asked: bool = False
    ) -> None:
        """``hand_clipped``: clip bounds given (in θ's units: no whitening); ``mcmc_asked``:
        another setting only MCMC uses was given. Either makes ``method="auto"`` run MCMC
        unless the chains would freeze (a setting the user gives wins)."""
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        self.warmup = _check_warmup(warmup)
        if method == "laplace" and self.warmup is None:
            raise ValueError(
                "method='laplace' needs the warm-up (its Laplace approximation): leave "
                "warmup on, or use method='mcmc'."
            )
        self.method = method
        self._laplace = method == "laplace"
        self._whiten = self.warmup is not None and not hand_clipped
        self._mcmc_asked = hand_clipped or mcmc_asked
        self._warmup_mu = 0.0
        self._view = None
        self._warmup_result: LaplaceWarmup | None = None
        # one warm-up for every chain of a run (warm_up_for_run), reserved once: what it
        # found, the events reserved for it and the run they were reserved under
        self._shared_warmup: LaplaceWarmup | None = None
        self._shared_warmup_events: tuple = ()
        self.shared_warmup_run_id: str | None = None
        # set by pymc_dp.sample while its pm.sample runs: chains after a shared warm-up must
        # run there, where the report counts it (a plain pm.sample trace cannot see it)
        self._in_run_with_shared_warmup = False

    def _check_warmup_model(self) -> None:
        """Refuse now, before any data is read, a model the warm-up cannot differentiate."""
        self._view = AffineView(self.private_model)
        if self.warmup is None:
            return
        try:
            self.private_model.check_gradient_rows()
        except UnsupportedModelError as err:
            raise UnsupportedModelError(
                f"{err} The private warm-up that chooses the start, proposal shape and clip "
                "bounds needs gradients: give the settings by hand and warmup=False."
            ) from None
        if self.warmup.replicates and self.private_model.can_replicate():
            # (its graph checked and compiled now: a backend that cannot compile it fails
            # before the warm-up's first release, not after)
            self.private_model.compile_replicates()
        if self.warmup.hessian_norms and self.private_model.likelihood_kinks():
            # (the graph's structure: every row's Hessian is zero but at its own kink)
            self.warmup = self.warmup.without_hessian_norms()
        self._sampling_mu_allotment(self.planned_chains)  # the warm-up's μ, until calibrated

    def _check_adapter(self) -> None:
        super()._check_adapter()
        if getattr(self, "warmup", None) is not None:  # (before batches or gradients compile)
            self._refuse_per_person_parameters()

    def _refuse_per_person_parameters(self) -> None:
        """Refuse, from shapes alone, a model with about as many free parameters as people
        or more (n − 1: a zero-sum or simplex vector of one entry per person on the value
        space; also split over several variables): the warm-up would take every person's
        gradient in n coordinates (memory and compile time that grow as n²), and one
        person's data inform each entry, which the privacy noise is there to hide."""
        pmodel = self.private_model
        n = pmodel.n_data
        if pmodel.dim >= n - 1 > 1:
            per_person = [name for name, shape, *_ in pmodel.point_map_info
                          if int(np.prod(shape)) > 1]
            raise UnsupportedModelError(
                f"{type(self).__name__}: the free variables {per_person} have, together, "
                f"about one entry per person or more ({pmodel.dim} parameters for {n} "
                "people). "
                "Each entry is then informed by about one person's data, "
                "which the privacy noise hides, so its private posterior is close to its "
                "prior; and the private warm-up that chooses the start, proposal shape and "
                "clip bounds would take every person's gradient in that many coordinates "
                "(memory and time growing as the square of the number of people). Integrate "
                "the per-person effect out (a negative binomial for a Poisson with one "
                "effect per observation, a Student-t for a normal with per-person scales), or "
                "give the settings by hand and warmup=False. Nothing was reserved or read."
            )

    def _warmup_share(self) -> float:
        return 0.0 if self.warmup is None else self.warmup.share

    def _sampling_mu_allotment(self, chains: int) -> float:
        """The μ a chain's sampler may spend: its allotment less the warm-up's share.

        With the Laplace approximation (``method="laplace"``) the warm-up spends it all.
        Clip diagnostics, when on, take their share too.
        """
        mu = self._chain_mu_allotment(chains)
        if self._shared_warmup is not None:
            # The run's warm-up was paid once, before the chains (warm_up_for_run): a chain
            # keeps what it would have had for sampling, and the run still sums to μ_max.
            self._warmup_mu = 0.0
            if self._laplace:
                return 0.0
            return (1.0 - self._warmup_share()) * mu - self._clip_diagnostics_mu(chains)
        self._warmup_mu = mu if self._laplace else self._warmup_share() * mu
        # (the clip diagnostics' share, when on: PrivateStep._clip_diagnostics_mu)
        return mu - self._warmup_mu - self._clip_diagnostics_mu(chains)

    def _run_warmup_share(self) -> float:
        """The share of the whole run's μ a warm-up for all chains spends."""
        return 1.0 if self._laplace else self._warmup_share()

    def _shared_warmup_mu(self) -> float:
        """The μ of one warm-up for all chains of a run: its share of the whole budget."""
        return self._run_warmup_share() * self._chain_mu_allotment(1)

    def shared_warmup_events(self) -> list:
        """The releases of one warm-up for all chains of a run (public numbers)."""
        mu = self._shared_warmup_mu()
        if not self.laplace_capable or self.warmup is None or mu <= 0:
            return []
        return self.warmup.events(mu / self.warmup.share)

    def warm_up_for_run(
        self, rng: np.random.Generator, chains: int, iterations: int, **info
    ) -> LaplaceWarmup | None:
        """One private warm-up for every chain of the planned run (:func:`pymc_dp.sample`).

        Per-chain warm-ups each get ``1/chains`` of the warm-up's budget; one warm-up for
        all gets it whole, so its noise sd is ``√chains`` times smaller, and every chain
        then works in the same metric with the same clip bound (drawn from the same
        approximation, chains agree up to Monte Carlo error). Its releases are reserved in
        the ledger first (``kind="warm-up"``, with ``info``), and checked against what the
        ledger has left, before any data is read; then it runs from the model's initial
        point with ``rng``. The chains of the run then pay only for their sampling (see
        :meth:`_sampling_mu_allotment`), so the run costs what per-chain warm-ups would.
        Call it after :meth:`plan` (``chains`` chains of ``iterations``); a step whose
        warm-up already ran, or that has none, returns ``None``. A run that would not fit
        in what the ledger has left is refused before anything is reserved.
        """
        events = self.shared_warmup_events()
        if not events or self._shared_warmup is not None:
            return None
        self._check_run_fits(chains)
        # The whole run must fit before its warm-up is paid for. With per-chain warm-ups
        # it costs the same (the chains' warm-ups sum to this one's μ, their sampling is
        # unchanged), and those events are what the plan holds now.
        self._check_fits([e for _ in range(chains) for e in self._chain_events(iterations)])
        self.guard.reserve(
            events, budget=(self.epsilon, self.delta), kind="warm-up",
            step=type(self).__name__, **info,
        )
        pmodel = self.private_model
        q0 = pmodel.plausible_start(pmodel.ravel(pmodel._initial_point))
        # (the same μ as the reserved events: the same noise multipliers, to the last bit)
        found = self._run_warmup(rng, q0, self._shared_warmup_mu())
        with self._changing_settings():
            self._shared_warmup = found
            self._shared_warmup_events = tuple(events)
            self.shared_warmup_run_id = info.get("run_id")
        return found

    def _choose_method(self, iterations: int, chains: int) -> None:
        """Decide, from public numbers only, whether MCMC can mix with this budget.

        :func:`expected_moves` estimates how many independent posterior draws the sampler's
        share buys. ``method="auto"`` draws from the private Laplace approximation when it
        is below :data:`MCMC_MIN_MOVES` (the chain would hardly mix, and the budget is
        better spent on the approximation); ``method="mcmc"`` refuses a run in which it is
        below one (the chain would hardly leave its start) before any data is read, with
        the numbers.
        """
        if self.method == "laplace" or not self.laplace_capable or self._fixed_noise:
            return  # (noise fixed by hand: the user asked for that MCMC run)
        if self._shared_warmup is not None:
            return  # decided when the run's warm-up was paid for (a retry keeps it)
        if self.warmup is None and self._refuse_frozen:
            return  # (no warm-up, so no approximation: the user asked for that MCMC run)
        moves = self._expected_moves(chains, iterations)
        # (the auto choice also asks whether a chain this long can make them: a frozen
        # chain is one the noise stops, not a short one)
        mixing = self._within_chain(moves, iterations)
        mcmc = self.method == "mcmc" or self.warmup is None or mixing >= self._min_moves()
        if mcmc and moves < 1.0 and not self._refuse_frozen:
            # (a step whose budget bounds its iterations runs what it was asked to run)
            self._warn_once(
                f"{type(self).__name__}: the budget buys about {moves:.2g} independent MCMC "
                "draws per chain here: "
                + ("expect chains that hardly mix (R̂ far above 1)" if moves > 0.0
                   else self._no_moves_effect)
                + ("." if self.warmup is None else "; method='auto' with no MCMC settings "
                   "would draw from the private Laplace approximation instead."),
                UserWarning,
            )
        if self.warmup is None:
            return
        if self.method == "mcmc":
            if moves < 1.0 and self._refuse_frozen:
                raise PrivacyBudgetExceeded(
                    f"This run would leave its chains frozen: with ε = {self.epsilon:.4g} over "
                    f"{chains} chain(s), n = {self.private_model.n_data} and "
                    f"{self.private_model.dim} parameters, the noise of the sampler's releases "
                    f"allows about {moves:.2g} independent draws per chain whatever its length. "
                    "Sample fewer chains, give a larger budget, or use method='auto' (the "
                    "default), which then draws from the private Laplace approximation. No "
                    "data was read."
                )
            return
        laplace = mixing < self._min_moves()
        with self._changing_settings():
            self._laplace = laplace
        if laplace:
            if self._mcmc_asked:  # (then moves < 1: method="mcmc" would refuse the run)
                advice = (
                    "The MCMC settings given are not used; give a larger budget or fewer "
                    "chains to run MCMC with them."
                )
            elif mixing < moves:
                advice = (
                    "Give a longer chain (draws=…) for MCMC, or method='mcmc' to run it "
                    "anyway."
                )
            elif not moves > 0.0:
                advice = self._no_moves_advice
            else:
                # (the draws a budget buys grow as μ·n: expected_moves)
                factor = self._min_moves() / moves
                advice = (
                    f"MCMC would need about {factor:.2g} times this budget's μ (Gaussian "
                    "DP; as many times the data buys the same), or fewer chains; "
                    + ("method='mcmc' runs it anyway." if factor <= 10 else
                       "at this budget the Laplace draws are the result to use (the "
                       "warm-up warns when they may be far from the posterior).")
                )
            reads = " (it reads every row, not batches)" if self._subsampled else ""
            default = sum(self._mcmc_length(chains))
            if mixing >= moves:
                length = ""
            elif iterations == sum(self.default_length(chains)):
                # (the library's own length for a Laplace run: no chain anyone asked for)
                length = (f" and a chain of the default MCMC length, {default} iterations, "
                          f"can make at most {self._chain_moves(default):.2g}")
            else:
                length = (f" and a chain of {iterations} iterations can make at most "
                          f"{self._chain_moves(iterations):.2g} (of the default MCMC length, "
                          f"{default} iterations: {self._chain_moves(default):.2g})")
            self._warn_once(
                f"{type(self).__name__}: the budget buys about {moves:.2g} independent MCMC "
                f"draws per chain here{length}"
                + f", too few for chains to mix (method='auto', the default, runs MCMC only "
                f"when it buys about {self._min_moves():.0f}); the draws come from the "
                "private Laplace approximation (the exact prior times a Gaussian likelihood) "
                f"that the whole budget pays for{reads}. "
                f"{advice}",
                LaplaceApproximationWarning,
            )

    #: whether the step's MCMC reads random batches (its Laplace route reads every row)
    _subsampled = False

    #: the advice when no budget would let the step's MCMC mix (it expects no moves at all)
    _no_moves_advice = (
        "Its MCMC cannot mix on this model; the Laplace draws are the result to use."
    )

    #: what a chain run anyway does when the step expects no moves at all
    _no_moves_effect = "expect chains that do not move (R̂ far above 1)"

    def _warn_once(self, message: str, category) -> None:
        """Warn once per step and kind of warning: a run plans and calibrates several
        times (and the figures in the message change with the run's length)."""
        said = self.__dict__.setdefault("_warned", set())
        if category not in said:
            said.add(category)
            warn(message, category)

    def _expected_moves(self, chains: int, iterations: int | None = None) -> float:
        if iterations is None:
            iterations = sum(self._mcmc_length(chains))
        return expected_moves(
            self._sampling_mu_equivalent(iterations, chains),
            self.private_model.n_data,
            self.private_model.dim,
            self._clip_squared(),
        )

    def _clip_squared(self) -> float:
        """n b² for the clip bound b the warm-up will set (whitened: a datum's squared
        gradient norm is about χ²_d / n, and the bound is the plan's margin times its
        quantile of the norms, no lower than that quantile of √(χ²_d / n)). Public.
        Bounds given by hand (θ's units) or no warm-up: the planning constant κ² d."""
        d, n = self.private_model.dim, self.private_model.n_data
        if not self._whiten:
            return _CLIP_RATIO_SQUARED * d
        bound = self.warmup.clip_margin * whitened_norm_quantile(self.warmup.quantile, d, n)
        return n * bound**2

    def _chain_moves(self, iterations: int) -> float:
        """The most independent draws a chain of ``iterations`` can make however little
        noise it carries: a random walk's best, :data:`RANDOM_WALK_EFFICIENCY` / d per
        iteration. Public numbers only."""
        return RANDOM_WALK_EFFICIENCY * int(iterations) / self.private_model.dim

    def _mixing_moves(self, chains: int, iterations: int | None = None) -> float:
        """The independent draws per chain the budget buys (:meth:`_expected_moves`) and
        a chain of this length can make (:meth:`_chain_moves`), whichever is fewer."""
        if iterations is None:
            iterations = sum(self._mcmc_length(chains))
        return self._within_chain(self._expected_moves(chains, iterations), iterations)

    def _within_chain(self, moves: float, iterations: int) -> float:
        if self._mcmc_asked:  # (settings given by hand: only a frozen chain leaves MCMC)
            return moves
        return min(moves, self._chain_moves(iterations))

    def _sampling_mu(self, chains: int) -> float:
        """The μ a chain's sampling may spend: its allotment less the warm-up's. Public."""
        return (1 - self._warmup_share()) * self._chain_mu_allotment(chains)

    def _sampling_mu_equivalent(self, iterations: int, chains: int) -> float:
        """The μ of full-data Gaussian releases as noisy as a chain's MCMC releases would be.

        For the Gaussian steps, the μ their sampling may spend (it does not depend on the
        chain's length). Public numbers only.
        """
        return self._sampling_mu(chains)

    def _will_use_laplace(self, chains: int) -> bool:
        if self.method == "laplace":
            return True
        return (
            self.method == "auto" and self.laplace_capable and not self._fixed_noise
            and self.warmup is not None and self._mixing_moves(chains) < self._min_moves()
        )

    def _min_moves(self) -> float:
        if not self._mcmc_asked:
            return MCMC_MIN_MOVES
        # Settings given by hand ask for MCMC: leave it only for a run that would freeze
        # (never, for a step whose budget bounds its iterations, not its noise).
        return 1.0 if self._refuse_frozen else 0.0

    def default_length(self, chains: int) -> tuple[int, int]:
        # Draws from the Laplace approximation are free: many, no tuning.
        if self.laplace_capable and self._will_use_laplace(chains):
            return 1000, 0
        return self._mcmc_length(chains)

    def _mcmc_length(self, chains: int) -> tuple[int, int]:
        # Random-walk steps: how far a chain moves does not grow with its length (more
        # iterations, more noise each) until the walk itself is the limit, at
        # RANDOM_WALK_EFFICIENCY / d draws per iteration. So 700 iterations (the scale is
        # tuned twice, enough draws for diagnostics), or as many as the draws the budget
        # buys need, up to MCMC_MIN_MOVES and MAX_DEFAULT_ITERATIONS.
        tune, shortest = 200, 700
        if self._fixed_noise:  # (noise given by hand: the budget bounds the iterations)
            return shortest - tune, tune
        moves = min(self._expected_moves(chains, shortest), MCMC_MIN_MOVES)
        wanted = np.ceil(moves * self.private_model.dim / RANDOM_WALK_EFFICIENCY)
        return int(np.clip(wanted, shortest, MAX_DEFAULT_ITERATIONS)) - tune, tune

    def _clip_diagnostics_unused(self) -> bool:
        """Whether a step with clip diagnostics on draws from the Laplace approximation
        (then they release nothing and cost nothing): warns once when so."""
        if self.clip_diagnostics is None or not self._laplace:
            return False
        self._warn_once(
            CLIP_DIAGNOSTICS_UNUSED.format(step=type(self).__name__),
            ClipDiagnosticsUnusedWarning,
        )
        return True

    def _start_clip_diagnostics(self, tune: int, draws: int) -> None:
        self._clip_diagnostics_unused()
        super()._start_clip_diagnostics(tune, draws)

    def _plan_notes(self, iterations: int, chains: int) -> list[str]:
        notes = []
        if self._clip_diagnostics_unused():
            notes.append(
                "clip diagnostics: none (the private Laplace approximation clips nothing: "
                "nothing is released or spent for them)"
            )
        if self.warmup is not None and (self._laplace or self._warmup_share() > 0):
            notes.append(
                f"warm-up: {self.warmup.iterations} iterations, "
                f"{'all' if self._laplace else f'{self.warmup.share:.0%}'} of each chain's "
                "budget, then start, metric and clip bounds from its releases (pymc_dp.sample "
                "runs one warm-up for all chains with their shares together: same cost, "
                f"noise sd 1/√{chains} of a chain's own)"
            )
            kinks = self.private_model.likelihood_kinks()
            if kinks:
                notes.append(
                    f"the likelihood bends in every row ({', '.join(kinks)} of a quantity "
                    "that moves with the parameters and the row): the warm-up reads the "
                    "curvature from clipped gradients some posterior sds apart, which costs "
                    "more noise than a smooth likelihood's Hessians; expect a wider spread "
                    "for the same budget"
                )
            noise = self.warmup.mode_noise(
                self._shared_warmup_mu() / self.warmup.share, self._coordinates_per_person()
            )
            n = self.private_model.n_data
            notes.append(
                f"the warm-up's mode: about {noise:.3g}/√m posterior sds off on a parameter "
                f"m people inform ({noise / np.sqrt(n):.2g} if all {n} do); within 1 sd "
                f"needs m ≥ {noise**2:.3g}, within 3 sds m ≥ {(noise / 3) ** 2:.3g}: a "
                "small group's intercept or a rare condition's coefficient, informed by "
                f"fewer, stays further off (pymc_dp.sample's one warm-up; √{chains} times "
                "more with a warm-up per chain under pm.sample)"
            )
            if noise / np.sqrt(n) > WANDERING_MODE_NOISE:
                notes.append(
                    f"the warm-up's mode: more than {WANDERING_MODE_NOISE:g} posterior sd "
                    "off even where every person informs: each iteration's release then moves its step by several "
                    "posterior sds, the iterates can wander, and the mode can end many sds off, "
                    "further than its own noise figure says (at n = 2000 and ε = 1 most "
                    "runs of ordinary models did: docs/private-mcmc.md, 'Small data "
                    "sets'); give a larger ε, or compare the result with a public reference"
                )
        if self.laplace_capable:
            if self._laplace:
                length = sum(self._mcmc_length(chains))
                notes.append(
                    "draws: from the private Laplace approximation (no further release; "
                    f"the budget would buy about {self._expected_moves(chains, length):.2g} "
                    f"independent MCMC draws per chain, and a chain of {length} iterations "
                    f"could make at most {self._chain_moves(length):.2g})"
                )
            else:
                moves = self._mixing_moves(chains, iterations)
                notes.append(f"draws: MCMC, about {moves:.2g} independent draws per chain expected")
        ratio = [e for e in self._chain_events(iterations) if e.name == "log-likelihood ratio"]
        if ratio and hasattr(ratio[0], "noise_multiplier"):
            from scipy.stats import norm

            n = self.private_model.n_data
            sigma = 2.0 * np.sqrt(self._clip_squared() / n) * ratio[0].noise_multiplier
            notes.append(
                f"expected acceptance of a move of one posterior sd, from the ratio's noise "
                f"alone: {2 * norm.cdf(-sigma / 2):.2f} (noise sd ≈ {sigma:.3g})"
            )
        return notes

    def _coordinates_per_person(self) -> int:
        """How many of the warm-up's coordinates one person's gradient touches (graph
        only): all of θ's, but where the likelihood reads tables of group parameters through
        a per-row index, the shared parameters and one entry per table."""
        pmodel = self.private_model
        params = pmodel.likelihood_parameters()
        if params is None:
            return pmodel.dim
        with np.errstate(all="ignore"):
            groups = params.row_groups(pmodel.ravel(pmodel._initial_point))
        if not np.any(groups > 0):
            return pmodel.dim
        return int(np.sum(groups == 0) + np.unique(groups[groups > 0]).size)

    def _start_warmup_chain(self) -> None:
        """Forget the last chain's warm-up: every chain pays for its own and runs it (with
        its own generator), so a run is the same whether PyMC runs its chains in one
        process, one after another, or in several.

        After a warm-up for all chains (:meth:`warm_up_for_run`), refuse a chain that
        :func:`pymc_dp.sample` did not start (before it reserves or reads anything): its
        trace would not show the warm-up its draws depend on.
        """
        if self._shared_warmup is not None and not self._in_run_with_shared_warmup:
            raise PrivacyBudgetExceeded(
                f"This {type(self).__name__} already ran its private warm-up for all chains "
                "of a pymc_dp.sample run (a call that then failed?): its chains must run in "
                "pymc_dp.sample too, whose report counts that warm-up; a plain pm.sample "
                "trace would not. Call pymc_dp.sample(step=step, ...) with the same chains. "
                "Nothing was reserved for this chain."
            )
        self._warmup_result = None
        # (each chain samples the approximation with a sampler seeded from its own
        # generator, whether or not its warm-up was shared)
        self.__dict__.pop("_approximation", None)

    def _surrogate_target(self, found):
        """The compiled surrogate target of ``found`` (public): built once, shared by the
        chains of a run that sample the same approximation in this process."""
        shared = self.__dict__.get("_shared_target")
        if shared is None or shared[0] is not found:
            shared = (found, surrogate_target(self.private_model, found, self._target_tempering))
            self._shared_target = shared
        return shared[1]

    def _laplace_transition(self, q: np.ndarray) -> tuple[np.ndarray, dict]:
        """One draw from the private Laplace approximation (post-processing: no release)."""
        if self._warmup_result is None:
            self._warm_up(q)
        found = self._warmup_result
        cached = self.__dict__.get("_approximation")
        if cached is None or cached[0] is not found:  # (built once per approximation)
            mean, cov, factor = self._target_draws(found)
            start = _draw_approximation(mean, factor, self.rng)
            sampler = surrogate_posterior(self._surrogate_target(found), start, cov, self.rng)
            cached = (found, mean, factor, sampler)
            self._approximation = cached
        _, mean, factor, sampler = cached
        draw = sampler.draw() if sampler is not None else None
        if draw is None:  # (no surrogate for this model, or its sampler failed: the Gaussian)
            draw = (_draw_approximation(mean, factor, self.rng), 1.0)
        draw, accept = draw
        # Stats of a release that was not made are missing values (the per-iteration privacy
        # stats are filled in by the base class after this).
        stats = {}
        for key, (dtype, _) in self.stats_dtypes_shapes.items():
            kind = np.dtype(dtype).kind
            stats[key] = np.nan if kind == "f" else (False if kind == "b" else 0)
        stats.update(accept=accept, accepted=1.0)
        if "dp_warmup_mu" in stats:
            stats["dp_warmup_mu"] = self._mu_warmup()
        return draw, stats

    def _mu_shared_warmup(self) -> float:
        # Every chain's draws depend on it: each draw says so, so that the trace alone
        # (even of a plain pm.sample) counts it, once.
        if self._shared_warmup is None:
            return 0.0
        return float(sum(event.mu for event in self._shared_warmup_events))

    def _warmup_events(self) -> list:
        """A chain's own warm-up releases (none when the run's warm-up was shared)."""
        if self.warmup is None or self._shared_warmup is not None or self._warmup_mu <= 0:
            return []
        return self.warmup.events(self._warmup_mu / self.warmup.share)

    def _mu_warmup(self) -> float:
        return sum(event.mu for event in self._warmup_events())

    def _warm_up(self, q: np.ndarray) -> np.ndarray:
        """Set the chain up from the warm-up; return the chain's start θ.

        With a warm-up for the whole run (:meth:`warm_up_for_run`) nothing is released: the
        chain starts at a draw from the approximation of its target, N(θ̂, Ĥ⁻¹ + Σ̂) or its
        tempered version (:meth:`_target_approximation`; post-processing, with the chain's
        generator), so that chains start apart and R̂ can compare them. Otherwise the chain
        runs its own warm-up from θ = ``q`` (releases; coordinates PyMC filled in where
        their prior finds them implausible start at the prior's median:
        :meth:`~pymc_dp.model.PrivateModel.plausible_start`) and starts at the centre.
        """
        if self.warmup is None:
            self._view = AffineView(self.private_model)
            return q
        if self._shared_warmup is not None:
            found = self._shared_warmup
            mean, _, factor = self._target_draws(found)
            start = _draw_approximation(mean, factor, self.rng)
        else:
            q = self.private_model.plausible_start(q)
            found = self._run_warmup(self.rng, q, self._warmup_mu)
            start = self._target_approximation(found)[0]  # (θ̂ unless tempered)
        self._warmup_result = found
        pmodel = self.private_model
        if self._whiten:
            self._view = AffineView(pmodel, found.mean, whitening(found.hessian).T)
        else:
            self._view = AffineView(pmodel)
        return start

    def _replicates_fn(self):
        """The warm-up's simulated gradients (:mod:`pymc_dp.model.replicates`), or ``None``
        where the plan asks for none or the model's outcomes cannot be simulated row by
        row (decided on the graph alone)."""
        pmodel, draws = self.private_model, self.warmup.replicates
        if not draws or not pmodel.can_replicate():
            return None
        return lambda theta, rng: pmodel.replicate_gradient_rows(theta, rng, draws)

    def _run_warmup(self, rng, q: np.ndarray, mu: float) -> LaplaceWarmup:
        """The warm-up's releases from θ = ``q``, spending ``mu``: the Laplace approximation."""
        pmodel = self.private_model
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            found = laplace_warmup(
                rng,
                q,
                lambda theta: pmodel.gradient_rows(theta)[0],
                pmodel.prior_gradient,
                pmodel.prior_negative_hessian,
                prior_logp_fn=pmodel.logprior,
                likelihood_parameters=pmodel.likelihood_parameters(),
                noise_multipliers=self.warmup.noise_multipliers(mu / self.warmup.share),
                quantile=self.warmup.quantile,
                clip_margin=self.warmup.clip_margin,
                replicates_fn=self._replicates_fn(),
            )
        if not np.all(np.isfinite(found.mean)):
            # Noise took the iterate off the model's support: start where the chain was.
            found = LaplaceWarmup(q, found.hessian, found.clip, found.iterations, found.noise_cov,
                                  converged=False)
        if found.curvature_noise > NOISY_CURVATURE:  # (released values only, as below)
            warn(
                f"{type(self).__name__}: the private warm-up's curvature releases were "
                f"{found.curvature_noise:.2g} times noisier than the posterior's own "
                "curvature in its last iterations: its approximation (the start"
                f"{', and the draws' if self._laplace else ''}) may be far from the posterior: "
                "means several posterior sds off, intervals too narrow or too wide. "
                "Common causes: a few people weigh heavily on some parameter (small groups "
                "of a hierarchical model, rare categories: their rows set the clip bounds, "
                "whose noise then drowns the other parameters), parameters the data tie "
                "closely together (an intercept and a slope per group on an uncentred "
                "covariate), or many parameters for the budget and the number of rows. Give "
                "a larger budget, pool small groups, centre covariates, or check the result "
                "against a public reference.",
                WarmupNotConvergedWarning,
            )
        if not found.converged:  # (a released fact: the steps' lengths are released values)
            kinks = pmodel.likelihood_kinks()
            bends = (
                f" This likelihood bends in every row ({', '.join(kinks)}): far from the "
                "posterior it is linear, its curvature says nothing, and each step covers "
                "only some posterior sds, so a start far off (an intercept's prior centred "
                "at 0 for an outcome near 10) is not reached. Centre the outcome, or centre "
                "the priors of its location parameters on a public guess of its scale."
                if kinks else ""
            )
            warn(
                f"{type(self).__name__}: the private warm-up did not settle: its last Newton "
                f"steps were longer than their noise explains, so its approximation (the "
                f"start{', and the draws' if self._laplace else ''}) may be far from the "
                "posterior. Give a larger budget, a model whose initial point is closer to "
                "the data's scale, or check the result against a public reference." + bends,
                WarmupNotConvergedWarning,
            )
        return found

    def _choose_proposal(self, noise_per_distance) -> None:
        """After the warm-up: the released clip bound and the proposal shape, unless given.

        Whitened, the posterior is close to N(0, I): unit proposal sds, and a first scale
        at which the ratio's noise sd (``noise_per_distance()`` per unit of move, evaluated
        once the clip bound is set) is about 1 for a typical move, where the penalty still
        lets a fair share of proposals through, or the random-walk optimum 2.38/√d,
        whichever is smaller. Tuning then follows the acceptance rate. With a clip bound
        given by hand, θ's own coordinates and sds from Ĥ⁻¹ (unless ``S`` was given).
        """
        if self.warmup is None:
            return
        dim = self.private_model.dim
        if self._view.whitened:
            with self._changing_settings():
                self.clip_bound = float(self._warmup_result.clip)
            sds = np.ones(dim)
            if self._target_tempering < 1.0:
                # the tempered target's sds in u = Lᵀ(θ − θ̂), Ĥ = L Lᵀ (1 untempered)
                factor = np.linalg.cholesky(self._warmup_result.hessian)
                sds = np.sqrt(np.diag(factor.T @ self._target_covariance() @ factor))
        else:
            sds = self.S if self._S_given else np.sqrt(self._warmup_variances())
        walk = self.proposal == "random_walk"  # the others move one coordinate at a time
        length = float(np.linalg.norm(sds) if walk else np.max(sds))
        scaling = min(2.38 / np.sqrt(dim) if walk else 2.38, 1.0 / (noise_per_distance() * length))
        self._set_proposal_shape(None if self._S_given else sds, scaling)

    def _warmup_variances(self) -> np.ndarray:
        """The target's variances of θ's coordinates under the warm-up's approximation."""
        return np.diag(self._target_covariance())

    def _target_covariance(self) -> np.ndarray:
        """The covariance of the chain's target under the warm-up's approximation."""
        return np.linalg.inv(self._target_approximation()[1])

    def _target_approximation(self, found: LaplaceWarmup | None = None):
        """``(mean, precision, noise covariance of the mean)`` of the chain's target under
        the warm-up's approximation ``found`` (default: this chain's): N(θ̂, Ĥ⁻¹) and Σ̂,
        or for a tempered target
        p(θ) p(x | θ)^T (the minibatch steps' ``tempering`` T < 1) its tempered version
        (:func:`~pymc_dp.kernels.warmup.tempered_approximation`; without it a tempered
        chain's proposals were 1/√T times too small and the approximation's draws followed
        the untempered posterior). Post-processing of released values and the prior."""
        found = self._warmup_result if found is None else found
        if self._target_tempering >= 1.0:
            return found.mean, found.hessian, found.noise_cov
        pmodel = self.private_model
        with np.errstate(all="ignore"):
            # (θ̂ unsettled is no mode: its prior gradient says nothing of the likelihood's)
            grad = pmodel.prior_gradient(found.mean) if found.converged else 0.0 * found.mean
            return tempered_approximation(
                found.mean, found.hessian, grad, pmodel.prior_negative_hessian(found.mean),
                self._target_tempering, found.noise_cov,
            )

    @property
    def _target_tempering(self) -> float:
        """T of the chain's target p(θ) p(x | θ)^T: the minibatch steps' ``tempering``."""
        return float(getattr(self, "tempering", 1.0))

    def _target_draws(self, found: LaplaceWarmup):
        """``(mean, covariance, its Cholesky factor)`` of the target's approximation widened
        by the noise in the warm-up's mean: N(mean, H⁻¹ + Σ̂), as
        :meth:`LaplaceWarmup.covariance`."""
        mean, precision, noise_cov = self._target_approximation(found)
        cov = replace(found, hessian=precision, noise_cov=noise_cov).covariance()
        return mean, cov, np.linalg.cholesky(cov)


def _draw_approximation(mean: np.ndarray, factor: np.ndarray, rng: np.random.Generator):
    """A draw from ``N(mean, factor factorᵀ)``: the private approximation, widened by the
    noise in its mean (post-processing, with the chain's generator)."""
    return mean + factor @ rng.standard_normal(mean.size)
