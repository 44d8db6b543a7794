"""``DPHMC``: differentially private Hamiltonian Monte Carlo (kernel: :mod:`pymc_dp.kernels.hmc`)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

import numpy as np

from pymc.step_methods.compound import StepMethodState
from pymc.step_methods.state import dataclass_state
from pymc.step_methods.step_sizes import DualAverageAdaptation, StepSizeState

from pymc_dp.accounting.events import GaussianEvent
from pymc_dp.accounting.gaussian import gaussian_mu, noise_multiplier_for_mu
from pymc_dp.validation import check_fraction, check_int, check_positive
from pymc_dp.kernels.hmc import HMCState, hmc_transition, noisy_gradient
from pymc_dp.steps.base import CLIP_DIAGNOSTIC_STATS, shared_arguments, shared_parameter_docs
from pymc_dp.steps.gaussian import GAUSSIAN_PRIVACY_STATS, GaussianPrivateStep
from pymc_dp.steps.warmup import MCMC_MIN_MOVES, PrivateWarmup

__all__ = ["DPHMC", "DEFAULT_BUDGET_SPLIT", "mass_matrix_windows"]

#: Default share of the privacy budget (in the accountant's μ) spent on gradient releases;
#: the rest goes to the log-likelihood ratios. The thesis' settings for its flat banana
#: (τ_g = 0.4, τ_l = 0.1, L = 10) spend ≈ 0.385 on gradients.
DEFAULT_BUDGET_SPLIT = 0.4

_HAND_SETTINGS = (
    "DPHMC chooses grad_clip and loglik_clip privately in its warm-up, in the warm-up's own "
    "coordinates. Give both clip bounds (in θ's units) when you give one of them or "
    "inv_mass, and when you turn the warm-up off (warmup=False); or give none of them."
)

#: Independent draws per iteration of HMC at its best: a trajectory can carry the chain a
#: posterior's width, but at the optimal step size about 35 % of them are rejected (Beskos
#: et al. 2013: acceptance 0.65). A planning figure.
HMC_EFFICIENCY = 0.65

#: Leapfrog steps per iteration with the warm-up's whitened coordinates (each one is a
#: gradient release: short paths leave more budget per gradient).
_WHITENED_N_STEPS = 4

# More leapfrog steps than this per iteration is a mistake (path_length ≫ step_size), not a plan.
_MAX_N_STEPS = 100_000

# Dual averaging constants of pm.HamiltonianMC (Hoffman & Gelman 2014).
_DA_GAMMA, _DA_K, _DA_T0 = 0.05, 0.75, 10


def mass_matrix_windows(tune: int) -> list[int]:
    """Tuning iterations after which the diagonal mass matrix is re-estimated.

    Stan's schedule scaled to the tuning length: an initial buffer of 15 %, doubling windows
    (the first 5 % of ``tune``, at least 5 iterations), a final buffer of 10 % in which only
    the step size adapts. No adaptation below 20 tuning iterations.

    >>> mass_matrix_windows(1000)
    [200, 300, 500, 900]
    """
    if tune < 20:
        return []
    start = int(0.15 * tune)
    end = tune - int(0.1 * tune)
    window = max(5, int(0.05 * tune))
    ends = []
    while start + window <= end:
        nxt = start + window
        if nxt + 2 * window > end:  # the next window would not fit: stretch this one
            nxt = end
        ends.append(nxt)
        start, window = nxt, 2 * window
    return ends


@dataclass_state
class DPHMCState(StepMethodState):
    # Public values only: this state may be stored with a trace (ZarrTrace). The cached
    # per-datum log-likelihoods are private and live outside it (the cached noisy gradient
    # is a release, public, but lives with them in the kernel state).
    step_adapt: StepSizeState
    inv_mass: np.ndarray
    tune: bool
    tune_done: int
    window_start: int
    window_ends: list
    window_count: int
    window_mean: np.ndarray
    window_m2: np.ndarray
    n_steps: int = field(metadata={"frozen": True})


@shared_parameter_docs
class DPHMC(PrivateWarmup, GaussianPrivateStep):
    r"""Differentially private Hamiltonian Monte Carlo with noisy clipped gradients.

    Every leapfrog step releases the noisy clipped gradient of the log posterior
    ``G(θ) = Σ_j clip_{b_g}(∇ℓ_j(θ)) + ∇ log prior(θ) + N(0, (2 b_g z_g)² I)``, and every
    iteration releases one noisy clipped log-likelihood ratio of the end of the trajectory
    against the current point, ``R̂ = Σ_j clip_{b_l‖θ_L−θ‖}(ℓ_j(θ_L) − ℓ_j(θ)) +
    N(0, (2 b_l ‖θ_L−θ‖ z_l)²)``, accepted with the penalty-corrected HMC probability
    ``min(1, exp(R̂ + log prior ratio + ½p0ᵀM⁻¹p0 − ½p_LᵀM⁻¹p_L − σ_l²/2))`` (thesis 4.2,
    Algorithm 4, with the η of the θ update restored; docs/algorithms.md "DP HMC"). Everything
    happens on PyMC's unconstrained value space.

    Parameters
    ----------
    vars : list, optional
        Must be every free variable (default); all must be continuous, and the model
        differentiable.
    {budget parameters}
    grad_clip : float, optional
        Default: chosen privately per chain by the warm-up (with ``loglik_clip``, in its
        whitened coordinates; give both or neither). b_g: each datum's gradient ∇ℓ_j(θ) (on the value space, all free variables
        together) is clipped to ℓ2 norm ``b_g``. Too small biases the dynamics (not the
        stationary distribution: the acceptance test corrects it) and lowers acceptance;
        too large adds noise.
    loglik_clip : float, optional
        Default: chosen by the warm-up, as ``grad_clip``. b_l: each per-datum log-likelihood ratio is clipped to ``±b_l‖θ_L−θ‖₂``, as in
        :class:`~pymc_dp.DPPenalty` (``clip_bound``). Too small biases the posterior.
    n_steps : int, optional
        L, the number of leapfrog steps (gradient releases) per iteration. Default 4 in the
        warm-up's whitened coordinates, else 10, unless ``path_length`` is given.
    path_length : float, optional
        Instead of ``n_steps``: L = max(1, round(path_length / step_size)) with the
        *initial* step size. L is fixed for the whole run, because every leapfrog step is a
        release that the budget must have paid for before the chain starts.
    step_size : float, optional
        Initial leapfrog step size η (default ``0.5 / dim**0.25`` in the warm-up's
        whitened coordinates, else ``0.25 / dim**0.25`` as ``pm.HamiltonianMC``); adapted
        during tuning.
    budget_split : float, optional
        Share, in (0, 1), of the chain's privacy budget (its μ in the exact Gaussian
        accountant) spent on gradient releases; the rest pays for the ratios. Default
        :data:`DEFAULT_BUDGET_SPLIT` = 0.4. Not allowed with fixed noise multipliers.
    grad_noise_multiplier, loglik_noise_multiplier : float, optional
        Fix z_g and z_l (noise std / sensitivity) instead of calibrating them from ``eps``;
        give both or neither. The run is then accounted and must still fit in the budget.
    target_accept : float
        Target mean acceptance probability of the step-size adaptation (default 0.65).
    adapt_step_size : bool
        Dual averaging of η toward ``target_accept`` during tuning (default True).
    inv_mass : array, optional
        Diagonal of the inverse mass matrix M⁻¹ (a posterior variance guess per value-space
        coordinate; needs the clip bounds). Default: the identity in the warm-up's whitened
        coordinates, or its Laplace variances with hand-set clip bounds (ones without it).
    adapt_mass_matrix : bool
        Re-estimate the diagonal of M⁻¹ from the chain's own tuning draws in doubling
        windows (:func:`mass_matrix_windows`; default False).
    warmup : bool or pymc_dp.WarmupPlan
        The private warm-up at the start of every chain (default ``True``: half of each
        chain's budget; docs/private-mcmc.md, "Settings chosen privately"). It chooses the
        start, the coordinates (whitened by a private curvature estimate) and the clip
        bounds. ``False``: no warm-up (then give the clip bounds).
    {method parameters}
    {diagnostics parameters}
    {shared parameters}

    Notes
    -----
    *Accounting.* One gradient is released before the first iteration and cached (Algorithm
    4); after that an iteration releases L gradients and one ratio. A chain of k iterations
    (tuning included) is a composition of Gaussian mechanisms with
    ``μ = (kL + 1)/(2 z_g²) + k/(2 z_l²)`` (thesis Theorem 12), exactly (ε, δ)-DP by the
    Gaussian accountant; ``chains`` chains cost the sum. With ``eps`` given and no fixed
    noise, the step is told k by PyMC and sets ``z_g = √((kL+1)/(2 s μ_c))`` and
    ``z_l = √(k/(2 (1−s) μ_c))``, μ_c the chain's share of the μ that (ε, δ) allows and s
    the ``budget_split``. On reject the chain keeps its cached gradient; this does not bias
    the chain (see :mod:`pymc_dp.kernels.hmc`), so no extra gradient is released per
    iteration.

    The thesis' iteration counts for τ_l = 0.1, τ_g = 0.4, L = 10, n = 10⁵, δ = 10⁻⁶
    (z = τ√n) are 34, 123, 258, 431, 640, 880 at ε = 1…6 with this accounting; the
    counts 33, 119, 248, 416, 616, 848 quoted elsewhere assume L + 1 gradient releases in
    every iteration (a fresh start gradient each time), which this step does not make.

    *Tuning* uses only released values: the step size follows dual averaging of the
    acceptance probabilities (computed from the noisy ratio), the mass matrix the chain's
    own draws. Neither reads the data; exact gradients or clip fractions are never used or
    returned.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> y = np.random.default_rng(1).normal(1.0, 1.0, size=1000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=y)
    ...     step = pymc_dp.DPHMC(eps=1.0, chains=2)
    ...     idata = pymc_dp.sample(step=step, chains=2, random_seed=1, progressbar=False)
    >>> idata.attrs["dp_epsilon"] <= 1.0
    True
    """

    name = "dp_hmc"
    privacy_settings = (
        "grad_clip",
        "loglik_clip",
        "n_steps",
        "grad_noise_multiplier",
        "loglik_noise_multiplier",
        "budget_split",
        "_fixed_noise",
    )
    _state_class = DPHMCState
    laplace_capable = True
    optional_stats_dtypes_shapes = CLIP_DIAGNOSTIC_STATS
    stats_dtypes_shapes = {
        "accept": (np.float64, []),
        "accepted": (np.float64, []),
        "diverging": (bool, []),
        "step_size": (np.float64, []),
        "step_size_bar": (np.float64, []),
        "n_steps": (np.int64, []),
        "grad_clip": (np.float64, []),
        "loglik_clip": (np.float64, []),
        "grad_noise_multiplier": (np.float64, []),
        "loglik_noise_multiplier": (np.float64, []),
        **GAUSSIAN_PRIVACY_STATS,
    }

    def __init__(
        self,
        vars=None,
        *,
        eps: float,
        delta: float | None = None,
        grad_clip: float | None = None,
        loglik_clip: float | None = None,
        n_steps: int | None = None,
        path_length: float | None = None,
        step_size: float | None = None,
        budget_split: float | None = None,
        grad_noise_multiplier: float | None = None,
        loglik_noise_multiplier: float | None = None,
        target_accept: float = 0.65,
        adapt_step_size: bool = True,
        inv_mass=None,
        adapt_mass_matrix: bool = False,
        warmup=True,
        method: str = "auto",
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
        # Public arguments first: bad input fails before the model or its data is touched.
        hand_clipped = grad_clip is not None and loglik_clip is not None
        if not hand_clipped and (
            grad_clip is not None or loglik_clip is not None or inv_mass is not None
            or warmup is False
        ):
            raise ValueError(_HAND_SETTINGS)
        self.grad_clip = check_positive(grad_clip, "grad_clip") if hand_clipped else None
        self.loglik_clip = check_positive(loglik_clip, "loglik_clip") if hand_clipped else None
        self._init_warmup(
            warmup, hand_clipped=hand_clipped, method=method,
            mcmc_asked=any(x is not None for x in (n_steps, path_length, step_size)),
        )
        if n_steps is not None and path_length is not None:
            raise ValueError("Give n_steps or path_length, not both.")
        if n_steps is not None:
            n_steps = check_int(n_steps, "n_steps")
        if path_length is not None:
            path_length = check_positive(path_length, "path_length")
        if step_size is not None:
            step_size = check_positive(step_size, "step_size")
        fixed = (grad_noise_multiplier is not None, loglik_noise_multiplier is not None)
        if fixed[0] != fixed[1]:
            raise ValueError(
                "Give both grad_noise_multiplier and loglik_noise_multiplier (fixed noise), "
                "or neither (noise calibrated from eps)."
            )
        self._fixed_noise = all(fixed)
        self.grad_noise_multiplier = (
            None
            if grad_noise_multiplier is None
            else check_positive(grad_noise_multiplier, "grad_noise_multiplier")
        )
        self.loglik_noise_multiplier = (
            None
            if loglik_noise_multiplier is None
            else check_positive(loglik_noise_multiplier, "loglik_noise_multiplier")
        )
        if budget_split is not None:
            if self._fixed_noise:
                raise ValueError(
                    "budget_split splits a calibrated budget; with fixed noise multipliers "
                    "there is nothing to split. Give one or the other."
                )
            budget_split = check_fraction(budget_split, "budget_split")
        self.budget_split = float(
            DEFAULT_BUDGET_SPLIT if budget_split is None else budget_split
        )
        self.target_accept = check_fraction(target_accept, "target_accept")
        for flag_name, flag in (
            ("adapt_step_size", adapt_step_size),
            ("adapt_mass_matrix", adapt_mass_matrix),
        ):
            if not isinstance(flag, bool | np.bool_):
                raise ValueError(f"{flag_name} must be True or False, got {flag!r}")
        self.adapt_step_size = bool(adapt_step_size)
        self.adapt_mass_matrix = bool(adapt_mass_matrix)
        if inv_mass is not None:
            try:
                inv_mass = np.asarray(inv_mass, dtype=float)
            except (TypeError, ValueError):
                inv_mass = None  # raised below, outside the handler, without NumPy's message
                bad_inv_mass = True
            else:
                bad_inv_mass = False
            if bad_inv_mass:
                raise ValueError("inv_mass must be an array of numbers")
            if inv_mass.ndim != 1 or not np.all(np.isfinite(inv_mass) & (inv_mass > 0)):
                raise ValueError("inv_mass must be a 1-d array of positive finite numbers")

        super().__init__(**shared_arguments(locals()))
        # Refuse a model without gradients now, before any chain reads the data.
        self.private_model.compile_gradients(count=self.clip_diagnostics is not None)
        self._check_warmup_model()
        dim = self.private_model.dim
        self._inv_mass_given = inv_mass is not None
        if inv_mass is None:
            inv_mass = np.ones(dim)
        inv_mass = np.asarray(inv_mass, dtype=float)
        if inv_mass.shape != (dim,) or not np.all(np.isfinite(inv_mass) & (inv_mass > 0)):
            raise ValueError(
                f"inv_mass must be {dim} positive finite numbers (the diagonal of M⁻¹)"
            )
        self._initial_inv_mass = inv_mass.copy()
        self.inv_mass = inv_mass.copy()
        # Whitened by the warm-up the posterior is close to N(0, I): longer steps fit.
        self.initial_step_size = (
            float(step_size)
            if step_size is not None
            else (0.5 if self._whiten else 0.25) / dim**0.25
        )
        if path_length is not None:
            ratio = path_length / self.initial_step_size
            if not ratio <= _MAX_N_STEPS:  # also inf: int(round(inf)) would raise
                raise ValueError(
                    f"path_length / step_size asks for more than {_MAX_N_STEPS} leapfrog steps "
                    "per iteration; use a shorter path or a larger step size."
                )
            n_steps = max(1, int(round(ratio)))
        if n_steps is None:
            n_steps = _WHITENED_N_STEPS if self._whiten else 10
        self.n_steps = int(n_steps)
        self.step_adapt = DualAverageAdaptation(
            self.initial_step_size, self.target_accept, _DA_GAMMA, _DA_K, _DA_T0
        )
        self.tune = True
        self.tune_done = 0
        self.window_start = 0
        self.window_ends: list[int] = []
        self._reset_window()
        if self._fixed_noise:
            self._check_one_iteration_fits()
        self._hmc_state: HMCState | None = None

    def public_settings(self) -> dict[str, Any]:
        return {
            **super().public_settings(),
            "grad_clip": "chosen privately per chain" if self._whiten else self.grad_clip,
            "loglik_clip": "chosen privately per chain" if self._whiten else self.loglik_clip,
            "warmup": None if self.warmup is None else repr(self.warmup),
            "n_steps": self.n_steps,
            "budget_split": None if self._fixed_noise else self.budget_split,
            "fixed_noise": self._fixed_noise,
            "target_accept": self.target_accept,
            "adapt_step_size": self.adapt_step_size,
            "adapt_mass_matrix": self.adapt_mass_matrix,
        }

    def __getstate__(self):
        # A copy starts its chains afresh (new start gradient, reserved by its setup_chain);
        # the cached per-datum log-likelihoods of the last chain never travel with it.
        state = super().__getstate__()
        state["_hmc_state"] = None
        return state

    def _chain_moves(self, iterations: int) -> float:
        return HMC_EFFICIENCY * int(iterations)

    def _mcmc_length(self, chains: int) -> tuple[int, int]:
        """A chain as long as its gradients stay informative.

        The noise of a released gradient (whitened coordinates, where the log posterior's
        gradient has size about 1) is ``2 b z_g`` with b² = c / n (``_clip_squared``: the
        clip the warm-up will set) and ``z_g² = (kL + 1) / (2 s μ)``: it stays below 1 while
        ``kL + 1 ≤ s μ n / (2 c)``.
        Public numbers only; 30 % of them tuning, at least 50 iterations and at most as
        many as make :data:`~pymc_dp.steps.warmup.MCMC_MIN_MOVES` draws at
        :data:`HMC_EFFICIENCY` (1539).
        """
        mu = self.budget_split * self._sampling_mu(chains)
        gradients = mu * self.private_model.n_data / (2 * self._clip_squared())
        # (noise given by hand: the budget bounds the iterations, as before the rule above)
        longest = 1000 if self._fixed_noise else int(np.ceil(MCMC_MIN_MOVES / HMC_EFFICIENCY))
        k = int(np.clip((gradients - 1) / self.n_steps, 50, longest))
        tune = max(20, int(0.3 * k))
        return k - tune, tune

    # ------------------------------------------------------------------ privacy plan
    def _mu_per_iteration(self) -> float:
        """μ of an iteration after the first: L gradients and one ratio."""
        if self._laplace:
            return 0.0
        return gaussian_mu(self.grad_noise_multiplier, self.n_steps) + gaussian_mu(
            self.loglik_noise_multiplier
        )

    def _mu_start(self) -> float:
        """μ of the one gradient released before the chain's first iteration."""
        return gaussian_mu(self.grad_noise_multiplier)

    def _mu_chain_start(self) -> float:
        return self._mu_warmup() + (0.0 if self._laplace else self._mu_start())

    def _calibrate(self, iterations: int, chains: int) -> None:
        self._choose_method(iterations, chains)
        mu = self._sampling_mu_allotment(chains)
        if self._laplace:
            return  # the warm-up spends the chain's whole share; the draws release nothing
        if self._fixed_noise:
            self._check_fixed_noise_plan(iterations, chains)
            return
        gradients = iterations * self.n_steps + 1
        s = self.budget_split
        # (kL+1)/(2 z_g²) ≤ s μ and k/(2 z_l²) ≤ (1 − s) μ, rounded to the safe side.
        self.grad_noise_multiplier = noise_multiplier_for_mu(gradients, s * mu)
        self.loglik_noise_multiplier = noise_multiplier_for_mu(iterations, (1 - s) * mu)

    def _chain_events(self, iterations: int) -> list[GaussianEvent]:
        if self._laplace:
            return self._warmup_events()
        return self._warmup_events() + self._clip_diagnostic_events() + [
            GaussianEvent(
                name="gradient",
                count=iterations * self.n_steps + 1,
                noise_multiplier=self.grad_noise_multiplier,
                sensitivity="2·grad_clip (ℓ2, replace-one)",
            ),
            GaussianEvent(
                name="log-likelihood ratio",
                count=iterations,
                noise_multiplier=self.loglik_noise_multiplier,
                sensitivity="2·loglik_clip·‖θ_L−θ‖ (replace-one)",
            ),
        ]

    # ------------------------------------------------------------------ tuning
    def _reset_window(self) -> None:
        dim = self.private_model.dim
        self.window_count = 0
        self.window_mean = np.zeros(dim)
        self.window_m2 = np.zeros(dim)

    def reset_tuning(self):
        """Reset step size and mass matrix to their initial values (PyMC calls this per chain)."""
        self.step_adapt = DualAverageAdaptation(
            self.initial_step_size, self.target_accept, _DA_GAMMA, _DA_K, _DA_T0
        )
        self.inv_mass = self._initial_inv_mass.copy()
        self.tune_done = 0
        self._reset_window()

    def _adapt_mass(self, q: np.ndarray) -> None:
        """Accumulate the draw; at a window end, re-estimate M⁻¹ (post-processing of draws)."""
        if not self.window_ends or not (
            self.window_start < self.tune_done <= self.window_ends[-1]
        ):
            return
        self.window_count += 1
        delta = q - self.window_mean
        self.window_mean = self.window_mean + delta / self.window_count
        self.window_m2 = self.window_m2 + delta * (q - self.window_mean)
        if self.tune_done in self.window_ends:
            w = self.window_count
            if w >= 3:
                var = self.window_m2 / (w - 1)
                if np.all(np.isfinite(var)) and np.all(var > 0):
                    # Shrink in log space toward the geometric mean of the variances
                    # (Stan shrinks toward 1e-3, which is no scale for posteriors of 10⁵
                    # data; a log-space shrink has no scale).
                    log_var = np.log(var)
                    log_var = (w * log_var + 5.0 * np.mean(log_var)) / (w + 5.0)
                    self.inv_mass = np.exp(log_var)
                    # New metric, new step size: restart dual averaging from the current η.
                    self.step_adapt = DualAverageAdaptation(
                        float(self.step_adapt.current(True)),
                        self.target_accept,
                        _DA_GAMMA,
                        _DA_K,
                        _DA_T0,
                    )
            self._reset_window()

    # ------------------------------------------------------------------ sampling
    def setup_chain(self, rng, tune: int, draws: int) -> None:
        self._tune_length = int(tune)
        super().setup_chain(rng, tune, draws)

    def _start_chain(self) -> None:
        self._hmc_state = None
        self._start_chain_accounting()
        self._start_warmup_chain()
        self.reset_tuning()
        self.tune = self._tune_length > 0
        self.window_ends = mass_matrix_windows(self._tune_length) if self.adapt_mass_matrix else []
        self.window_start = int(0.15 * self._tune_length)

    def _release_gradient(self, q: np.ndarray) -> np.ndarray:
        return noisy_gradient(
            self.rng,
            q,
            self._view.clipped_gradient if self._clip_counts is None else self._counted_gradient,
            clip_bound=self.grad_clip,
            noise_multiplier=self.grad_noise_multiplier,
        )

    def _counted_gradient(self, q, bound):
        """The clipped gradient with the clip diagnostics' count (one release: one count)."""
        clipped, prior_grad, count = self._view.clipped_gradient(q, bound, count=True)
        self._count_clipped(count)
        return clipped, prior_grad

    # The clip diagnostics count the gradients' clipped rows: L releases an iteration, and
    # the start gradient at the chain's first.
    def _clip_releases_per_iteration(self) -> int:
        return int(self.n_steps)

    def _clip_releases_at_start(self) -> int:
        return 1

    def _transition(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        if self._laplace:
            return self._laplace_transition(q)
        state = self._hmc_state
        if state is None:
            # First iteration of the chain: the warm-up (its releases), then the start
            # gradient (the "+1" of kL + 1) and ℓ(θ) cached at the start, which is not a
            # release: it only enters the clipped, noised ratio of the next proposal. (The
            # base class refuses a chain that something else moved between iterations.)
            start = self._warm_up(q)
            self._choose_settings()
            view = self._view
            u = view.u(start)
            grad = self._release_gradient(u)
            state = HMCState(q=u, loglik=view.loglik(u), logprior=view.logprior(u), grad=grad)
        view = self._view
        tuning = bool(self.tune)
        step_size = float(self.step_adapt.current(tuning))
        state, info = hmc_transition(
            self.rng,
            state,
            ratio_fn=view.clipped_ratio,
            logprior_fn=view.logprior,
            grad_fn=self._release_gradient,
            step_size=step_size,
            n_steps=self.n_steps,
            inv_mass=self.inv_mass,
            loglik_clip=self.loglik_clip,
            loglik_noise_multiplier=self.loglik_noise_multiplier,
        )
        self._hmc_state = state
        accept = float(np.exp(min(info.log_accept, 0.0))) if np.isfinite(info.log_accept) else 0.0
        if self.adapt_step_size:
            self.step_adapt.update(accept, tuning)
        if tuning:
            self.tune_done += 1
            if self.adapt_mass_matrix:
                self._adapt_mass(state.q)
        adapt_stats = self.step_adapt.stats()
        stats = {
            "accept": accept,
            "accepted": float(info.accepted),
            "diverging": bool(info.diverging),
            "step_size": step_size,
            "step_size_bar": float(adapt_stats["step_size_bar"]),
            "n_steps": self.n_steps,
            "grad_clip": self.grad_clip,
            "loglik_clip": self.loglik_clip,
            "grad_noise_multiplier": self.grad_noise_multiplier,
            "loglik_noise_multiplier": self.loglik_noise_multiplier,
        }
        return view.theta(state.q), stats

    def _choose_settings(self) -> None:
        """After the warm-up: its clip bounds and metric, unless given.

        Whitened, both clip bounds are the released quantile of ‖Bᵀ∇ℓ_j‖ (a datum's
        gradient norm, and its log-likelihood slope per unit of ‖u' − u‖), and the mass
        matrix is the identity. With clip bounds given by hand the chain stays in θ and
        the mass matrix is the warm-up's posterior variances unless ``inv_mass`` was given.
        """
        if self.warmup is None:
            return
        if self._view.whitened:
            clip = float(self._warmup_result.clip)
            with self._changing_settings():
                self.grad_clip = self.loglik_clip = clip
        elif not self._inv_mass_given:
            self.inv_mass = self._warmup_variances()
