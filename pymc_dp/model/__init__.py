"""The model adapter: from a PyMC model to what private steps may read of it.

:class:`PrivateModel` (:mod:`~pymc_dp.model.adapter`) is the one door through which steps
read data. Its parts, each in its own module:

* :mod:`~pymc_dp.model.data`: which graph variables hold people's data, and
  :func:`public_data` to declare a container a public constant;
* :mod:`~pymc_dp.model.validation`: the checks a model passes before any data is read,
  ending in the row-locality gate on every graph that will run;
* :mod:`~pymc_dp.model.constants`: NumPy arrays written into the model and which of their
  uses may spread one person's values;
* :mod:`~pymc_dp.model.probes`: rows moved on purpose, the second line behind the proof;
* :mod:`~pymc_dp.model.gradients`, :mod:`~pymc_dp.model.batches`,
  :mod:`~pymc_dp.model.prior`: per-datum gradients, batches of rows, the public prior;
* :mod:`~pymc_dp.model.graphs`: compiling and rebuilding graphs without leaking values;
* :mod:`~pymc_dp.model.extensions`: what compiling runs besides the graph (rewrites and
  backend code registered with PyTensor), judged: :func:`foreign_extensions`.
"""

from pymc_dp.model.adapter import PrivateModel
from pymc_dp.model.data import data_dependent_deterministics, public_data
from pymc_dp.model.extensions import foreign_extensions

__all__ = ["PrivateModel", "data_dependent_deterministics", "foreign_extensions", "public_data"]
