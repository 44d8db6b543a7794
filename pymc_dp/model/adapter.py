"""The model adapter: from a PyMC model to per-datum log-likelihoods on the value space.

Every private step reads the data through one :class:`PrivateModel`. It

* validates, before any data enters a release, that the model is one a private step can
  handle (observed data with one row per individual along a shared leading axis, finite
  data, priors and potentials that do not read data, continuous free variables where the
  step needs them, all free variables covered by the step);
* compiles, once, a vectorised PyTensor function of the raveled value-space point θ that
  returns the vector of per-datum log-likelihoods ``ℓ_j(θ) = Σ_{observed elements on row j}
  log p(x_j | θ)``, and the public prior term (log density of the free variables on the value
  space, Jacobians included, which never touches data).

The per-datum arrays (observed values, and ``pm.Data`` and NumPy arrays in the likelihood
with the datum axis in front) are inputs of the compiled function, not constants baked into
it, so a step can evaluate the same graph on a subset of rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytensor.tensor as pt

from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.model import Model, modelcontext
from pymc.pytensorf import join_nonshared_inputs
from pymc.util import get_value_vars_from_user_vars
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.graph.replace import graph_replace

from pymc_dp.model.per_datum_gradients import (
    clipped_scalar_count,
    clipped_scalar_sum,
)
from pymc_dp.model.data import (
    DatumInput,
    data_containers,
    data_dependent_deterministics,
    numeric_value,
)
from pymc_dp.model.graphs import (
    compile_function,
    check_backend_keeps_float64,
    require_float64,
    withholding_details,
    without_checks_on,
)
from pymc_dp.model.probes import RowProbes, data_digest
from pymc_dp.model.shared_solves import with_shared_solves_as_products
from pymc_dp.model.extensions import refuse_foreign_extensions
from pymc_dp.model.validation import ModelChecks
from pymc_dp.model.gradients import Gradients
from pymc_dp.model.prior import PublicPrior
from pymc_dp.model.batches import RowBatches
from pymc_dp.model.replicates import Replicates

__all__ = ["PrivateModel"]


def _data_array(datum: DatumInput) -> np.ndarray:
    """The data array the step computes with. A container's own array (``pm.Data``) is made
    read-only: written to in place (``get_value(borrow=True)``, by a callback, mid-chain),
    it would move rows and index arrays the step checked. (A view of another array is
    copied first: the other could still be written to.) A NumPy array written into the
    model stays the user's, writable: a change to it is refused before the next chain
    (:meth:`~pymc_dp.model.probes.RowProbes.check_data_unchanged`)."""
    value = np.ascontiguousarray(datum.value)
    if isinstance(datum.variable, SharedVariable):
        if value.base is not None:
            value = value.copy()
        value.flags.writeable = False
    return value


class PrivateModel(ModelChecks, RowProbes, Gradients, PublicPrior, RowBatches, Replicates):
    """Compiled per-datum log-likelihood and public prior of a PyMC model.

    Parameters
    ----------
    model : pm.Model, optional
        The model (default: from context).
    vars : list, optional
        The free variables the step samples; must be all of them (default: all). The order
        fixes the layout of the raveled point θ, as in PyMC's ``DictToArrayBijection``.
    continuous : bool
        Refuse discrete free variables (gradient and random-walk steps need continuous ones).
    initial_point : dict, optional
        A public point of the model (default: the model's initial point): it fixes the
        layout of θ and is where the row-independence probe evaluates the likelihood.
    compile_kwargs : dict, optional
        Passed to PyTensor compilation.

    Attributes
    ----------
    n_data : int
        Number of individuals (rows along the shared leading axis).
    dim : int
        Size of the raveled value-space point.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_dp.model import PrivateModel
    >>> with pm.Model() as m:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.5, -0.2, 1.0]))
    >>> pmodel = PrivateModel(m)
    >>> pmodel.n_data, pmodel.dim
    (3, 1)
    >>> np.round(pmodel.loglik(np.array([0.0])), 3)
    array([-1.044, -0.939, -1.419])
    """

    def __init__(
        self,
        model: Model | None = None,
        vars: Sequence[Variable] | None = None,
        *,
        continuous: bool = True,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
    ):
        model = modelcontext(model)
        self.model = model
        # (what compiling runs besides the graph: before anything of the model is compiled)
        refuse_foreign_extensions()
        # PyMC's own start as it is when the model is checked: a chain may start there or at
        # the given point, both checked; set_initval later changes what
        # model.initial_point() returns, not what was checked
        self._pymc_start = model.initial_point()
        self._initial_point = (
            self._pymc_start if initial_point is None
            else _as_numbers(initial_point, self._pymc_start)
        )
        given = (
            list(model.value_vars)
            if vars is None
            else get_value_vars_from_user_vars(vars, model)
        )
        self._check_covers_all(given)
        # PyMC ravels the whole point in the model's order (the step covers every variable),
        # so θ is laid out in that order whatever order ``vars`` came in.
        value_vars = list(model.value_vars)
        self.value_vars = value_vars
        if continuous:
            self._check_continuous(value_vars)

        self.datum_inputs = self._find_datum_inputs()
        self.n_data = int(self.datum_inputs[0].value.shape[0])
        self._check_priors_and_potentials()
        # Every other container (public ones set priors, potentials or tables the
        # likelihood indexes) is frozen too: the checks above read its current value.
        datum_vars = {d.variable for d in self.datum_inputs}
        self._frozen_containers = [
            (c, np.array(numeric_value(c), copy=True))
            for c in data_containers(model)
            if c not in datum_vars
        ]
        self.deterministics_reading_data = data_dependent_deterministics(model)

        raveled = DictToArrayBijection.map({v.name: self._initial_point[v.name] for v in value_vars})
        self.point_map_info = raveled.point_map_info
        self.dim = int(raveled.data.size)

        check_backend_keeps_float64(compile_kwargs or {})
        self._compile(compile_kwargs or {})

    def _compile(self, compile_kwargs: dict):
        model = self.model
        obs_terms = self._likelihood_terms
        per_datum = None
        for term in obs_terms:
            row_sums = term if term.ndim == 1 else term.reshape((term.shape[0], -1)).sum(axis=1)
            per_datum = row_sums if per_datum is None else per_datum + row_sums
        prior_terms = model.logp(vars=model.free_RVs + model.potentials, sum=True)

        # Per-datum arrays become explicit inputs, so a step can pass a subset of rows.
        self._placeholders = [
            pt.tensor(
                dtype=d.variable.dtype,
                shape=(None, *d.variable.type.shape[1:]),
                name=f"datum_input_{i}",
            )
            for i, d in enumerate(self.datum_inputs)
        ]
        per_datum = graph_replace(
            [per_datum],
            {d.variable: p for d, p in zip(self.datum_inputs, self._placeholders)},
            strict=False,
        )[0]
        per_datum = without_checks_on(per_datum, self._placeholders)
        per_datum = with_shared_solves_as_products(per_datum)
        (per_datum, prior), q = join_nonshared_inputs(
            self._initial_point, [per_datum, prior_terms], self.value_vars
        )
        self._q = q
        self._per_datum_graph = per_datum
        self._data_values = [_data_array(d) for d in self.datum_inputs]
        self._data_digests = [data_digest(v) for v in self._data_values]
        # The gate, before anything is compiled or evaluated: the proof that row j reads
        # data row j only, and the range of every index array.
        self._check_graph([per_datum], q, self._placeholders, "The per-datum log-likelihood")
        self._prior_graph = prior  # for the lazily compiled gradients
        self._compile_kwargs = dict(compile_kwargs)
        self._gradient_fn = None  # compiled on first use: see compile_gradients
        self._forward_gradient_fn = None  # reverse mode's fallback, compiled if ever needed
        self._counted_gradient_fns = None  # both, with the count of clipped rows (diagnostics)
        self._gradient_rows_fn = None  # the warm-up's per-datum gradients (gradient_rows)
        self._prior_gradient_fn = None
        self._prior_quantiles = None  # plausible_start's, drawn on first use
        self._gradient_rows_graph = None
        self._forward_columns = None
        self.gradient_method: str | None = None  # "reverse" or "forward", once compiled
        # on_unused_input: a per-datum pm.Data the likelihood does not read, or an observed
        # array PyTensor merged with an equal constant, is simply not needed.
        self._loglik_fn = compile_function(
            [q, *self._placeholders], per_datum, on_unused_input="ignore", **compile_kwargs
        )
        self._loglik_fn.trust_input = True
        self._ratio_fn = None  # clipped_ratio's, compiled on first use
        self._ratio_count_fn = None  # with the count of clipped terms (clip diagnostics)
        self._prior_fn = compile_function([q], prior, **compile_kwargs)
        self._prior_fn.trust_input = True
        self._probe_rows_are_independent()

    def loglik(self, q: np.ndarray) -> np.ndarray:
        """Per-datum log-likelihoods ``(ℓ_1(θ), …, ℓ_n(θ))`` at raveled point ``q``.

        Private: never release this without clipping and noise.
        """
        return withholding_details(
            "the per-datum log-likelihood",
            self._loglik_fn,
            np.asarray(q, dtype=self._q.dtype),
            *self._data_values,
        )

    def clipped_ratio(
        self, q: np.ndarray, current: np.ndarray, bound: float, count: bool = False
    ) -> tuple[np.ndarray, float] | tuple[np.ndarray, float, int]:
        """``(ℓ(θ'), Σ_j clip_b(ℓ_j(θ') − current_j))`` at ``q`` = θ', in one compiled pass.

        ``current`` is :meth:`loglik` at the chain's point θ (cached by the caller); the sum
        is the log-likelihood ratio a DP penalty or DP HMC test releases, clamped by the rule
        of :func:`~pymc_dp.kernels.clipping.clipped_sum` (sensitivity 2b under replace-one).
        The difference, the clamp and the sum run inside the compiled function, fused with
        the log-likelihood's own loop: no n-length array besides ``ℓ(θ')`` itself, which
        becomes the next cache if θ' is accepted. Both outputs are private.

        ``count=True`` also returns how many terms were clamped (``|r_j| > b`` or not
        finite; reference :func:`~pymc_dp.kernels.clipping.clipped_count`), counted in the
        same compiled loop (a second compiled function, used only by the clip
        diagnostics). Private too: released only with noise.

        Examples
        --------
        >>> import numpy as np, pymc as pm
        >>> from pymc_dp.model import PrivateModel
        >>> with pm.Model() as m:
        ...     mu = pm.Normal("mu", 0, 10)
        ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.0, 1.0, 5.0]))
        >>> pmodel = PrivateModel(m)
        >>> current = pmodel.loglik(np.array([0.0]))
        >>> new, ratio = pmodel.clipped_ratio(np.array([1.0]), current, 2.0)
        >>> round(ratio, 6)  # the three differences −0.5, 0.5, 4.5 clamped to [−2, 2]
        2.0
        >>> pmodel.clipped_ratio(np.array([1.0]), current, 2.0, count=True)[2]  # 4.5 only
        1
        """
        if not (np.isfinite(bound) and bound >= 0):
            raise ValueError(f"bound must be a finite number >= 0, got {bound!r}")
        fn = self._ratio_count_fn if count else self._ratio_fn
        if fn is None:
            per_datum = self._per_datum_graph
            cache = pt.vector("current_loglik", dtype=per_datum.dtype)
            # The clamp and the sum in float64 whatever floatX is: in float32 the bound
            # would be rounded (up, sometimes) and the sum rounded to a step that grows with
            # n, and a person could move the released sum by more than 2b.
            clip = pt.scalar("ratio_clip", dtype="float64")
            difference = pt.cast(per_datum, "float64") - pt.cast(cache, "float64")
            outputs = [per_datum, clipped_scalar_sum(difference, clip)]
            if count:
                outputs.append(clipped_scalar_count(difference, clip))
            fn = compile_function(
                [self._q, cache, clip, *self._placeholders],
                outputs,
                on_unused_input="ignore",
                **self._compile_kwargs,
            )
            fn.trust_input = True
            if count:
                self._ratio_count_fn = fn
            else:
                self._ratio_fn = fn
        dtype = self._per_datum_graph.dtype
        current = np.asarray(current, dtype=dtype)
        if current.shape != (self.n_data,):
            raise ValueError(f"current must have shape ({self.n_data},), got {current.shape}")
        out = withholding_details(
            "the clipped log-likelihood ratio",
            fn,
            np.asarray(q, dtype=self._q.dtype),
            current,
            np.asarray(bound, dtype="float64"),
            *self._data_values,
        )
        loglik, ratio = out[0], float(require_float64(out[1], "The clipped log-likelihood ratio"))
        return (loglik, ratio, int(out[2])) if count else (loglik, ratio)

    def logprior(self, q: np.ndarray) -> float:
        """Public log prior density of ``q`` on the value space (Jacobians included)."""
        return float(self._prior_fn(np.asarray(q, dtype=self._q.dtype)))

    def ravel(self, point: dict) -> np.ndarray:
        """The raveled value-space vector of ``point`` in this adapter's layout."""
        return DictToArrayBijection.map({v.name: point[v.name] for v in self.value_vars}).data

    def unravel(self, q: np.ndarray) -> dict:
        """Inverse of :meth:`ravel`."""
        return DictToArrayBijection.rmap(RaveledVars(q, self.point_map_info))


def _as_numbers(point: dict, like: dict) -> dict:
    """``point`` with every value a NumPy array of its variable's dtype: what is checked is
    what the chain starts from (an array-like could show the checks one thing, NumPy
    another)."""
    out = {}
    for name, value in point.items():
        dtype = np.asarray(like[name]).dtype if name in like else float
        try:
            out[name] = np.array(value, dtype=dtype)
        except (TypeError, ValueError):
            raise ValueError(
                f"The initial point's value of {name!r} is not an array of numbers."
            ) from None
    return out
