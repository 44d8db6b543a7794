"""Tools for checking private samplers, used by the tests, benchmarks and examples (never
imported by :mod:`pymc_dp` itself): empirical privacy audits on neighbouring datasets
(:mod:`~pymc_dp.testing.auditing`), the thesis' benchmark models
(:mod:`~pymc_dp.testing.benchmark_models`), distances of a private posterior from a
reference one (:mod:`~pymc_dp.testing.evaluation`) and the papers' epidemic simulators
(:mod:`~pymc_dp.testing.epidemics`). Import the submodule you need."""

__all__: list[str] = []
