"""What a model must be for a private step, checked before any data is read: which arrays
are per-datum rows, priors, potentials and initial values without data, array constants
that cannot spread one person's values, and the row-locality gate on every graph that runs.
"""

from __future__ import annotations

import os
import warnings

from types import FunctionType

import numpy as np
import pymc
import pytensor

from pymc.distributions.custom import CustomDistRV
from pymc.distributions.distribution import (
    SymbolicRandomVariable, _support_point, support_point,
)
from pymc.initial_point import make_initial_point_expression
from pymc.vartypes import continuous_types
from pymc.logprob.abstract import _logprob
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.tensor.random.type import RandomType

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.index_bounds import check_index_bounds
from pymc_dp.model.row_locality import NotRowLocal, foreign_ops, library_code, prove_rows_first
from pymc_dp.model.stand_ins import likelihood_on_stand_ins
from pymc_dp.model.data import (
    DatumInput,
    container_label,
    data_containers,
    is_public,
    numeric_value,
    private_data_variables,
    read_unshaped_lengths,
    reads_any,
    unshaped_lengths,
)
from pymc_dp.model.constants import (
    array_constants,
    arrays_written,
    constant_expressions,
    numbers_written,
    constant_uses,
    cross_row_constant_expression,
    has_rows,
    may_hold_people,
    shape_only_variables,
)

__all__ = ["ModelChecks"]


_PRIOR_READS_DATA = (
    "The prior of {!r} depends on data. The prior term is added without noise, so it must "
    "not read observed values, pm.Data or shared variables (declare public constants with "
    "pymc_dp.public_data(...)), nor NumPy arrays with one entry per individual (an "
    "errors-in-variables prior x_true ~ Normal(x_obs, ...) releases x_obs): model such "
    "values as observed variables (x_obs ~ Normal(x_true, ...), observed). A public "
    "constant shared by every individual is written as a scalar (mu=0 with shape=n, not "
    "np.zeros(n)): an array of n entries or more, even all equal, cannot be told from "
    "data. A public array that large (a design of the analysis) is passed as pm.Data "
    "declared with pymc_dp.public_data(...)."
)

_START_HOLDS_DATA = (
    "The start of {!r} (its initval=, or PyMC's support point of it, such as a "
    "pm.CustomDist's support_point=) reads data or a shared variable not declared public, "
    "holds an array of one entry per individual or more, runs code of its own (as_op), or, "
    "for a variable of one entry per individual, is as written as large as the data; it "
    "would be released as the chain's first draws, without noise. Initial values must be "
    "public: leave them to PyMC, or give scalars or NumPy arrays of fewer entries than "
    "individuals; an array of n entries or more, even all equal (np.zeros(n)), cannot be "
    "told from data and is refused: use a scalar prior mean and PyMC's start instead."
)


def _not_row_local(what: str, err: NotRowLocal) -> str:
    """The refusal of a graph the row-locality proof fails on: the Op type and the fix."""
    if err.mixes:
        why = (
            f"{what} computes with {err.op} ({err.why}), which can make one row of the "
            "data change the values of other rows."
        )
    else:
        why = (
            f"{what} computes with {err.op} ({err.why}): the row-locality proof cannot show "
            "that it keeps rows apart, and a private step accepts only models it proves to."
        )
    return f"{why} {_REWRITE}"


_REWRITE = (
    "Private steps need ℓ_j to depend on row j only. Compute per-person values elementwise "
    "and reduce only over axes other than the rows; index parameters or public tables "
    "(pymc_dp.public_data) by per-row integer arrays (a[group]), never per-person values by "
    "an index array (x[g]: give each row its own values instead); preprocess with public "
    "constants (no standardising by the data's own mean or sd, lags or cumulative sums); "
    "and keep Scan, as_op and custom Ops out of the likelihood. See 'What the model must "
    "look like' in docs/private-mcmc.md."
)


def _refuse_foreign_ops(outputs, what: str) -> None:
    """Refuse a graph that runs code other than PyTensor's and PyMC's (:func:`foreign_ops`)."""
    found = foreign_ops(outputs)
    if found:
        raise UnsupportedModelError(
            f"{what} computes with {', '.join(found)}: an operation that runs code of its own "
            "(as_op, wrap_py, or an Op defined outside PyTensor and PyMC), which may read data "
            "held in its Python code, and a private step cannot see what it reads. Write it "
            "with PyTensor operations (see 'What the model must look like' in "
            "docs/private-mcmc.md)."
        )


def _check_observed_expression(name: str, value: Variable, containers) -> None:
    """Refuse an observed value computed from data other than row by row.

    Its rows would mix (``x - x.mean()``) and its length could be a count of the data
    (``x[x > 0]``); proven row-local from the containers it reads, its length is theirs.
    """
    rows = {c: 0 for c in containers if c.ndim >= 1 and reads_any([value], [c])}
    try:
        prove_rows_first([value], rows)
    except NotRowLocal as err:
        raise UnsupportedModelError(
            _not_row_local(f"The observed value of {name!r}", err)
            + " Observed values computed from pm.Data must be computed row by row (or pass "
            "them as arrays)."
        ) from None


class ModelChecks:
    """Validation of :class:`~pymc_dp.model.PrivateModel` (a mixin)."""

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

    def _find_datum_inputs(self) -> list[DatumInput]:
        """The per-datum arrays (leading axis = individual) the likelihood reads, checked.

        Observed values, private containers and NumPy arrays in the likelihood with n rows;
        everything else the likelihood reads must be public. Reads shapes and structure,
        and the values only to refuse non-finite data (saying where, never what).
        """
        model = self.model
        _check_observations(model)
        containers = data_containers(model)
        inputs = [_observed_input(model, rv, containers) for rv in model.observed_RVs]
        n = _shared_length(inputs)
        # An observed value computed from pm.Data (``observed=f(x)``) is not an input: the
        # pm.Data it reads is, so that the row-locality probe sees what f does across rows.
        observed_exprs = [d.variable for d in inputs]
        inputs = [d for d in inputs if isinstance(d.variable, Constant | SharedVariable)]
        private = set(private_data_variables(model))
        inputs += _containers_on_datum_axis(containers, inputs, private, n)
        self._check_constant_expressions(n)
        # Built once, on stand-ins for the data (nothing folded by value), and compiled as
        # is (_compile): the constants found here must be the compiled ones.
        self._likelihood_build = likelihood_on_stand_ins(model, n)
        likelihood = self._likelihood_build.on_model(model)
        self._likelihood_terms = likelihood
        inputs += _array_constants_on_datum_axis(model, likelihood, inputs, n)
        self._check_array_constants(likelihood, n)
        _check_terms_have_datum_axis(model, likelihood)
        _check_nothing_hidden(containers, inputs, private, likelihood)
        if not inputs:
            raise UnsupportedModelError(
                "No data array with one row per individual was found on the leading axis."
            )
        for d in inputs:
            _check_values(d, observed_exprs)
        return inputs

    def _check_constant_expressions(self, n: int) -> None:
        """Refuse computations across the rows of a NumPy array written inside the model.

        PyMC folds expressions of constants alone (``x - x.mean()`` with ``x`` a NumPy array
        of n rows, a threshold on ``max(y)``) into new constants when it builds the
        log-densities, so a proof on such a graph only sees their results (the likelihood
        is built on stand-ins for the arrays, but priors and the inner graphs of symbolic
        distributions are not, and refusing early says why). They are found here,
        on the model's own graphs of the parameters of every observed and free variable
        (and inside the inner graphs of ``pm.CustomDist(dist=...)`` and other symbolic
        distributions), by the structural row-locality proof (:mod:`pymc_dp.model.row_locality`)
        with every array that has n entries along some axis as per-datum input along it.
        Reads shapes and structure only.
        """
        model = self.model

        def inner_graph(op):  # a symbolic distribution: its graph is folded too
            inner = getattr(op, "fgraph", None)
            return [] if inner is None else [(list(inner.outputs), set(inner.inputs))]

        graphs = []
        for rv in model.observed_RVs + model.free_RVs:
            graphs += [(list(rv.owner.inputs), set(model.free_RVs))] + inner_graph(rv.owner.op)
        while graphs:
            outputs, blockers = graphs.pop()
            nodes = io_toposort(list(graph_inputs(outputs, blockers=blockers)), outputs)
            for node in nodes:
                graphs += inner_graph(node.op)
            if cross_row_constant_expression(outputs, nodes, blockers, n):
                raise UnsupportedModelError(
                    "The model computes across the rows of a NumPy array with n entries "
                    "(e.g. x - x.mean(), max(x), a sort or a cumulative sum). PyMC evaluates "
                    "such expressions when it builds the model, before a private step can "
                    "check them, and one person's value would then move every row's "
                    "log-likelihood. Compute them from public values, or pass the array as "
                    "pm.Data (the step then checks what the model does with it; declare it "
                    "with pymc_dp.public_data(...) if it is a public table)."
                )

    def _check_array_constants(self, likelihood, n: int) -> None:
        """Refuse NumPy arrays off the datum axis that the likelihood may spread across rows.

        Like ``pm.Data`` that is not declared public, an array whose leading length is not
        n may hold people's records: a per-person table read through a per-row index
        (``x[g]``, m people in n rows) lets one person move many rows. Looked for in the
        likelihood as compiled, in the observed variables' own graphs (before PyMC folds
        NumPy-only expressions such as ``x[g]`` into a new constant of n rows), in their
        log-densities as written (``pm.CustomDist(logp=...)``), and inside inner graphs.
        Shapes, sizes and index arrays pass (:func:`may_hold_people`). Reads shapes,
        types and structure only.
        """
        model = self.model
        free = set(model.free_RVs)
        graphs = [list(likelihood)]
        for rv in model.observed_RVs:
            graphs.append([rv])
            try:  # the log-density as the distribution writes it, before any rewrite
                with warnings.catch_warnings():  # (about clones of the free variables)
                    warnings.simplefilter("ignore")
                    raw = _logprob(rv.owner.op, [model.rvs_to_values[rv]], *rv.owner.inputs)
            except NotImplementedError:
                continue  # derived from an inner graph, which is entered
            graphs.append([raw] if isinstance(raw, Variable) else list(raw))
        sideways = spread = False
        for graph in graphs:
            shape_only = shape_only_variables(graph)  # (inner graphs: none, fail closed)
            for const, node, position in constant_uses(graph, blockers=free):
                shape = np.shape(const.data)
                if shape[0] == n:
                    continue  # per-datum (an input of the compiled graph, or proven inside)
                if n in shape[1:]:
                    sideways = True
                elif may_hold_people(const, node, position, shape_only):
                    spread = True
        if sideways:
            # (No shapes or counts in the message: a constant PyMC folded from data, x[x > 0]
            # say, has a shape that depends on the values.)
            raise UnsupportedModelError(
                "The likelihood reads NumPy arrays with one entry per individual on an axis "
                "other than the first. If they hold people's values (transposed covariates), "
                "put one row per person on the leading axis; if they are public constants, "
                "wrap them in pm.Data and declare them with pymc_dp.public_data(...)."
            )
        if spread:
            raise UnsupportedModelError(
                "The likelihood reads a NumPy array that is not on the datum axis (its leading "
                "length is not the number of rows): a table indexed by per-row integers "
                "(x[g]), values shared by every row, or an index array that picks or places "
                "parameters (a[table], positions set from a table). If it holds people's "
                "values (a per-person table of covariates), one person would move many rows "
                "and the "
                "privacy guarantee would not hold: give each row its own values (one row per "
                "person on the leading axis). If it is a public constant (a design of the "
                "analysis, a known covariance matrix), wrap it in pm.Data and "
                "declare it with pymc_dp.public_data(...). PyMC makes such arrays from "
                "numbers you give, too (the fixed psi of a zero-inflated distribution, a "
                "mixture's fixed weights): pass those numbers as pm.Data declared public. "
                "Rows picked by a mask or an "
                "index (x[event], for censored times) are one too: keep every person's row "
                "in one observed variable (pm.Censored for censored times)."
            )

    def _check_priors_and_potentials(self):
        """Refuse priors, potentials and initial values that hold data.

        They enter a release without noise: the prior and potential terms are added to
        every acceptance ratio as they are, and the initial point is where the chain starts
        (and what it returns while no proposal is accepted). Besides observed values and
        containers that are not declared public, a NumPy array of n entries or more in any
        layout (:func:`~pymc_dp.model.constants.has_rows`) is data here (an
        errors-in-variables prior ``x_true ~ Normal(x_obs, ...)``, ``initval=x_obs``), even
        when its entries are equal. The initial point passes one only where it equals
        PyMC's own initial point, computed from the values checked here.
        """
        model = self.model
        n = self.n_data
        # Containers declared public (pymc_dp.public_data) are constants here; observed
        # values, and what they are computed from, never are.
        data_vars = private_data_variables(model)
        free = set(model.free_RVs)
        for rv in model.free_RVs:
            logp = model.logp(vars=[rv])
            _refuse_foreign_ops([logp], f"The prior of {rv.name!r}")
            as_written = [c for c, _, _ in constant_uses([rv], blockers=free - {rv})]
            as_written += constant_expressions([rv])
            if reads_any([logp], data_vars) or has_rows(arrays_written([logp], True), n):
                raise UnsupportedModelError(_PRIOR_READS_DATA.format(rv.name))
            # Its draws too (a CustomDist's random= may read what its logp does not): the
            # warm-up's start comes from prior draws (plausible_start).
            if reads_any([rv], data_vars, blockers=list(free - {rv})):
                raise UnsupportedModelError(_PRIOR_READS_DATA.format(rv.name))
            if has_rows(as_written, n):
                raise UnsupportedModelError(_PRIOR_READS_DATA.format(rv.name))
        reading = read_unshaped_lengths(model, [*model.free_RVs, *model.observed_RVs])
        if reading:
            # (a prior is added without noise; a likelihood's number shared by every row is
            # taken as public by the row-locality proof)
            raise UnsupportedModelError(
                f"The parameters of {reading} read, as a value, the length of a dimension no "
                "variable has; it may be a count of the data. Use a public constant."
            )
        for pot in model.potentials:
            graph = model.replace_rvs_by_values([pot])
            _refuse_foreign_ops(graph, f"pm.Potential {pot.name!r}")
            if (reads_any(graph, data_vars) or array_constants(graph, inner=True)
                    or numbers_written([pot], blockers=model.free_RVs) >= n):
                raise UnsupportedModelError(
                    f"pm.Potential {pot.name!r} reads observed values, pm.Data, a shared "
                    "variable or an array constant, or is, as written, as large as the data: "
                    "as many constants, operations and their inputs and settings as there "
                    "are individuals, or more (n numbers can be written in any arrangement). "
                    "Potentials are added without noise, so they must not hold data; express "
                    "data terms as observed variables. A long Potential of parameters alone "
                    "(several pm.logp terms) can be split into several Potentials, each "
                    "counted on its own."
                )
        for rv, init in model.rvs_to_initial_values.items():
            if isinstance(init, str) and init != "support_point":
                # ("prior" draws each chain's start anew, by the variable's random=, which
                # may be a closure: nothing to check, and never the start that was checked)
                raise UnsupportedModelError(
                    f"The initial value of {rv.name!r} is the strategy {init!r}, which draws "
                    "each chain's start at run time: the start is released as the chain's "
                    "first draws, without noise, and must be checked when the step is "
                    "built. Leave initval out (the warm-up picks the start privately) or "
                    "give a public number."
                )
            if init is None or isinstance(init, str | Variable):
                continue  # (checked below, in the start PyMC computes from it)
            try:  # (a list, a tuple, a pandas Series: as numbers)
                holds_data = has_rows([np.asarray(init, dtype=float)], n)
            except (TypeError, ValueError):
                holds_data = True  # (not numbers: cannot be checked)
            if holds_data:
                raise UnsupportedModelError(_START_HOLDS_DATA.format(rv.name))
        # PyMC's own start, one expression per variable: its initial value, or its support
        # point, which a CustomDist computes with a function of the user's (a closure may
        # hold data, as its logp's may). Its leaves may be constants, random generators
        # (PyMC leaves some of its distributions' there), the lengths of the model's dims
        # and containers declared public; PyMC copies shared variables into this graph,
        # which keep their storage. Any other shared variable, data or met only here, is
        # nobody's to vouch for.
        start = make_initial_point_expression(
            free_rvs=model.free_RVs, rvs_to_transforms=model.rvs_to_transforms,
            initval_strategies=model.rvs_to_initial_values,
        )
        unshaped = unshaped_lengths(model)  # (dims no variable has: maybe counts of data)
        public = [*(v for v in model.dim_lengths.values() if v not in unshaped),
                  *(d for d in data_containers(model) if is_public(d) and d not in data_vars)]
        vouched = {id(v.container) for v in public if isinstance(v, SharedVariable)}
        entries = _entries(model)
        for rv, expr in zip(model.free_RVs, start, strict=True):
            unvouched = [
                v for v in graph_inputs([expr])
                if not isinstance(v, Constant) and not isinstance(v.type, RandomType)
                and id(getattr(v, "container", None)) not in vouched
            ]
            if (unvouched or reads_any([expr], data_vars) or foreign_ops([expr])
                    or has_rows(arrays_written([expr], inner=True), n)
                    # (released as a start of as many entries: n − 1 or more carry a
                    # person each, however their numbers are written)
                    or (entries[rv] >= max(n - 1, 4) and _start_numbers(rv, model) >= n)):
                raise UnsupportedModelError(_START_HOLDS_DATA.format(rv.name))
        # (a backstop for the step's initial_point=: PyMC's own initial point is computed
        # from the priors and initial values checked above alone, so a per-individual
        # array equal to its entry is public; any other, even all equal, is refused)
        own = self._pymc_start
        for name, value in self._initial_point.items():
            # (on the value space: a transform may drop an entry per axis, a zero-sum or
            # simplex vector of one entry per individual has n - 1)
            if not has_rows([value], n - 1):
                continue
            if name not in own or not np.array_equal(np.asarray(value), own[name]):
                raise UnsupportedModelError(
                    f"The initial point's value of {name!r} has one entry per individual "
                    "and is not PyMC's own initial value. It is where the chain starts, and "
                    "would be released without noise, and nothing shows that an array with "
                    "one entry per individual is not data, even with equal entries: leave "
                    "the start of such variables to PyMC."
                )

    def _check_graph(
        self, outputs, q, row_inputs, what: str, public=(), parameters=None, row_values=None
    ) -> None:
        """Refuse ``outputs`` unless proven row-local and its index arrays in range.

        ``row_inputs`` are the per-datum inputs (their values: the data, in order); the
        graph's other input is the raveled point θ, ``q``, and those of ``parameters`` (a
        dict of public inputs, such as the warm-up's basis, to a public value each). The proof
        (:mod:`pymc_dp.model.row_locality`) is the gate: every operation must match a rule that
        shows output row j reads data row j only, or the model is refused, naming the
        operation's type. Then every integer index array must lie in its table
        (:mod:`pymc_dp.model.index_bounds`). Both read shapes and structure, and the smallest
        and largest index entries, only to refuse; nothing of them is returned or printed.
        ``row_values``: the values of ``row_inputs`` when they are more than the data.
        """
        # (the proof meets only the Ops that compute values; a check's condition on
        # parameters alone is kept without one, and runs at every evaluation all the same)
        _refuse_foreign_ops(outputs, what)
        try:
            prove_rows_first(outputs, {p: 0 for p in row_inputs}, self.n_data, public)
        except NotRowLocal as err:
            raise UnsupportedModelError(_not_row_local(what, err)) from None
        point = np.asarray(self.ravel(self._initial_point), dtype=self._q.dtype)
        parameters = dict(parameters or {})
        check_index_bounds(
            outputs,
            [q, *parameters, *row_inputs],
            [point, *parameters.values(), *(self._data_values if row_values is None
                                            else row_values)],
        )


#: Why a model without observed variables is refused, for every private method.
NO_OBSERVED_MESSAGE = (
    "The model has no observed variables. A private method protects the rows of observed "
    "data and finds none here; a model that reads data another way (a likelihood written "
    "as pm.Potential, data inside a prior or a deterministic) cannot be protected by it. "
    "Write the likelihood as an observed distribution (e.g. pm.CustomDist(..., "
    "logp=..., observed=y)); use pm.sample only for a model that reads no private data."
)


def _check_observations(model) -> None:
    """Refuse a model without observed variables, or one PyMC would impute data for."""
    if not model.observed_RVs:
        # (not "no data": a likelihood written as a pm.Potential reads data all the same)
        raise UnsupportedModelError(NO_OBSERVED_MESSAGE)
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


def _observed_input(model, rv, containers) -> DatumInput:
    """The observed value of ``rv`` as a per-datum input, refused unless it has rows and is
    an array passed in or computed row by row from data containers."""
    value_var = model.rvs_to_values[rv]
    value = numeric_value(value_var)
    if value.ndim == 0:
        raise UnsupportedModelError(
            f"Observed variable {rv.name!r} is a scalar. A private step needs one row "
            "per individual along the leading axis of every observed variable."
        )
    if not isinstance(value_var, Constant | SharedVariable):
        if not reads_any([value_var], containers):
            raise UnsupportedModelError(
                f"The observed value of {rv.name!r} is an expression of constants; "
                "pass the data as a NumPy array or pm.Data."
            )
        _check_observed_expression(rv.name, value_var, containers)
    if value.shape[0] == 0:
        raise UnsupportedModelError(
            f"Observed variable {rv.name!r} has no rows. A private step needs at least "
            "one individual: pass data with one row per individual."
        )
    return DatumInput(value_var, value, f"observed variable {rv.name!r}")


def _shared_length(inputs: list[DatumInput]) -> int:
    """n, the leading length all observed values share; refused if they differ."""
    lengths = {d.label: d.value.shape[0] for d in inputs}
    if len(set(lengths.values())) > 1:
        # (Lengths only of arrays passed in. An observed value computed from pm.Data is
        # proven row-local above, so its length is that of an array passed in, but it
        # is left out all the same.)
        given = {
            label: length
            for (label, length), d in zip(lengths.items(), inputs)
            if isinstance(d.variable, Constant | SharedVariable)
        }
        raise UnsupportedModelError(
            "Observed variables must share the leading (individual) axis; their leading "
            f"lengths differ (of the arrays passed in: {given})."
        )
    return inputs[0].value.shape[0]


def _containers_on_datum_axis(containers, inputs, private, n: int) -> list[DatumInput]:
    """Private containers of leading length n besides the observed ones: per-person rows."""
    observed_vars = {d.variable for d in inputs}
    found = []
    for data_var in containers:
        if data_var in observed_vars:
            continue
        if data_var not in private:
            continue  # declared public: a constant, even if its length happens to be n
        value = numeric_value(data_var)
        if value.ndim >= 1 and value.shape[0] == n:
            found.append(DatumInput(data_var, value, container_label(data_var)))
    return found


def _array_constants_on_datum_axis(model, likelihood, inputs, n: int) -> list[DatumInput]:
    """NumPy arrays with n rows written into the likelihood: per-individual values
    (covariates), data like pm.Data, whose rows the row-locality proof follows."""
    datum_vars = {d.variable for d in inputs}
    found = []
    for k, const in enumerate(array_constants(likelihood)):
        if const not in datum_vars and np.shape(const.data)[0] == n:
            value = np.asarray(const.data)
            where = ", ".join(
                repr(rv.name)
                for term, rv in zip(likelihood, model.observed_RVs)
                if reads_any([term], [const])
            )
            label = (
                f"a NumPy array with one row per individual (#{k}, in the "
                f"log-likelihood of {where})"
            )
            found.append(DatumInput(const, value, label))
            datum_vars.add(const)
    return found


def _check_terms_have_datum_axis(model, likelihood) -> None:
    for term, rv in zip(likelihood, model.observed_RVs):
        if term.ndim == 0:
            raise UnsupportedModelError(
                f"The log-density of observed variable {rv.name!r} has no datum axis (a "
                "multivariate distribution over the whole leading axis, such as a random "
                "walk or an AR process over the rows?). A private step needs one "
                "log-density value per individual along the leading axis, each reading its "
                "own row only. Write the likelihood row by row (one person per row, a "
                "distribution per row); a series whose rows depend on each other is not a "
                "dataset of people, and its privacy needs another unit. See "
                "docs/private-mcmc.md, 'What the model must look like'."
            )


def _check_nothing_hidden(containers, inputs, private, likelihood) -> None:
    """Refuse a private container the likelihood reads that is not on the datum axis."""
    datum_vars = {d.variable for d in inputs}
    hidden = [
        container_label(d)
        for d in containers
        if d not in datum_vars
        and d in private  # (public ones too, if observed values are computed from them)
        and reads_any(likelihood, [d])
    ]
    if hidden:
        raise UnsupportedModelError(
            f"The likelihood reads {hidden}, which is not on the datum axis (its "
            "leading length is not the number of rows). If it holds people's records (a "
            "per-person table indexed by observations), one person would move several rows "
            "and the privacy guarantee would not hold: put one row per person on the "
            "leading axis. If it is a public constant, declare it with "
            "pymc_dp.public_data(...)."
        )


def _check_values(d: DatumInput, observed_exprs) -> None:
    """Numeric data; observed values finite, covariates without NaN (a per-person censoring
    bound of pm.Censored may be ±inf). Says where, never what."""
    if not np.issubdtype(d.value.dtype, np.number) and d.value.dtype != bool:
        raise UnsupportedModelError(f"The data of {d.label} is not numeric.")
    observed = reads_any(observed_exprs, [d.variable])
    if not np.all(np.isfinite(d.value) if observed else ~np.isnan(d.value)):
        raise ValueError(
            f"The data of {d.label} contains non-finite values "
            f"({'NaN or inf' if observed else 'NaN'}). Private steps need "
            f"{'finite data' if observed else 'data without NaN'}; remove or impute "
            "those rows before sampling."
        )


def _start_numbers(rv, model) -> int:
    """What the start PyMC gives ``rv`` holds as written
    (:func:`~pymc_dp.model.constants.numbers_written`): its initial value as given; else,
    up to the free variables (priors are checked apart), the parameters it is computed from
    where PyMC's own rule computes it from them (PyMC's rules add nodes, not data: a
    truncated normal's start measures about 80 with them), else the whole support point —
    a ``pm.CustomDist``, a rule or a class of the user's, and distributions built of
    others (a mixture's or a truncation's rule calls its components', which may be the
    user's)."""
    init = model.rvs_to_initial_values.get(rv)
    if isinstance(init, Variable):
        return numbers_written([init])
    if init not in (None, "support_point"):
        return 0  # (NumPy values: counted by their entries)
    op = rv.owner.op
    if (isinstance(op, SymbolicRandomVariable | CustomDistRV)
            or not _pymcs_own(_support_point.dispatch(type(op)))):
        written = [support_point(rv)]
    else:
        written = list(op.dist_params(rv.owner))
    return numbers_written(written, blockers=model.free_RVs)


def _pymcs_own(rule) -> bool:
    """Whether ``rule`` is PyMC's code, and what its closure holds library code (PyMC
    registers each distribution's ``support_point`` through a closure holding the
    class's)."""
    return isinstance(rule, FunctionType) and library_code(rule, (_PYMC_DIR,))


_PYMC_DIR = os.path.dirname(os.path.abspath(pymc.__file__)) + os.sep


def _entries(model) -> dict:
    """The number of entries of each free variable: from its static shape, else its shape
    computed (infinite if it cannot be). Not from its dims: ``shape=`` wins over ``dims`` in
    PyMC, and a variable may have more entries than its dims' lengths say.

    A start of n − 1 entries or more can carry every person's number; below four entries
    (n < 5, where PyMC's own start of a scalar holds as many numbers as there are people)
    a start is taken as one of the analysis."""
    sizes = {rv: float(np.prod(rv.type.shape)) for rv in model.free_RVs
             if None not in rv.type.shape}
    unknown = [rv for rv in model.free_RVs if rv not in sizes]
    try:  # (one compiled function for all: a shape released with the results anyway)
        shapes = pytensor.function([], [rv.shape for rv in unknown])() if unknown else []
    except Exception:  # (not computable before sampling: as if unbounded)
        shapes = [np.inf] * len(unknown)
    sizes.update({rv: float(np.prod(shape)) for rv, shape in zip(unknown, shapes)})
    return sizes
