"""What compiling a graph runs besides its Ops: PyTensor's extension points, judged.

The checks read a model's graph, but the code that computes its values is made when the
graph is compiled: PyTensor applies every rewrite registered in its rewrite database
(``optdb``: ``register_canonicalize`` and the like) and turns each Op into code through
its backend's dispatch registry (``numba_funcify``, ``jax_funcify``, …), by the mode and
linker the configuration names. All are public and open to registration: a rewrite or an
implementation of the user's runs in every compiled function, may put anything in the
values (a Deterministic's, a start's), and is not in the graph that was checked.

:func:`foreign_extensions` lists what is registered there that is not PyTensor's or
PyMC's own code (:func:`~pymc_dp.model.row_locality.library_code`, closures included);
:func:`refuse_foreign_extensions` refuses while there is any. It runs when a model is
checked and again when a chain starts, before anything is reserved or read (a
registration made between building a step and sampling is seen). Reads the registries
only, never data.
"""

from __future__ import annotations

import sys

from types import FunctionType

from pymc_dp.errors import UnsupportedModelError

from pymc_dp.model.row_locality import _inert, library_code

__all__ = ["foreign_extensions", "refuse_foreign_extensions"]


def foreign_extensions() -> list[str]:
    """Labels of the rewrites, backend implementations, modes, linkers and optimizers
    registered in PyTensor that run code other than PyTensor's and PyMC's.

    Private steps refuse to run while there is any. Reads PyTensor's registries, never
    data.

    Examples
    --------
    >>> from pymc_dp.model import foreign_extensions
    >>> foreign_extensions()  # a process where nothing of the user's is registered
    []
    """
    from pytensor.compile import mode

    found = []
    for name, dispatcher in _dispatchers():
        for cls, impl in list(dispatcher.registry.items()):
            if not library_code(impl):
                found.append(f"{name} for {getattr(cls, '__name__', cls)}")
    seen: set = set()  # (each object judged once; the first finding refuses)
    for rewriter in _rewriters(mode.optdb):
        if not _inert(rewriter, seen):
            label = getattr(rewriter, "__name__", None) or getattr(rewriter, "name", None)
            found.append(f"the rewrite {label or type(rewriter).__name__!r}")
    # (and the modes get_default_mode keeps for the configuration's names)
    for registry in ("predefined_modes", "predefined_linkers", "predefined_optimizers",
                     "_CACHED_RUNTIME_MODES"):
        for name, value in list(getattr(mode, registry, {}).items()):
            if not _inert(value, seen):
                found.append(f"the {registry.split('_')[-1][:-1].lower()} {name!r}")
    return found


def refuse_foreign_extensions() -> None:
    """Raise :class:`~pymc_dp.errors.UnsupportedModelError` if :func:`foreign_extensions`
    finds any."""
    found = foreign_extensions()
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise UnsupportedModelError(
            f"PyTensor has code registered that is not PyTensor's or PyMC's: {shown}. "
            "Compiling a model runs every registered rewrite and backend implementation, "
            "and a private step cannot see what they put in the values it releases. "
            "Run private steps in a process where no rewrite, dispatch implementation, "
            "mode or linker of your own is registered."
        )


def _dispatchers():
    """PyTensor's ``functools.singledispatch`` registries, in the modules imported so far (a
    registry whose module is not imported holds only its own). Not PyMC's: they build a
    model's graphs (a ``pm.CustomDist`` registers the user's ``logp`` in ``_logprob``),
    which are checked as graphs; PyTensor's turn graphs into code."""
    seen = set()
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.split(".")[0] != "pytensor":
            continue
        for attr, value in list(vars(module).items()):
            # (read from the function's own namespace: attributes of other objects may run
            # code, PyMC's module proxies import on access)
            held = vars(value) if isinstance(value, FunctionType) else {}
            if (id(value) in seen or "registry" not in held or "dispatch" not in held
                    or not library_code(held.get("__wrapped__"))):
                continue  # (numba's own typeof_impl is imported into PyTensor's modules)
            seen.add(id(value))
            yield f"{module_name}.{attr}", value


def _rewriters(db, seen=None):
    """Every rewriter registered in ``db`` and the databases within it, and those
    databases (a database is judged by its class and what it holds, as a rewriter)."""
    seen = set() if seen is None else seen
    for registered in list(getattr(db, "__db__", {}).values()):
        for rewriter in list(registered):
            if id(rewriter) in seen:
                continue
            seen.add(id(rewriter))
            yield rewriter
            if hasattr(rewriter, "__db__"):
                yield from _rewriters(rewriter, seen)
