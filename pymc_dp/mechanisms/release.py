"""The data holder's side: apply a DP mechanism to a statistic and keep what was done.

A release function takes a statistic of confidential data, adds noise, and returns a
:class:`Release`: the noisy value together with every parameter of the mechanism that
produced it (kind, sensitivity, ε or σ, noise scale). The analyst's likelihood
(:mod:`pymc_dp.mechanisms.likelihood`) reads its noise parameters from that object, so the
noise that was added and the noise that is modelled cannot drift apart, and
:attr:`Release.event` is the ledger entry that :func:`ledger_of` gathers for the privacy
report.

Mechanisms (docs/algorithms.md, "Inference from privatized releases"):

* Laplace: ``s + Lap(Δ₁/ε)`` per entry, ε-DP for a statistic of ℓ1 sensitivity Δ₁;
* Gaussian: ``s + N(0, σ²)`` per entry, σ = z·Δ₂ (μ = 1/(2z²) in the Gaussian accountant);
* infection curve (Xiong, Ju & Zhang, Prop 4): ``s_i ~ Binomial(n_s, (I(t_i)+m)/(K+2m))`` at
  L time points, ε = n_s·L/m.

Bounds that make a sensitivity finite (:func:`clamp`) are public inputs: they must not be
computed from the confidential data.

Errors never show the confidential data: entries that are not numbers are refused by their
type, out-of-range values without saying which or how many.

Noise that rounding would erase
-------------------------------
In floating point ``s + noise == s`` once the noise is below the spacing of the doubles at
``s``: such a release is the exact statistic, whatever ε the accounting says. The Laplace
and Gaussian releases therefore refuse a noise scale below ``2**20`` spacings of the
statistic's magnitude (then the chance that an entry's noise is below one spacing is under
10⁻⁶). That magnitude is taken from public inputs only, never from the value, because a
refusal that depended on the value would itself disclose something about it (whether it
is large), without noise: it is the declared ``bound`` on the entries when given (the
statistic is then clamped to ``[-bound, bound]``, which never increases its sensitivity),
else the sensitivity. A statistic much larger than its sensitivity (a sum over many rows,
a count) should declare its bound, e.g. ``n · max(|lower|, |upper|)`` for a sum of
clamped values. Independently of that, a release whose value lies beyond ``2**32`` noise
scales is refused after the noise is added: that check reads the released value only, so it
is post-processing, and it catches a statistic far larger than its declared scale.

Note on randomness. Noise comes from the ``rng`` you pass. A release is private only if that
generator is unpredictable to the adversary: use ``np.random.default_rng()`` (fresh OS
entropy) for real releases, and integer seeds only for tests and simulations. Like most
research code, the samplers are NumPy's floating-point ones, not a hardened
(snapping / discrete) implementation.
"""

from __future__ import annotations

import math
import numbers

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from pymc_dp.accounting.events import Event, GaussianEvent, LaplaceEvent, PureDPEvent
from pymc_dp.validation import check_delta, check_epsilon, check_int, check_positive

__all__ = [
    "LAPLACE",
    "GAUSSIAN",
    "INFECTION_CURVE",
    "Release",
    "clamp",
    "gaussian_release",
    "infection_curve_release",
    "laplace_release",
    "ledger_of",
]

LAPLACE = "laplace"
GAUSSIAN = "gaussian"
INFECTION_CURVE = "infection_curve"
_KINDS = (LAPLACE, GAUSSIAN, INFECTION_CURVE)


#: A noise scale must be at least this many float spacings of the statistic's (public)
#: magnitude (see the module notes).
NOISE_RESOLUTION = 2.0**20
#: A noise scale must leave this factor of room below the largest float, so that draws
#: (Laplace tails reach ~700 scales with probability 1e-304) stay finite.
_NOISE_HEADROOM = 2.0**10

# dtype kinds of real numbers (bool, signed, unsigned, float); what the others hold, by name
_REAL_KINDS = "biuf"
_KIND_NAMES = {
    "U": "strings", "S": "bytes", "c": "complex numbers", "M": "datetimes",
    "m": "timedeltas", "O": "Python objects", "V": "raw records",
}


def _numeric(data, name: str) -> np.ndarray:
    """``data`` as a new float array, or a ValueError that names its type, never an entry.

    NumPy's own conversion errors quote the first bad entry ("could not convert string to
    float: '...'") or the data's shape; they are caught and replaced, outside the handler
    so that the replaced error is not even chained to the new one.
    """
    failed = None
    try:
        arr = np.asarray(data)
        if arr.dtype.kind in _REAL_KINDS:
            return np.array(arr, dtype=float)
        failed = _KIND_NAMES.get(arr.dtype.kind, "entries that are not real numbers")
        if arr.dtype.kind == "O":
            try:  # e.g. Fractions or Decimals: convertible, so fine
                return np.array(arr, dtype=float)
            except (TypeError, ValueError, OverflowError):
                pass
    except (TypeError, ValueError, OverflowError):
        failed = "entries that are not real numbers, or rows of unequal length"
    raise ValueError(f"{name} must be an array of real numbers; it holds {failed}")


def _noise_scale(scale, sensitivity: float, bound: float | None, what: str) -> float:
    """Refuse a noise scale that overflows or that rounding would erase (module notes).

    Every input is public: the scale, the sensitivity and the declared bound.
    """
    if not (math.isfinite(scale * _NOISE_HEADROOM) and scale > 0):
        raise ValueError(
            f"The {what} {scale:.3g} is too large for floating point (its draws could "
            "overflow); use a larger epsilon or a smaller sensitivity."
        )
    magnitude = sensitivity if bound is None else bound
    floor = NOISE_RESOLUTION * float(np.spacing(magnitude))
    if scale < floor:
        source = "the sensitivity" if bound is None else "the declared bound"
        raise ValueError(
            f"The {what} {scale:.3g} is below {floor:.3g}, 2**20 float spacings at "
            f"{source} {magnitude:.3g}: rounding would erase the noise and release the "
            "statistic nearly exactly. Use more noise (a larger sigma or noise_multiplier, "
            "a smaller epsilon)."
        )
    return scale


def _checked_release(noisy: np.ndarray, scale: float) -> np.ndarray:
    """``noisy``, unless an entry is so large that rounding erased most of its noise.

    The check reads the released value only (post-processing: it costs no privacy and
    reveals nothing the release would not). An entry beyond ``2**32`` noise scales keeps
    fewer than 20 bits of its noise, so an unbounded statistic far larger than its
    sensitivity (a sum of n values declared with sensitivity 1, say) is refused here
    rather than returned nearly exactly.
    """
    if not np.all(np.abs(noisy) <= scale * NOISE_RESOLUTION * 2.0**12):
        raise ValueError(
            "The released statistic is more than 2**32 noise scales from zero, where "
            "rounding erases most of the noise. Release a rescaled statistic (a mean "
            "instead of a sum, say) with its own sensitivity, or declare bound= (a public "
            "bound on the entries). Nothing is returned; the values are not shown."
        )
    return noisy


def _bounded(s: np.ndarray, bound: float | None) -> np.ndarray:
    """The statistic clamped to the declared ``[-bound, bound]`` (entry-wise; no check of s)."""
    return s if bound is None else np.clip(s, -bound, bound)


def _generator(rng) -> np.random.Generator:
    """The generator to draw noise from; ``rng`` is required (no hidden global state)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        raise ValueError(
            "rng is required: pass np.random.default_rng() for a real release "
            "(an integer seed makes the noise reproducible, which is for tests only)"
        )
    if isinstance(rng, bool) or not isinstance(rng, numbers.Integral | np.random.SeedSequence):
        raise ValueError(
            f"rng must be a numpy Generator, a SeedSequence or an int, got a {type(rng).__name__}"
        )
    return np.random.default_rng(rng)


def _as_statistic(value, name: str = "value") -> np.ndarray:
    arr = _numeric(value, name)  # a copy: the caller's array is left alone
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        # Do not echo the confidential values.
        raise ValueError(f"{name} contains NaN or infinite entries")
    return arr


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, kw_only=True, eq=False)
class Release:
    """One privatized release: the noisy value and the mechanism that produced it.

    Made by :func:`laplace_release`, :func:`gaussian_release` or
    :func:`infection_curve_release`; read by the mechanism likelihoods
    (``LaplaceMechanism.from_release`` etc.). The value is public; nothing confidential is
    stored.

    Attributes
    ----------
    name : str
        Name of the release (used for the ledger entry).
    kind : {"laplace", "gaussian", "infection_curve"}
        The mechanism.
    value : numpy.ndarray
        The released (noisy) value, read-only.
    noise_scale : float or None
        Laplace scale ``b = Δ/ε`` or Gaussian standard deviation σ; None for the infection
        curve (its noise is binomial).
    sensitivity : float or None
        ℓ1 (Laplace) or ℓ2 (Gaussian) sensitivity of the statistic, under
        ``neighbouring``. None for the infection curve, whose sensitivity is fixed
        (one individual changes each I(t) by at most 1).
    epsilon : float or None
        ε of the release (Laplace, infection curve) or the ε the Gaussian noise was
        calibrated for (None if σ was given directly).
    delta : float or None
        δ the Gaussian noise was calibrated for, else None.
    population, n_trials, m : float or None
        Infection-curve parameters K, n_s and m (Xiong, Ju & Zhang, Prop 4).
    neighbouring : str
        ``"replace_one"`` or ``"add_remove"``: the relation ``sensitivity`` refers to.
    """

    name: str
    kind: str
    value: np.ndarray
    noise_scale: float | None = None
    sensitivity: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    population: float | None = None
    n_trials: int | None = None
    m: float | None = None
    neighbouring: str = "replace_one"
    _event: Event = field(init=False, repr=False)

    _FIELDS = ("noise_scale", "sensitivity", "epsilon", "delta", "population", "n_trials", "m",
               "neighbouring")

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {self.kind!r}")
        object.__setattr__(self, "value", _frozen(self.value))
        object.__setattr__(self, "_event", self._make_event())

    def _make_event(self) -> Event:
        common = {"name": self.name, "count": 1, "neighbouring": self.neighbouring}
        if self.kind in (LAPLACE, GAUSSIAN):
            return _noise_event(self.kind, common, self.epsilon, self.noise_scale,
                                self.sensitivity)
        return PureDPEvent(
            **common,
            epsilon=self.epsilon,
            description=(
                f"binomial infection-curve mechanism (Xiong, Ju & Zhang Prop 4): "
                f"L={self.value.size}, n_trials={self.n_trials}, m={self.m}"
            ),
        )

    @property
    def event(self) -> Event:
        """The ledger entry of this release (an :class:`~pymc_dp.accounting.events.Event`)."""
        return self._event

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the released value."""
        return self.value.shape

    @classmethod
    def from_dict(cls, data: Mapping) -> Release:
        """Inverse of :meth:`to_dict`: how an analyst loads a published release.

        Examples
        --------
        >>> rel = laplace_release([1.0, 2.0], sensitivity=1.0, epsilon=0.5, rng=0, name="m")
        >>> again = Release.from_dict(rel.to_dict())
        >>> again.event == rel.event and bool((again.value == rel.value).all())
        True
        """
        data = dict(data)
        unknown = set(data) - set(cls._FIELDS) - {"name", "kind", "value"}
        if unknown:
            raise ValueError(f"unknown release fields: {sorted(unknown)}")
        return cls(**data)

    def to_dict(self) -> dict:
        """A JSON-serialisable description (value as a nested list)."""
        out = {
            "name": self.name,
            "kind": self.kind,
            "value": self.value.tolist(),
            "neighbouring": self.neighbouring,
        }
        for key in self._FIELDS:
            if key == "neighbouring":
                continue
            val = getattr(self, key)
            if val is not None:
                out[key] = val
        return out


def _noise_event(kind: str, common: dict, epsilon, noise_scale, sensitivity) -> Event:
    """The ledger entry of one Laplace or Gaussian release (known before it is made)."""
    if kind == LAPLACE:
        return LaplaceEvent(**common, epsilon=epsilon, sensitivity=sensitivity)
    return GaussianEvent(**common, noise_multiplier=noise_scale / sensitivity,
                         sensitivity=sensitivity)


def _reserve(budget, kind: str, name: str, neighbouring: str, epsilon, scale, sensitivity):
    """Reserve a release's event in ``budget`` (a :class:`pymc_dp.Budget`) before its
    value is read; refused releases read nothing."""
    from pymc_dp.accounting.budget import Budget

    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a pymc_dp.Budget, got {type(budget).__name__}")
    common = {"name": name, "count": 1, "neighbouring": neighbouring}
    budget.reserve([_noise_event(kind, common, epsilon, scale, sensitivity)],
                   owner=f"{kind}_release")


def clamp(data, *, lower, upper, clip: bool = True) -> np.ndarray:
    """Clamp data to public bounds, or check that it lies within them.

    Bounded data is what gives a sum or a mean a finite sensitivity. The bounds are part of
    the privacy guarantee: they must be fixed in advance (or from public knowledge), never
    computed from the confidential data.

    Parameters
    ----------
    data : array_like
        Confidential values.
    lower, upper : float or array_like
        Public bounds, broadcast against ``data`` (e.g. one pair per column). Required.
    clip : bool, default True
        True: values outside ``[lower, upper]`` are moved to the nearest bound. False
        (clamping off): the data is checked instead, and any value outside the bounds is
        an error; this is for data whose range is guaranteed by design.

    Returns
    -------
    numpy.ndarray
        The clamped data (a new float array).

    Raises
    ------
    ValueError
        If a bound is missing, not finite, or ``lower >= upper``; if ``data`` holds
        anything but real numbers, or NaN; or, with ``clip=False``, if any value is outside
        the bounds. Messages never contain the data values, nor how many are out of range.

    Examples
    --------
    >>> clamp([-3.0, 0.5, 12.0], lower=-1, upper=1)
    array([-1. ,  0.5,  1. ])
    >>> clamp([0.2, 0.9], lower=0, upper=1, clip=False)
    array([0.2, 0.9])
    >>> clamp([0.2, 1.5], lower=0, upper=1, clip=False)
    Traceback (most recent call last):
        ...
    ValueError: data lie outside the declared bounds [lower, upper] and clamping is off ...
    """
    lo, hi = _check_bounds(lower, upper)
    arr = _numeric(data, "data")
    if np.any(np.isnan(arr)):
        raise ValueError("data contains NaN; bounds cannot be applied to missing values")
    lo_b, hi_b = np.broadcast_to(lo, arr.shape), np.broadcast_to(hi, arr.shape)
    if clip:
        return np.clip(arr, lo_b, hi_b)
    if np.any((arr < lo_b) | (arr > hi_b)):
        raise ValueError(
            "data lie outside the declared bounds [lower, upper] and clamping is off "
            "(clip=False); clamp them, or declare bounds that hold by design"
        )
    return np.array(arr, copy=True)


def _check_bounds(lower, upper) -> tuple[np.ndarray, np.ndarray]:
    if lower is None or upper is None:
        raise ValueError("lower and upper bounds are required, public inputs")
    lo = _numeric(lower, "lower")
    hi = _numeric(upper, "upper")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("bounds must be finite numbers")
    if np.any(lo >= hi):
        raise ValueError("each lower bound must be smaller than its upper bound")
    return lo, hi


def laplace_release(value, *, sensitivity, epsilon, rng, bound=None,
                    name: str = "laplace_release", neighbouring: str = "replace_one",
                    budget=None) -> Release:
    """Release ``value + Lap(sensitivity / epsilon)`` (independent noise per entry).

    ε-DP when ``sensitivity`` bounds the ℓ1 change of the whole statistic (all entries
    together) between neighbouring datasets (Dwork et al. 2006).

    Parameters
    ----------
    value : array_like
        The confidential statistic (scalar or array).
    sensitivity : float
        ℓ1 sensitivity Δ₁ > 0 of the statistic.
    epsilon : float
        Privacy parameter ε > 0.
    rng : numpy.random.Generator or int
        Source of the noise (see the module note on randomness).
    bound : float, optional
        Public bound on the magnitude of every entry of the statistic; the statistic is
        clamped to ``[-bound, bound]``. It sets the scale at which the noise must not be
        erased by rounding (module notes); default: the sensitivity.
    name : str, optional
        Name of the ledger entry.
    neighbouring : {"replace_one", "add_remove"}
        The relation under which ``sensitivity`` was derived.
    budget : pymc_dp.Budget, optional
        The dataset's budget: the release's event is reserved in it before ``value`` is
        read, or the release is refused (:class:`~pymc_dp.PrivacyBudgetExceeded`).

    Returns
    -------
    Release
        Kind ``"laplace"`` with ``noise_scale = sensitivity / epsilon``.

    Raises
    ------
    ValueError
        On a bad parameter, a statistic that is not an array of finite real numbers, or a
        noise scale that overflows or that rounding would erase (module notes).

    Examples
    --------
    >>> rel = laplace_release([10.0, 20.0], sensitivity=2.0, epsilon=1.0, rng=1)
    >>> rel.noise_scale, rel.value.shape
    (2.0, (2,))
    >>> type(rel.event).__name__, rel.event.epsilon, rel.event.sensitivity
    ('LaplaceEvent', 1.0, 2.0)
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive(sensitivity, "sensitivity")
    bound = None if bound is None else check_positive(bound, "bound")
    scale = _noise_scale(sensitivity / epsilon, sensitivity, bound, "Laplace scale")
    gen = _generator(rng)
    if budget is not None:
        _reserve(budget, LAPLACE, name, neighbouring, epsilon, scale, sensitivity)
    s = _bounded(_as_statistic(value), bound)
    noisy = _checked_release(s + gen.laplace(0.0, scale, size=s.shape), scale)
    return Release(
        name=name, kind=LAPLACE, value=noisy, noise_scale=scale, sensitivity=sensitivity,
        epsilon=epsilon, neighbouring=neighbouring,
    )


def gaussian_release(value, *, sensitivity, rng, sigma=None, noise_multiplier=None,
                     epsilon=None, delta=None, bound=None, name: str = "gaussian_release",
                     neighbouring: str = "replace_one", budget=None) -> Release:
    """Release ``value + N(0, σ²)`` (independent noise per entry).

    Give exactly one of ``sigma``, ``noise_multiplier`` (σ = z·Δ₂) or the pair
    ``(epsilon, delta)``; the pair is calibrated with the exact Gaussian accountant
    (:func:`pymc_dp.accounting.gaussian.noise_multiplier_for`), the smallest σ for which
    one release is (ε, δ)-DP. The ledger entry records the noise multiplier, so Gaussian
    releases compose exactly (μ = 1/(2z²) each).

    Parameters
    ----------
    value : array_like
        The confidential statistic.
    sensitivity : float
        ℓ2 sensitivity Δ₂ > 0.
    rng : numpy.random.Generator or int
        Source of the noise.
    sigma, noise_multiplier : float, optional
        Noise standard deviation, or it divided by Δ₂.
    epsilon, delta : float, optional
        Target (ε, δ) for one release.
    bound : float, optional
        Public bound on the magnitude of every entry of the statistic; the statistic is
        clamped to ``[-bound, bound]``. It sets the scale at which the noise must not be
        erased by rounding (module notes); default: the sensitivity.
    name : str, optional
        Name of the ledger entry.
    neighbouring : {"replace_one", "add_remove"}
        The relation under which ``sensitivity`` was derived.
    budget : pymc_dp.Budget, optional
        The dataset's budget: the release's event is reserved in it before ``value`` is
        read, or the release is refused (:class:`~pymc_dp.PrivacyBudgetExceeded`).

    Returns
    -------
    Release
        Kind ``"gaussian"`` with ``noise_scale = σ``.

    Raises
    ------
    ValueError
        On a bad parameter, a statistic that is not an array of finite real numbers, or a
        σ that overflows or that rounding would erase (module notes).

    Examples
    --------
    >>> rel = gaussian_release(5.0, sensitivity=1.0, sigma=2.0, rng=0)
    >>> rel.noise_scale, rel.event.noise_multiplier
    (2.0, 2.0)
    >>> rel = gaussian_release(5.0, sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=0)
    >>> round(rel.noise_scale, 3)
    3.731
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    bound = None if bound is None else check_positive(bound, "bound")
    calibrate = epsilon is not None or delta is not None
    if sum([sigma is not None, noise_multiplier is not None, calibrate]) != 1:
        raise ValueError("give exactly one of sigma, noise_multiplier, or (epsilon, delta)")
    if sigma is not None:
        sigma = check_positive(sigma, "sigma")
    elif noise_multiplier is not None:
        sigma = check_positive(noise_multiplier, "noise_multiplier") * sensitivity
    else:
        from pymc_dp.accounting.gaussian import noise_multiplier_for

        if epsilon is None or delta is None:
            raise ValueError("calibrating a Gaussian release needs both epsilon and delta")
        epsilon, delta = check_epsilon(epsilon), check_delta(delta)
        sigma = noise_multiplier_for(epsilon, delta, 1) * sensitivity
    sigma = _noise_scale(sigma, sensitivity, bound, "Gaussian noise sd")
    gen = _generator(rng)
    if budget is not None:
        _reserve(budget, GAUSSIAN, name, neighbouring, None, sigma, sensitivity)
    s = _bounded(_as_statistic(value), bound)
    noisy = _checked_release(s + gen.normal(0.0, sigma, size=s.shape), sigma)
    return Release(
        name=name, kind=GAUSSIAN, value=noisy, noise_scale=sigma, sensitivity=sensitivity,
        epsilon=epsilon, delta=delta, neighbouring=neighbouring,
    )


def infection_curve_release(infected, *, population, n_trials, rng, m=None, epsilon=None,
                            name: str = "infection_curve") -> Release:
    """Release an infection curve with the binomial mechanism of Xiong, Ju & Zhang (Prop 4).

    For counts ``I(t_1..t_L)`` of infected among ``K`` people, releases independent
    ``s_i ~ Binomial(n_trials, (I(t_i) + m) / (K + 2m))``. One person changes each count by at
    most 1, and the release is ε-DP with ``ε = n_trials · L / m``. Give ``m`` or ``epsilon``
    (then ``m = n_trials · L / ε``). The paper's setting: n_trials = m = 1000, L = 10, ε = 10.

    Parameters
    ----------
    infected : array_like of int
        Confidential counts I(t_i), each in ``[0, population]``.
    population : int
        Population size K (public).
    n_trials : int
        Binomial trials n_s per time point.
    rng : numpy.random.Generator or int
        Source of the noise.
    m, epsilon : float, optional
        Smoothing count m > 0, or the ε it is derived from.
    name : str, optional
        Name of the ledger entry.

    Returns
    -------
    Release
        Kind ``"infection_curve"``; ``value`` holds the L binomial counts.

    Examples
    --------
    >>> rel = infection_curve_release([1, 40, 300, 120], population=1000, n_trials=1000,
    ...                               m=1000, rng=0)
    >>> rel.epsilon, rel.value.shape
    (4.0, (4,))
    >>> infection_curve_release([1, 40], population=1000, n_trials=100, epsilon=1.0, rng=0).m
    200.0
    """
    population = check_positive(population, "population")
    n_trials = check_int(n_trials, "n_trials")
    counts = _numeric(infected, "infected")
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError("infected must be a non-empty 1-d array of counts")
    if not np.all(np.isfinite(counts)):
        raise ValueError("infected contains NaN or infinite entries")
    if np.any((counts < 0) | (counts > population) | (counts != np.round(counts))):
        raise ValueError("infected holds counts that are not integers in [0, population]")
    n_points = counts.size
    if (m is None) == (epsilon is None):
        raise ValueError("give exactly one of m or epsilon")
    if m is not None:
        m = check_positive(m, "m")
        epsilon = n_trials * n_points / m
    else:
        epsilon = check_epsilon(epsilon)
        m = n_trials * n_points / epsilon
    gen = _generator(rng)
    p = (counts + m) / (population + 2.0 * m)
    noisy = gen.binomial(n_trials, p).astype(float)
    return Release(
        name=name, kind=INFECTION_CURVE, value=noisy, epsilon=float(epsilon), population=population,
        n_trials=n_trials, m=float(m),
    )


def ledger_of(releases):
    """Gather the ledger entries of several releases into one privacy ledger.

    Releases of the same dataset compose: the ledger adds their costs up (Laplace and
    infection-curve releases as pure ε, Gaussian releases exactly through μ). Print it with
    ``pymc_dp.privacy_report``.

    Parameters
    ----------
    releases : Release, iterable of Release, or mapping of names to Release

    Returns
    -------
    pymc_dp.accounting.ledger.PrivacyLedger
        A new ledger holding one event per release.

    Examples
    --------
    >>> a = laplace_release(1.0, sensitivity=1.0, epsilon=0.5, rng=0, name="mean")
    >>> b = laplace_release(2.0, sensitivity=1.0, epsilon=0.25, rng=1, name="count")
    >>> ledger = ledger_of([a, b])
    >>> round(ledger.epsilon(0.0), 6)
    0.75
    """
    from pymc_dp.accounting.ledger import PrivacyLedger

    if isinstance(releases, Release):
        releases = [releases]
    elif isinstance(releases, Mapping):
        releases = list(releases.values())
    elif not isinstance(releases, Iterable):
        raise ValueError("releases must be a Release, an iterable of them, or a mapping")
    ledger = PrivacyLedger()
    for rel in releases:
        if not isinstance(rel, Release):
            raise ValueError(f"expected Release objects, got {type(rel).__name__}")
        ledger.add(rel.event)
    return ledger
