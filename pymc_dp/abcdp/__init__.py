"""What ABCDP needs besides its step (:class:`pymc_dp.ABCDP`, in :mod:`pymc_dp.steps.abcdp`):
bounded distances between summaries (:mod:`~pymc_dp.abcdp.distances`) and the inspection and
vectorised running of a model's ``pm.Simulator`` (:mod:`~pymc_dp.abcdp.simulator`)."""

from pymc_dp.abcdp.distances import MMD, ClippedDistance, RandomFeatureMMD

__all__ = ["MMD", "ClippedDistance", "RandomFeatureMMD"]
