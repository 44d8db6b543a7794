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

The per-datum arrays (observed values and ``pm.Data`` with the datum axis in front) are
inputs of the compiled function, not constants baked into it, so a step can evaluate the
same graph on a subset of rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.model import Model, modelcontext
from pymc.pytensorf import compile as pm_compile
from pymc.pytensorf import join_nonshared_inputs
from pymc.util import get_value_vars_from_user_vars
from pymc.vartypes import continuous_types
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors

from pymc_dp.errors import UnsupportedModelError

__all__ = ["PrivateModel", "data_dependent_deterministics"]


@dataclass(frozen=True)
class _DatumInput:
    """A graph variable holding per-datum values (leading axis = datum) and its value."""

    variable: Variable
    value: np.ndarray
    label: str


def _numeric_value(var: Variable) -> np.ndarray:
    if isinstance(var, Constant):
        return np.asarray(var.data)
    if isinstance(var, SharedVariable):
        return np.asarray(var.get_value(borrow=True))
    return np.asarray(var.eval())


def _data_variables(model: Model) -> list[Variable]:
    """Every graph variable that holds data: observed values and ``pm.Data`` containers."""
    observed_values = [model.rvs_to_values[rv] for rv in model.observed_RVs]
    return observed_values + [d for d in model.data_vars if d not in observed_values]


def _reads(graph_outputs: Sequence[Variable], data_vars: Sequence[Variable]) -> bool:
    wanted = set(data_vars)
    return any(a in wanted for a in ancestors(list(graph_outputs)))


def data_dependent_deterministics(model: Model | None = None) -> list[str]:
    """Names of ``pm.Deterministic`` variables whose value depends on data.

    PyMC records deterministics in the posterior; one that reads data (``mu = X @ beta``)
    would put the data, without noise, into the trace. :func:`pymc_dp.sample` leaves them
    out and :func:`pymc_dp.release` strips them.
    """
    model = modelcontext(model)
    data_vars = _data_variables(model)
    return [
        d.name
        for d in model.deterministics
        if _reads(model.replace_rvs_by_values([d]), data_vars)
    ]


class PrivateModel:
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
        A point of the model, used for shapes only.
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
        if initial_point is None:
            initial_point = model.initial_point()
        self._initial_point = initial_point
        value_vars = (
            list(model.value_vars)
            if vars is None
            else get_value_vars_from_user_vars(vars, model)
        )
        self.value_vars = value_vars
        self._check_covers_all(value_vars)
        if continuous:
            self._check_continuous(value_vars)

        self.datum_inputs = self._find_datum_inputs()
        self.n_data = int(self.datum_inputs[0].value.shape[0])
        self._check_priors_and_potentials()
        self.deterministics_reading_data = data_dependent_deterministics(model)

        raveled = DictToArrayBijection.map({v.name: initial_point[v.name] for v in value_vars})
        self.point_map_info = raveled.point_map_info
        self.dim = int(raveled.data.size)

        self._compile(compile_kwargs or {})

    # ------------------------------------------------------------------ validation
    def _check_covers_all(self, value_vars):
        missing = [v.name for v in self.model.value_vars if v not in value_vars]
        if missing:
            raise UnsupportedModelError(
                f"A private step must cover every free variable, but {missing} are left out. "
                "PyMC would assign them a non-private step (NUTS) that reads the data without "
                "noise. Pass vars=None (all variables) or sample them with another private step."
            )

    def _check_continuous(self, value_vars):
        discrete = [v.name for v in value_vars if v.dtype not in continuous_types]
        if discrete:
            raise UnsupportedModelError(
                f"Free variables {discrete} are discrete; this private step needs continuous "
                "variables. Marginalise them out, or use a step that supports discrete ones."
            )

    def _find_datum_inputs(self) -> list[_DatumInput]:
        model = self.model
        if not model.observed_RVs:
            raise UnsupportedModelError(
                "The model has no observed variables: there is no data to protect and nothing "
                "for a private step to do. Use pm.sample for prior-only models."
            )
        observed_names = {rv.name for rv in model.observed_RVs}
        imputed = [
            rv.name.removesuffix("_unobserved")
            for rv in model.free_RVs
            if rv.name.endswith("_unobserved")
            and rv.name.removesuffix("_unobserved") + "_observed" in observed_names
        ]
        if imputed:
            # PyMC turns NaN in observed data into free variables to impute; their number and
            # places are private. Say where, never what.
            raise ValueError(
                f"The observed data of {imputed} contains non-finite values (NaN), which PyMC "
                "would impute as free variables. Private steps need finite data; remove or "
                "impute those rows before sampling."
            )
        inputs: list[_DatumInput] = []
        for rv in model.observed_RVs:
            value_var = model.rvs_to_values[rv]
            value = _numeric_value(value_var)
            if value.ndim == 0:
                raise UnsupportedModelError(
                    f"Observed variable {rv.name!r} is a scalar. A private step needs one row "
                    "per individual along the leading axis of every observed variable."
                )
            inputs.append(_DatumInput(value_var, value, f"observed variable {rv.name!r}"))
        lengths = {d.label: d.value.shape[0] for d in inputs}
        if len(set(lengths.values())) > 1:
            raise UnsupportedModelError(
                "Observed variables must share the leading (individual) axis; their leading "
                f"lengths differ: {lengths}."
            )
        n = inputs[0].value.shape[0]
        observed_vars = {d.variable for d in inputs}
        for data_var in model.data_vars:
            if data_var in observed_vars:
                continue
            value = _numeric_value(data_var)
            if value.ndim >= 1 and value.shape[0] == n:
                inputs.append(_DatumInput(data_var, value, f"pm.Data {data_var.name!r}"))
        for d in inputs:
            if not np.issubdtype(d.value.dtype, np.number) and d.value.dtype != bool:
                raise UnsupportedModelError(f"The data of {d.label} is not numeric.")
            if not np.all(np.isfinite(d.value)):
                # Say where, never what: the values are private.
                raise ValueError(
                    f"The data of {d.label} contains non-finite values (NaN or inf). Private "
                    "steps need finite data; remove or impute those rows before sampling."
                )
        return inputs

    def _check_priors_and_potentials(self):
        model = self.model
        data_vars = _data_variables(model)
        for rv in model.free_RVs:
            if _reads([model.logp(vars=[rv])], data_vars):
                raise UnsupportedModelError(
                    f"The prior of {rv.name!r} depends on data. The prior term is added without "
                    "noise, so it must not read observed values or pm.Data."
                )
        for pot in model.potentials:
            if _reads(model.replace_rvs_by_values([pot]), data_vars):
                raise UnsupportedModelError(
                    f"pm.Potential {pot.name!r} reads observed values or pm.Data. Potentials are "
                    "added without noise; express data terms as observed variables instead."
                )

    # ------------------------------------------------------------------ compilation
    def _compile(self, compile_kwargs: dict):
        model = self.model
        obs_terms = model.logp(vars=model.observed_RVs, sum=False)
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
        (per_datum, prior), q = join_nonshared_inputs(
            self._initial_point, [per_datum, prior_terms], self.value_vars
        )
        self._q = q
        self._per_datum_graph = per_datum
        self._loglik_fn = pm_compile([q, *self._placeholders], per_datum, **compile_kwargs)
        self._loglik_fn.trust_input = True
        self._prior_fn = pm_compile([q], prior, **compile_kwargs)
        self._prior_fn.trust_input = True
        self._data_values = [np.ascontiguousarray(d.value) for d in self.datum_inputs]

    # ------------------------------------------------------------------ evaluation
    def loglik(self, q: np.ndarray) -> np.ndarray:
        """Per-datum log-likelihoods ``(ℓ_1(θ), …, ℓ_n(θ))`` at raveled point ``q``.

        Private: never release this without clipping and noise.
        """
        return self._loglik_fn(np.asarray(q, dtype=self._q.dtype), *self._data_values)

    def logprior(self, q: np.ndarray) -> float:
        """Public log prior density of ``q`` on the value space (Jacobians included)."""
        return float(self._prior_fn(np.asarray(q, dtype=self._q.dtype)))

    def ravel(self, point: dict) -> np.ndarray:
        """The raveled value-space vector of ``point`` in this adapter's layout."""
        return DictToArrayBijection.map({v.name: point[v.name] for v in self.value_vars}).data

    def unravel(self, q: np.ndarray) -> dict:
        """Inverse of :meth:`ravel`."""
        return DictToArrayBijection.rmap(RaveledVars(q, self.point_map_info))
