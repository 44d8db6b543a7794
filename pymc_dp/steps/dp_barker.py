"""``DPBarker``: the DP Barker acceptance test on random batches (kernel: :mod:`pymc_dp.kernels.barker`)."""

from __future__ import annotations

import math

from typing import Any

import numpy as np

from pymc_dp.accounting.barker import (
    BARKER_NOISE_VARIANCE,
    MIN_BARKER_BATCH,
    BarkerEvent,
    barker_max_iterations,
)
from pymc_dp.accounting.ledger import PrivacyLedger
from pymc_dp.validation import check_int, check_positive
from pymc_dp.errors import PrivacyBudgetExceeded
from pymc_dp.kernels.barker import barker_transition, load_vcorr
from pymc_dp.steps.base import shared_arguments, shared_parameter_docs
from pymc_dp.steps.subsampled import SUBSAMPLED_PRIVACY_STATS, SubsampledPrivateStep
from pymc_dp.steps.warmup import RANDOM_WALK_EFFICIENCY, PrivateWarmup

__all__ = ["DPBarker"]


#: A random walk's best efficiency (Roberts & Rosenthal 2001: 0.33/d for Metropolis) halved
#: for Barker's acceptance, which accepts at most half as often. A planning figure.
_BARKER_EFFICIENCY = RANDOM_WALK_EFFICIENCY / 2

#: The smallest batch, in units of T²n, at which DP Barker's clip √b/(nT) stops binding on
#: a typical move's per-datum ratios: a move of 2.38/√d posterior sds and a datum's
#: gradient at twice its typical norm √(d/n) give a ratio of about 4.8/√n, and
#: √b/(nT) ≥ 4.8/√n needs b ≥ 23 T² n. Below it the clipped test follows a flattened
#: target (without tempering, any batch: thesis 3.4). A planning figure.
_BARKER_UNCLIPPED_BATCH = 23.0

#: Why DP Barker's MCMC cannot follow an untempered posterior (warnings' wording).
_FLATTENED = (
    "no batch keeps DP Barker's fixed clip bound (√b/(nT)) from flattening the target its "
    "chains follow"
)


@shared_parameter_docs
class DPBarker(PrivateWarmup, SubsampledPrivateStep):
    r"""Differentially private MCMC by the Barker acceptance test on random batches.

    Heikkilä, Jälkö, Dikmen & Honkela (2019); thesis 3.3, Algorithm 3. Each iteration
    proposes θ', draws a batch of ``batch_size`` rows without replacement from the chain's
    generator, clips every per-datum log-likelihood ratio at ``√b / n0`` (``n0 = nT``) and
    releases ``λ + N(0, 2 − s²)``, where ``λ = (nT/b) Σ_B r_j`` and ``s² ≤ 1`` is the batch
    estimate of λ's variance; θ' is accepted iff ``release + log prior ratio + V > 0`` with
    ``V ~ V_corr``, the correction distribution that makes ``N(0, 2) + V_corr`` a
    Logistic(0, 1) (up to a Kolmogorov–Smirnov distance of 5.9·10⁻⁴, see
    :class:`~pymc_dp.kernels.barker.VCorr`). That is Barker's test, accept with probability
    ``1/(1 + e^{−λ})``, so the chain targets the (tempered) posterior up to the V_corr and
    central-limit approximations.

    There is no noise to calibrate: the noise variance is fixed at 2. The budget instead
    bounds the number of iterations: thesis Theorem 7 gives the RDP of one iteration from b
    and n alone, and ``k`` iterations cost ``ε = min_α k ε(α) + ln(1/δ)/(α − 1)`` over the
    integer orders ``2 < α < b/5`` (:meth:`max_iterations`). That number is split evenly
    over the planned chains: a longer chain, a chain beyond the plan, or a second run of
    the step is refused before any data is read. A run may cost less than the budget (the
    report says what it released).

    Parameters
    ----------
    vars : list, optional
        Must be every free variable (default).
    {budget parameters}
    batch_size : int, optional
        b, the rows read per iteration: at least 16 (Theorem 7 needs an integer order
        2 < α < b/5) and at most n. Larger batches cost more privacy per iteration but
        bind the clip less. Default: the largest batch whose budget pays for the run's
        chains and length, chosen when the run is planned (public numbers only).
    tempering : float
        T = n0/n in (0, 1]: the chain targets the tempered posterior ∝ prior ·
        likelihood^T, and the clip bound √b/n0 on the untempered ratios loosens as T
        shrinks (without tempering, √b/n clips almost everything on large data).
    noise_variance : float
        σ², fixed at 2 (Theorem 7 and the shipped V_corr are for σ² = 2; a correction
        distribution only exists for σ² < π²/3).
    proposal : {"random_walk", "one_component", "guided"}
        The proposals of :class:`~pymc_dp.DPPenalty` (Barker's acceptance function keeps
        the guided walk's extended-space reversibility).
    S, scaling, tune_interval
        Per-coordinate proposal standard deviations, their initial factor (tuned from
        accept decisions during tuning) and the tuning period.
    method : {"auto", "mcmc", "laplace"}
        ``"auto"`` (default) runs DP Barker MCMC only when the iterations the budget buys,
        and the chain's length, give about :data:`~pymc_dp.steps.warmup.MCMC_MIN_MOVES`
        independent draws per chain (a random walk's best case, halved), or when a setting
        only its MCMC uses is given (``batch_size``, ``S``, ``scaling``); otherwise the
        whole budget pays for the private Laplace approximation of the (tempered) target
        (as :class:`~pymc_dp.DPPenalty` does) and the draws come from it, with a
        :class:`~pymc_dp.steps.warmup.LaplaceApproximationWarning`.
        ``"mcmc"`` always runs DP Barker; ``"laplace"`` always draws from the approximation.
    warmup : bool or pymc_dp.WarmupPlan
        The private warm-up that makes the Laplace approximation (default ``True``; docs/
        private-mcmc.md, "Settings chosen privately"). DP Barker's MCMC does not use it: its
        clip bound is fixed by the algorithm. ``False`` with ``method="auto"`` means MCMC.
    {diagnostics parameters}
    {shared parameters}

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> from pymc_dp.steps.dp_barker import DPBarker
    >>> y = np.random.default_rng(1).normal(1.0, 1.0, size=20_000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=y)
    ...     step = DPBarker(eps=4.0, batch_size=200, tempering=0.01, scaling=0.05, chains=2)
    ...     idata = pymc_dp.sample(step=step, draws=300, tune=100, chains=2,
    ...                            random_seed=1, progressbar=False)
    >>> idata.attrs["dp_epsilon"] <= 4.0
    True
    """

    name = "dp_barker"
    privacy_settings = ("noise_variance", "_batch_choices")
    laplace_capable = True
    _subsampled = True
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "accepted": (np.float64, []),
        "scaling": (np.float64, []),
        "dp_noise_variance": (np.float64, []),
        "dp_warmup_mu": (np.float64, []),
        **SUBSAMPLED_PRIVACY_STATS,
    }

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        delta: float | None = None,
        batch_size: int | None = None,
        tempering: float = 1.0,
        noise_variance: float = BARKER_NOISE_VARIANCE,
        proposal: str = "random_walk",
        S=None,
        scaling: float | None = None,
        method: str = "auto",
        warmup=True,
        tune_interval: int = 100,
        clip_diagnostics=None,
        chains: int | None = None,
        ledger_dir=None,
        budget=None,
        model=None,
        initial_point=None,
        compile_kwargs=None,
        blocked: bool = True,
        rng=None,
    ):
        _check_noise_variance(noise_variance)
        # (the clip bound √b/n0 is the algorithm's: the warm-up never sets it)
        if method == "mcmc" and warmup is True:
            warmup = False  # DP Barker's MCMC does not use it: no gradients needed
        self._init_warmup(
            warmup, hand_clipped=False, method=method,
            mcmc_asked=any(x is not None for x in (batch_size, S, scaling)),
        )
        self._whiten = False
        self._fixed_noise = False
        self._auto_batch = batch_size is None
        if not self._auto_batch and check_int(batch_size, "batch_size") < MIN_BARKER_BATCH:
            raise ValueError(
                f"DPBarker needs batch_size >= {MIN_BARKER_BATCH}: its accountant (thesis "
                f"Theorem 7) needs an integer RDP order 2 < α < b/5; got {batch_size}"
            )
        self.noise_variance = BARKER_NOISE_VARIANCE
        super().__init__(
            batch_size=batch_size,
            tempering=tempering,
            proposal=proposal,
            S=S,
            scaling=scaling,
            tune_interval=tune_interval,
            **shared_arguments(locals()),
        )
        self._vcorr = load_vcorr()
        self._batch_choices: dict[tuple[int, int], tuple[int | None, int]] = {}
        self._check_warmup_model()
        if not self._auto_batch and self.max_iterations() < 1:
            cost = PrivacyLedger(self._chain_events(1)).epsilon(self.delta)
            raise ValueError(
                f"The budget ε = {self.epsilon:.4g} (δ = {self.delta:.3g}) is too small for "
                f"even one DP Barker iteration with b = {self.batch_size} of n = "
                f"{self.private_model.n_data} (one iteration costs ε = {cost:.4g}). Use a "
                "smaller batch or a larger budget."
            )

    def public_settings(self) -> dict[str, Any]:
        return {**super().public_settings(), "noise_variance": self.noise_variance}

    def _default_batch_size(self, n: int) -> int:
        # Provisional: the smallest batch the accountant admits. The batch is chosen for
        # the run's length when the run is planned (_calibrate).
        return MIN_BARKER_BATCH

    def _choose_batch_size(self, iterations: int, chains: int) -> None:
        """The largest batch whose budget still pays for ``chains`` chains of ``iterations``.

        A larger batch makes the test statistic less noisy but costs more privacy per
        iteration; the run's length is fixed, so the largest batch that fits spends the
        budget best. A function of public numbers (ε, δ, n, the run's length).
        """
        n = self.private_model.n_data
        key = (iterations, chains)
        if key not in self._batch_choices:
            self._batch_choices[key] = _largest_batch(
                lambda b: self._iterations_per_chain(b, chains), iterations, n
            )
        chosen, most = self._batch_choices[key]
        if chosen is None and most == 0:
            raise PrivacyBudgetExceeded(
                f"The budget ε = {self.epsilon:.4g}, δ = {self.delta:.3g} cannot pay for a "
                f"single DP Barker iteration per chain over {chains} chain(s) with any batch "
                f"size for n = {n} (thesis Theorem 7). Give a larger budget, fewer chains, or "
                "use DPPenalty or DPHMC. No data was read."
            )
        if chosen is None:
            raise PrivacyBudgetExceeded(
                f"The budget ε = {self.epsilon:.4g}, δ = {self.delta:.3g} buys at most about "
                f"{most} DP Barker iterations per chain over {chains} chain(s) with any batch "
                f"size for n = {n} (thesis Theorem 7); the run asks for {iterations} per chain "
                "(tuning included). Run shorter chains (e.g. pymc_dp.sample picks the length "
                "from the budget when draws and tune are not given), fewer chains, or give a "
                "larger budget. No data was read."
            )
        with self._changing_settings():
            self.batch_size = chosen
            self.sampling_rate = chosen / n

    def _mcmc_length(self, chains: int) -> tuple[int, int]:
        """As many iterations as the budget buys with a batch of 1000 rows (or all n), at
        most 1000 per chain, a fifth of them tuning; if that batch buys fewer than 20, the
        most any batch buys. Public numbers only."""
        n = self.private_model.n_data
        k = self._iterations_per_chain(min(n, 1000), chains)
        if k < 20:
            k = max(k, self._most_iterations(chains))
        k = int(np.clip(k, 1, 1000))
        tune = k // 5
        return k - tune, tune

    def max_iterations(self) -> int:
        """The most iterations, over all chains and tuning, that the whole budget allows."""
        return barker_max_iterations(
            self.epsilon, self.delta, self.private_model.n_data, self.batch_size,
            fixed_mu=self._clip_mu_all(self.planned_chains),
        )

    def _iterations_per_chain(self, batch_size: int, chains: int) -> int:
        """The most iterations each of ``chains`` chains may run with batches of
        ``batch_size``, beside the clip diagnostics' releases when on (public numbers)."""
        return barker_max_iterations(
            self.epsilon, self.delta, self.private_model.n_data, batch_size,
            fixed_mu=self._clip_mu_all(chains),
        ) // chains

    def _clip_mu_all(self, chains: int) -> float:
        """The μ of the clip diagnostics of ``chains`` chains (0 when off): Gaussian
        releases beside the Barker tests, composed with them in RDP."""
        if self.clip_diagnostics is None:  # (whatever the route: batch choices are cached)
            return 0.0
        return chains * self.clip_diagnostics.mu(self._chain_mu_allotment(chains))

    # ------------------------------------------------------------------ privacy plan
    def _calibrate(self, iterations: int, chains: int) -> None:
        # Nothing to calibrate (σ² = 2 is fixed). As for the other steps, the budget is
        # split into `chains` equal allotments, here of iterations: a chain may run at most
        # max_iterations() // chains of them, and the step runs at most `chains` chains over
        # its life. Checked before the chain reads any data; the guard then reserves the
        # chain's actual releases against the budget.
        self._choose_method(iterations, chains)
        self._sampling_mu_allotment(chains)  # the warm-up's μ: all of it, or none for MCMC
        if self._laplace:
            return  # the warm-up spends the chain's whole share; the draws release nothing
        if self._auto_batch:
            self._choose_batch_size(iterations, chains)
        allowed = self.max_iterations()
        per_chain = allowed // chains
        if iterations > per_chain:
            raise PrivacyBudgetExceeded(
                f"A chain of {iterations} iterations (tuning included) is longer than this "
                f"step's per-chain allotment of {per_chain}: the budget ε = {self.epsilon:.4g}, "
                f"δ = {self.delta:.3g} allows {allowed} DP Barker iterations in all with "
                f"b = {self.batch_size} of n = {self.private_model.n_data} (thesis Theorem 7), "
                f"split over {chains} planned chain(s). Run fewer or shorter chains, or use a "
                "smaller batch. No data was read."
            )
        ran = len(self._chain_reservations())
        if ran >= chains:
            raise PrivacyBudgetExceeded(
                f"This step already ran the {chains} chain(s) its budget was planned for; "
                "another chain would be beyond the plan. Create a new step with its own "
                "budget. No data was read."
            )

    def _chain_events(self, iterations: int) -> list:
        if self._laplace:
            return self._warmup_events()
        return [
            BarkerEvent(
                name="Barker test statistic",
                count=iterations,
                n_data=self.private_model.n_data,
                batch_size=self.batch_size,
            )
        ] + self._clip_diagnostic_events()

    # ------------------------------------------------------------------ sampling
    # Its noise is fixed (σ² = 2) and its budget bounds the iterations instead, checked when
    # the run is planned: a short chain is the user's to ask for with method="mcmc".
    _refuse_frozen = False

    def _warmup_share(self) -> float:
        return 0.0  # DP Barker's MCMC runs without the warm-up (the Laplace route: all of it)

    def _most_iterations(self, chains: int) -> int:
        """About the most iterations per chain that any batch size buys (public numbers)."""
        n = self.private_model.n_data
        _, most = _largest_batch(lambda b: self._iterations_per_chain(b, chains), 1, n)
        return most

    def _chain_moves(self, iterations: int) -> float:
        # A chain of this length makes at most this many draws, whatever its budget buys
        # (with a longer chain): a random walk's best, halved for Barker's acceptance.
        return _BARKER_EFFICIENCY * int(iterations) / self.private_model.dim

    _no_moves_advice = (
        f"Unless tempering=T ≤ 0.2 (a tempered posterior), {_FLATTENED}; the Laplace draws "
        "are the result to use."
    )

    # (the chain moves freely on a target the clip flattened: R̂ and ESS look fine)
    _no_moves_effect = (
        f"{_FLATTENED}, so their draws spread far wider than the posterior (often tens of "
        "times), however good R̂ and the ESS look. Give tempering=T ≤ 0.2 (the draws then "
        "follow the tempered posterior) or leave method='auto'"
    )

    def _expected_moves(self, chains: int, iterations: int | None = None) -> float:
        # The iterations per chain the budget buys with a batch large enough that clipping
        # leaves typical moves alone, at a random walk's best efficiency; none if no batch
        # is (without tempering: the chain would follow a flattened, prior-like target).
        n = self.private_model.n_data
        batch = math.ceil(_BARKER_UNCLIPPED_BATCH * self.tempering**2 * n)
        if batch > n:
            return 0.0
        batch = max(batch, MIN_BARKER_BATCH)
        k = self._iterations_per_chain(batch, chains)
        return _BARKER_EFFICIENCY * k / self.private_model.dim

    def _start_chain(self) -> None:
        super()._start_chain()
        self._start_warmup_chain()

    def _transition(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        if self._laplace:
            return self._laplace_transition(q)
        pmodel = self.private_model
        proposal = self._propose(q)
        q_new, logprior_new, info = barker_transition(
            self.rng,
            q,
            self._logprior(q),
            proposal.q,
            pmodel.loglik_rows,
            pmodel.logprior,
            n_data=pmodel.n_data,
            batch_size=self.batch_size,
            tempering=self.tempering,
            vcorr=self._vcorr,
            count_clipped=self._clip_counter(),
        )
        self._after(proposal, q_new, logprior_new, info.accepted)
        stats = {
            "accept": info.accept_prob,
            "accepted": float(info.accepted),
            "scaling": float(np.mean(self.scaling)),
            "dp_noise_variance": self.noise_variance,
            "dp_warmup_mu": 0.0,
        }
        return q_new, stats


def _largest_batch(iterations_allowed, iterations: int, n: int) -> tuple[int | None, int]:
    """The largest batch (within 2 %) that allows ``iterations`` (None if none does), and
    the most iterations any batch allows (about).

    The iterations a budget allows rise with the batch at first (larger batches admit
    higher RDP orders, thesis Theorem 7) and then fall (less amplification by
    subsampling): find the rise by doubling, then bisect the fall in log space.
    """
    b, allowed = MIN_BARKER_BATCH, iterations_allowed(MIN_BARKER_BATCH)
    while 2 * b <= n:
        more = iterations_allowed(2 * b)
        if more < allowed:
            break
        b, allowed = 2 * b, more
    if allowed < iterations:
        return None, allowed
    if iterations_allowed(n) >= iterations:
        return n, allowed
    lo, hi = b, n  # fits at lo, not at hi
    while hi > 1.02 * lo:
        mid = int(round(math.sqrt(lo * hi)))
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if iterations_allowed(mid) >= iterations else (lo, mid)
    return lo, allowed


def _check_noise_variance(value) -> None:
    v = check_positive(value, "noise_variance")
    if v >= math.pi**2 / 3:
        raise ValueError(
            f"noise_variance must be < π²/3 ≈ {math.pi**2 / 3:.4f} (the variance of the "
            f"Logistic(0, 1) that N(0, σ²) + V_corr must match), got {value!r}"
        )
    if v != BARKER_NOISE_VARIANCE:
        raise ValueError(
            f"DPBarker supports noise_variance = {BARKER_NOISE_VARIANCE} only: thesis Theorem "
            f"7 and the shipped V_corr fit are for σ² = 2; got {value!r}"
        )
