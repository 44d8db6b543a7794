"""The public prior on the value space: its gradient and curvature, and a plausible start.
Nothing here reads data.
"""

from __future__ import annotations

import numpy as np

from pymc.initial_point import make_initial_point_fn


__all__ = ["PLAUSIBLE_GAIN", "PublicPrior"]


#: How much a start moved by :meth:`PrivateModel.plausible_start` must raise the prior's
#: log density (nats): a move that only trades one tail for another is not made.
PLAUSIBLE_GAIN = 2.0


class PublicPrior:
    """The prior of :class:`~pymc_dp.model.PrivateModel` (a mixin)."""

    def prior_gradient(self, q: np.ndarray) -> np.ndarray:
        """``∇ log prior(q)`` on the value space (public; compiled on first use)."""
        self.compile_gradient_rows()
        return np.asarray(self._prior_gradient_fn(np.ascontiguousarray(q, dtype=self._q.dtype)))

    def prior_graph(self):
        """``(θ, log prior(θ))``: the public prior's graph (Jacobians and potentials
        included) and its input, for samplers of public targets."""
        return self._q, self._prior_graph

    def plausible_start(self, q: np.ndarray) -> np.ndarray:
        """``q`` with the default coordinates of a variable moved to the prior's median when
        the prior finds them implausible. Public: it reads the prior, never the data.

        A variable's coordinates move when they equal PyMC's default initial point, lie
        outside the central 90 % of their prior (value space), and the move raises the
        prior's log density by at least :data:`PLAUSIBLE_GAIN` nats. PyMC's defaults ignore
        some distributions' parameters: an ``LKJCholeskyCov`` starts at the identity
        whatever its ``sd_dist``, so the covariance of blood pressures (sds 10–15) starts
        with sds of 1, hundreds of posterior sds from the mode, where a private warm-up's
        Newton steps crawl. The density condition keeps a vague skewed prior's start: PyMC
        starts ``Gamma(0.01, 0.01)`` at its mean 1, in its upper tail, but its median is
        10⁻²⁸ and its density there no higher. Starts a user gave (``initval=``,
        ``pm.sample(initvals=…)``) are kept. The quantiles come from 1001 prior draws with
        fixed seeds: the same start every run.
        """
        if self._prior_quantiles is None:
            self._prior_quantiles = self._prior_value_quantiles()
        start = np.array(q, dtype=float)
        lo, median, hi = self._prior_quantiles
        default = self.ravel(self._initial_point)
        for mask in self._value_masks():
            moved = mask & (start == default) & ((start < lo) | (start > hi))
            if moved.any():
                trial = np.where(moved, median, start)
                if self.logprior(trial) >= self.logprior(start) + PLAUSIBLE_GAIN:
                    start = trial
        return start

    def _value_masks(self) -> list[np.ndarray]:
        """One boolean mask of raveled coordinates per value variable."""
        sizes = [int(np.prod(info[1], dtype=int)) for info in self.point_map_info]
        edges = np.cumsum([0, *sizes])
        masks = []
        for a, b in zip(edges[:-1], edges[1:]):
            mask = np.zeros(edges[-1], dtype=bool)
            mask[a:b] = True
            masks.append(mask)
        return masks

    def _prior_value_quantiles(self):
        """The prior's 5 %, 50 % and 95 % quantiles per value-space coordinate (±∞ and NaN
        for a variable PyMC cannot draw, a ``Flat`` say: its start is left as it is)."""
        try:
            return self._prior_draw_quantiles({})
        except Exception:  # noqa: BLE001 - a start, not a release: find who cannot be drawn
            pass
        size = self.ravel(self._initial_point).size
        lo, median, hi = (np.full(size, v) for v in (-np.inf, np.nan, np.inf))
        for rv, mask in zip(self._free_rvs_in_order(), self._value_masks()):
            others = {o: "support_point" for o in self.model.free_RVs if o is not rv}
            try:
                found = self._prior_draw_quantiles(others)
            except Exception:  # noqa: BLE001 - this variable keeps PyMC's start
                continue
            lo[mask], median[mask], hi[mask] = found[0][mask], found[1][mask], found[2][mask]
        return lo, median, hi

    def _free_rvs_in_order(self) -> list:
        """The free variables in the order of :attr:`point_map_info`."""
        by_value = {self.model.rvs_to_values[rv].name: rv for rv in self.model.free_RVs}
        return [by_value[info[0]] for info in self.point_map_info]

    def _prior_draw_quantiles(self, overrides: dict) -> np.ndarray:
        draw = make_initial_point_fn(
            model=self.model, overrides=overrides, jitter_rvs=set(),
            default_strategy="prior", return_transformed=True,
        )
        draws = np.stack([self.ravel(draw(seed)) for seed in range(1001)])
        return np.quantile(draws, [0.05, 0.5, 0.95], axis=0)

    def prior_negative_hessian(self, q: np.ndarray) -> np.ndarray:
        """``−∇² log prior(q)`` (public) by central differences of the compiled prior gradient.

        The prior is public, so its curvature may be computed any way; differences avoid
        compiling a symbolic Hessian, which is slow for structured priors (LKJ). Symmetrised.
        It costs 2·dim gradient calls: ask for it once per point, not with every row pass.
        """
        self.compile_gradient_rows()
        q = np.ascontiguousarray(q, dtype=self._q.dtype)
        dim = q.size
        steps = 1e-5 * np.maximum(1.0, np.abs(q))
        hessian = np.empty((dim, dim))
        for k in range(dim):
            e = np.zeros(dim, dtype=q.dtype)
            e[k] = steps[k]
            with np.errstate(all="ignore"):
                up, down = self._prior_gradient_fn(q + e), self._prior_gradient_fn(q - e)
            hessian[:, k] = (up - down) / (2 * steps[k])
        hessian = np.where(np.isfinite(hessian), hessian, 0.0)
        return -0.5 * (hessian + hessian.T)
