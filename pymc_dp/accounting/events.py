"""Mechanism events: what a run released, independent of how it is accounted.

An event says *which* mechanism ran, how often and with which noise; it carries no
privacy numbers of its own beyond what defines the mechanism. Accountants
(:mod:`pymc_dp.accounting.ledger`) turn a list of events into (ε, δ). This split follows
dp-accounting, where events are kept apart from accountants.

Conventions
-----------
* ``sensitivity`` is the ℓ2 (Gaussian) or ℓ1 (Laplace) sensitivity Δ of the released
  statistic under the neighbouring relation named in ``neighbouring``. Where the
  sensitivity changes from release to release (DP penalty: Δ = 2·b·‖θ'−θ‖) the event
  records a description string; the accounting only needs the noise multiplier because
  every release is normalised by its own Δ (docs/algorithms.md, "Gaussian compositions are
  exact").
* ``noise_multiplier`` z is the noise standard deviation divided by Δ, so a Gaussian
  release costs μ = 1 / (2 z²) whatever Δ is.
* ``count`` is how many such releases were made (may be 0 for a planned but unused
  mechanism).
* :class:`BarkerEvent` has neither: DP Barker's released variance depends on the data, and
  its guarantee is stated in RDP (:mod:`pymc_dp.accounting.barker`).
"""

from __future__ import annotations

import math

from dataclasses import asdict, dataclass

from pymc_dp.accounting.gaussian import gaussian_mu
from pymc_dp.validation import check_fraction, check_int, check_positive

# σ² belongs to the mechanism: the kernel adds the noise and ships a V_corr fitted for it,
# so it owns the constant, and the accounting, which describes that mechanism, reads it
# from there (kernels/barker.py imports nothing from pymc_dp.accounting).
from pymc_dp.kernels.barker import BARKER_NOISE_VARIANCE

__all__ = [
    "MIN_BARKER_BATCH",
    "BarkerEvent",
    "Event",
    "GaussianEvent",
    "LaplaceEvent",
    "PureDPEvent",
    "SubsampledGaussianEvent",
    "event_from_dict",
]

REPLACE_ONE = "replace_one"
ADD_REMOVE = "add_remove"

#: Smallest DP Barker batch with an admissible order (an integer α with 2 < α < b/5).
MIN_BARKER_BATCH = 16


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base class of a mechanism event (see the module docstring for conventions)."""

    name: str
    count: int = 1
    neighbouring: str = REPLACE_ONE

    kind = "event"

    def __post_init__(self):
        # Stored as plain Python numbers: events are written to the JSON ledger.
        object.__setattr__(self, "count", check_int(self.count, f"{type(self).__name__}.count", minimum=0))
        if self.neighbouring not in (REPLACE_ONE, ADD_REMOVE):
            raise ValueError(
                f"neighbouring must be {REPLACE_ONE!r} or {ADD_REMOVE!r}, got {self.neighbouring!r}"
            )

    def to_dict(self) -> dict:
        """A JSON-serialisable dict that :func:`event_from_dict` reads back."""
        return {"kind": self.kind, **asdict(self)}


def _check_positive(event: Event, field: str) -> None:
    value = check_positive(getattr(event, field), f"{type(event).__name__}.{field}")
    object.__setattr__(event, field, value)


def _check_noise_multiplier(event: Event) -> None:
    """A finite number > 0 whose release cost μ = 1/(2 z²) is a finite float too."""
    _check_positive(event, "noise_multiplier")
    if not math.isfinite(gaussian_mu(event.noise_multiplier)):
        raise ValueError(
            f"{type(event).__name__}.noise_multiplier = {event.noise_multiplier:.3g} is too small "
            "to be accounted: one release would cost μ = 1/(2 z²) beyond the floats, i.e. no "
            "privacy at all. Use more noise."
        )


@dataclass(frozen=True, kw_only=True)
class GaussianEvent(Event):
    """``count`` releases of ``f(X) + N(0, (z·Δ)²)``; each costs μ = 1/(2 z²)."""

    noise_multiplier: float
    sensitivity: float | str = "normalised"

    kind = "gaussian"

    def __post_init__(self):
        super().__post_init__()
        _check_noise_multiplier(self)

    @property
    def mu(self) -> float:
        """Summed μ = count / (2 z²) of these releases (a Gaussian PLD N(μ, 2μ))."""
        return gaussian_mu(self.noise_multiplier, self.count)


@dataclass(frozen=True, kw_only=True)
class SubsampledGaussianEvent(Event):
    """``count`` Gaussian releases, each computed on a random batch of the data.

    ``sampling`` is ``"poisson"`` (each row in with probability ``sampling_rate``) or
    ``"without_replacement"`` (a fixed-size batch, ``sampling_rate = b / n``).
    """

    noise_multiplier: float
    sampling_rate: float
    sampling: str = "without_replacement"
    sensitivity: float | str = "normalised"

    kind = "subsampled_gaussian"

    def __post_init__(self):
        super().__post_init__()
        _check_noise_multiplier(self)
        check_fraction(self.sampling_rate, "sampling_rate", include_one=True)
        if self.sampling not in ("poisson", "without_replacement"):
            raise ValueError(
                f"sampling must be 'poisson' or 'without_replacement', got {self.sampling!r}"
            )


@dataclass(frozen=True, kw_only=True)
class LaplaceEvent(Event):
    """``count`` releases of ``f(X) + Lap(Δ/ε)`` (ℓ1 sensitivity Δ); each is ε-DP."""

    epsilon: float
    sensitivity: float | str = "normalised"

    kind = "laplace"

    def __post_init__(self):
        super().__post_init__()
        _check_positive(self, "epsilon")


@dataclass(frozen=True, kw_only=True)
class PureDPEvent(Event):
    """``count`` runs of an ``epsilon``-DP mechanism (e.g. a sparse-vector run)."""

    epsilon: float
    description: str = ""

    kind = "pure"

    def __post_init__(self):
        super().__post_init__()
        _check_positive(self, "epsilon")


def _check_batch(n_data, batch_size) -> tuple[int, int]:
    n_data, batch_size = check_int(n_data, "n_data"), check_int(batch_size, "batch_size")
    if batch_size < MIN_BARKER_BATCH:
        raise ValueError(
            f"DP Barker's accountant (thesis Theorem 7) needs an integer order 2 < α < b/5, "
            f"hence a batch of at least {MIN_BARKER_BATCH} rows; got batch_size={batch_size}"
        )
    if batch_size > n_data:
        raise ValueError(f"batch_size ({batch_size}) cannot exceed n_data ({n_data})")
    return n_data, batch_size


@dataclass(frozen=True, kw_only=True)
class BarkerEvent(Event):
    """``count`` DP Barker iterations on batches of ``batch_size`` of ``n_data`` rows.

    Replace-one neighbouring only; noise variance 2 (see :mod:`pymc_dp.accounting.barker`
    for why there is no noise multiplier, and for its accounting).

    Examples
    --------
    >>> ev = BarkerEvent(name="barker test", count=100, n_data=10_000, batch_size=500)
    >>> ev.sampling_rate
    0.05
    """

    n_data: int
    batch_size: int
    noise_variance: float = BARKER_NOISE_VARIANCE

    kind = "dp_barker"

    def __post_init__(self):
        super().__post_init__()
        _check_batch(self.n_data, self.batch_size)
        if self.neighbouring != REPLACE_ONE:
            raise ValueError("BarkerEvent is accounted under the replace-one relation only")
        if self.noise_variance != BARKER_NOISE_VARIANCE:
            raise ValueError(
                f"BarkerEvent supports noise_variance = {BARKER_NOISE_VARIANCE} only (thesis "
                f"Theorem 7), got {self.noise_variance!r}"
            )

    @property
    def sampling_rate(self) -> float:
        return self.batch_size / self.n_data


_EVENT_TYPES = {
    cls.kind: cls
    for cls in (GaussianEvent, SubsampledGaussianEvent, LaplaceEvent, PureDPEvent, BarkerEvent)
}


def register_event_type(cls: type[Event]) -> type[Event]:
    """Make ``cls`` readable by :func:`event_from_dict` (for events defined elsewhere)."""
    _EVENT_TYPES[cls.kind] = cls
    return cls


def event_from_dict(data: dict) -> Event:
    """Inverse of :meth:`Event.to_dict`."""
    data = dict(data)
    kind = data.pop("kind")
    try:
        cls = _EVENT_TYPES[kind]
    except KeyError:
        raise ValueError(f"Unknown mechanism event kind {kind!r}") from None
    return cls(**data)
