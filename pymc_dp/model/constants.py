"""Array constants written into a model (NumPy arrays PyMC folds into the graph): where they
are, which uses may carry people's values, and computations across their rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytensor.graph.basic import Constant, Variable
from pytensor.graph.fg import FunctionGraph
from pytensor.graph.op import Op
from pytensor.scalar.basic import ScalarOp, Second
from pytensor.graph.traversal import ancestors
from pytensor.graph.traversal import graph_inputs, io_toposort  # batches of rows
from pytensor.tensor.basic import (
    Alloc, AllocEmpty, MakeVector, ScalarFromTensor, Split, TensorFromScalar,
)
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
)

from pymc.distributions.dist_math import CheckParameterValue

from pymc_dp.model.row_locality import NotRowLocal, datum_axes, inner_graph_outputs

__all__ = [
    "array_constants",
    "inner_graph_outputs",
    "constant_expressions",
    "arrays_written",
    "numbers_written",
    "numbers_in_settings",
    "numbers_held",
    "constant_uses",
    "may_hold_people",
    "shape_determined_index",
    "shape_only_variables",
    "one_number",
    "scaled_identity",
    "structural_use",
    "shape_use",
    "has_rows",
    "cross_row_constant_expression",
]


def array_constants(graph_outputs: Sequence[Variable], inner: bool = False) -> list[Variable]:
    """Non-scalar constants in a graph: data written into the model as NumPy arrays.

    With ``inner``, also those inside the inner graphs of its Ops (``OpFromGraph``, the core
    Op of a ``Blockwise``, symbolic distributions).
    """
    found = (
        (c for c, _, _ in constant_uses(graph_outputs))
        if inner
        else ancestors(list(graph_outputs))
    )
    return list(
        dict.fromkeys(
            a
            for a in found
            if isinstance(a, Constant) and getattr(a, "ndim", 0) > 0 and np.size(a.data) > 1
        )
    )


def constant_expressions(graph_outputs: Sequence[Variable], inner: bool = False) -> list:
    """Stand-ins for the arrays that expressions of constants alone build.

    Data written as n scalar constants and stacked (``pt.stack``), or as pieces joined
    (``pt.concatenate`` of two halves), is an array of n entries all the same, yet no
    constant of the graph holds more than a piece. For each expression of one dimension or
    more computed from constants alone that the rest of the graph reads (or that is an
    output), an empty array of as many entries as the numbers its constants hold, indices
    and lengths included (:func:`_numbers_taken`): ``pt.zeros(n)`` holds two, n values
    picked from a table by n stacked indices hold n. Values are never read:
    :func:`has_rows` counts the stand-ins by size like array constants. With ``inner``,
    also inside the inner graphs of its Ops.

    Examples
    --------
    >>> import pytensor.tensor as pt
    >>> x = pt.scalar("x")
    >>> [a.size for a in constant_expressions([x + pt.stack([pt.constant(1.0)] * 5)])]
    [5]
    >>> [a.size for a in constant_expressions([x + pt.zeros(5)])]  # (0 and 5)
    [2]
    >>> [a.size for a in constant_expressions([x + pt.ones(2)[pt.stack([0, 1, 1, 0, 1])]])]
    [5]
    """
    found, graphs, seen = [], [list(graph_outputs)], set()
    while graphs:
        outs = graphs.pop()
        made_by = {}  # variable computed from constants alone -> its node
        readers = []  # nodes that read such a variable and something else
        for node in io_toposort(graph_inputs(outs), outs):
            inner_outs = inner_graph_outputs(node.op) if inner else None
            if inner_outs and id(node.op) not in seen:
                seen.add(id(node.op))
                graphs.append(inner_outs)
            if node.inputs and all(isinstance(i, Constant) or i in made_by for i in node.inputs):
                made_by.update(dict.fromkeys(node.outputs, node))
            else:
                readers.append(node)
        read = [i for node in readers for i in node.inputs if i in made_by]
        for var in dict.fromkeys([*read, *(o for o in outs if o in made_by)]):
            if getattr(var, "ndim", 0) > 0:
                count = _numbers_taken(made_by[var], made_by)
                # (an array holds no more numbers than its entries: PyMC's bound checks
                # compare a constant of shape (1,) with ±inf)
                shape = getattr(var.type, "shape", (None,))
                if None not in shape:
                    count = min(count, int(np.prod(shape)))
                if count > 1:
                    found.append(np.empty(count))
    return found


def _numbers_taken(node, made_by) -> int:
    """Numbers the constants read by ``node`` and by the nodes it is computed from hold.

    Indices and lengths count too (an index vector of n entries picks n values from a
    table of two; n lengths read back through ``Shape`` are n values). Each node is
    counted once; an array constant once, however many nodes read it (a public ``X`` read
    as ``X - X.mean()`` holds len(X) numbers, not twice that); a scalar constant once per
    use, so that n equal values merged into one constant still count n. c·I counts as one
    number, as in :func:`has_rows`. Numbers held in an Op's settings count too
    (:func:`numbers_in_settings`).
    """
    count, nodes, seen, arrays = 0, [node], {node}, set()
    while nodes:
        node = nodes.pop()
        count += numbers_in_settings(node.op)
        for i in node.inputs:
            if isinstance(i, Constant):
                count += _numbers_in(i, arrays)
            elif made_by[i] not in seen:
                seen.add(made_by[i])
                nodes.append(made_by[i])
    return count


def numbers_written(graph_outputs: Sequence[Variable], blockers=()) -> int:
    """How much a graph holds as written: every constant it computes with (an array once,
    its entries or, if more, its lengths; c·I as one; a scalar once per use), every
    operation's inputs (one at least), and the numbers in the operations' settings
    (:func:`numbers_in_settings`), inner graphs (``OpFromGraph``, a ``Composite``'s scalar
    graph) included.

    For graphs the user writes whole (initial values, ``pm.Potential``, ``pm.Deterministic``,
    PyMC's start): n per-person values can be written in any arrangement (n scalars
    stacked, ``pt.stack([mu + a for a in ages])``; lengths of allocations read back as a
    shape; offsets of diagonals in the Ops' settings; in unary, as sums of ones), and
    whatever the arrangement, writing them takes n symbols or more, unless several are
    packed into one number (a blind spot). Values are never read. The walk stops at
    ``blockers`` (free random variables: what the user wrote, not the priors and
    transforms PyMC adds).

    Examples
    --------
    >>> import pytensor.tensor as pt
    >>> mu = pt.scalar("mu")
    >>> numbers_written([pt.stack([mu + float(a) for a in range(6)])])  # (6 + 12 + 7)
    25
    >>> numbers_written([pt.empty((3, 4, 5)).shape])  # (3 lengths, 4 inputs, a dtype)
    8
    """
    count, arrays, graphs, seen = 0, set(), [list(graph_outputs)], set()
    blockers = list(blockers)
    while graphs:
        outs = graphs.pop()
        uses = [(o, None) for o in outs if isinstance(o, Constant)]
        for node in io_toposort([*graph_inputs(outs, blockers=blockers), *blockers], outs):
            core = getattr(node.op, "core_op", node.op)  # (a Blockwise's Elemwise too)
            op = getattr(core, "scalar_op", core)
            for inner in (inner_graph_outputs(node.op),
                          list(getattr(getattr(op, "fgraph", None), "outputs", []))):
                if inner and (id(node.op), len(inner)) not in seen:
                    seen.add((id(node.op), len(inner)))
                    graphs.append(inner)
            uses += [(i, node) for i in node.inputs if isinstance(i, Constant)]
            # (the operation and each input it reads are one: n additions of ones write n
            # ages in unary, one addition of ones and zeros their bits)
            count += max(1, len(node.inputs)) + numbers_in_settings(node.op)
        count += sum(_numbers_in(c, arrays) for c, _ in uses)
    return count


def numbers_in_settings(op) -> int:
    """The numbers an Op holds in its settings (``__props__``) rather than in its inputs:
    a diagonal's ``offset``, a reduction's ``axis``, a ``DimShuffle``'s order, a dtype. Each
    number, flag or name is one (each picks among values: n diagonals of a public table,
    their lengths read back, give n ages); Ops held as settings (an ``Elemwise``'s scalar
    Op, a ``Blockwise``'s core Op) count theirs; inner graphs count where they are walked.
    Anything that cannot be read as numbers counts as one. Rules per Op type
    (:data:`_SETTINGS_RULES`) leave out what the input types fix or no value reads.

    Examples
    --------
    >>> import pytensor.tensor as pt
    >>> from pytensor.tensor.basic import ExtractDiag
    >>> numbers_in_settings(ExtractDiag(offset=42))  # (offset, axis1, axis2, view)
    4
    >>> numbers_in_settings(pt.exp(pt.vector()).owner.op)
    0
    """
    for cls in type(op).__mro__:
        rule = _SETTINGS_RULES.get(cls)
        if rule is not None:
            return rule(op)
    props = getattr(op, "__props__", None)
    if props is None:
        # (an Op without settings to compare by: PyTensor's scalar Ops, or one with an
        # inner graph, which is walked; Ops running code of their own are refused apart)
        return 0
    return sum(_numbers_in_setting(getattr(op, name, None)) for name in props)


def _numbers_in_setting(value) -> int:
    if isinstance(value, Variable | FunctionGraph):
        return 0  # (inner graphs: counted where they are walked)
    if isinstance(value, Op | ScalarOp):
        return numbers_in_settings(value)
    return numbers_held(value, _numbers_in_setting)


#: Settings rules for Ops some of whose settings carry nothing: fixed by the input types
#: (which the Op checks), or read by no value.
_SETTINGS_RULES = {
    DimShuffle: lambda op: len(op.new_order),  # (its input's number of axes: the type's)
    # (its signature is its core Op's)
    Blockwise: lambda op: numbers_in_settings(op.core_op),
    # (its message and error type reach no value)
    CheckParameterValue: lambda op: 1,
}


def _numbers_in(constant, arrays: set) -> int:
    """The numbers one use of ``constant`` adds: 1 for a scalar (each use), an array's size
    (or, if more, its number of axes: an empty array's lengths are numbers) the first time
    (``arrays``: the ids already counted; c·I is one number); for data that is not an array
    (a sparse matrix, a random generator's state, a slice) the numbers it holds
    (:func:`numbers_held`), the first time."""
    data = np.asarray(constant.data) if isinstance(constant.data, np.ndarray | np.generic) \
        else constant.data
    if isinstance(data, np.ndarray) and data.dtype != object and data.size <= 1 \
            and data.ndim <= 1:
        return 1
    if id(constant) in arrays:
        return 0
    arrays.add(id(constant))
    if isinstance(data, np.ndarray) and data.dtype != object:
        # (its lengths are numbers too: an empty array of shape (0, a₁, …, a₉) holds nine)
        return 1 if scaled_identity(data) else max(int(data.size), data.ndim)
    return numbers_held(data)


def numbers_held(value, each=None) -> int:
    """How many numbers ``value`` holds, whatever it is: a number, flag or name one, an
    array its entries (or lengths), a sparse matrix its stored entries and their positions,
    a random generator its state, containers what they hold (each item counted by ``each``,
    by default this); ``None`` none; anything else that cannot be read as numbers, one.
    Values are counted, never read.

    Examples
    --------
    >>> import numpy as np
    >>> numbers_held(np.random.default_rng(0)) > 1
    True
    >>> numbers_held(slice(2, 5))
    2
    """
    each = each or numbers_held
    if value is None:
        return 0
    if isinstance(value, bool | int | float | complex | str | np.generic):
        return 1
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return sum(each(v) for v in value.flat)
        return max(int(value.size), value.ndim)
    if isinstance(value, slice):
        return sum(each(v) for v in (value.start, value.stop, value.step))
    if isinstance(value, tuple | list | set | frozenset):
        return sum(each(v) for v in value)
    if hasattr(value, "items"):  # (a dict, PyTensor's frozendict)
        return sum(each(k) + each(v) for k, v in value.items())
    if isinstance(value, np.random.Generator):
        return each(value.bit_generator.state)
    if isinstance(value, np.random.BitGenerator):
        return each(value.state)
    if hasattr(value, "tocoo"):  # (a SciPy sparse matrix: entries, positions, lengths)
        coo = value.tocoo()
        return 3 * int(coo.nnz) + len(coo.shape)
    return 1


def arrays_written(graph_outputs: Sequence[Variable], inner: bool = False) -> list:
    """The arrays a graph holds as written: its array constants (:func:`array_constants`)
    and stand-ins for those built from constants alone (:func:`constant_expressions`)."""
    return [*array_constants(graph_outputs, inner), *constant_expressions(graph_outputs, inner)]


def constant_uses(outputs: Sequence[Variable], blockers=()):
    """``(constant, node, position)`` for every tensor constant the graph computes with.

    Enters inner graphs (:func:`inner_graph_outputs`); a constant that is itself an output
    comes with ``node=None``. Stops at ``blockers`` (free random variables: priors).
    """
    graphs, seen = [list(outputs)], set()
    while graphs:
        outs = graphs.pop()
        for out in outs:
            if isinstance(out, Constant):
                yield out, None, None
        # (graph_inputs leaves the blockers out: they are inputs of the walk all the same)
        for node in io_toposort([*graph_inputs(outs, blockers=blockers), *blockers], outs):
            inner = inner_graph_outputs(node.op)
            if inner and id(node.op) not in seen:
                seen.add(id(node.op))
                graphs.append(inner)
            for k, i in enumerate(node.inputs):
                if isinstance(i, Constant) and getattr(i, "ndim", 0) > 0:
                    yield i, node, k


def _structural_inputs(node) -> range:
    """Input positions of ``node`` whose values are shapes, sizes or indices, or whose shape
    alone is read: where PyMC and PyTensor put their own array constants."""
    for cls in type(node.op).__mro__:
        found = _STRUCTURAL_INPUTS.get(cls)
        if found is not None:
            return found(node)
    return range(0)


_STRUCTURAL_INPUTS = {
    Reshape: lambda node: range(1, 2),
    Split: lambda node: range(1, 3),
    Alloc: lambda node: range(1, len(node.inputs)),
    AllocEmpty: lambda node: range(len(node.inputs)),
    SpecifyShape: lambda node: range(1, len(node.inputs)),
    Subtensor: lambda node: range(1, len(node.inputs)),
    AdvancedSubtensor: lambda node: range(1, len(node.inputs)),
    IncSubtensor: lambda node: range(2, len(node.inputs)),
    AdvancedIncSubtensor: lambda node: range(2, len(node.inputs)),
    Shape: lambda node: range(1),
    Shape_i: lambda node: range(1),
    # fill(x, v) (zeros_like, ones_like) reads the shape of x
    Elemwise: lambda node: range(1 if isinstance(node.op.scalar_op, Second) else 0),
    # a random variable's generator and size (its parameters are values)
    RandomVariable: lambda node: range(len(node.inputs) - len(node.op.dist_params(node))),
}


def structural_use(node, position: int) -> bool:
    """Whether ``node`` reads input ``position`` as a shape, a size or an index (or reads
    only its shape), not as values to compute with."""
    return position in _structural_inputs(node)


def shape_use(node, position: int) -> bool:
    """Whether ``node`` reads input ``position`` as a shape or a size (or reads only its
    shape): a :func:`structural_use` other than an index."""
    return structural_use(node, position) and not isinstance(node.op, _INDEXING)


_INDEXING = (Subtensor, AdvancedSubtensor, IncSubtensor, AdvancedIncSubtensor)


def may_hold_people(const: Constant, node, position, shape_only=frozenset()) -> bool:
    """Whether a use of an array constant (not on the datum axis) may spread people's values.

    Shapes and sizes do not (PyMC's and PyTensor's own constants are of these kinds), nor
    does an entry of a constant shape vector used only as a shape (``shape_only``: the
    variables of the graph :func:`shape_only_variables` finds). An index array or the
    sizes of split pieces may, unless their layout follows from their length
    (:func:`shape_determined_index`). A table indexed by per-row integers (one entry read
    by many rows) always may, whatever its values; any other use (values broadcast to
    every row) may unless the array holds no more than a scalar does (:func:`one_number`,
    a range).
    """
    a = np.asarray(const.data)
    if node is None:
        return a.size > 1
    if isinstance(node.op, Split) and position == len(node.inputs) - 1:
        # The sizes of the pieces, which their shapes read back as values. Two sizes hold one
        # number (they add up to a public length): PyMC's random walk splits [1, steps].
        return a.size > 2 and not shape_determined_index(a)
    if structural_use(node, position):
        # An index array selects or places values: a per-person table written as positions
        # (a[table][g], zeros(k)[table].set(a)) moves every row its entries reach. Only
        # layouts a shape determines pass (a range, a triangle's indices: PyMC's own).
        if isinstance(node.op, _INDEXING):
            return a.size > 1 and not shape_determined_index(a)
        return False
    if (
        isinstance(node.op, Subtensor)
        and position == 0
        and const.dtype.startswith(("int", "uint"))
        and all(isinstance(i, Constant) for i in node.inputs[1:])
        and node.outputs[0] in shape_only
    ):
        # an entry of a constant shape vector ([n, k], PyMC's folded shapes), used as a
        # shape only: an entry that reaches a value (a[R[k]], b * R[k]) is a value read
        return False
    table = isinstance(node.op, AdvancedSubtensor | AdvancedIncSubtensor) and position < 2
    if table:
        # (never by its values: a per-person table whose entries happen to be equal would
        # pass, and one person's differing entry would then be refused)
        return True
    if one_number(a) or _is_range(a):
        # no more than a scalar constant (np.ones(p), np.full(p, c), np.eye(d), a range:
        # PyMC folds arange(1, k + 1) into one when a model's graph is rewritten in place)
        return False
    return a.size > 1


def _is_range(a: np.ndarray) -> bool:
    """Whether ``a`` is a 1-d run of consecutive integers, up or down (``arange``)."""
    if a.ndim != 1 or a.size < 2 or not np.issubdtype(a.dtype, np.integer):
        return False
    step = np.arange(a.size, dtype=np.int64)
    shifted = a.astype(np.int64) - np.int64(a[0])
    return bool(np.array_equal(shifted, step) or np.array_equal(shifted, -step))


def shape_determined_index(a: np.ndarray) -> bool:
    """Whether an index array's entries follow from its length alone (and at most one
    number): all equal, a range (:func:`_is_range`), the rows or columns of a triangle's
    indices (``np.tril_indices``, ``np.triu_indices``, with or without the diagonal), or
    the positions of a packed triangle's diagonal. These are the layouts PyMC writes (an
    LKJ factor's triangle, its diagonal); a table of people's values is none of them
    except by chance, and is then accepted only as that layout.
    """
    if one_number(a) or _is_range(a):
        return True
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        return False
    m = a.size
    layouts = []
    for k in range(1, m + 2):
        for offset, count in ((0, k * (k + 1) // 2), (1, k * (k - 1) // 2)):
            if count == m:
                layouts += [*np.tril_indices(k, -offset), *np.triu_indices(k, offset)]
    rows = np.arange(1, m + 1)
    layouts += [np.cumsum(rows) - 1, np.concatenate([[0], np.cumsum(rows[::-1])[:-1]])]
    return any(np.array_equal(a, layout) for layout in layouts)


# Integer arithmetic a shape passes through on its way to a shape input.
_SHAPE_ARITHMETIC = (Elemwise, MakeVector, DimShuffle, Subtensor, ScalarFromTensor, TensorFromScalar)


def shape_only_variables(outputs: Sequence[Variable]) -> set:
    """The integer variables of the graph of ``outputs`` that are used only as shapes or
    sizes (:func:`shape_use`), directly or through integer arithmetic. Not the outputs."""
    nodes = io_toposort(list(graph_inputs(outputs)), list(outputs))
    clients: dict = {}
    for node in nodes:
        for k, i in enumerate(node.inputs):
            clients.setdefault(i, []).append((node, k))
    only: set = set()
    for node in reversed(nodes):
        for out in node.outputs:
            uses = clients.get(out)
            # (a generator's or a None output has no dtype: never a shape)
            if not uses or not getattr(out, "dtype", "").startswith(("int", "uint")):
                continue
            if all(
                shape_use(c, k)
                or (isinstance(c.op, _SHAPE_ARITHMETIC) and all(o in only for o in c.outputs))
                for c, k in uses
            ):
                only.add(out)
    return only


def one_number(a: np.ndarray) -> bool:
    """Whether ``a`` is determined by its shape and one number: all entries equal, or c·I."""
    if a.size == 0 or np.all(a == a.flat[0]):
        return True
    a = a.reshape([s for s in a.shape if s != 1])  # (broadcast axes)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        return False
    diagonal = np.diagonal(a)
    return bool(np.all(diagonal == diagonal[0]) and np.count_nonzero(a - np.diag(diagonal)) == 0)


def scaled_identity(a: np.ndarray) -> bool:
    """Whether ``a`` is c·I with c ≠ 0 (broadcast axes aside): a public covariance's form."""
    a = a.reshape([s for s in a.shape if s != 1])
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 2:
        return False
    diagonal = np.diagonal(a)
    return bool(diagonal[0] != 0 and np.all(diagonal == diagonal[0])
                and np.count_nonzero(a - np.diag(diagonal)) == 0)


def has_rows(arrays, n: int) -> bool:
    """Whether some array (or constant) may hold one value per individual, whatever its
    values: n entries or more in any layout (an axis of length n, a flattened or reshaped
    (n, k) array, the data with an entry appended), unless it is c·I
    (:func:`scaled_identity`: a public ``np.eye(d)`` with d² ≥ n). Values are not read:
    data whose entries happen to be equal would pass, and one person's differing entry
    would decide. A public array that large is declared with ``pymc_dp.public_data``.

    A guard against per-person arrays written where data must not be, not a proof that an
    array holds no data: a part of the data (fewer than n entries, or the data split into
    pieces) or a number computed from it cannot be told from a constant of the analysis.
    """
    for a in arrays:
        data = a.data if isinstance(a, Constant) else a
        if not isinstance(data, np.ndarray | np.generic | list | tuple | int | float):
            # (a sparse matrix, a random generator: by its lengths and the numbers it holds)
            if n in getattr(data, "shape", ()) or numbers_held(data) >= n:
                return True
            continue
        value = np.asarray(data)
        if value.dtype == object:
            if numbers_held(value) >= n:
                return True
            continue
        if n in value.shape or (value.size >= n and not scaled_identity(value)):
            return True  # (an empty array too: n entries along an axis, or a length n)
    return False


def cross_row_constant_expression(outputs, nodes, blockers, n: int) -> bool:
    """Whether a constant-only expression in ``nodes`` computes across an axis of length n."""
    constant = {
        v for v in graph_inputs(outputs, blockers=blockers) if isinstance(v, Constant)
    } - set(blockers)
    for node in nodes:
        if node.inputs and all(i in constant for i in node.inputs):
            constant.update(node.outputs)
    # the results of constant-only expressions, where the rest of the graph reads them
    results = [
        i
        for node in nodes
        if not all(i in constant for i in node.inputs)
        for i in node.inputs
        if i in constant and i.owner is not None
    ] + [o for o in outputs if o in constant and o.owner is not None]
    # every array with n entries along some axis is per-datum along the first such axis
    rows = {}
    for c in constant:
        if isinstance(c, Constant) and n in np.shape(c.data):
            rows[c] = np.shape(c.data).index(n)
    if not results or not rows:
        return False
    try:
        datum_axes(results, rows, n)
    except NotRowLocal:
        return True
    return False
