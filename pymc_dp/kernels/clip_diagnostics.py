"""Clip diagnostics: noisy counts of the terms a sampler clipped, window by window.

Small functions of arrays and a generator; nothing here knows PyMC or the accountant
(docs/steps.md, "Clip diagnostics"). A chain's sampling iterations (after tuning) are split
into ``k`` contiguous windows from public numbers only (:func:`diagnostic_windows`). At the
last iteration of window ``w`` the chain releases

    ``S_w = Σ_{t ∈ w} c_t + N(0, (z · T_w)²)``,

where ``c_t`` is the number of per-datum terms the step's clipped sums clipped at
iteration ``t`` (a term is clipped when it is larger than its bound or not finite:
:func:`~pymc_dp.kernels.clipping.clipped_count`, :func:`~pymc_dp.kernels.clipping.clipped_row_count`),
and ``T_w`` is the sensitivity of that sum.

Sensitivity
-----------
Each clipped-sum release of the step holds at most one term of a given person (one row of
the data, or of a batch drawn without replacement), so changing that person's row, under
replace-one (the steps' neighbouring relation), flips at most one clipped indicator per release:
the count of one release has sensitivity 1. A window's total therefore has sensitivity
``T_w`` = the most clipped-sum releases the window can hold (:func:`window_sensitivity`):
one per iteration for the DP penalty, the minibatch penalty and DP Barker, ``L`` per
iteration for DP HMC's gradients (plus the start gradient if the window holds the chain's
first iteration). It is an upper bound: a release skipped on public grounds (a proposal
rejected before the data is read) only lowers the count. The chain's states and proposals, at
which ``c_t`` is evaluated, depend on the data only through earlier (accounted) releases,
so the window releases compose adaptively with the sampler's. Noise ``z · T_w`` makes each window a Gaussian
mechanism of multiplier ``z`` (μ = 1/(2z²)); ``k`` windows cost ``k/(2z²)``. Minibatch
steps count on a batch of their own, drawn afresh at each move, never on the batch the
release reads (whose secrecy its amplification by subsampling needs:
:func:`~pymc_dp.kernels.minibatch_penalty.fresh_batch_clipped_count`); no amplification
is claimed for the count (it is charged as a plain Gaussian release on the whole data set;
docs/steps.md, "Clip diagnostics", says why the charges add up).

The released fraction is ``S_w / m_w`` with ``m_w`` = the terms the window's releases
examined (n or the batch size per release, times the releases made, both public): its
noise sd is ``z · T_w / m_w``, ``z / n`` (``z / b``) when every release was made.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np

from pymc_dp.validation import check_positive

__all__ = [
    "COUNT_SENSITIVITY",
    "WindowRelease",
    "WindowedClipCounts",
    "check_windows",
    "diagnostic_windows",
    "window_sensitivity",
]

#: The sensitivity of one release's count of clipped terms: one person flips at most one
#: indicator (replace-one).
COUNT_SENSITIVITY = 1


def check_windows(windows, draws: int | None = None) -> int:
    """``windows`` as an int ≥ 1 (and ≤ ``draws`` when given), else a ``ValueError``.

    Examples
    --------
    >>> check_windows(4, draws=100)
    4
    """
    if isinstance(windows, bool) or not isinstance(windows, int | np.integer):
        raise ValueError(
            f"clip_diagnostics windows must be an int >= 1 (windows per chain), got "
            f"{windows!r}"
        )
    windows = int(windows)
    if windows < 1:
        raise ValueError(f"clip_diagnostics windows must be >= 1, got {windows}")
    if draws is not None and windows > int(draws):
        raise ValueError(
            f"clip_diagnostics asks for {windows} windows per chain, more than its {draws} "
            "draws: every window needs at least one iteration. Ask for fewer windows or more "
            "draws. Nothing was read or reserved."
        )
    return windows


def diagnostic_windows(tune: int, draws: int, windows: int) -> tuple[tuple[int, int], ...]:
    """The ``windows`` windows of a chain as ``(start, stop)`` iteration indices.

    Iterations are counted from 0 at the chain's first (tuning) iteration; the windows
    split the ``draws`` sampling iterations ``[tune, tune + draws)`` into contiguous parts
    whose lengths differ by at most one (the longer ones first). Public numbers only.

    Examples
    --------
    >>> diagnostic_windows(10, 7, 3)
    ((10, 13), (13, 15), (15, 17))
    """
    windows = check_windows(windows, draws)
    sizes = [len(part) for part in np.array_split(np.arange(int(draws)), windows)]
    edges = int(tune) + np.concatenate([[0], np.cumsum(sizes)])
    return tuple((int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]))


def window_sensitivity(
    start: int, stop: int, releases_per_iteration: int, releases_at_start: int = 0
) -> int:
    """``T_w``: the most clipped-sum releases iterations ``[start, stop)`` can make.

    ``releases_at_start`` are made once, at the chain's first iteration (DP HMC's start
    gradient): counted if the window holds iteration 0.

    Examples
    --------
    >>> window_sensitivity(20, 30, 3, releases_at_start=1)  # 10 iterations of 3 gradients
    30
    """
    extra = releases_at_start if start == 0 else 0
    return COUNT_SENSITIVITY * ((stop - start) * releases_per_iteration + extra)


@dataclass(frozen=True)
class WindowRelease:
    """One window's release (public numbers only)."""

    window: int  # 0-based
    iterations: int
    count: float  # the noisy number of clipped terms
    terms: int  # the terms the window's releases examined
    noise_sd: float  # of ``count``

    @property
    def fraction(self) -> float:
        """The noisy fraction of clipped terms (NaN if no release was made)."""
        return self.count / self.terms if self.terms else math.nan

    @property
    def fraction_sd(self) -> float:
        """The noise sd of :attr:`fraction`."""
        return self.noise_sd / self.terms if self.terms else math.nan


class WindowedClipCounts:
    """One chain's clip diagnostics: counts clipped terms in its windows, releases each
    window's total with noise at the window's last iteration.

    The running count is private: it is never shown (not in ``repr``) and leaves only
    through :meth:`end`, noised.

    Parameters
    ----------
    windows : tuple of (int, int)
        :func:`diagnostic_windows`.
    noise_multiplier : float
        z: each window's noise sd is ``z · T_w``.
    releases_per_iteration, releases_at_start : int
        For :func:`window_sensitivity`.
    terms_per_release : int
        The per-datum terms one release clips (n, or the batch size).

    Examples
    --------
    >>> counts = WindowedClipCounts(diagnostic_windows(0, 2, 1), noise_multiplier=1e-9,
    ...                             releases_per_iteration=1, terms_per_release=10)
    >>> rng = np.random.default_rng(0)
    >>> for t, c in enumerate([3, 5]):
    ...     counts.begin(t)
    ...     counts.add(c)
    ...     out = counts.end(t, rng)
    >>> round(out.fraction, 6), out.terms
    (0.4, 20)
    """

    __slots__ = ("_windows", "_z", "_per_iteration", "_at_start", "_terms", "_current",
                 "_count", "_releases")

    def __init__(self, windows, *, noise_multiplier: float, releases_per_iteration: int,
                 terms_per_release: int, releases_at_start: int = 0):
        self._windows = tuple(windows)
        self._z = check_positive(noise_multiplier, "noise_multiplier")
        self._per_iteration = int(releases_per_iteration)
        self._at_start = int(releases_at_start)
        self._terms = int(terms_per_release)
        self._current: int | None = None  # the window of the running iteration, if any
        self._count = 0
        self._releases = 0

    def __repr__(self) -> str:
        return f"WindowedClipCounts({len(self._windows)} windows)"

    def begin(self, iteration: int) -> None:
        """Start iteration ``iteration`` (0-based): count only inside a window."""
        self._current = next(
            (w for w, (a, b) in enumerate(self._windows) if a <= iteration < b), None
        )

    @property
    def counting(self) -> bool:
        """Whether the running iteration lies in a window (public: its index alone)."""
        return self._current is not None

    def add(self, clipped: int, releases: int = 1) -> None:
        """Record ``releases`` clipped-sum releases that clipped ``clipped`` terms in all."""
        if self._current is None:
            return
        self._count += int(clipped)
        self._releases += int(releases)

    def end(self, iteration: int, rng: np.random.Generator) -> WindowRelease | None:
        """After iteration ``iteration``: the window's release if it was its last, else None."""
        w = self._current
        self._current = None
        if w is None or iteration != self._windows[w][1] - 1:
            return None
        start, stop = self._windows[w]
        sensitivity = window_sensitivity(start, stop, self._per_iteration, self._at_start)
        if self._releases > sensitivity:  # (the bound the noise was set for)
            raise RuntimeError(
                "clip diagnostics: a window made more clipped-sum releases than its "
                "sensitivity allows; nothing was released"
            )
        noise_sd = self._z * sensitivity
        count = float(self._count) + noise_sd * rng.standard_normal()  # the release
        release = WindowRelease(w, stop - start, count, self._releases * self._terms, noise_sd)
        self._count = 0
        self._releases = 0
        return release
