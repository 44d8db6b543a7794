"""The per-datum log-likelihood of a batch of rows, compiled for any batch length (the
minibatch steps read O(b) per evaluation).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pymc.pytensorf import join_nonshared_inputs
from pymc.distributions.shape_utils import change_dist_size  # batches of rows
from pymc.logprob.basic import logp as _rv_logp  # batches of rows
from pymc.logprob.utils import replace_rvs_by_values  # batches of rows
from pytensor.compile.rebuild import UnusedInputError
from pytensor.graph.basic import Variable
from pytensor.graph.traversal import ancestors

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.graphs import compile_function, rebuild_graph, without_checks_on
from pymc_dp.model.shared_solves import with_shared_solves_as_products

__all__ = ["RowBatches"]


_ROWS_FOLDED = (
    "The log-likelihood of a batch of rows cannot select rows of {}: an array with one row "
    "per individual that PyMC meets only while it builds the density (captured by a "
    "pm.CustomDist logp or dist function), and a minibatch step cannot follow its rows. "
    "Pass such arrays as parameters of the distribution, or wrap the per-individual arrays "
    "in pm.Data (pm.Data('x', x))."
)

_ROWS_UNSUPPORTED = (
    "The model's per-datum log-likelihood cannot be evaluated on a batch of rows ({}). A "
    "minibatch step reads a random subset of the rows of every observed variable and of every "
    "pm.Data or NumPy array whose leading axis has length n; per-individual values held "
    "elsewhere (an array captured by a pm.CustomDist function: wrap it in pm.Data) or "
    "shapes fixed to n by something other than the data cannot follow the batch."
)


class RowBatches:
    """Batches of rows of :class:`~pymc_dp.model.PrivateModel` (a mixin)."""

    def loglik_rows(self, q: np.ndarray, rows) -> np.ndarray:
        """Per-datum log-likelihoods ``(ℓ_j(θ))_{j ∈ rows}`` at raveled point ``q``.

        Reads only the given rows of every per-datum array (observed values and ``pm.Data``
        with the datum axis in front) and evaluates a function compiled for batches of any
        length (:meth:`compile_rows`), so one call costs O(len(rows)), not O(n). On
        ``rows = arange(n)`` it equals :meth:`loglik`. Private: never release this without
        clipping and noise.

        Parameters
        ----------
        q : array
            Raveled value-space point.
        rows : 1-d integer array
            Row indices (a batch drawn by the step, e.g. without replacement).

        Raises
        ------
        UnsupportedModelError
            If the model's log-likelihood cannot follow a subset of rows (see
            :meth:`compile_rows`). The message names the error type only: PyTensor messages
            may print input values, which are private.

        Examples
        --------
        >>> import numpy as np, pymc as pm
        >>> from pymc_dp.model import PrivateModel
        >>> with pm.Model() as m:
        ...     mu = pm.Normal("mu", 0, 10)
        ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.5, -0.2, 1.0]))
        >>> np.round(PrivateModel(m).loglik_rows(np.array([0.0]), np.array([2, 0])), 3)
        array([-1.419, -1.044])
        """
        self.compile_rows()
        rows = np.asarray(rows)
        if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
            raise ValueError("rows must be a 1-d array of integer row indices")
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_data):
            raise ValueError("row indices must lie in [0, n), n the number of rows")
        batch = [np.take(v, rows, axis=0) for v in self._data_values]
        try:
            out = self._rows_fn(np.asarray(q, dtype=self._q.dtype), *batch)
        except Exception as err:  # sanitise: PyTensor may print private input values
            raise UnsupportedModelError(_ROWS_UNSUPPORTED.format(type(err).__name__)) from None
        if out.shape != rows.shape:
            raise UnsupportedModelError(_ROWS_UNSUPPORTED.format("wrong output length"))
        return out

    def compile_rows(self) -> None:
        """Compile :meth:`loglik_rows` now and check it on synthetic batches.

        The per-datum log-likelihood is rebuilt from the observed random variables with
        every per-datum array replaced by an input of unknown length: each observed
        variable's size is re-derived from its batch of values (``change_dist_size``), free
        variables are replaced by their value-space points, other observed variables by
        their (batched) values, and a ``SpecifyShape`` that pins the leading length to n is
        relaxed. Graphs that fix the number of rows in the model itself therefore follow the
        batch: ``shape=y.shape``, ``dims``, ``pm.MvNormal`` observations of shape (n, d), a
        ``pm.Data`` design matrix entering through ``X @ β``.

        The compiled function is then run on synthetic all-zero batches of two lengths (not
        the data) to check that it returns one value per row. Minibatch steps call this at
        construction, so a model that cannot be batched is refused before any data is read.

        Raises
        ------
        UnsupportedModelError
            If the graph cannot be rebuilt for batches or returns the wrong length, e.g. a
            per-individual array captured by a ``pm.CustomDist`` function (pass it as a
            parameter, or wrap it in ``pm.Data``), or an observed variable without a batch
            axis.
        """
        if getattr(self, "_rows_fn", None) is not None:
            return
        try:
            inputs, output = self._rows_graph()
            what = "The log-likelihood of a batch of rows"
            self._check_graph([output], inputs[0], inputs[1:], what)
            fn = compile_function(inputs, output, **getattr(self, "_compile_kwargs", {}))
        except UnsupportedModelError:
            raise
        except UnusedInputError:
            used = set(ancestors([output]))
            folded = [d.label for d, p in zip(self.datum_inputs, inputs[1:]) if p not in used]
            raise UnsupportedModelError(_ROWS_FOLDED.format(", ".join(folded))) from None
        except Exception as err:
            raise UnsupportedModelError(_ROWS_UNSUPPORTED.format(type(err).__name__)) from None
        fn.trust_input = True
        point = np.asarray(self.ravel(self._initial_point), dtype=self._q.dtype)
        for k in [k for k in (2, 3, 5) if k != self.n_data][:2]:
            fake = [np.zeros((k, *v.shape[1:]), dtype=v.dtype) for v in self._data_values]
            try:
                out = np.asarray(fn(point, *fake))
            except Exception as err:
                raise UnsupportedModelError(_ROWS_UNSUPPORTED.format(type(err).__name__)) from None
            if out.shape != (k,):
                raise UnsupportedModelError(_ROWS_UNSUPPORTED.format("wrong output length"))
        self._rows_fn = fn

    def _rows_graph(self) -> tuple[list[Variable], Variable]:
        """Inputs ``[θ, *per-datum batches]`` and the per-datum log-likelihood of the batch."""
        model = self.model
        placeholders = [
            pt.tensor(
                dtype=d.variable.dtype,
                shape=(None, *d.variable.type.shape[1:]),
                name=f"datum_rows_{i}",
            )
            for i, d in enumerate(self.datum_inputs)
        ]
        data_map = {d.variable: p for d, p in zip(self.datum_inputs, placeholders)}
        rvs_to_values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs + model.observed_RVs}
        per_datum = None
        for rv in model.observed_RVs:
            # (rebuilt: an integer pm.Data observed by a discrete likelihood is Cast(x))
            (rows_value,) = rebuild_graph([model.rvs_to_values[rv]], data_map)
            others = {r: v for r, v in rvs_to_values.items() if r is not rv}
            (rv_values,) = replace_rvs_by_values(
                [rv], rvs_to_values=others, rvs_to_transforms=model.rvs_to_transforms
            )
            (rv_rows,) = rebuild_graph([rv_values], data_map)
            batch_ndim = rv_rows.owner.op.batch_ndim(rv_rows.owner)
            if batch_ndim < 1:
                raise UnsupportedModelError(
                    f"Observed variable {rv.name!r} has no batch axis: its leading axis is part "
                    "of one multivariate observation, not one row per individual."
                )
            size = (rows_value.shape[0], *(rv_rows.shape[i] for i in range(1, batch_ndim)))
            rv_rows = change_dist_size(rv_rows, size)
            term = _rv_logp(rv_rows, rows_value, warn_rvs=False)
            row_sums = term if term.ndim == 1 else term.reshape((term.shape[0], -1)).sum(axis=1)
            per_datum = row_sums if per_datum is None else per_datum + row_sums
        (per_datum,) = rebuild_graph([per_datum], data_map)
        per_datum = without_checks_on(per_datum, placeholders)
        per_datum = with_shared_solves_as_products(per_datum)
        (per_datum,), q = join_nonshared_inputs(self._initial_point, [per_datum], self.value_vars)
        return [q, *placeholders], per_datum
