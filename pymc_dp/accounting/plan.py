"""Plans: how a chain's share of the budget is spent, decided from public quantities only.

:class:`WarmupPlan` splits the part of a chain's μ that a private warm-up spends
(:mod:`pymc_dp.kernels.warmup`) over its iterations and releases. Everything here is a
function of public quantities (the budget and its split), so a plan can be shown before any
data is read. :mod:`pymc_dp.steps.warmup` runs it in every chain of the Gaussian steps.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, replace

import numpy as np

from pymc_dp.accounting.events import GaussianEvent
from pymc_dp.accounting.gaussian import noise_multiplier_for_mu
from pymc_dp.kernels.clip_diagnostics import check_windows

__all__ = ["ClipDiagnostics", "DEFAULT_CLIP_DIAGNOSTICS_SHARE", "WarmupPlan"]

#: The share of the Gaussian μ a budget buys that clip diagnostics spend by default: 5 %,
#: so the sampler keeps 95 % (its noise sd grows by 1/√0.95 − 1 ≈ 2.6 %; with the default
#: warm-up's 50 % it keeps 45 % instead of 50 %: √(0.5/0.45) − 1 ≈ 5.4 %).
DEFAULT_CLIP_DIAGNOSTICS_SHARE = 0.05


@dataclass(frozen=True)
class WarmupPlan:
    """The warm-up's releases for one chain, as a share of the chain's μ.

    The defaults are the library's own (:data:`pymc_dp.steps.warmup.DEFAULT_WARMUP`), so
    ``WarmupPlan(iterations=24)`` changes the number of iterations and nothing else.

    Parameters
    ----------
    share : float
        Share of the chain's μ spent on warm-up, in (0, 1).
    iterations : int
        Newton iterations; each releases one histogram of per-datum gradient norms, one
        clipped gradient sum, one histogram of per-datum Hessian norms and one clipped
        Hessian sum.
    quantile : float
        The quantile of the per-datum gradient norms that sets the clip bound.
    clip_margin : float
        The clip bound is this multiple of the released quantile. Where data or budget are
        small the noisy histogram cannot locate a tail as thin as ``1 − quantile`` and
        returns a lower quantile; clipping there biased dispersion and shape parameters
        (negative binomial α, a Gamma shape, Student-t ν) by several posterior sds. A
        margin of 1.5 costs 1.5 times the gradient noise and removed most of that bias.
    growth : float
        Iteration t ≥ 1 gets a share of the warm-up's μ proportional to ``growth**t``:
        early iterations only need to get close, the last one sets the mode. The first
        iteration, which only measures the scales that set the metric of all others, gets
        as much as the last.
    split : tuple of four floats
        Shares of each iteration's μ for the gradient-norm histogram, the gradient, the
        Hessian-norm histogram and the Hessian, in the order of :meth:`events`. The
        Hessian-norm share may be 0: the histogram is then not released, and the Hessian's
        clip bound comes from the gradient's (:meth:`without_hessian_norms`, which the
        steps use for a likelihood with a kink in every row).
    replicates : int
        Outcomes simulated from the model per person and iteration (an even number:
        antithetic pairs) to take the clipping bias out of the gradient release
        (:mod:`pymc_dp.kernels.score_correction`); 0 releases the plain clipped sum. Costs
        no budget (the release keeps its sensitivity) and one pass over the data per
        replicate; models whose outcomes cannot be simulated row by row run without.
    """

    share: float = 0.5
    iterations: int = 16
    quantile: float = 0.999
    clip_margin: float = 1.5
    growth: float = 1.3
    split: tuple[float, float, float, float] = (0.05, 0.6, 0.05, 0.3)
    replicates: int = 16

    def __post_init__(self):
        if not 0.0 < self.share < 1.0:
            raise ValueError("the warm-up share must lie in (0, 1)")
        if isinstance(self.iterations, bool) or not (
            isinstance(self.iterations, int) and self.iterations >= 1
        ):
            raise ValueError("warm-up iterations must be an int >= 1")
        if not 0.5 <= self.quantile < 1.0:
            raise ValueError("the clip quantile must lie in [0.5, 1)")
        if not (math.isfinite(self.clip_margin) and self.clip_margin >= 1.0):
            raise ValueError("clip_margin must be a finite number >= 1")
        if not (math.isfinite(self.growth) and self.growth >= 1.0):
            raise ValueError("growth must be a finite number >= 1")
        if len(self.split) != 4 or not (
            all(math.isfinite(s) and s >= 0 for s in self.split)
            and all(self.split[k] > 0 for k in (0, 1, 3))
        ):
            raise ValueError(
                "split must be four shares, positive but for the Hessian-norm histogram's "
                "(which may be 0)"
            )
        if isinstance(self.replicates, bool) or not (
            isinstance(self.replicates, int) and self.replicates >= 0 and self.replicates % 2 == 0
        ):
            raise ValueError("replicates must be an even int >= 0 (antithetic pairs)")

    @property
    def hessian_norms(self) -> bool:
        """Whether each iteration releases a histogram of per-datum Hessian norms."""
        return self.split[2] > 0

    def without_hessian_norms(self) -> WarmupPlan:
        """This plan with the Hessian-norm histogram's share moved to the Hessian's release.

        For a likelihood whose rows each bend at a point of their own (a quantile
        regression's, a Laplace likelihood's: :func:`pymc_dp.model.kinks.model_kinks`), every
        row's Hessian is zero but at its kink, and a quantile of their norms says nothing.
        The warm-up then differences clipped gradients several posterior sds apart, whose
        norms the gradient's clip bound already bounds. Same μ in all.
        """
        a, b, c, d = self.split
        return replace(self, split=(a, b, 0.0, c + d))

    def mu(self, chain_mu: float) -> float:
        """The μ the warm-up of one chain spends."""
        return self.share * chain_mu

    def noise_multipliers(self, chain_mu: float) -> np.ndarray:
        """Rows ``(z_norms, z_gradient, z_hessian_norms, z_hessian)``, one per iteration, spending
        :meth:`mu` in all (each release costs 1/(2z²))."""
        weights = self.growth ** np.arange(self.iterations)
        weights[0] = weights[-1]  # the first iteration sets the metric the others work in
        per_iteration = self.mu(chain_mu) * weights / weights.sum()
        split = np.asarray(self.split) / sum(self.split)
        with np.errstate(divide="ignore"):  # (a share of 0: no release, z = ∞)
            return np.sqrt(1.0 / (2.0 * np.outer(per_iteration, split)))

    def mode_noise(self, chain_mu: float, dim: int) -> float:
        """About how far the warm-up's mode lies from the posterior's, in posterior sds,
        on a parameter that m people inform, times √m: the mode is off by about this
        divided by √m (public: reads no data).

        The mode is the precision-weighted mean of the Newton targets of the last
        iterations, each off by its gradient release's noise 2Cz in the posterior's metric.
        There one person's gradient has squared norm about χ²_dim / m on a parameter m
        people inform (the others' gradients do not touch it): the clip bound C is
        ``clip_margin`` times the ``quantile`` of √χ²_dim, over √m. The later half of
        the iterations are counted, the ones the mean usually averages; so the figure is
        ``2 · clip_margin · √χ²_dim(quantile) · z``, z the noise multiplier of those
        releases together. A guide, not a bound: a model whose per-person gradients have
        heavier tails than a Gaussian's is clipped harder and noisier; one whose
        parameters' information sits in few people (a small group's intercept, the
        coefficient of a rare condition) has the small m.
        """
        from scipy.stats import chi2

        z_grad = self.noise_multipliers(chain_mu)[:, 1]
        later = z_grad[len(z_grad) // 2:]
        z = float(np.sum(later**-2.0) ** -0.5)
        return 2.0 * self.clip_margin * float(np.sqrt(chi2.ppf(self.quantile, dim))) * z

    def events(self, chain_mu: float) -> list[GaussianEvent]:
        """The warm-up's releases of one chain as ledger events, one per release."""
        names = (
            # (k histograms stacked in one release — the first metric's coordinate scales,
            # a model's blocks of group parameters — have √(2k), and √k times the noise)
            ("warm-up norm histogram", "√2 per histogram, √(2k) for k stacked (replace-one)"),
            ("warm-up clipped gradient", "2·clip (replace-one)"),
            ("warm-up Hessian-norm histogram", "√2 (replace-one)"),
            ("warm-up clipped Hessian", "2·clip (Frobenius, all entries; replace-one)"),
        )
        return [
            GaussianEvent(name=name, count=1, noise_multiplier=float(z), sensitivity=sens)
            for row in self.noise_multipliers(chain_mu)
            for (name, sens), z in zip(names, row)
            if np.isfinite(z)  # (a share of 0 releases nothing)
        ]


@dataclass(frozen=True)
class ClipDiagnostics:
    """An opt-in private release of how much a sampler clipped (``clip_diagnostics=``).

    Each chain's sampling iterations are split into ``windows`` contiguous windows; at the
    end of each the chain releases the number of per-datum terms its clipped sums clipped
    in that window, with Gaussian noise (sensitivity: the window's clipped-sum releases;
    :mod:`pymc_dp.kernels.clip_diagnostics`). The noise is set from public numbers so
    that the diagnostics of a run cost ``share`` of the Gaussian μ its budget (ε, δ) buys;
    the sampler's noise is calibrated for the rest, and the whole run still costs at most
    (ε, δ). Read the result with :func:`pymc_dp.results.clipped_fractions`.

    Parameters
    ----------
    windows : int
        Windows per chain, ``1 ≤ windows ≤ draws``.
    share : float
        The share of the run's Gaussian μ (for the DP penalty and DP HMC, exactly the
        share of the μ the run spends) that the diagnostics spend, in (0, 1); default 5 %.

    Examples
    --------
    >>> diag = ClipDiagnostics(windows=4)
    >>> round(diag.noise_multiplier(chain_mu=0.02), 2)  # 4 windows at μ = 0.05 · 0.02
    44.72
    >>> [(e.name, e.count) for e in diag.events(chain_mu=0.02)]
    [('clip diagnostics', 4)]
    """

    windows: int = 4
    share: float = DEFAULT_CLIP_DIAGNOSTICS_SHARE

    def __post_init__(self):
        object.__setattr__(self, "windows", check_windows(self.windows))
        share = self.share
        if isinstance(share, bool) or not isinstance(share, int | float | np.floating) or not (
            0.0 < float(share) < 1.0
        ):
            raise ValueError(f"clip_diagnostics share must lie in (0, 1), got {share!r}")
        object.__setattr__(self, "share", float(share))

    def mu(self, chain_mu: float) -> float:
        """The μ one chain's diagnostics spend, of a chain allotment ``chain_mu``."""
        return self.share * chain_mu

    def noise_multiplier(self, chain_mu: float) -> float:
        """z of every window: ``windows`` releases of multiplier z cost :meth:`mu`."""
        return noise_multiplier_for_mu(self.windows, self.mu(chain_mu))

    def events(self, chain_mu: float) -> list[GaussianEvent]:
        """One chain's diagnostic releases as ledger events."""
        return [
            GaussianEvent(
                name="clip diagnostics",
                count=self.windows,
                noise_multiplier=self.noise_multiplier(chain_mu),
                sensitivity="the window's clipped-sum releases (count of clipped terms, "
                "1 per release; replace-one)",
            )
        ]


def clip_diagnostics_setting(value) -> ClipDiagnostics | None:
    """``clip_diagnostics=`` as a :class:`ClipDiagnostics` (None: off); an int is the
    number of windows. Public arguments only: raises ``ValueError`` on bad input."""
    if value is None:
        return None
    if isinstance(value, ClipDiagnostics):
        return value
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(
            "clip_diagnostics must be None (off), an int >= 1 (windows per chain) or a "
            f"pymc_dp.ClipDiagnostics, got {value!r}"
        )
    return ClipDiagnostics(windows=int(value))
