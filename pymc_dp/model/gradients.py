"""Per-datum gradients of the log-likelihood, clipped and summed in one compiled pass (the
gradient steps' statistic), as rows (the warm-up's), and the likelihood's own parameters.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pytensor.compile.sharedvalue import SharedVariable
from pytensor.gradient import NullTypeGradError
from pytensor.gradient import grad as pt_grad
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import graph_inputs, io_toposort  # batches of rows

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model.per_datum_gradients import (
    clipped_row_count,
    clipped_row_sum,
    forward_columns,
    reverse_columns,
)
from pymc_dp.model.row_locality import is_row_local
from pymc_dp.model.data import numeric_value, private_data_variables, reads_any
from pymc_dp.model.constants import constant_uses, has_rows, inner_graph_outputs
from pymc_dp.model.graphs import (
    as_list, compile_function, require_float64, withholding_details,
)

__all__ = ["Gradients"]


class Gradients:
    """Gradients of :class:`~pymc_dp.model.PrivateModel` (a mixin)."""

    def compile_gradients(self, method: str = "auto", count: bool = False) -> None:
        """Compile :meth:`clipped_gradient` now (it is otherwise compiled on first use).

        Steps that need gradients call this at construction, so that a model they cannot
        differentiate is refused before any data is read; steps that do not (DP penalty)
        never pay for it.

        Parameters
        ----------
        method : {"auto", "reverse", "forward"}
            How per-datum gradients are computed (:mod:`pymc_dp.model.per_datum_gradients`).
            ``"auto"`` (default) uses reverse mode through per-row copies of the parameter
            tensors broadcast along the rows where the structure of the model's graph
            proves it keeps rows apart (and, with up to 6 coordinates, it needs few terms),
            else forward mode (one pass per coordinate of θ). ``"reverse"`` also copies the
            outputs of ``X @ β`` and ``a[g]`` per row (up to 12 coordinates): from half of
            forward mode's time to several times it, depending on the model and on the
            memory allocator (``benchmarks/per_datum_gradients.py``), which is why "auto"
            does not.
            The choice reads no data. Stored in :attr:`gradient_method`.
        count : bool
            Also compile the functions of ``clipped_gradient(..., count=True)`` (the clip
            diagnostics), by the same method.

        Raises
        ------
        UnsupportedModelError
            If the log-likelihood or the prior has an operation without a gradient.
        ValueError
            If ``method="reverse"`` is asked for a model where it does not apply.
        """
        if method not in ("auto", "reverse", "forward"):
            raise ValueError(f"method must be 'auto', 'reverse' or 'forward', got {method!r}")
        if self._gradient_fn is not None and method in ("auto", self.gradient_method):
            if count and self._counted_gradient_fns is None:
                self._compile_counted_gradients()
            return
        fn, chosen, may_fall_back = self._compiled_gradient_fn(method)
        if method == "reverse" and chosen != "reverse":
            raise ValueError(
                "Reverse-mode per-datum gradients do not apply to this model: a parameter "
                "tensor meets the data other than elementwise along the datum axis or "
                "through X @ β or a[g] (with at most 12 coordinates), the graph's structure "
                "does not prove that rows stay apart, or the parameters' Jacobian is too "
                "dense. Use method='forward' (or 'auto')."
            )
        if may_fall_back and self._forward_gradient_fn is None:
            # Compiled now, not in the middle of a chain (see clipped_gradient), and before
            # the reverse function is installed: if it is refused, nothing is.
            self._forward_gradient_fn, _, _ = self._compiled_gradient_fn("forward")
        self._gradient_fn, self.gradient_method = fn, chosen
        self._gradient_method_asked = method
        self._counted_gradient_fns = None
        if count:
            self._compile_counted_gradients()

    def _compile_counted_gradients(self) -> None:
        """The gradient functions with the count of clipped rows as a fourth output, by the
        method :meth:`compile_gradients` chose (and its forward fallback)."""
        asked = getattr(self, "_gradient_method_asked", "auto")
        fn, chosen, may_fall_back = self._compiled_gradient_fn(asked, count=True)
        if chosen != self.gradient_method:  # (the same graph choice: it reads no data)
            fn, chosen, may_fall_back = self._compiled_gradient_fn(self.gradient_method, count=True)
        forward = self._compiled_gradient_fn("forward", count=True)[0] if may_fall_back else None
        self._counted_gradient_fns = (fn, forward)

    def _compiled_gradient_fn(self, method: str, count: bool = False):
        """The compiled :meth:`_clipped_gradient_graph`, the method it uses, and whether it
        may need forward mode at some θ (reverse mode left Jacobian entries out)."""
        inputs, outputs, chosen = self._clipped_gradient_graph(method, count=count)
        # on_unused_input: as for the log-likelihood (a per-datum pm.Data it does not read)
        fn = compile_function(inputs, outputs, on_unused_input="ignore", **self._compile_kwargs)
        fn.trust_input = True
        return fn, chosen, not isinstance(outputs[2], Constant)

    def _clipped_gradient_graph(
        self, method: str = "forward", per_row: bool = False, count: bool = False
    ) -> tuple[list[Variable], list[Variable], str]:
        """Inputs ``[θ, b, *data]``, outputs ``[Σ_j clip_b(∇ℓ_j), ∇ log prior, dropped]``
        (and, with ``count``, the number of rows clipped:
        :func:`~pymc_dp.model.per_datum_gradients.clipped_row_count`).

        ``method="forward"``: one Jacobian-vector product per coordinate of θ with the
        constant tangent e_k gives the column ``(∂ℓ_j/∂θ_k)_j`` (d passes over the data;
        always available; a ``pm.Data`` design matrix entering through ``X @ β`` costs about
        one pass, as ``X @ e_k`` is rewritten to ``X[:, k]``). ``"reverse"`` or ``"auto"``:
        one reverse pass through per-row copies of the parameter tensors that meet the data
        (``"reverse"`` also of the outputs of linear operations, ``X @ β``, ``a[g]``) where
        :func:`~pymc_dp.model.per_datum_gradients.reverse_columns` proves it applies, else
        forward mode. Neither has an (n, n) intermediate or a loop or scan over data.
        ``dropped`` (a function of θ alone) is 0 unless a Jacobian entry that reverse mode
        left out is not zero at θ; :meth:`clipped_gradient` then uses forward mode.
        Clipping: :func:`~pymc_dp.model.per_datum_gradients.clipped_row_sum`. Also returns the
        method used.
        """
        q = self._q
        bound = pt.scalar("grad_clip", dtype="float64")
        try:
            reverse = None
            basis = pt.matrix("basis", dtype=q.dtype)
            if method != "forward" and not per_row:
                try:
                    reverse = reverse_columns(
                        self._per_datum_graph,
                        q,
                        self._placeholders,
                        self.n_data,
                        self._public_points(3, 0.3),
                        max_terms=max(16, 4 * self.dim),
                        basis=basis,  # the columns of the rows Bᵀ∇ℓ_j
                        # Through X @ β or a[g] only when asked: from 0.5 to several times
                        # forward mode's time, and nothing public tells which in advance.
                        linear_outputs=method == "reverse",
                    )
                except Exception:
                    reverse = None  # forward mode says whether the model has gradients at all
            rows = {p: 0 for p in self._placeholders}
            if reverse is not None and not is_row_local(
                as_list(reverse.columns), rows, self.n_data
            ):
                reverse = None  # the graph that would run (copies set to zero) is not proven
            if reverse is None and per_row:
                if self._forward_columns is None:  # built once: its proof is memoised too
                    self._forward_columns = forward_columns(self._per_datum_graph, q, self.dim)
                columns, dropped = self._forward_columns, None
            elif reverse is None:  # (along B's columns: the rows come out in B's coordinates)
                columns = forward_columns(self._per_datum_graph, q, self.dim, basis)
                dropped = None
            else:
                columns, dropped = reverse.columns, reverse.dropped
            prior_grad = pt_grad(self._prior_graph, q, disconnected_inputs="ignore")
        except (NotImplementedError, NullTypeGradError) as err:
            raise UnsupportedModelError(
                "The model is not differentiable: an operation in its log-likelihood or prior "
                f"has no gradient ({type(err).__name__}: {err}). Gradient-based private steps "
                "(DPHMC) need a differentiable model; use DPPenalty, which needs none."
            ) from None
        if dropped is None:
            dropped = pt.constant(0.0, dtype=q.dtype)
        # The gradient graph that will run is proven too, not assumed from the likelihood's.
        # (Constants it adds, e.g. forward mode's tangents, are public whatever their length;
        # the likelihood's data constants are inputs by now.)
        likelihood = set(graph_inputs([self._per_datum_graph]))
        added = [
            c for c in graph_inputs(as_list(columns))
            if isinstance(c, Constant) and c not in likelihood
        ]
        if per_row:
            # The warm-up's (n, d) matrix of per-datum gradients (private: released only
            # through the clipped, noised statistics of pymc_dp.kernels.warmup).
            self._check_graph(columns, q, self._placeholders, "The per-datum gradient", added)
            rows = pt.stack(columns, axis=1)
            return [q, *self._placeholders], [rows, prior_grad], "forward"
        # In the coordinates u of θ = θ_0 + B u (B public, the identity unless a warm-up
        # chose a metric) a datum's gradient is Bᵀ∇ℓ_j: clipping it bounds the sensitivity
        # in that metric just the same.
        self._check_graph(
            as_list(columns), q, self._placeholders, "The per-datum gradient", added,
            parameters={basis: np.eye(self.dim, dtype=q.dtype)},
        )
        # (the clip and the sums in float64 whatever floatX is: see clipped_ratio)
        rows64 = (
            [pt.cast(c, "float64") for c in columns] if isinstance(columns, list)
            else pt.cast(columns, "float64")  # the (n, d) rows
        )
        clipped = clipped_row_sum(rows64, bound)
        chosen = "forward" if reverse is None else "reverse"
        outputs = [clipped, pt.dot(prior_grad, basis), dropped]
        if count:
            outputs.append(clipped_row_count(rows64, bound))
        return [q, bound, basis, *self._placeholders], outputs, chosen

    def _public_points(self, count: int, spread: float, seed: int = 7) -> list[np.ndarray]:
        """The initial point and ``count − 1`` points around it (fixed seed: public)."""
        point = np.asarray(self.ravel(self._initial_point), dtype=self._q.dtype)
        rng = np.random.default_rng(seed)
        return [point] + [
            point + spread * rng.standard_normal(point.shape) for _ in range(count - 1)
        ]

    def clipped_gradient(
        self, q: np.ndarray, bound: float, basis: np.ndarray | None = None, count: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, int]:
        """``(Σ_j clip_b(Bᵀ∇_θ ℓ_j(θ)), Bᵀ∇_θ log prior(θ))`` at raveled point ``q``.

        The first array is private (sensitivity 2b under replace-one): never release it
        without noise. The second is the public prior gradient (Jacobians included). Both
        have shape ``(dim,)``. ``basis`` B (public, default the identity) gives the
        gradients in the coordinates u of ``θ = θ_0 + B u``, so the clip bounds the norm in
        that metric. Compiled on first use (:meth:`compile_gradients`). ``count=True``
        also returns the number of rows clipped (norm > b or not finite; reference
        :func:`~pymc_dp.kernels.clipping.clipped_row_count`), from the same compiled pass
        (private: the clip diagnostics release it with noise).

        Examples
        --------
        >>> import numpy as np, pymc as pm
        >>> from pymc_dp.model import PrivateModel
        >>> with pm.Model() as m:
        ...     mu = pm.Normal("mu", 0, 10)
        ...     _ = pm.Normal("y", mu, 1, observed=np.array([0.5, -0.2, 3.0]))
        >>> clipped, prior = PrivateModel(m).clipped_gradient(np.array([0.0]), 1.0)
        >>> clipped, prior  # per-datum y_j − μ = 0.5, −0.2, 3 → clipped to 0.5, −0.2, 1
        (array([1.3]), array([-0.]))
        """
        if not bound > 0:
            raise ValueError(f"bound must be > 0, got {bound!r}")
        self.compile_gradients(count=count)
        gradient_fn, forward_fn = (
            self._counted_gradient_fns if count
            else (self._gradient_fn, self._forward_gradient_fn)
        )
        dtype = self._q.dtype
        basis = np.eye(self.dim, dtype=dtype) if basis is None else basis
        basis = np.ascontiguousarray(basis, dtype=dtype)
        if basis.shape != (self.dim, self.dim) or not np.all(np.isfinite(basis)):
            raise ValueError(f"basis must be a finite ({self.dim}, {self.dim}) matrix")
        args = (np.ascontiguousarray(q, dtype=dtype), np.asarray(bound, dtype="float64"), basis)
        what = "the clipped per-datum gradients"
        out = withholding_details(what, gradient_fn, *args, *self._data_values)
        if out[2] != 0:
            # Reverse mode left out a Jacobian entry (zero at the public points it was
            # chosen at) that is not zero at this θ: recompute in forward mode (compiled
            # with the reverse function). Whether this happens depends on θ alone.
            out = withholding_details(what, forward_fn, *args, *self._data_values)
        clipped = require_float64(out[0], "The clipped gradient sum")
        return (clipped, out[1], int(out[3])) if count else (clipped, out[1])

    def check_gradient_rows(self) -> None:
        """Build (not compile) the graph of :meth:`gradient_rows` and prove it row-local:
        a model without gradients is refused before any data is read
        (:class:`~pymc_dp.errors.UnsupportedModelError`). Compiling waits for first use."""
        if self._gradient_rows_graph is None:
            inputs, outputs, _ = self._clipped_gradient_graph("forward", per_row=True)
            self._gradient_rows_graph = (inputs, outputs)

    def compile_gradient_rows(self) -> None:
        """Compile :meth:`gradient_rows` (done on first use)."""
        if self._gradient_rows_fn is None:
            self.check_gradient_rows()
            inputs, outputs = self._gradient_rows_graph
            fn = compile_function(inputs, outputs, on_unused_input="ignore", **self._compile_kwargs)
            fn.trust_input = True
            prior = compile_function([self._q], outputs[1], **self._compile_kwargs)
            prior.trust_input = True
            self._gradient_rows_fn, self._prior_gradient_fn = fn, prior

    def gradient_rows(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(G, ∇ log prior)`` at ``q``: G's row j is ``∇_θ ℓ_j(θ)``.

        G (shape ``(n, dim)``) is private: the warm-up (:mod:`pymc_dp.kernels.warmup`)
        releases only clipped, noised statistics of it. The prior's gradient (Jacobians
        included) is public; its curvature is :meth:`prior_negative_hessian`. Forward mode,
        compiled on first use.

        Raises
        ------
        UnsupportedModelError
            If the log-likelihood or the prior has an operation without a gradient.
        """
        self.compile_gradient_rows()
        q = np.ascontiguousarray(q, dtype=self._q.dtype)
        return withholding_details(
            "the per-datum gradients", self._gradient_rows_fn, q, *self._data_values
        )

    def likelihood_parameters(self):
        """The likelihood's own parameters φ(θ), compiled on first use.

        A :class:`~pymc_dp.model.likelihood_parameters.LikelihoodParameters`, or ``None`` if
        the graph has none that a surrogate likelihood can use (reading the graph only, never
        data)."""
        if "_likelihood_parameters" not in self.__dict__:
            from pymc_dp.model.likelihood_parameters import LikelihoodParameters

            try:
                found = LikelihoodParameters(
                    self._per_datum_graph, self._q, self._placeholders,
                    private=[*private_data_variables(self.model),
                             *(d.variable for d in self.datum_inputs)],
                    compile_kwargs=self._compile_kwargs,
                )
                if not self._is_public_parameter_graph(found.graph):
                    found = None
            except ValueError:
                found = None
            self._likelihood_parameters = found
        return self._likelihood_parameters

    def likelihood_kinks(self) -> tuple[str, ...]:
        """The operations that bend each row's log-likelihood in θ at a point of its own
        (``abs``, ``sign``, ``maximum``: :func:`pymc_dp.model.kinks.model_kinks`); empty for
        a likelihood smooth row by row. Reads the model as written, never data values."""
        if "_likelihood_kinks" not in self.__dict__:
            from pymc_dp.model.kinks import model_kinks

            self._likelihood_kinks = model_kinks(
                self.model, self.n_data, self._likelihood_build
            )
        return self._likelihood_kinks

    def _is_public_parameter_graph(self, graph: Variable) -> bool:
        """Whether φ's graph provably reads θ and public constants only (fail closed).

        Refused: a graph that reads data (:meth:`reads_data`); any Op with an inner graph
        (an ``OpFromGraph`` or ``Scan`` can hold a per-row array as an inner constant, which
        the walk over the outer graph does not see); any constant or shared variable with
        one entry per individual (per-person values, even declared public: the release
        coordinates and the surrogate must not be indexed by people).
        """
        if self.reads_data(graph):
            return False
        nodes = io_toposort(graph_inputs([graph]), [graph])
        if any(inner_graph_outputs(node.op) for node in nodes):
            return False
        constants = [c for c, _, _ in constant_uses([graph])]
        shared = [
            numeric_value(v) for v in graph_inputs([graph]) if isinstance(v, SharedVariable)
        ]
        return not has_rows([*constants, *shared], self.n_data)

    def reads_data(self, graph: Variable) -> bool:
        """Whether ``graph`` reads an observed value, a private container or a per-datum
        array of this model (structure only)."""
        data = [*private_data_variables(self.model), *(d.variable for d in self.datum_inputs),
                *self._placeholders]
        return reads_any([graph], data)
