"""Distances between datasets with a known replace-one sensitivity, for ABCDP.

ABCDP (``docs/algorithms.md``, "ABCDP") tests ``ρ(Y*, Y_t)`` between the private observations Y*
(N rows) and a simulated dataset Y_t. Its privacy rests on the sensitivity

    Δ_ρ ≥ sup |ρ(Y*, Y) − ρ(Y*', Y)|   over Y and neighbours Y*, Y*' (one row replaced).

Three distances are offered:

* :class:`MMD` — the (biased, V-statistic) maximum mean discrepancy with the Gaussian kernel
  ``k(x, y) = exp(−‖x − y‖² / (2 l²))``, computed exactly (O(N²) per simulation). Lemma 4.1 of
  Park et al.: with equal set sizes ``Δ_ρ = 2 √B_k / N`` and ``ρ ≤ 2 √B_k`` (B_k = 1 here).
* :class:`RandomFeatureMMD` — the MMD of the random-Fourier-feature map
  ``φ(x) = D^{-1/2} (cos ω_j·x, sin ω_j·x)_{j=1..D}``, ``ω_j ~ N(0, l^{-2} I)``, an unbiased
  approximation of the same Gaussian kernel. ``‖φ(x)‖ = 1`` exactly, so it is the exact MMD of a
  kernel bounded by 1 and Lemma 4.1 gives the same ``Δ_ρ = 2 / N``. Linear in N.
* :class:`ClippedDistance` — any other distance, clamped to ``[0, C]`` with a sensitivity the
  user declares (at most C, which the clamp guarantees).

The kernel bandwidth ``l`` is either fixed by the user or set by the median heuristic on
**simulated data only** (:func:`median_heuristic`); the private observations are never used to
tune it (one published ABCDP experiment did, which leaks).

Life cycle (each stage sees only what it may see)::

    dist = RandomFeatureMMD(bandwidth="median", n_features=100)
    fitted = dist.fit(pilot_simulations, rng)        # public: bandwidth, frequencies
    summaries = [fitted.summarize(y) for y in sims]  # public: may run on any executor
    bound = fitted.bind(y_private)                   # reads the private data
    rho = bound(summaries)                           # distances, never released

Failures. Whether computing a distance fails must not tell anything about the private data:
an exception raised while evaluating ρ(Y*, ·) for a summary (a user function of
:class:`ClippedDistance` that raises for some values, say) or a NaN counts as the distance's
``max_value``, the largest value it takes, and warnings and floating-point traps are silenced
while the private data is in use. Only public checks raise (a simulation of another shape).
A distance that fails to bind to the private data is covered by
:meth:`Distance.bind_quietly`, which ABCDP uses once a public stand-in bound without error.

Floating point. The sensitivity bounds hold in exact arithmetic. The declared
:meth:`~Distance.sensitivity` adds a small, documented allowance for rounding so that the bound
holds for the computed values too: a relative ``1e-5`` for the random features (their trig is
evaluated in float32 for speed; float32 ``cos² + sin²`` is within ``1e-6`` of 1) plus ``4·N·u``
for the float64 accumulation (u = float64 unit round-off), and an absolute ``2·sqrt(256·u)``
(3.4e-7) for the exact MMD, whose ``sqrt`` of a difference of kernel means can turn a rounding
error e of MMD² into sqrt(e) near zero. At N = 5000 these are 0.001 % and 0.09 % of Δ = 2/N.
"""

from __future__ import annotations

import math
import warnings

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from pymc_dp.validation import check_int, check_positive

__all__ = [
    "BoundDistance",
    "ClippedDistance",
    "Distance",
    "MMD",
    "RandomFeatureMMD",
    "gaussian_kernel_mean",
    "median_heuristic",
    "mmd_gaussian",
]

_U64 = np.finfo(np.float64).eps / 2
# Upper bound on |‖φ̃(x)‖ − 1| for the float32 random-feature map (measured ≲ 1e-7; see tests).
_RFF_FLOAT32_SLACK = 1e-5
_BLOCK_ELEMENTS = 1 << 21  # ~16 MB of float64 per kernel block
# Rounding of MMD² = mean k_xx + mean k_yy − 2 mean k_xy (pairwise sums inside blocks, fsum
# across blocks, ≤ 1 ulp per kernel value) stays far below 256·u; sqrt turns it into ≤ sqrt(256·u).
_EXACT_MMD_SLACK = 2.0 * math.sqrt(256.0 * _U64)
# Observation ranges: differences of values up to 1e150 square to ≤ 4e300 in float64; in
# float32 (max 3.4e38) values up to 1e30 leave a factor 3e8 for the product with a frequency.
_MAX_ABS_FLOAT64 = 1e150
_MAX_ABS_FLOAT32 = 1e30


def _check_rows(n_rows) -> int:
    return check_int(n_rows, "the number of rows")


@contextmanager
def _silenced():
    """No warning and no floating-point trap (``np.seterr``) while the private data is in use.

    A warning or a trapped overflow shows, outside the sparse vector, what the data values
    alone decide.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _as_rows(y, name: str = "data") -> np.ndarray:
    """A dataset as a float64 array of shape (N, d): rows are individuals."""
    a = np.asarray(y, dtype=np.float64)
    if a.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension (rows), got a scalar")
    if a.ndim == 1:
        a = a[:, None]
    elif a.ndim > 2:
        a = a.reshape(a.shape[0], -1)
    if a.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    return a


def median_heuristic(
    simulated: Sequence[np.ndarray] | np.ndarray,
    rng: np.random.Generator,
    *,
    max_rows: int = 1000,
) -> float:
    """Median pairwise Euclidean distance between rows of *simulated* datasets.

    ``simulated`` is one dataset (rows × …) or a sequence of datasets; rows are pooled and at most
    ``max_rows`` of them, chosen with ``rng``, enter the O(max_rows²) computation. Pass only
    simulated (public) data: a bandwidth chosen on the private observations is a private
    statistic and is not covered by ABCDP's guarantee.
    """
    if isinstance(simulated, np.ndarray):
        simulated = [simulated]
    rows = np.concatenate([_as_rows(s, "simulated data") for s in simulated], axis=0)
    if rows.shape[0] > max_rows:
        rows = rows[rng.choice(rows.shape[0], size=max_rows, replace=False)]
    diff = rows[:, None, :] - rows[None, :, :]
    dist = np.sqrt(np.sum(diff * diff, axis=-1))
    iu = np.triu_indices(rows.shape[0], k=1)
    pairwise = dist[iu]
    if pairwise.size == 0:
        raise ValueError("the median heuristic needs at least two simulated rows")
    med = float(np.median(pairwise))
    if not med > 0:
        positive = pairwise[pairwise > 0]
        if positive.size == 0:
            raise ValueError(
                "all simulated rows are identical: the median heuristic cannot set a bandwidth; "
                "pass bandwidth=<float>"
            )
        med = float(np.median(positive))
    return med


def gaussian_kernel_mean(a: np.ndarray, b: np.ndarray, bandwidth: float) -> float:
    """Mean of ``exp(−‖a_i − b_j‖² / (2 l²))`` over all pairs, in blocks of bounded memory."""
    a = _as_rows(a)
    b = _as_rows(b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"row dimensions differ: {a.shape[1]} vs {b.shape[1]}")
    gamma = 1.0 / (2.0 * bandwidth * bandwidth)
    rows_per_block = max(1, _BLOCK_ELEMENTS // (b.shape[0] * b.shape[1]))
    partial = []
    for start in range(0, a.shape[0], rows_per_block):
        block = a[start : start + rows_per_block]
        if a.shape[1] == 1:
            sq = (block - b.T) ** 2
        else:
            diff = block[:, None, :] - b[None, :, :]
            sq = np.einsum("ijk,ijk->ij", diff, diff)
        sq *= -gamma
        np.exp(sq, out=sq)
        partial.append(float(sq.sum()))
    return math.fsum(partial) / (a.shape[0] * b.shape[0])


def mmd_gaussian(x, y, bandwidth: float) -> float:
    """The biased MMD ``‖mean φ(x) − mean φ(y)‖`` of the Gaussian kernel, exactly (O(N·M))."""
    x = _as_rows(x, "x")
    y = _as_rows(y, "y")
    sq = (
        gaussian_kernel_mean(x, x, bandwidth)
        + gaussian_kernel_mean(y, y, bandwidth)
        - 2.0 * gaussian_kernel_mean(x, y, bandwidth)
    )
    return float(min(math.sqrt(max(sq, 0.0)), 2.0))


class Distance:
    """A distance ρ(Y*, Y) between equal-size datasets with a known replace-one sensitivity.

    Subclasses implement :meth:`sensitivity`, :meth:`fit` (fix every public hyper-parameter from
    simulated data and a generator), :meth:`summarize` (a public summary of one simulated
    dataset, safe to compute on any executor) and :meth:`_bind` (read the private data).
    """

    #: whether :meth:`fit` still has to fix hyper-parameters from simulated data
    needs_fit: bool = False
    #: the largest absolute value of the observations the distance computes with in floating point
    #: (float64 squares of differences stay finite); ABCDP refuses larger ones before any
    #: budget is reserved
    max_abs_value: float = _MAX_ABS_FLOAT64
    #: the largest value ρ takes (a finite number): values are clamped to [0, max_value], and
    #: a NaN or an error while evaluating ρ counts as max_value; ABCDP refuses a distance
    #: without one
    max_value: float | None = None

    def sensitivity(self, n_rows: int) -> float:  # pragma: no cover - abstract
        """Replace-one sensitivity Δ_ρ for datasets of ``n_rows`` rows."""
        raise NotImplementedError

    def fit(self, simulated: Sequence[np.ndarray], rng: np.random.Generator) -> Distance:
        """A copy with every public hyper-parameter fixed, from simulated data only."""
        return self

    def summarize(self, simulated: np.ndarray):
        """Public summary of one simulated dataset; the default keeps the rows."""
        return _as_rows(simulated, "simulated data")

    def bind(self, observed) -> BoundDistance:
        """Bind to the private observations: the only method that reads them."""
        if self.needs_fit:
            raise RuntimeError(
                f"{type(self).__name__} must be fitted on simulated data (fit) before bind"
            )
        obs = _as_rows(observed, "observed data")
        return self._bind(obs)

    def bind_quietly(self, observed) -> BoundDistance:
        """:meth:`bind`, or, if that raises, ρ ≡ ``max_value``: no exception, no message.

        For the private observations, once the same distance bound a public dataset of the
        same shape without error (ABCDP does this before reserving the budget): a failure here
        then depends on the data values, and raising would show it outside ε. Every prior draw
        is then rejected, unless the noise accepts it. The declared sensitivity must cover
        this case (the built-in distances do not fail on data in their range).
        """
        obs = np.asarray(observed)
        n = int(obs.shape[0])
        try:
            with _silenced():
                return self.bind(obs)
        except Exception:
            largest = float(self.max_value)
            return BoundDistance(
                lambda summary: largest, self.sensitivity(n), n,
                int(np.prod(obs.shape[1:], dtype=np.int64)), largest, self.describe(),
            )

    def _bind(self, observed: np.ndarray) -> BoundDistance:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


@dataclass
class BoundDistance:
    """ρ(Y*, ·) for one private dataset: call it on a sequence of public summaries.

    ``distance_fn(summary) -> float`` reads the private data captured at :meth:`Distance.bind`;
    ``n_rows`` and ``row_dim`` describe the observed data so that simulated datasets of another
    size are refused (Lemma 4.1 needs equal set sizes). Values are clamped to
    ``[0, max_value]``; a NaN, or an exception raised by ``distance_fn``, counts as
    ``max_value``, so that calling a bound distance never raises because of the data.
    """

    distance_fn: Callable[[object], float]
    sensitivity: float
    n_rows: int
    row_dim: int
    max_value: float
    description: str = ""

    def __call__(self, summaries) -> np.ndarray:
        for s in summaries:  # public: the simulations' shapes
            _check_same_shape(s, self.n_rows, self.row_dim)
        with _silenced():
            return np.fromiter(
                (self._value(s) for s in summaries), dtype=np.float64, count=len(summaries)
            )

    def _value(self, summary) -> float:
        try:
            value = float(self.distance_fn(summary))
        except Exception:
            # No data-dependent exception: a failure counts as the largest distance.
            return self.max_value
        if math.isnan(value):
            return self.max_value
        return min(max(value, 0.0), self.max_value)

    def evaluate(self, summary) -> float:
        """``distance_fn(summary)`` as computed, errors raised: for public stand-in data only."""
        return float(self.distance_fn(summary))


def _check_same_shape(summary, n_rows: int, row_dim: int) -> None:
    """Refuse the summary of a simulation of another shape than the observations, if it says."""
    if isinstance(summary, np.ndarray):  # the rows themselves (Distance.summarize)
        _check_same_rows(summary.shape[0], n_rows)
        return
    rows = getattr(summary, "n_rows", None)
    if rows is not None:
        _check_same_rows(int(rows), n_rows)
    dim = getattr(summary, "row_dim", None)
    if dim is not None and int(dim) != row_dim:
        raise ValueError("simulated rows have another dimension than the observed rows")


def _check_bandwidth(bandwidth) -> float | str:
    if isinstance(bandwidth, str):
        if bandwidth != "median":
            raise ValueError("bandwidth must be a finite number > 0 or 'median', got another str")
        return bandwidth
    return check_positive(bandwidth, "bandwidth")


def _check_same_rows(summary_rows: int, n_rows: int) -> None:
    if summary_rows != n_rows:
        raise ValueError(
            f"simulated dataset has {summary_rows} rows but the observed data has {n_rows}: "
            "the MMD sensitivity 2/N (Lemma 4.1) needs simulations of the same size as the "
            "observations"
        )


@dataclass(frozen=True)
class MMD(Distance):
    """Exact Gaussian-kernel MMD, ``ρ = ‖mean φ(Y*) − mean φ(Y)‖`` (O(N²) per simulation).

    Parameters
    ----------
    bandwidth : float or "median"
        Kernel length-scale ``l`` in ``exp(−‖x − y‖² / (2 l²))``; ``"median"`` sets it to the
        median pairwise distance of rows of simulated (prior-predictive) datasets at
        :meth:`fit`. Never computed from the observations.
    max_rows_median : int
        Rows pooled from the simulations for the median heuristic.

    Sensitivity: ``2 √B_k / N`` with ``B_k = 1`` (Lemma 4.1; equal set sizes are enforced), plus
    the float allowance of the module docstring. The distance is clamped to ``[0, 2]`` (its range
    by Lemma 4.1; the clamp is 1-Lipschitz and does not raise the sensitivity).
    """

    bandwidth: float | str = "median"
    max_rows_median: int = 1000
    max_value = 2.0  # Lemma 4.1: ρ ≤ 2 √B_k

    def __post_init__(self):
        object.__setattr__(self, "bandwidth", _check_bandwidth(self.bandwidth))

    @property
    def needs_fit(self) -> bool:  # type: ignore[override]
        return self.bandwidth == "median"

    def sensitivity(self, n_rows: int) -> float:
        n = _check_rows(n_rows)
        return 2.0 / n + _EXACT_MMD_SLACK

    def fit(self, simulated, rng):
        if not self.needs_fit:
            return self
        return replace(
            self, bandwidth=median_heuristic(simulated, rng, max_rows=self.max_rows_median)
        )

    def summarize(self, simulated):
        rows = _as_rows(simulated, "simulated data")
        if self.needs_fit:
            raise RuntimeError("MMD must be fitted before summarizing simulations")
        return _ExactSummary(rows, gaussian_kernel_mean(rows, rows, self.bandwidth))

    def _bind(self, observed):
        length = float(self.bandwidth)
        k_xx = gaussian_kernel_mean(observed, observed, length)
        n, d = observed.shape

        def distance(summary: _ExactSummary) -> float:
            sq = k_xx + summary.k_yy - 2.0 * gaussian_kernel_mean(observed, summary.rows, length)
            return min(math.sqrt(max(sq, 0.0)), 2.0)

        return BoundDistance(
            distance, self.sensitivity(n), n, d, self.max_value, self.describe()
        )

    def describe(self) -> str:
        return f"MMD(gaussian, bandwidth={self.bandwidth!r}, exact)"


@dataclass(frozen=True)
class _ExactSummary:
    rows: np.ndarray
    k_yy: float

    @property
    def n_rows(self) -> int:
        return int(self.rows.shape[0])

    @property
    def row_dim(self) -> int:
        return int(self.rows.shape[1])


@dataclass(frozen=True)
class RandomFeatureMMD(Distance):
    """Linear-time MMD with random Fourier features of the Gaussian kernel.

    ``φ(x) = D^{-1/2} (cos ω_j·x, sin ω_j·x)_{j=1..D}`` with ``ω_j ~ N(0, l^{-2} I)`` drawn at
    :meth:`fit` from the chain's generator (public). ``‖φ(x)‖ = 1`` for every x, so
    ``ρ = ‖mean φ(Y*) − mean φ(Y)‖₂`` is the MMD of a kernel bounded by 1 and has the same
    sensitivity ``2 / N`` as :class:`MMD` (Lemma 4.1). Cost per simulation: O(N·D·d).

    Parameters
    ----------
    bandwidth : float or "median"
        As for :class:`MMD`; "median" uses simulated data only.
    n_features : int
        Number D of frequencies (the feature vector has 2D entries).
    precision : "float32" or "float64"
        Precision of the trigonometric features (accumulation is always float64). float32 is
        ~20× faster; its rounding is covered by a relative ``1e-5`` allowance in
        :meth:`sensitivity`.
    """

    bandwidth: float | str = "median"
    n_features: int = 100
    precision: str = "float32"
    max_rows_median: int = 1000
    frequencies: np.ndarray | None = field(default=None, repr=False, compare=False)
    max_value = 2.0  # ‖mean φ(Y*) − mean φ(Y)‖ ≤ 2 for ‖φ‖ = 1

    def __post_init__(self):
        object.__setattr__(self, "bandwidth", _check_bandwidth(self.bandwidth))
        object.__setattr__(self, "n_features", check_int(self.n_features, "n_features"))
        if not (isinstance(self.precision, str) and self.precision in ("float32", "float64")):
            raise ValueError("precision must be 'float32' or 'float64'")

    @property
    def needs_fit(self) -> bool:  # type: ignore[override]
        return self.frequencies is None

    @property
    def max_abs_value(self) -> float:  # type: ignore[override]
        return _MAX_ABS_FLOAT32 if self.precision == "float32" else _MAX_ABS_FLOAT64

    def sensitivity(self, n_rows: int) -> float:
        n = _check_rows(n_rows)
        slack = _RFF_FLOAT32_SLACK if self.precision == "float32" else 1e-12
        return 2.0 * (1.0 + slack) / n + 4.0 * n * _U64

    def fit(self, simulated, rng):
        if not self.needs_fit:
            return self
        bandwidth = self.bandwidth
        if bandwidth == "median":
            bandwidth = median_heuristic(simulated, rng, max_rows=self.max_rows_median)
        if isinstance(simulated, np.ndarray):
            simulated = [simulated]
        dim = _as_rows(simulated[0], "simulated data").shape[1]
        freqs = rng.standard_normal((dim, int(self.n_features))) / float(bandwidth)
        return replace(self, bandwidth=float(bandwidth), frequencies=freqs)

    def _phases(self, rows: np.ndarray) -> np.ndarray:
        """``ω_j · x_i`` as a (D, len(rows)) array in the feature precision."""
        if self.frequencies is None:
            raise RuntimeError("RandomFeatureMMD must be fitted before use")
        if rows.shape[1] != self.frequencies.shape[0]:
            raise ValueError(
                f"rows have dimension {rows.shape[1]}, the features expect "
                f"{self.frequencies.shape[0]}"
            )
        dtype = np.float32 if self.precision == "float32" else np.float64
        freqs_t = self.frequencies.T.astype(dtype)  # (D, d)
        with np.errstate(over="ignore", invalid="ignore"):
            rows = rows.astype(dtype)
            if rows.shape[1] <= 4:  # outer products beat a skinny matrix product
                z = np.multiply.outer(freqs_t[:, 0], rows[:, 0])
                for k in range(1, rows.shape[1]):
                    z += np.multiply.outer(freqs_t[:, k], rows[:, k])
            else:
                z = freqs_t @ rows.T
        # A phase that overflowed counts as 0: every row keeps ‖φ(x)‖ = 1, on which the
        # sensitivity 2/N rests, whatever its values (no data-dependent NaN or error).
        finite = np.isfinite(z)
        if not finite.all():
            z[~finite] = 0.0
        return z

    def features_mean(self, rows: np.ndarray) -> np.ndarray:
        """``mean_i φ(rows_i)`` as a float64 vector of length 2D (cos block, then sin block)."""
        rows = _as_rows(rows)
        n_freq = int(self.n_features)
        block = max(1, _BLOCK_ELEMENTS // n_freq)
        acc_cos = np.zeros(n_freq, dtype=np.float64)
        acc_sin = np.zeros(n_freq, dtype=np.float64)
        for start in range(0, rows.shape[0], block):
            z = self._phases(rows[start : start + block])
            # float64 accumulation along the contiguous axis (pairwise summation)
            acc_cos += np.cos(z).sum(axis=1, dtype=np.float64)
            acc_sin += np.sin(z, out=z).sum(axis=1, dtype=np.float64)
        scale = 1.0 / (rows.shape[0] * math.sqrt(n_freq))
        return np.concatenate([acc_cos, acc_sin]) * scale

    def feature_map(self, rows: np.ndarray) -> np.ndarray:
        """φ(rows) row by row (shape (N, 2D)), as computed; for tests and diagnostics."""
        z = self._phases(_as_rows(rows))
        out = np.concatenate([np.cos(z), np.sin(z)], axis=0).T.astype(np.float64)
        return out / math.sqrt(z.shape[0])

    def summarize(self, simulated):
        rows = _as_rows(simulated, "simulated data")
        return _FeatureSummary(rows.shape[0], self.features_mean(rows), rows.shape[1])

    def _bind(self, observed):
        n, d = observed.shape
        mean_obs = self.features_mean(observed)

        def distance(summary: _FeatureSummary) -> float:
            return min(float(np.linalg.norm(mean_obs - summary.mean)), 2.0)

        return BoundDistance(
            distance, self.sensitivity(n), n, d, self.max_value, self.describe()
        )

    def describe(self) -> str:
        return (
            f"RandomFeatureMMD(gaussian, bandwidth={self.bandwidth!r}, "
            f"n_features={self.n_features}, precision={self.precision})"
        )


@dataclass(frozen=True)
class _FeatureSummary:
    n_rows: int
    mean: np.ndarray
    row_dim: int


class ClippedDistance(Distance):
    """Any distance, clamped to ``[0, clip]``, with a declared replace-one sensitivity.

    Parameters
    ----------
    fn : callable
        ``fn(observed, simulated) -> float`` (``fn(observed, summary(simulated))`` when
        ``summary`` is given).
    clip : float
        C: ABCDP uses ``min(max(fn, 0), C)`` (Park et al., after Thm 4.1). The clamp bounds the
        sensitivity by C whatever ``fn`` does, so the sensitivity used is ``min(sensitivity, C)``.
        A NaN value, or an exception raised by ``fn``, counts as C: whether ``fn`` fails may
        depend on the data, and an error would show it.
    sensitivity : float or callable
        The declared replace-one sensitivity of ``fn`` on datasets of N rows: a number or a
        function of N (e.g. ``lambda n: 2 * B / n`` for the gap between means of data in
        [0, B]), for ``fn`` with its failures counted as C. Declaring it correctly is the
        user's responsibility; it is not checked.
    summary : callable, optional
        A public reduction of each simulated dataset, computed where the simulations run.
    name : str, optional
        A label for reports.

    The settings are fixed once built (the sensitivity a step computed from them must stay
    true).
    """

    def __init__(self, fn, *, clip: float, sensitivity, summary=None, name: str = ""):
        if not callable(fn):
            raise TypeError("fn must be callable fn(observed, simulated) -> float")
        clip = check_positive(clip, "clip")
        if sensitivity is None:
            raise ValueError(
                "ClippedDistance needs a declared sensitivity (a number, or a function of N)"
            )
        if not callable(sensitivity):
            sensitivity = check_positive(sensitivity, "sensitivity")
        if summary is not None and not callable(summary):
            raise TypeError("summary must be callable or None")
        fields = dict(fn=fn, clip=clip, declared_sensitivity=sensitivity, summary=summary,
                      name=str(name))
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, name, value):
        raise AttributeError(
            f"ClippedDistance settings are fixed once built ({name!r}): a step's sensitivity "
            "was computed from them. Create a new ClippedDistance."
        )

    @property
    def max_value(self) -> float:  # type: ignore[override]
        return self.clip

    def sensitivity(self, n_rows: int) -> float:
        s = self.declared_sensitivity
        value = float(s(_check_rows(n_rows)) if callable(s) else s)
        value = check_positive(value, "declared sensitivity")
        return min(value, self.clip)

    def summarize(self, simulated):
        rows = np.asarray(simulated)
        payload = self.summary(rows) if self.summary is not None else rows
        return _ClippedSummary(int(rows.shape[0]), payload, int(np.prod(rows.shape[1:])))

    def bind(self, observed):
        obs = np.asarray(observed)
        if obs.ndim == 0:
            raise ValueError("observed data must have at least one dimension (rows)")
        n = int(obs.shape[0])
        fn = self.fn

        def distance(summary: _ClippedSummary) -> float:
            # clamped, NaN and errors counted as clip, by BoundDistance
            return fn(obs, summary.payload)

        row_dim = int(np.prod(obs.shape[1:])) if obs.ndim > 1 else 1
        return BoundDistance(distance, self.sensitivity(n), n, row_dim, self.clip, self.describe())

    def describe(self) -> str:
        label = self.name or getattr(self.fn, "__name__", "distance")
        return f"ClippedDistance({label}, clip={self.clip})"


@dataclass(frozen=True)
class _ClippedSummary:
    n_rows: int
    payload: object
    row_dim: int
