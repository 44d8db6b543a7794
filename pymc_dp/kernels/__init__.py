"""The algorithms' mathematics, apart from PyMC: pure functions and frozen states that read
only what they are given (private rows, released values, a generator). The steps in
:mod:`pymc_dp.steps` adapt them to PyMC; the accounting of what they release is in
:mod:`pymc_dp.accounting`."""

__all__: list[str] = []
