"""Privatized releases: mechanisms as release functions and as PyMC likelihoods, and the
routes to a correct posterior from releases (see ``docs/privatized-data.md``).

Data holder: :func:`clamp`, :func:`laplace_release`, :func:`gaussian_release`,
:func:`infection_curve_release`, :func:`linear_regression_release`, :func:`ledger_of`.

Analyst: :class:`LaplaceMechanism`, :class:`GaussianMechanism`,
:class:`InfectionCurveMechanism` (likelihoods), :class:`PrivatizedDataModel` and the routes
:func:`data_augmentation_model`, :func:`normal_approximation_model`, :func:`smc_abc_model`,
:func:`neural_posterior` (SPPE / SPLE; needs the ``sbi`` extra, imported only when called),
with :func:`naive_plugin_model` as the (wrong) comparator.
"""

from pymc_dp.mechanisms.likelihood import (
    GaussianMechanism,
    InfectionCurveMechanism,
    LaplaceMechanism,
    mechanism_from_release,
)
from pymc_dp.mechanisms.neural import neural_posterior
from pymc_dp.mechanisms.release import (
    Release,
    clamp,
    gaussian_release,
    infection_curve_release,
    laplace_release,
    ledger_of,
)
from pymc_dp.mechanisms.routes import (
    PrivatizedDataModel,
    data_augmentation_model,
    naive_plugin_model,
    normal_approximation_model,
    record_moments,
    smc_abc_model,
)
from pymc_dp.mechanisms.statistics import (
    linear_regression_records,
    linear_regression_release,
    linear_regression_sensitivity,
    unpack_linear_regression,
)

__all__ = [
    "GaussianMechanism",
    "InfectionCurveMechanism",
    "LaplaceMechanism",
    "PrivatizedDataModel",
    "Release",
    "clamp",
    "data_augmentation_model",
    "gaussian_release",
    "infection_curve_release",
    "laplace_release",
    "ledger_of",
    "linear_regression_records",
    "linear_regression_release",
    "linear_regression_sensitivity",
    "mechanism_from_release",
    "naive_plugin_model",
    "neural_posterior",
    "normal_approximation_model",
    "record_moments",
    "smc_abc_model",
    "unpack_linear_regression",
]
