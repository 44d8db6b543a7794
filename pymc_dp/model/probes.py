"""The second line behind the row-locality proof: rows of the data moved on purpose while
the others are watched; and the check that the data did not change after validation.
"""

from __future__ import annotations

import hashlib

import numpy as np

from pytensor.compile.sharedvalue import SharedVariable

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.data import container_label
from pymc_dp.model.graphs import withholding_details

__all__ = ["RowProbes"]


def data_digest(values: np.ndarray) -> bytes:
    """A digest of an array's shape, type and bytes (never shown: it is computed from data)."""
    values = np.ascontiguousarray(values)
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((values.shape, values.dtype.str)).encode())
    h.update(memoryview(values.reshape(-1)).cast("B"))
    return h.digest()


def _extremes(values: np.ndarray):
    """An integer array's (min, max), which its moved rows stay within; else None."""
    if values.dtype != bool and np.issubdtype(values.dtype, np.integer) and values.size:
        return values.min(), values.max()
    return None


def _bump_row(values: np.ndarray, k: int, extremes):
    """Row k moved a little (a bool flipped, an integer to one end of the array's range)."""
    if values.dtype == bool:
        return ~values[k]
    if extremes is not None:
        return _other_extreme(values, k, extremes[1], extremes[0])
    return values[k] + 1


def _far_row(values: np.ndarray, k: int, extremes):
    """Row k moved far away: reaches thresholds (``max(x) > c``) that small changes miss."""
    if values.dtype == bool:
        return ~values[k]
    if extremes is not None:
        return _other_extreme(values, k, extremes[0], extremes[1])
    return values[k] * 1e6 + 1e6


def _other_extreme(values: np.ndarray, k: int, first, second):
    """An integer row moved within the array's own range (index arrays, checked to be in
    their tables' range, stay in it: an index outside a table reads memory outside it)."""
    return np.where(np.all(values[k] == first), second, first)


def _copy_next_row(values: np.ndarray, k: int, extremes):
    return values[(k + 1) % len(values)]


def _same_values(a: np.ndarray, b: np.ndarray, chunk: int = 1 << 16) -> bool:
    """``np.array_equal(a, b, equal_nan=True)`` for arrays of one shape, a block of rows at
    a time: its temporaries stay small whatever n is (this runs before every sampling call)."""
    if a.ndim == 0:
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    equal_nan = a.dtype.kind in "fc"
    return all(
        np.array_equal(a[i:i + chunk], b[i:i + chunk], equal_nan=equal_nan)
        for i in range(0, len(a), chunk)
    )


def _unmoved(changed: np.ndarray, base: np.ndarray, others: np.ndarray,
             chunk: int = 1 << 16) -> bool:
    """Whether every ``others`` entry of ``changed`` equals ``base``'s (NaN as NaN) or, where
    ``base`` is finite, lies within 1e-12 relative of it (an infinite one gave an infinite
    tolerance, and its row went unwatched), a block of rows at a time: small temporaries
    whatever n is (whole-array comparisons had set the step's peak memory at set-up, 3.4
    times the data)."""
    for i in range(0, len(base), chunk):
        new, old, watched = changed[i:i + chunk], base[i:i + chunk], others[i:i + chunk]
        same = (new == old) | (np.isnan(new) & np.isnan(old))
        with np.errstate(invalid="ignore"):
            close = np.isfinite(old) & (np.abs(new - old) <= 1e-12 * (1 + np.abs(old)))
        if not np.all((same | close)[watched]):
            return False
    return True


_ROWS_MIX = (
    "One row of the data changes the log-likelihood of other rows (e.g. data standardised by "
    "its own mean or sd, lags, cumulative sums, or parameters estimated from the data inside "
    "the model). Private steps need ℓ_j to depend on row j only: preprocess with public "
    "constants instead."
)


class RowProbes:
    """Probes of :class:`~pymc_dp.model.PrivateModel` (a mixin)."""

    def _probe_rows_are_independent(self):
        """A second line behind the proof: move a few rows and watch the others.

        Change row k of every per-datum array (by one unit, by copying the next row, and
        far away) for a few rows k drawn at random (fresh entropy: which rows are moved
        cannot be predicted), at the initial point and at a public point near it, and
        check that no other ℓ_j moves. The proof (:meth:`_check_graph`) already refused
        every model it cannot show row-local; this guards the proof's rules themselves.

        The outcome is a property of the graph's structure (row-local operations leave
        other rows bit-identical), so it reveals nothing about the values; nothing of it
        is returned or printed.
        """
        n = self.n_data
        if n < 2:
            return
        q = self.ravel(self._initial_point)
        # A second, public point: at the initial point a parameter is often 0, which hides
        # any factor that multiplies it.
        shifted = q + 0.5 * np.random.default_rng(0).standard_normal(q.shape)
        # (at most n − 1 rows, so that some row is left to watch)
        rows = np.random.default_rng().choice(n, size=min(n - 1, 3), replace=False)
        work = [v.copy() for v in self._data_values]  # the probes' one working copy
        with np.errstate(all="ignore"):
            for point in (q, shifted):
                try:
                    base = withholding_details(
                        "the per-datum log-likelihood", self._loglik_fn, point, *self._data_values
                    )
                except RuntimeError:
                    if point is q:
                        raise
                    continue  # the shifted point may be outside the model's support
                self._probe_rows(point, base, rows, work)

    def _probe_rows(self, point: np.ndarray, base: np.ndarray, rows, work) -> None:
        # The rows are moved together in ``work``, a copy of the data, set and restored in
        # place: three passes over the data per point, and the one copy, whatever n is.
        data = self._data_values
        extremes = [_extremes(v) for v in data]
        others = np.ones(len(base), dtype=bool)
        others[rows] = False
        for probe in (_bump_row, _copy_next_row, _far_row):
            try:
                for w, v, ends in zip(work, data, extremes):
                    for k in rows:
                        w[k] = probe(v, k, ends)
                changed = self._loglik_fn(point, *work)
            except Exception:  # e.g. an index out of range: try the other probes
                continue
            finally:
                for w, v in zip(work, data):
                    w[rows] = v[rows]
            if not _unmoved(changed, base, others):
                raise UnsupportedModelError(_ROWS_MIX)

    def check_data_unchanged(self) -> None:
        """Refuse to sample if a data container changed since construction.

        Covers the ``pm.Data`` on the datum axis and every other container the model reads,
        public ones included (``pymc_dp.public_data``: a prior's scale, a table indexed by
        group): the step validated, bounds-checked and planned for their old values.
        """
        # The step computes with the data's own arrays (no copy): written to in place, they
        # would pass the comparisons below, with index arrays no longer checked.
        for d, value, digest in zip(self.datum_inputs, self._data_values, self._data_digests):
            if data_digest(value) != digest:
                raise ValueError(
                    f"The data of {d.label} changed in place after the step was built. The "
                    "step validated and planned for the old data: build a new step."
                )
        snapshots = [
            (d.variable, d.label, value)
            for d, value in zip(self.datum_inputs, self._data_values)
            if isinstance(d.variable, SharedVariable)
        ] + [(c, container_label(c), value) for c, value in self._frozen_containers]
        for var, label, snapshot in snapshots:
            current = np.asarray(var.get_value(borrow=True))
            if current.shape != snapshot.shape or not _same_values(current, snapshot):
                raise ValueError(
                    f"The data of {label} changed after the step was built (pm.set_data?). "
                    "The step validated and planned for the old data: build a new step."
                )
