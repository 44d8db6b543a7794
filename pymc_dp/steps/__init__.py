"""Private PyMC step methods (``DPPenalty``, ``MinibatchDPPenalty``, ``DPBarker``, ``DPHMC``,
``ABCDP``): thin adapters from PyMC's step interface to the kernels in
:mod:`pymc_dp.kernels`, each reserving its budget before it reads data. Users import them
from :mod:`pymc_dp`."""

__all__: list[str] = []
