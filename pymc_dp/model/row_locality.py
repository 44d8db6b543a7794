"""A structural proof that a graph is row-local: output row j reads data row j only.

Clipping per-datum terms bounds a sum's sensitivity by 2b only if term j depends on datum j
alone. A probe (change a row, watch the others) can catch the ordinary ways a model breaks
this but cannot prove it. This module proves it from the graph's structure, without reading
any value: every variable gets a *datum axis*, the axis along which position i holds
something computed from row i of the per-datum inputs only (and from variables that read no
per-datum input at all, *row-free* ones). Every operation the outputs' values are computed
with must match a rule of the registry below, one small function per Op type, that shows
where its output's datum axis is. An Op type without a rule fails the proof, even on
row-free values: an Op the proof does not know (``as_op``, a scan, a custom Op) may compute
anything from anything, including data held outside the graph. A subclass shares its
parent's rule only if PyTensor or PyMC defines it (``Sum``, ``Assert``, ``LogSumExp``); one
defined elsewhere may compute its values differently and needs a rule of its own
(:class:`_Registry`).

The rules, in the words of a model:

* elementwise operations (PyTensor's scalar operations) whose per-datum inputs share the
  datum axis, none broadcast along it (broadcasting would copy one row into all); row-free
  values broadcast freely; ``fill``/``zeros_like`` read only the shape of their first input;
* dimension shuffles that keep the axis, reductions (sums, max, ``all``, argmax, cumulative
  sums) over other axes, reshapes that keep the leading length n, basic indexing with a full
  slice ``:`` on the axis (and row-free indices), ``set_subtensor``/``inc_subtensor``
  likewise, joins and splits along other axes;
* indexing a row-free table by per-datum integer arrays (``a[group]``, ``p[:, y]``): position
  i reads the table and index entry i; the indices of per-datum values must be a provable
  identity: ``arange`` over the datum axis (Categorical's ``p[arange(n), y]``);
* ``Blockwise`` operations (solves, Cholesky, batched products, …) whose datum axis is a
  batch axis of every per-datum input: the core operation runs on each batch entry alone;
* matrix products with a row-free factor that keep the datum axis;
* operations defined by an inner graph (``OpFromGraph``: LogSumExp, softmax, …): their inner
  graph is proven with the same rules;
* shape queries (the shapes are public), shape assertions and value checks, which pass their
  first input through (a check's condition decides only whether evaluation stops with an
  error, so it is not part of the proof).

Anything else with a per-datum input (a reduction over the datum axis, a slice or shift of
it, indexing per-datum values by data, ``x[g]``) and any Op without a rule fails the proof,
with a :class:`NotRowLocal` that names the Op type (never a value).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
import dataclasses
import functools
import importlib
import os
import sysconfig
import weakref

from abc import ABCMeta

from functools import lru_cache
from types import (
    BuiltinFunctionType, BuiltinMethodType, ClassMethodDescriptorType, FunctionType,
    GenericAlias, MethodDescriptorType, MethodType, MethodWrapperType, ModuleType, UnionType,
    WrapperDescriptorType,
)

import numpy as np
import pymc
import scipy.special
import pytensor
import pytensor.tensor as pt

from pytensor import configparser
from pytensor.compile.builders import OpFromGraph
from pytensor.compile.ops import DeepCopyOp, FromFunctionOp, ViewOp
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.op import Op
from pytensor.graph.type import Type
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.raise_op import CheckAndRaise
from pytensor.scalar.basic import Cast, Composite, ScalarOp, Second
from pytensor.tensor import linalg
from pytensor.tensor.basic import (
    ARange,
    Alloc,
    AllocEmpty,
    ExtractDiag,
    Eye,
    Join,
    MakeVector,
    ScalarFromTensor,
    Split,
    TensorFromScalar,
    get_scalar_constant_value,
)
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.extra_ops import CumOp
from pytensor.tensor.math import Argmax, Dot
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.sort import ArgSortOp, SortOp
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
    indices_from_subtensor,
)

__all__ = [
    "NotRowLocal",
    "datum_axes",
    "foreign_ops",
    "is_row_local",
    "op_label",
    "prove_rows_first",
    "value_ancestors",
]


class NotRowLocal(Exception):
    """The structure of a graph does not show that its rows are independent.

    Attributes
    ----------
    op : str
        The type name of the failing Op (with its scalar or core Op's type name), nothing
        computed from data.
    mixes : bool
        True when the failing operation moves values between rows (a reduction over the
        datum axis, a slice or shift of it, an index into per-datum values, a per-datum value
        broadcast to every row, a product that contracts the datum axis); False when the
        proof has no rule for it (an Op without a rule, a reshape or core axis it cannot
        follow). Either way the graph is refused.
    """

    def __init__(self, op: str, why: str, mixes: bool = True):
        super().__init__(f"{op}: {why}")
        self.op = op
        self.why = why
        self.mixes = mixes


def op_label(op) -> str:
    """The type name of ``op``, with the type of its scalar or core Op (no values)."""
    inner = getattr(op, "scalar_op", None) or getattr(op, "core_op", None)
    name = type(op).__name__
    return name if inner is None else f"{name}({type(inner).__name__})"


def is_row_local(
    outputs: Sequence[Variable], row_inputs: Mapping[Variable, int], n: int | None = None
) -> bool:
    """Whether every output provably has its datum axis first (row j reads row j only).

    An output that reads no per-datum input at all (row-free) qualifies trivially.

    Parameters
    ----------
    outputs : list of Variable
        Graph outputs, each expected to have the datum axis as axis 0.
    row_inputs : dict
        The per-datum inputs and their datum axis (usually 0).
    n : int, optional
        Number of rows, if known: constants of leading length n then count as per-datum
        inputs too (NumPy arrays of per-individual covariates written into the model).

    Examples
    --------
    >>> import pytensor.tensor as pt
    >>> x, theta = pt.matrix("x"), pt.vector("theta")
    >>> is_row_local([((x - theta) ** 2).sum(axis=1)], {x: 0})
    True
    >>> is_row_local([x - x.mean(axis=0)], {x: 0})  # every row reads the column means
    False
    """
    try:
        prove_rows_first(outputs, row_inputs, n)
    except NotRowLocal:
        return False
    return True


def prove_rows_first(
    outputs: Sequence[Variable],
    row_inputs: Mapping[Variable, int],
    n: int | None = None,
    public: Collection[Variable] = (),
) -> None:
    """Raise :class:`NotRowLocal` unless every output provably has its datum axis first.

    Arguments as for :func:`datum_axes`.
    """
    axes = datum_axes(outputs, row_inputs, n, public)
    for out in outputs:
        if axes.get(out, 0) != 0:
            raise NotRowLocal("output", "its datum axis is not the first axis")


def datum_axes(
    outputs: Sequence[Variable],
    row_inputs: Mapping[Variable, int],
    n: int | None = None,
    public: Collection[Variable] = (),
) -> dict[Variable, int]:
    """The datum axis of every per-datum variable of the graph (row-free ones are absent).

    Parameters
    ----------
    outputs : list of Variable
        Graph outputs.
    row_inputs : dict
        The per-datum inputs and their datum axis.
    n : int, optional
        Number of rows, if known: constants of leading length n count as per-datum inputs,
        and constant lengths equal to n as the length of the datum axis.
    public : collection of Variable
        Constants known to be public even if their leading length is n (the tangents a
        forward-mode gradient adds to a graph whose data constants are inputs already).

    Raises
    ------
    NotRowLocal
        At the first operation the outputs' values are computed with that has no rule, or
        whose rule cannot show its output has a datum axis.
    """
    axes: dict[Variable, int] = dict(row_inputs)
    if n is not None:
        for var in graph_inputs(list(outputs)):
            if (
                isinstance(var, Constant)
                and var not in axes
                and var not in public
                and getattr(var, "ndim", 0) > 0
                and np.shape(var.data)[0] == n
            ):
                axes[var] = 0
    nodes = io_toposort(list(graph_inputs(list(outputs))), list(outputs))
    carries_values = _value_ancestors(outputs, nodes)
    for node in nodes:
        if not any(o in carries_values for o in node.outputs):
            continue  # only decides a shape or whether a check raises (_value_ancestors)
        rule = _known_rule(node.op)
        if not any(i in axes for i in _value_inputs(node, carries_values)):
            continue  # row-free
        for out, axis in zip(node.outputs, rule(node, axes, n)):
            if axis is not None:
                axes[out] = axis
    return axes


def _value_inputs(node, needed=None) -> list[Variable]:
    """The inputs whose values (not only shapes) the outputs' values are computed from.

    Only the outputs in ``needed`` count, if given (an Op with an inner graph may compute
    the output that is used without reading every input). By the rule registered for the
    Op's type (:func:`reads`); an Op without one reads every input.
    """
    found = _READS.lookup(node.op)
    return list(node.inputs) if found is None else found(node, needed)


def shape_reads(x: Variable) -> frozenset[Variable]:
    """The variables whose values the shape of ``x`` is computed from.

    None for a graph input (observed values, data, constants: their shapes are public) and
    for outputs of Ops whose shape PyTensor infers from their inputs' shapes alone
    (elementwise operations, products, reductions, ...). An Op whose ``infer_shape`` reads
    input values (a reshape's shape vector, ``alloc``'s dimensions, slice bounds,
    ``arange``'s arguments) adds those inputs. An Op without ``infer_shape`` (``nonzero``,
    ``unique``, a boolean mask's count) has a shape that depends on its output's values:
    the output itself is read, so the proof meets the Op (and its inputs) like any value.
    """
    stack = [x]
    while stack:
        v = stack[-1]
        if v in _SHAPE_READS:
            stack.pop()
        elif v.owner is None:
            _SHAPE_READS[v] = frozenset()
            stack.pop()
        else:
            missing = [i for i in v.owner.inputs if i not in _SHAPE_READS]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            for out, reads in zip(v.owner.outputs, _node_shape_reads(v.owner)):
                _SHAPE_READS[out] = reads
    return _SHAPE_READS[x]


_SHAPE_READS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _node_shape_reads(node) -> list[frozenset]:
    """:func:`shape_reads` of every output of ``node``, its inputs' being known.

    Walks the output shapes ``infer_shape`` gives in terms of stand-ins for the input
    shapes: a stand-in (or a shape query of an input) brings that input's shape reads; an
    input met otherwise is read by value. Conditions of the shape's checks count too.

    Elementwise Ops have a rule of their own (no inference needed), and Blockwise Ops a
    pattern cached per Op and input types (see the body): a per-datum gradient repeats
    them many times, and Blockwise inference is costly.
    """
    if isinstance(node.op, Elemwise):
        # An elementwise output's shape is the broadcast of its inputs' shapes: it reads
        # what their shapes read, never a value (all inputs, even where static shapes
        # would let inference skip some: an over-approximation only refuses more).
        found = frozenset().union(*(_SHAPE_READS[i] for i in node.inputs))
        return [found] * len(node.outputs)
    # Blockwise: the core shapes come from the core Op's inference on a node built from
    # input types alone, the batch shapes from the inputs' shapes: a pattern over input
    # positions, cached per Op and input types (non-constant inputs only). Every input's
    # shape reads are kept (an over-approximation only refuses more).
    if not isinstance(node.op, Blockwise) or any(isinstance(i, Constant) for i in node.inputs):
        return _node_shape_reads_walk(node)[0]
    try:
        key = (node.op, tuple(i.type for i in node.inputs), len(node.outputs))
        hash(key)
    except TypeError:
        return _node_shape_reads_walk(node)[0]
    pattern = _SHAPE_PATTERNS.get(key)
    if pattern is None:
        reads, pattern = _node_shape_reads_walk(node)
        if pattern is not None:
            _SHAPE_PATTERNS[key] = pattern
        if pattern is None or pattern == "values":
            return reads
    if pattern == "values":
        return [frozenset([out]) for out in node.outputs]
    by_value = pattern[0]
    found = {node.inputs[k] for k in by_value}.union(*(_SHAPE_READS[i] for i in node.inputs))
    return [frozenset(found)] * len(node.outputs)


_SHAPE_PATTERNS: dict = {}


def _node_shape_reads_walk(node):
    """:func:`_node_shape_reads` by walking ``infer_shape``; also its positional pattern."""
    outputs = [frozenset([out]) for out in node.outputs]  # no inference: values decide
    dims = [
        [pt.lscalar() for _ in range(i.type.ndim)] if hasattr(i.type, "ndim") else None
        for i in node.inputs
    ]
    try:
        shapes = node.op.infer_shape(node, dims)
        stack = [
            pt.as_tensor_variable(d) for shape in shapes if shape is not None for d in shape
        ]
    except Exception:
        return outputs, "values"
    position = {i: k for k, i in enumerate(node.inputs)}
    stand_ins = {d: i for i, ds in zip(node.inputs, dims) if ds for d in ds}
    found, seen = set(), set()
    by_value, by_shape, other = set(), set(), False
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in node.outputs:
            return outputs, "values"
        if v in stand_ins:
            found |= _SHAPE_READS[stand_ins[v]]
            by_shape.add(position[stand_ins[v]])
        elif v in node.inputs:
            found.add(v)
            by_value.add(position[v])
        elif v.owner is not None and isinstance(v.owner.op, Shape | Shape_i):
            queried = v.owner.inputs[0]
            found |= shape_reads(queried)  # (its leaves are the node's inputs)
            if queried in position:
                by_shape.add(position[queried])
            else:
                other = True  # an expression's shape: not a pattern over positions
        elif v.owner is not None:
            stack.extend(v.owner.inputs)
    # (a shape query of an expression may read a stand-in: that input's shape)
    for d in [d for d in found if d in stand_ins]:
        found.discard(d)
        found |= _SHAPE_READS[stand_ins[d]]
        by_shape.add(position[stand_ins[d]])
    known = set(node.inputs).union(*(_SHAPE_READS[i] for i in node.inputs))
    if not found <= known:  # values computed inside the inference (a mask's count)
        return outputs, "values"
    pattern = None if other else (frozenset(by_value), frozenset(by_shape))
    reads = [frozenset(found)] * len(node.outputs)
    if pattern is not None:
        # the pattern must give this node's answer exactly, or it is not cached
        again = {node.inputs[k] for k in by_value}.union(
            *(_SHAPE_READS[node.inputs[k]] for k in by_shape)
        )
        if again != found:
            pattern = None
    return reads, pattern


def value_ancestors(outputs: Sequence[Variable]) -> set[Variable]:
    """Variables the values of ``outputs`` are computed from (not only their shapes)."""
    nodes = io_toposort(list(graph_inputs(list(outputs))), list(outputs))
    return _value_ancestors(outputs, nodes)


def _value_ancestors(outputs: Sequence[Variable], nodes) -> set[Variable]:
    """Variables the outputs' values are computed from (see :func:`_value_inputs`).

    (A check over every row, say that all probabilities are in [0, 1], is common in PyMC's
    log-densities; the model adapter takes the ones that read data out of the graph.)
    """
    needed = set(outputs)
    for node in reversed(nodes):
        if any(o in needed for o in node.outputs):
            needed.update(_value_inputs(node, needed))
    return needed


def _fail(node, why: str, mixes: bool = True):
    raise NotRowLocal(op_label(node.op), why, mixes)


# ---------------------------------------------------------------------- the registries


class _Registry:
    """Functions registered per Op type: one dispatcher for every rule of one analysis.

    An Op's rule is the one registered for its own type; failing that, for a type defined
    in PyTensor or PyMC only, the one of its nearest registered ancestor (along the MRO).
    A subclass defined anywhere else (a model's module, another package) has no rule until
    its own type is registered: it may override how its values are computed (``perform``,
    ``c_code``), so a rule shown sound for its parent would speak of code that does not
    run. PyTensor's and PyMC's own subclasses (``Sum`` of ``CAReduce``, ``Assert`` and
    PyMC's parameter checks of ``CheckAndRaise``, ``LogSumExp`` of ``OpFromGraph``, the
    gradient-only ``ViewOp`` variants, PyMC's measurable Ops) keep their parent's
    semantics: they are trusted as those libraries' scalar Ops are (:func:`_from_library`).
    """

    def __init__(self):
        self._by_type: dict[type, Callable] = {}

    def register(self, *op_types: type):
        """A decorator that registers its function for ``op_types``."""

        def add(fn: Callable) -> Callable:
            for op_type in op_types:
                self._by_type[op_type] = fn
            return fn

        return add

    def lookup(self, op) -> Callable | None:
        """The rule of ``op``'s type (see the class docstring), or None."""
        cls = type(op)
        if cls in self._by_type or _from_library(cls):
            for base in cls.__mro__:
                if base in self._by_type:
                    return self._by_type[base]
        return None

    def ancestor(self, op) -> type | None:
        """The nearest registered type ``op`` derives from (whether or not it inherits)."""
        return next((c for c in type(op).__mro__ if c in self._by_type), None)

    def registered(self) -> dict[type, Callable]:
        """Every registered type and its rule (a copy)."""
        return dict(self._by_type)


def _from_library(cls: type) -> bool:
    """Whether ``cls`` is defined in PyTensor or PyMC: its module says so, and so does the
    code of every method (a class may name any module as its own)."""
    known = _FROM_LIBRARY.get(cls)
    if known is not None:
        return known  # (True while it is being checked: the check under way decides)
    if cls.__module__.split(".")[0] not in _LIBRARIES:
        return False
    _FROM_LIBRARY[cls] = True
    # (every method, not only those that compute values: RandomVariable.perform calls
    # rng_fn, shapes come from infer_shape; a class naming PyTensor's module may bring its
    # own. Those it inherits from Python's classes, UserList or collections.abc's, are
    # Python's code)
    found = _FROM_LIBRARY[cls] = _known_metaclass(type(cls)) and all(
        library_code(a.fget if isinstance(a, property) else a, _CLASS_CODE_DIRS)
        or _made_by_dataclasses(k, a)
        if callable(a) or isinstance(a, classmethod | staticmethod | property)
        # (any other descriptor by its class: a partialmethod or a cached_property runs
        # what it holds; the slots and __dict__ of a class are Python's, written in C)
        else library_code(type(a))
        for k in cls.__mro__ if k not in _PYTHONS_CLASSES
        for a in list(vars(k).values())
        if (callable(a) or hasattr(type(a), "__get__"))
        and not isinstance(a, type)  # (nested classes: checked where they are used)
    )
    return found


def _made_by_dataclasses(cls: type, method) -> bool:
    """Whether ``method`` is one that ``dataclasses`` wrote for the library class ``cls``
    (its code has no file), calling no function but the fields' default factories, judged."""
    fields = vars(cls).get("__dataclass_fields__")
    if getattr(method, "__code__", None) in _PYTHONS_CODE:
        method = getattr(method, "__wrapped__", None)  # (reprlib's guard of its __repr__)
    return (fields is not None and isinstance(method, FunctionType)
            and method.__code__.co_filename == "<string>"
            and method.__name__ in _DATACLASS_METHODS
            and all(library_code(f.default_factory) for f in fields.values()
                    if callable(f.default_factory)))


#: The methods ``dataclasses`` writes from source text.
_DATACLASS_METHODS = frozenset({
    "__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__",
    "__le__", "__gt__", "__ge__", "__getstate__", "__setstate__", "__annotate__"})


#: What :func:`_from_library` found, by class (weakly: classes made at run time go away).
_FROM_LIBRARY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def library_code(value, dirs: tuple[str, ...] | None = None) -> bool:
    """Whether calling ``value`` runs only PyTensor's and PyMC's code (the source files in
    ``dirs``, by default both libraries'), NumPy's, SciPy's special functions or Python's:
    a function by the file its code comes from; a method, class or static method by its
    function; a class by all its methods; NumPy's and SciPy's ufuncs by identity
    (``np.frompyfunc`` makes one of any function); a PyTensor ``Type`` by its class; any
    other object, no: a compiled ``pytensor.function`` or an ``OpFromGraph`` is PyTensor's
    class and runs the graph and storage it holds, ``functools.partial`` what it wraps
    (an object's ``__func__`` or ``__code__`` attribute says nothing: any object may have
    one). A library function runs what it was made with too (``pymc.util.biwrap(f)`` is
    PyMC's function calling ``f``): what its closure and defaults hold must be library
    code or plain values (:func:`_inert`). A function whose code names a library file it
    does not come from, or a library class patched after it was checked, is not seen:
    forgeries are out of reach.
    """
    return _library_code(value, _LIBRARY_DIRS if dirs is None else dirs, set())


def _library_code(value, dirs: tuple[str, ...], seen: set) -> bool:
    if isinstance(value, classmethod | staticmethod):
        value = value.__func__
    if isinstance(value, MethodType):
        # (bound to a class, a class method; bound to an object, what the object holds
        # decides: a compiled function's __call__ runs its graph and storage)
        owner = value.__self__
        if not (library_code(owner) if isinstance(owner, type) else _inert(owner, seen)):
            return False
        value = value.__func__
    if isinstance(value, FunctionType):
        if not (value.__code__.co_filename.startswith(dirs) or value.__code__ in _PYTHONS_CODE):
            return False
        seen.add(id(value))
        held = [c.cell_contents for c in value.__closure__ or () if _filled(c)]
        if "<locals>" in value.__qualname__:  # (made at run time: defaults from arguments)
            held += [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()]
        return all(_inert(h, seen) for h in held)
    if isinstance(value, np.ufunc):
        return any(getattr(m, value.__name__, None) is value for m in (np, scipy.special))
    if isinstance(value, functools._lru_cache_wrapper):  # (a cache: what it wraps runs)
        return _library_code(value.__wrapped__, dirs, seen)
    if isinstance(value, functools.partial):
        # (what it wraps, with plain settings: an array it holds would be passed to code
        # that may return it)
        return _library_code(value.func, dirs, seen) and all(
            v is None or _plain(v) or (callable(v) and _inert(v, seen))
            for v in (*value.args, *value.keywords.values()))
    if isinstance(value, _C_CALLABLES):
        # (written in C, so not by the user, but it runs what it is bound to: a module's
        # function the module's code (builtins.exec runs any), a class's slot wrapper
        # (Cls.__call__) the class's and its metaclass's, an object's method what the
        # object holds (an array's copy returns the array))
        bound = getattr(value, "__self__", None)
        if isinstance(bound, ModuleType):
            return (bound.__name__.split(".")[0] in _C_MODULES
                    and not (bound.__name__ == "builtins" and value.__name__ in _RUNS_ANY))
        return bound is None or (library_code(bound) if isinstance(bound, type)
                                 else _inert(bound, seen))
    if isinstance(value, type):
        # (calling it runs its metaclass's __call__, then its own __new__ and __init__:
        # PyTensor's or PyMC's; or written in C, no Python function anywhere in it:
        # Python's exceptions, NumPy's arrays)
        return _known_metaclass(type(value)) and (_from_library(value) or all(
            not isinstance(a, FunctionType | classmethod | staticmethod | property)
            for k in value.__mro__ for a in vars(k).values()))
    # (any other object: not by its class alone. A compiled pytensor.function or an
    # OpFromGraph is PyTensor's class, and runs whatever graph and storage it holds;
    # a Type only makes variables)
    return isinstance(value, Type) and _from_library(type(value))


def _inert(value, seen: set) -> bool:
    """Whether ``value``, held by library code (a library function's closure or defaults,
    a rewrite or mode registered with PyTensor), runs only library code if that code
    calls it: a plain value, library code, an Op of its
    library's classes without an inner graph or a Type, or an object of a library class
    whose attributes are all inert; anything else, no (fail closed)."""
    if id(value) in seen or value is None or _plain(value) or isinstance(value, _CONFIG):
        return True
    seen.add(id(value))
    if isinstance(value, tuple | list | set | frozenset):
        return all(_inert(v, seen) for v in value)
    if isinstance(value, dict | weakref.WeakKeyDictionary | weakref.WeakValueDictionary):
        # (classes as keys are looked up, not called: a cache by type)
        return all((isinstance(k, type) or _inert(k, seen)) and _inert(v, seen)
                   for k, v in list(value.items()))
    if isinstance(value, weakref.ref):
        return _inert(value(), seen)
    if isinstance(value, np.ndarray):  # (code given it may return it)
        return value.size <= 1 and value.dtype != object
    if isinstance(value, UnionType | GenericAlias):  # (int | None: classes, not called)
        return True
    if isinstance(value, ModuleType):
        return value.__name__.split(".")[0] in _LIBRARIES
    if isinstance(value, Type):
        return _from_library(type(value))
    if isinstance(value, Op):
        # (an inner graph holds constants its call would write out)
        return not inner_graph_outputs(value) and not _runs_foreign_code(value)
    if isinstance(value, _CODE):
        return _library_code(value, _LIBRARY_DIRS, seen)
    # (any other object, callable or not: of a library class, or one written in C (a
    # stream), whose attributes are all inert; a compiled function's hold its graph and
    # storage)
    return library_code(type(value)) and all(
        _inert(v, seen) for v in (vars(value).values() if hasattr(value, "__dict__") else ()))


def _plain(value) -> bool:
    """Whether ``value`` is a number, a string or bytes of Python's or NumPy's own types (a
    subclass of ``str`` may bring a ``__str__`` of its own)."""
    return type(value) in _PLAIN or (isinstance(value, np.generic)
                                     and type(value).__module__ == "numpy"
                                     and library_code(type(value)))


#: Values that run no code (exactly these types).
_PLAIN = (bool, int, float, complex, str, bytes)
#: PyTensor's configuration, which its methods read and change: the parser as a whole (a
#: ``config.change_flags`` decorator, or a parameter, is judged by what it holds: a
#: parameter of the user's may apply a function of theirs when set).
_CONFIG = (configparser.PyTensorConfigParser,)


def _filled(cell) -> bool:
    """Whether a closure's cell holds a value yet."""
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _known_metaclass(meta: type) -> bool:
    """Whether ``meta`` is Python's ``type`` or ``ABCMeta``, or a library class
    (PyTensor's ``MetaType``, PyMC's ``DistributionMeta``)."""
    return meta in _PYTHONS_CLASSES or _from_library(meta)


def _pythons_code() -> frozenset:
    """The code of Python's functions that library classes are made of, each the same
    wherever it is used, what it calls held in its closure (judged): a
    ``functools.singledispatch`` function and its dispatch, a dataclass's ``__replace__``
    and its ``__repr__`` (made by ``reprlib.recursive_repr``)."""
    generic = functools.singledispatch(lambda x: x)
    found = {generic.__code__, *(c.cell_contents.__code__ for c in generic.__closure__
                                 if isinstance(c.cell_contents, FunctionType))}

    @dataclasses.dataclass
    class Example:
        field: int = 0

    found |= {vars(Example)[name].__code__ for name in ("__replace__", "__repr__")
              if isinstance(vars(Example).get(name), FunctionType)}
    return frozenset(found)


#: Python's own functions whose closures decide what they run.
_PYTHONS_CODE = _pythons_code()

#: Python's classes that library classes and their metaclasses derive from.
_PYTHONS_CLASSES = (object, type, ABCMeta)


#: Modules whose functions written in C run only their own code (but for ``_RUNS_ANY``).
_C_MODULES = (*("pytensor", "pymc"), "numpy", "scipy", "math", "cmath", "operator", "_operator",
              "builtins", "itertools", "_functools", "functools")
#: Python's built-in functions that run code they are given (a string, a name).
_RUNS_ANY = frozenset({"eval", "exec", "compile", "__import__", "__build_class__", "setattr",
                       "delattr", "getattr", "breakpoint", "open", "input", "exit", "quit"})


_C_CALLABLES = (BuiltinFunctionType, BuiltinMethodType, WrapperDescriptorType, MethodWrapperType,
                MethodDescriptorType, ClassMethodDescriptorType)
#: What :func:`library_code` judges by its code.
_CODE = (FunctionType, MethodType, classmethod, staticmethod, type, np.ufunc,
         functools._lru_cache_wrapper, functools.partial, *_C_CALLABLES)


def _holds_foreign_callable(op) -> bool:
    """Whether ``op`` replaces a method of its class with an attribute of its own (the
    class's rules speak of the class's code; any function, even a library's, set on the
    instance computes something else), or keeps among its settings something callable
    that is not known to be PyTensor's, PyMC's, NumPy's or Python's own, or a value of a
    class that is not theirs: PyTensor's ``Print(global_fn=f)``
    calls ``f`` with its input, which its output may be a view of, so ``f`` may write
    anything into the values; an object wrapping a function (``np.vectorize(f)``, a
    partial) is as good as ``f``; ``Print(message=s)`` prints ``s``, running its class's
    ``__str__``."""
    _drop_built_caches(op)
    held = vars(op) if hasattr(op, "__dict__") else {}
    if any(callable(getattr(type(op), k, None)) for k in held):
        return True
    # (a setting that names a function: PyTensor imports an Elemwise's nfunc_spec by name
    # and calls it when it computes in Python)
    spec = getattr(op, "nfunc_spec", None)
    if spec and not _names_numpys_function(spec[0]):
        return True
    values = [getattr(op, name, None) for name in getattr(type(op), "__props__", None) or ()]
    for value in values:
        if isinstance(value, tuple | list):
            values.extend(value)
        elif isinstance(value, dict):
            values.extend(value.values())
        elif callable(value):
            if not _known_callable(value):
                return True
        elif not (value is None or _plain(value) or library_code(type(value))):
            return True  # (a setting of the user's class: its methods may run)
    return False


def _drop_built_caches(op) -> None:
    """Drop the functions PyTensor builds on an Op from its checked settings the first time
    it computes in Python (an Elemwise's ufunc and nfunc, a Composite's Python function),
    so that they are built again from what was checked: set by hand, they would run in
    their place."""
    held = getattr(op, "__dict__", {})
    for cls, names in _BUILT_CACHES.items():
        if isinstance(op, cls):
            for name in names:
                if name.startswith("_"):
                    held.pop(name, None)  # (built on first use when missing)
                elif held.get(name) is not None:
                    setattr(op, name, None)  # (built when None)


#: The attributes in which PyTensor keeps functions it builds, by Op class.
_BUILT_CACHES = {Elemwise: ("ufunc", "nfunc"), Composite: ("_py_perform_fn",)}


def _names_numpys_function(name) -> bool:
    """Whether ``name``, as PyTensor reads an ``nfunc_spec`` (NumPy's function of that name,
    else a dotted path), names a function of NumPy or of SciPy's special functions."""
    if not isinstance(name, str):
        return False
    if "." not in name:
        return getattr(np, name, None) is not None
    module, _, attr = name.rpartition(".")
    return module in ("numpy", "scipy.special") and hasattr(importlib.import_module(module), attr)


def _known_callable(value) -> bool:
    if isinstance(value, Op | ScalarOp):
        return not _runs_foreign_code(value)
    if isinstance(value, Type):
        return _from_library(type(value))
    return library_code(value)


Rule = Callable[..., list]
_RULES = _Registry()
_READS = _Registry()


def rule(*op_types: type):
    """Register ``fn(node, axes, n) -> datum axes of node's outputs`` for these Op types.

    ``fn`` is called only for nodes with a per-datum value input; it returns one entry per
    output (None: row-free) or fails the proof with :func:`_fail`. Its docstring says why
    it is sound. Subclasses defined in PyTensor or PyMC share it (:class:`_Registry`).
    """
    return _RULES.register(*op_types)


def reads(*op_types: type):
    """Register ``fn(node, needed) -> the inputs read by value`` for these Op types.

    For :func:`_value_inputs`; an Op type without one reads every input (which only ever
    refuses more).
    """
    return _READS.register(*op_types)


def _rule_for(op) -> Rule | None:
    return _RULES.lookup(op)


def _known_rule(op) -> Rule:
    """The rule of ``op``, or :class:`NotRowLocal` if it has none (fail closed).

    An Op without a rule may compute anything from anything, even on row-free values
    (``as_op``, a scan, a custom Op: data held in a closure). So may an Op whose scalar,
    core or inner Ops are not known (:func:`_is_known`).
    """
    found = _rule_for(op)
    if found is not None and _is_known(op):
        return found
    why = "an operation without a row-locality rule"
    parent = _RULES.ancestor(op) if found is None else None
    if parent is not None:
        why += (
            f" (a subclass of {parent.__name__} defined outside PyTensor and PyMC does not "
            "inherit its rule: it may compute its values differently)"
        )
    raise NotRowLocal(op_label(op), why, False)


def _is_known(op) -> bool:
    """Whether ``op`` computes its outputs from its inputs only (cached where hashable)."""
    try:
        return _is_known_cached(op)
    except TypeError:  # an Op whose properties are not hashable
        return _known_parts(op)


@lru_cache(maxsize=4096)
def _is_known_cached(op) -> bool:
    return _known_parts(op)


def _known_parts(op) -> bool:
    """Whether ``op`` computes its outputs from its inputs only, by known parts.

    An Op type with a rule, whose scalar Op (elementwise, reductions) is one of PyTensor's or
    PyMC's, whose core Op (``Blockwise``) is known, and whose inner graph (``OpFromGraph``)
    holds known Ops only.
    """
    if _rule_for(op) is None:
        return False
    scalar = getattr(op, "scalar_op", None)
    if scalar is not None and not (isinstance(scalar, ScalarOp) and _from_library(type(scalar))):
        return False
    core = getattr(op, "core_op", None)
    if core is not None and not _is_known(core):
        return False
    if isinstance(op, OpFromGraph):
        inner = io_toposort(list(op.inner_inputs), list(op.inner_outputs))
        return all(_is_known(node.op) for node in inner)
    return True


_LIBRARIES = ("pytensor", "pymc")
_LIBRARY_DIRS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (pytensor, pymc)
)
#: Where a library class's methods may come from: the libraries, Python's standard library.
_CLASS_CODE_DIRS = (*_LIBRARY_DIRS, *{os.path.abspath(sysconfig.get_paths()[k]) + os.sep
                                      for k in ("stdlib", "platstdlib")}, "<frozen ")


def inner_graph_outputs(op) -> list[Variable]:
    """Outputs of the inner graph of ``op`` (or of its core Op), if it has one."""
    inner = getattr(op, "core_op", op)
    if isinstance(inner, ScalarOp):
        return []  # (a Composite's scalar graph holds scalars only)
    fgraph = getattr(inner, "fgraph", None)
    if fgraph is not None and hasattr(fgraph, "outputs"):
        return list(fgraph.outputs)
    return list(getattr(inner, "inner_outputs", []))


#: PyTensor's Ops that run a function the user passes.
_USER_CODE_OPS: tuple[type, ...] = (FromFunctionOp,)
try:
    from pytensor.link.jax.ops import JAXOp

    _USER_CODE_OPS += (JAXOp,)
except ImportError:  # (older PyTensor)
    pass


def foreign_ops(outputs: Sequence[Variable]) -> list[str]:
    """Labels of the Ops in ``outputs``' graph, inner graphs included, that run code other
    than PyTensor's or PyMC's own: an Op type defined elsewhere, one whose scalar, core or
    inner Ops are, and ``as_op`` / ``wrap_py`` (defined in PyTensor, but running the
    user's Python). Such an Op may compute anything, from data held in its closure.

    The row-locality proof refuses them in what it proves; this finds them where no proof
    runs (priors, potentials, a check's condition on parameters), which enter every
    acceptance test without noise. Reads the graph's structure only.
    """
    found: dict[str, None] = {}
    graphs, seen = [list(outputs)], set()
    while graphs:
        for node in io_toposort([], graphs.pop()):
            if node in seen:
                continue
            seen.add(node)
            node.tag.__dict__.pop("ufunc", None)  # (built again from the checked Op)
            if _runs_foreign_code(node.op):
                found[op_label(node.op)] = None
            inner = inner_graph_outputs(node.op)
            if inner:
                graphs.append(inner)
    return list(found)


def _runs_foreign_code(op) -> bool:
    if (isinstance(op, _USER_CODE_OPS) or not _from_library(type(op))
            or _holds_foreign_callable(op)):
        return True
    scalar = getattr(op, "scalar_op", None)
    if scalar is not None:
        if not _from_library(type(scalar)):
            return True
        inner = getattr(scalar, "fgraph", None)  # (a Composite's scalar graph)
        if inner is not None and any(_runs_foreign_code(n.op) for n in inner.apply_nodes):
            return True
    core = getattr(op, "core_op", None)
    return core is not None and _runs_foreign_code(core)


# ------------------------------------------------- what an Op reads by value (_value_inputs)


@reads(CheckAndRaise, SpecifyShape)
def _reads_checked_value(node, needed):
    """A check (PyMC's parameter checks, asserts) or a shape assertion: the first input.

    The condition (or the asserted shape) decides only whether evaluation stops with an
    error; the output's value is the first input's.
    """
    return node.inputs[:1]


@reads(Elemwise)
def _reads_elementwise(node, needed):
    """Every input; but ``fill(x, v)`` (``Second``: ``zeros_like``/``ones_like``) reads ``v``
    and only the shape of ``x``, that is the values :func:`shape_reads` finds it computed
    from (none, for most tensors)."""
    if isinstance(node.op.scalar_op, Second):
        return [*node.inputs[1:], *shape_reads(node.inputs[0])]
    return list(node.inputs)


@reads(Shape, Shape_i)
def _reads_shape(node, needed):
    """A shape query reads only what the queried tensor's shape is computed from."""
    return list(shape_reads(node.inputs[0]))


@reads(OpFromGraph)
def _reads_inner_graph(node, needed):
    """An Op with an inner graph: the inputs its used outputs' inner graphs read by value.

    (PyTensor's gradients of ``OpFromGraph``, used by forward-mode products, compute the
    output that is used without reading every input.)
    """
    return _inner_reads(node, node.op, needed)


@reads(Blockwise)
def _reads_blockwise(node, needed):
    """Every input; for a core Op with an inner graph, what that graph reads by value."""
    core = node.op.core_op
    if isinstance(core, OpFromGraph) and _READS.lookup(core) is not None:
        return _inner_reads(node, core, needed)
    return list(node.inputs)


def _inner_reads(node, inner, needed) -> list[Variable]:
    outs = [
        inner_out
        for out, inner_out in zip(node.outputs, inner.inner_outputs)
        if needed is None or out in needed
    ]
    found = value_ancestors(outs)
    return [i for i, inner_in in zip(node.inputs, inner.inner_inputs) if inner_in in found]


# ------------------------------------------------------------------ the datum-axis rules


@rule(Shape, Shape_i)
def _shape(node, axes, n):
    """A shape query: row-free, unless the shape is computed from per-datum values.

    Shapes of per-datum tensors are public (n and the column counts) when computed from
    public shapes (:func:`_reads_shape`); a shape computed from per-datum values (``nonzero``,
    a boolean mask) is a count of the data, which every row would read.
    """
    if any(i in axes for i in _value_inputs(node)):
        _fail(node, "a shape computed from per-datum values")
    return [None]


@rule(SpecifyShape, CheckAndRaise, ViewOp, DeepCopyOp)
def _first_input(node, axes, n):
    """Checks, shape assertions and identities: the output is the first input's value.

    The other inputs only decide whether to raise (:func:`_reads_checked_value`). ``ViewOp``
    (and PyTensor's gradient-only variants of it) and ``DeepCopyOp`` are identities (PyMC's
    OrderedLogistic, compiled outputs).
    """
    return [axes.get(node.inputs[0])]


@rule(Elemwise)
def _elementwise(node, axes, n):
    """Elementwise: position i of the output reads position i of every input.

    Sound when the per-datum inputs share the datum axis and none is broadcast along it
    (broadcasting would copy one row into all, :func:`_aligned`); row-free inputs may
    broadcast. ``fill(x, v)`` reads x's shape only, which must not be computed from data.
    """
    rowed = [i for i in _value_inputs(node) if i in axes]
    if any(i not in node.inputs for i in rowed):  # fill(x, v): x's shape read from data
        _fail(node, "a shape computed from per-datum values")
    return [_aligned(node, rowed, axes)] * len(node.outputs)


@rule(DimShuffle)
def _dimshuffle(node, axes, n):
    """A transpose or broadcastable axes added or dropped: the datum axis moves, rows stay.

    Dropping the datum axis (a length-1 axis) is refused.
    """
    a = axes[node.inputs[0]]
    if a not in node.op.new_order:
        _fail(node, "drops the datum axis")
    return [list(node.op.new_order).index(a)]


@rule(CAReduce, Argmax)
def _reduction(node, axes, n):
    """A reduction (sum, max, ``all``, argmax, ...) over other axes: row i reads row i.

    A reduction over the datum axis mixes every row into one value.
    """
    x = node.inputs[0]
    a, ndim = axes[x], x.ndim
    if any(i in axes for i in node.inputs[1:]):
        _fail(node, "an axis read from per-datum values")
    axis = node.op.axis
    reduced = tuple(range(ndim)) if axis is None else tuple(r % ndim for r in axis)
    if a in reduced:
        _fail(node, "reduces over the datum axis")
    return [a - sum(r < a for r in reduced)] * len(node.outputs)


@rule(CumOp)
def _cumulative(node, axes, n):
    """A cumulative sum or product along another axis stays within each row.

    Along the datum axis, row i would read rows 0..i.
    """
    a = axes[node.inputs[0]]
    if node.op.axis == a:
        _fail(node, "accumulates along the datum axis")
    return [a]


@rule(Subtensor)
def _basic_index(node, axes, n):
    """``x[...]`` with slices and row-free integers, the datum axis taken whole (``:``).

    Any other entry on the datum axis (a slice, a step, one row) moves or drops rows; an
    index read from per-datum values would make every row read data.
    """
    x, *index = node.inputs
    if any(i in axes for i in index):
        _fail(node, "indices read per-datum values")
    return [_axis_after_basic_index(node, node.op.idx_list, axes[x])]


@rule(IncSubtensor)
def _basic_inc(node, axes, n):
    """``set_subtensor``/``inc_subtensor`` with basic indices: x and y keep rows aligned.

    The datum axis of x is taken whole (``:``) and y's datum axis lands on it (or only one
    of them is per-datum), not broadcast; the indices are row-free.
    """
    op = node.op
    x, y, *index = node.inputs
    if any(i in axes for i in index):
        _fail(node, "indices read per-datum values")
    # y lands in x[index]; find the axis of x that y's datum axis would be written to.
    targets = []
    if x in axes:
        targets.append(axes[x])
        _axis_after_basic_index(node, op.idx_list, axes[x])
    if y in axes:
        sub_ndim = x.ndim - sum(isinstance(e, int) for e in op.idx_list)
        sub = axes[y] + (sub_ndim - y.ndim)
        if y.type.broadcastable[axes[y]]:
            _fail(node, "broadcasts a per-datum value along the datum axis")
        targets.append(_axis_before_basic_index(node, op.idx_list, sub))
    if len(set(targets)) != 1:
        _fail(node, "the datum axes of x and y differ")
    return [targets[0]]


@rule(AdvancedSubtensor)
def _advanced_index(node, axes, n):
    """``x[i1, i2, …]`` with integer arrays: position k reads the index entries at k.

    A row-free table indexed by per-datum arrays is a gather, row-local like an elementwise
    operation over the broadcast index arrays. A per-datum table may be indexed along its
    datum axis by a provable identity only (``arange`` over the rows).
    """
    x, *index = node.inputs
    layout = _AdvancedLayout(node, index, axes)
    found = set(layout.index_axes(node, axes))
    if x in axes:
        found.add(layout.output_axis_of(node, axes[x], axes, n))
    if len(found) != 1:
        _fail(node, "index arrays and table with different datum axes")
    return [found.pop()]


@rule(AdvancedIncSubtensor)
def _advanced_inc(node, axes, n):
    """``x[idx] += y`` (or ``=``): row-local when the datum axis of x is written by itself.

    Either x's datum axis is indexed by a provable identity (``arange`` over the rows, as in
    the gradient of Categorical's ``p[arange(n), y]``), or it is taken whole (``:``) and every
    index array is row-free. Per-datum values scattered by data (group sums) mix rows.
    """
    x, y, *index = node.inputs
    layout = _AdvancedLayout(node, index, axes)
    targets = set(layout.index_axes(node, axes))
    if x in axes:
        targets.add(layout.output_axis_of(node, axes[x], axes, n))
    if y in axes:
        if y.type.broadcastable[axes[y]]:
            _fail(node, "broadcasts a per-datum value along the datum axis")
        targets.add(axes[y] + (layout.ndim - y.ndim))
    if len(targets) != 1:
        _fail(node, "the datum axes of x, y and the indices differ")
    (sub,) = targets
    return [layout.table_axis_at(node, sub, axes, n)]


class _AdvancedLayout:
    """Where the axes of ``x`` and of the broadcast index arrays land in ``x[idx]``.

    NumPy's rule: the broadcast dimensions of the index arrays replace the indexed axes,
    in place when the arrays are adjacent, else in front.
    """

    def __init__(self, node, index, axes):
        entries = list(indices_from_subtensor(index, node.op.idx_list))
        x = node.inputs[0]
        entries += [slice(None)] * (x.ndim - len(entries))
        for e in entries:
            parts = (e.start, e.stop, e.step) if isinstance(e, slice) else ()
            if any(p in axes for p in parts):
                _fail(node, "slice bounds read per-datum values")
        self.entries = entries
        self.arrays = [k for k, e in enumerate(entries) if not isinstance(e, slice)]
        if not self.arrays:
            _fail(node, "advanced indexing without index arrays", mixes=False)
        if any(entries[k].dtype == "bool" for k in self.arrays):
            _fail(node, "a boolean mask (its shape would depend on the data)")
        self.bdim = max(entries[k].ndim for k in self.arrays)
        adjacent = self.arrays == list(range(self.arrays[0], self.arrays[-1] + 1))
        self.start = self.arrays[0] if adjacent else 0
        self.ndim = x.ndim - len(self.arrays) + self.bdim
        self.kept = [k for k in range(x.ndim) if k not in self.arrays]

    def _position(self, k: int) -> int:
        """Output position of a kept (sliced) axis k of x."""
        j = self.kept.index(k)
        return j if j < self.start else j + self.bdim

    def index_axes(self, node, axes) -> list[int]:
        """Output datum axes contributed by per-datum index arrays."""
        found = []
        for k in self.arrays:
            e = self.entries[k]
            if e in axes:
                if e.type.broadcastable[axes[e]]:
                    _fail(node, "broadcasts a per-datum index along the datum axis")
                found.append(self.start + axes[e] + self.bdim - e.ndim)
        return found

    def output_axis_of(self, node, a: int, axes, n) -> int:
        """Output position of the datum axis a of x (full slice or identity index)."""
        e = self.entries[a]
        if isinstance(e, slice):
            if e != slice(None):
                _fail(node, "indexes the datum axis (only a full slice ':' keeps rows aligned)")
            return self._position(a)
        k = _identity_axis(e, axes, n)
        if k is None:
            _fail(node, "indexes per-datum values along the datum axis (row i reads row g_i)")
        return self.start + k + self.bdim - e.ndim

    def table_axis_at(self, node, sub: int, axes, n) -> int:
        """The axis of x written at position ``sub`` of ``x[idx]`` (full slice or identity)."""
        if self.start <= sub < self.start + self.bdim:
            for k in self.arrays:
                e = self.entries[k]
                ident = _identity_axis(e, axes, n)
                if ident is not None and self.start + ident + self.bdim - e.ndim == sub:
                    return k
            _fail(node, "writes along the datum axis at positions read from data")
        j = sub if sub < self.start else sub - self.bdim
        k = self.kept[j]
        if self.entries[k] != slice(None):
            _fail(node, "indexes the datum axis (only a full slice ':' keeps rows aligned)")
        return k


def _identity_axis(e: Variable, axes, n) -> int | None:
    """The axis k of index array ``e`` along which it is ``arange`` over the rows, if proven.

    ``arange(0, rows, 1)`` with ``rows`` the datum-axis length of a per-datum variable (or
    the constant n), possibly cast to a wider integer, reshaped to ``(-1, 1, …)`` or given
    broadcast axes: every other axis has length 1. Walks from ``e`` towards the ``arange``
    by the step registered for each Op type (:func:`identity_step`); an Op without one ends
    the walk unproven.
    """
    k = 0
    while e.owner is not None:
        step = _IDENTITY_STEPS.lookup(e.owner.op)
        if step is None:
            return None
        k, final = step(e.owner, k, axes, n)
        if final or k is None:
            return k
        e = e.owner.inputs[0]
    return None


def identity_step(*op_types: type):
    """Register ``fn(node, k, axes, n) -> (axis, final)`` for :func:`_identity_axis`.

    ``k`` is the axis of the node's output along which it is the identity if its first
    input is, along the returned axis (None: not proven); ``final``: the walk ends here.
    """
    return _IDENTITY_STEPS.register(*op_types)


_IDENTITY_STEPS = _Registry()


@identity_step(DimShuffle)
def _identity_through_dimshuffle(node, k, axes, n):
    """Broadcast axes added (or axes reordered, none dropped): the identity moves along."""
    op = node.op
    if sorted(d for d in op.new_order if d != "x") != list(range(node.inputs[0].ndim)):
        return None, True
    return list(op.new_order).index(k), False


@identity_step(Reshape)
def _identity_through_reshape(node, k, axes, n):
    """A vector reshaped to a constant ``(1, …, -1, …, 1)``: the identity along the -1."""
    shape = node.inputs[1]
    if not (isinstance(shape, Constant) and node.inputs[0].ndim == 1):
        return None, True
    long = [i for i, s in enumerate(np.atleast_1d(shape.data)) if s != 1]
    if len(long) != 1 or int(np.atleast_1d(shape.data)[long[0]]) != -1:
        return None, True
    return long[0], False


@identity_step(SpecifyShape)
def _identity_through_specify_shape(node, k, axes, n):
    """A shape assertion passes its input's values through."""
    return k, False


@identity_step(Elemwise)
def _identity_through_cast(node, k, axes, n):
    """A cast that keeps every integer (:func:`_widens_int`); any other elementwise Op ends
    the walk unproven."""
    return (k, False) if _widens_int(node) else (None, True)


@identity_step(ARange)
def _identity_from_arange(node, k, axes, n):
    """``arange(0, rows, 1)``, rows the number of rows (:func:`_is_rows`): the identity."""
    start, stop, step = node.inputs
    if not (_is_constant(start, 0) and _is_constant(step, 1)):
        return None, True
    return (k if _is_rows(stop, axes, n) else None), True


def _is_constant(v: Variable, value) -> bool:
    return isinstance(v, Constant) and np.ndim(v.data) == 0 and v.data == value


@rule(Reshape)
def _reshape(node, axes, n):
    """A reshape that keeps the datum axis first with the same length n keeps each row's
    entries in that row (C order): the leading length must be proven to be n
    (:func:`_first_entry_is_rows`), and the datum axis must be first already."""
    x, shape = node.inputs
    if shape in axes or axes[x] != 0 or node.outputs[0].ndim < 1:
        _fail(node, "reshape that may move the datum axis", mixes=False)
    if not _first_entry_is_rows(shape, axes, n):
        _fail(node, "reshape whose leading length is not shown to be n", mixes=False)
    return [0]


@rule(Alloc)
def _alloc(node, axes, n):
    """``alloc(value, *shape)``: a broadcast of ``value`` to new leading axes.

    Row-local when the shape is row-free and value is not broadcast along its datum axis.
    """
    value, *shape = node.inputs
    if any(s in axes for s in shape):
        _fail(node, "shape read from per-datum values")
    a = axes[value]
    if value.type.broadcastable[a]:
        _fail(node, "broadcasts a per-datum value along the datum axis")
    return [a + node.outputs[0].ndim - value.ndim]


@rule(Join)
def _join(node, axes, n):
    """A join along another axis puts row i of every input in row i of the output."""
    a = _aligned(node, [i for i in node.inputs if i in axes], axes)
    if node.op.axis == a:
        _fail(node, "joins along the datum axis")
    return [a]


@rule(Split)
def _split(node, axes, n):
    """A split along another axis at row-free points keeps every row in every part."""
    x, splits = node.inputs
    if splits in axes or x not in axes:
        _fail(node, "split points read from per-datum values")
    if node.op.axis == axes[x]:
        _fail(node, "splits along the datum axis")
    return [axes[x]] * len(node.outputs)


@rule(Blockwise)
def _blockwise(node, axes, n):
    """A ``Blockwise`` Op runs its core Op on each batch entry alone.

    Sound when the datum axis is a batch axis of every per-datum input (aligned, not
    broadcast), or for a matmul, the rows of the left factor only. Core Ops are known
    (:func:`_is_known`).
    """
    op = node.op
    ins = node.inputs
    rowed = [i for i in ins if i in axes]
    batch_ndim = node.outputs[0].ndim - len(op.outputs_sig[0])
    a = _aligned(node, rowed, axes)
    if a < batch_ndim:
        return [a] * len(node.outputs)
    if isinstance(op.core_op, Dot) and rowed == [ins[0]] and a == batch_ndim:
        return [a]  # matmul, rows of the left factor: (X @ W)[i] = X[i] @ W
    _fail(node, "the datum axis is a core axis", mixes=False)


@rule(Dot)
def _dot(node, axes, n):
    """A matrix product with a row-free factor that does not contract the datum axis.

    ``(X @ W)[i] = X[i] @ W`` and ``(W @ Y)[:, i] = W @ Y[:, i]``; two per-datum factors, or
    a contraction over the datum axis, mix rows.
    """
    x, y = node.inputs
    if x in axes and y in axes:
        _fail(node, "a product of two per-datum factors")
    if x in axes and axes[x] == 0 and x.ndim == 2:
        return [0]  # (X @ W)[i] = X[i] @ W
    if y in axes and axes[y] == 1 and y.ndim == 2 and x.ndim == 2:
        return [1]  # (W @ Y)[:, i] = W @ Y[:, i]
    _fail(node, "a product that contracts the datum axis")


@rule(OpFromGraph)
def _inner_graph(node, axes, n):
    """An Op defined by an inner graph (LogSumExp, softmax, …): prove the inner graph."""
    op = node.op
    inner = {i: axes[o] for i, o in zip(op.inner_inputs, node.inputs) if o in axes}
    try:
        inner_axes = datum_axes(list(op.inner_outputs), inner, n)
    except NotRowLocal as err:
        raise NotRowLocal(f"{op_label(op)} > {err.op}", err.why, err.mixes) from None
    return [inner_axes.get(o) for o in op.inner_outputs]


@rule(TensorFromScalar, ScalarFromTensor, MakeVector)
def _scalar(node, axes, n):
    """A scalar made of per-datum values (its only axis would be the datum axis, and every
    use reads it whole): refused. Row-free scalars are fine."""
    _fail(node, "a scalar read from per-datum values")


@rule(
    ARange,
    AllocEmpty,
    Eye,
    ExtractDiag,
    SortOp,
    ArgSortOp,
    linalg.Cholesky,
    linalg.SolveBase,
    linalg.Eigvalsh,
    linalg.Expm,
    linalg.LU,
    linalg.LUFactor,
    linalg.QR,
    linalg.MatrixInverse,
    linalg.MatrixPinv,
    linalg.Det,
    linalg.SLogDet,
    linalg.Eigh,
    linalg.SVD,
)
def _row_free_only(node, axes, n):
    """Known Ops (read only their inputs) without a rule for per-datum values.

    On row-free values they are fine; the linear-algebra ones also run on each batch entry
    of a ``Blockwise`` (which has its own rule).
    """
    _fail(node, "no rule for per-datum values", mixes=False)


# ---------------------------------------------------------------------- helpers


def _aligned(node, rowed: Sequence[Variable], axes: Mapping[Variable, int]) -> int:
    """The shared datum axis of broadcasting inputs, none broadcast along it."""
    found = {axes[i] for i in rowed}
    if len(found) != 1:
        _fail(node, "per-datum inputs with different datum axes")
    (a,) = found
    if any(i.type.broadcastable[axes[i]] for i in rowed):
        _fail(node, "broadcasts a per-datum value along the datum axis")
    return a


def _axis_after_basic_index(node, idx_list, a: int) -> int:
    """Where axis ``a`` of x lands in ``x[idx]``; it must be indexed by a full slice."""
    if a < len(idx_list):
        entry = idx_list[a]
        if not (isinstance(entry, slice) and entry == slice(None, None, None)):
            _fail(node, "indexes the datum axis (only a full slice ':' keeps rows aligned)")
    return a - sum(isinstance(e, int) for e in idx_list[:a])


def _axis_before_basic_index(node, idx_list, sub: int) -> int:
    """The axis of x that lands at axis ``sub`` of ``x[idx]`` (it must be a full slice)."""
    kept = [k for k, e in enumerate(idx_list) if not isinstance(e, int)]
    n_indexed = len(idx_list)
    if sub < len(kept):
        a = kept[sub]
    else:
        a = n_indexed + (sub - len(kept))
    _axis_after_basic_index(node, idx_list, a)
    return a


def _widens_int(node) -> bool:
    """A cast that keeps every value of a length: integer to int64 only.

    (Any other cast can change it: ``int8(260) == 4``, ``bool(260) == 1``; a reshape to
    such a leading length would move rows while looking as if it kept them.)
    """
    if not (isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Cast)):
        return False
    source, target = node.inputs[0].dtype, node.outputs[0].dtype
    return target == "int64" and source in _INT_TO_INT64


_INT_TO_INT64 = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def _first_entry_is_rows(shape: Variable, axes: Mapping[Variable, int], n) -> bool:
    """Whether ``shape[0]`` is n: a constant n, or the datum-axis length of a per-datum var."""
    if isinstance(shape, Constant):
        return n is not None and np.ndim(shape.data) == 1 and int(shape.data[0]) == n
    owner = shape.owner
    if owner is not None and isinstance(owner.op, Shape):  # reshape(g, v.shape)
        return _leads_with_rows(owner.inputs[0], axes, n)
    if owner is None or not isinstance(owner.op, MakeVector):
        return False
    return _is_rows(owner.inputs[0], axes, n)


def _is_rows(s: Variable, axes: Mapping[Variable, int], n) -> bool:
    """Whether scalar ``s`` is the number of rows (constant n or a datum-axis length).

    By the rule registered for the type of the Op that computes ``s`` (:func:`length_rule`);
    an Op without one is not shown to give the number of rows.
    """
    if isinstance(s, Constant):
        return n is not None and np.ndim(s.data) == 0 and int(s.data) == n
    if s.owner is None:
        return False
    found = _LENGTH_RULES.lookup(s.owner.op)
    return found is not None and found(s.owner, axes, n)


def length_rule(*op_types: type):
    """Register ``fn(node, axes, n) -> bool`` for :func:`_is_rows`: whether the node's
    (scalar) output is the number of rows."""
    return _LENGTH_RULES.register(*op_types)


_LENGTH_RULES = _Registry()


@length_rule(TensorFromScalar, ScalarFromTensor)
def _length_through_scalar(node, axes, n):
    """A scalar turned into a tensor (or back) keeps its value."""
    return _is_rows(node.inputs[0], axes, n)


@length_rule(Elemwise)
def _length_through_cast(node, axes, n):
    """A cast to int64 keeps every integer (:func:`_widens_int`); other elementwise Ops are
    not shown to keep the number of rows."""
    return _widens_int(node) and _is_rows(node.inputs[0], axes, n)


@length_rule(Shape_i)
def _length_from_shape_i(node, axes, n):
    """``Shape_i(i)(v)``: the length of axis i of ``v`` (:func:`_axis_is_rows`)."""
    return _axis_is_rows(node.inputs[0], node.op.i, axes, n)


@length_rule(Subtensor)
def _length_from_shape_entry(node, axes, n):
    """An entry of a constant shape vector equal to n, or ``v.shape[i]`` with a constant i
    and axis i of ``v`` the datum axis's length."""
    if n is not None and isinstance(node.inputs[0], Constant):
        try:  # an entry of a constant shape vector
            return int(get_scalar_constant_value(node.outputs[0], elemwise=False)) == n
        except NotScalarConstantError:
            return False
    if len(node.op.idx_list) != 1:
        return False
    shape_var, index = node.inputs
    if not (
        shape_var.owner is not None
        and isinstance(shape_var.owner.op, Shape)
        and isinstance(index, Constant)
    ):
        return False
    return _axis_is_rows(shape_var.owner.inputs[0], int(index.data), axes, n)


def _axis_is_rows(v: Variable, i: int, axes: Mapping[Variable, int], n) -> bool:
    """Whether axis i of ``v`` has the length of the datum axis."""
    if v in axes:
        return axes[v] == i
    return i == 0 and _leads_with_rows(v, axes, n)


def _leads_with_rows(v: Variable, axes: Mapping[Variable, int], n, depth: int = 0) -> bool:
    """Whether axis 0 of ``v`` provably has the length of the datum axis.

    ``v`` has its datum axis first, or (row-free values of that shape, as in PyTensor's
    gradient graphs: ``zeros_like`` of a per-datum value) takes its leading length from
    one, by the rule registered for the type of the Op that computes it
    (:func:`leading_rule`); an Op without one is not shown to.
    """
    if axes.get(v) == 0:
        return True
    if v in axes or v.owner is None or v.ndim < 1 or depth > 64:
        return False
    found = _LEADING_RULES.lookup(v.owner.op)
    return found is not None and found(v, axes, n, depth)


def leading_rule(*op_types: type):
    """Register ``fn(v, axes, n, depth) -> bool`` for :func:`_leads_with_rows`: whether
    axis 0 of ``v``, an output of an Op of these types, has the datum axis's length."""
    return _LEADING_RULES.register(*op_types)


_LEADING_RULES = _Registry()


@leading_rule(Elemwise)
def _leading_elementwise(v, axes, n, depth):
    """The length of any input not broadcastable there (PyTensor does not broadcast at run
    time)."""
    return any(
        i.ndim == v.ndim
        and not i.type.broadcastable[0]
        and _leads_with_rows(i, axes, n, depth + 1)
        for i in v.owner.inputs
    )


@leading_rule(SpecifyShape, CheckAndRaise)
def _leading_first_input(v, axes, n, depth):
    """A check or shape assertion: its first input's shape."""
    return _leads_with_rows(v.owner.inputs[0], axes, n, depth + 1)


@leading_rule(DimShuffle)
def _leading_dimshuffle(v, axes, n, depth):
    """A dimension shuffle that keeps axis 0 in front."""
    return v.owner.op.new_order[0] == 0 and _leads_with_rows(v.owner.inputs[0], axes, n, depth + 1)


@leading_rule(Reshape)
def _leading_reshape(v, axes, n, depth):
    """A reshape: the first entry of its shape (:func:`_first_entry_is_rows`)."""
    return _first_entry_is_rows(v.owner.inputs[1], axes, n)


@leading_rule(Alloc)
def _leading_alloc(v, axes, n, depth):
    """An allocation with as many dimensions as its output: the first one."""
    ins = v.owner.inputs
    return len(ins) - 1 == v.ndim and _is_rows(ins[1], axes, n)
