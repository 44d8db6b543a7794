"""What a shared result may hold, and :func:`release`, which builds it from a whitelist.

A result that users will share carries the posterior draws, the stats that pymc_dp's steps
declare and the privacy report, and nothing else: no observed or constant data, no
log-likelihoods, no deterministics computed from data, no stats of other samplers, no timings,
no coordinates but the labels of the dimensions released variables use, and labels of
per-person dimensions only as positions. :func:`release` builds such a result from a
whitelist and records what it released, so that a result extended afterwards (e.g. by
``pm.compute_log_likelihood``) is recognised as no longer safe to share.

"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil

from collections.abc import Iterable, Sequence

import numpy as np
import xarray as xr

from pymc.model import modelcontext

from pymc_dp.errors import UnsupportedModelError, warn
from pymc_dp.model import data_dependent_deterministics
from pymc_dp.steps.base import PrivateStep


__all__ = ['NotReleasableWarning', 'declared_stats', 'release']

#: The only groups a released result keeps: draws and the stats of pymc_dp's steps. Every
#: other group (observed/constant data, log-likelihoods, predictive draws computed with the
#: data's covariates, …) is dropped.
RELEASED_GROUPS = ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats")
STATS_GROUPS = ("sample_stats", "warmup_sample_stats")
#: Group attributes that say how a result was made and nothing about the data. Any other
#: (e.g. ``sampling_time``: wall-clock time is a side channel that ε does not cover) is dropped.
PUBLIC_GROUP_ATTRS = (
    "created_at",
    "creation_library",
    "creation_library_version",
    "creation_library_language",
    "inference_library",
    "inference_library_version",
    "sample_dims",
    "tuning_steps",
)
#: The root attribute in which a release records the variables of each group it released.
RELEASED_ATTR = "dp_released"
#: Root attributes a released result keeps: the privacy report and the release record.
RELEASE_ATTRS = ("dp_epsilon", "dp_delta", "dp_report", "dp_tempered", RELEASED_ATTR)


# ---------------------------------------------------------------------- release
class NotReleasableWarning(UserWarning):
    """:func:`privacy_report` read a result that holds more than a release keeps."""



def releasable_names(model) -> list[str]:
    """Free variables, and deterministics that read neither data nor array constants
    (:func:`~pymc_dp.model.data_dependent_deterministics`)."""
    private = set(data_dependent_deterministics(model))
    return [rv.name for rv in model.free_RVs] + [
        det.name for det in model.deterministics if det.name not in private
    ]



@functools.cache
def declared_stats() -> dict[str, dict[str, tuple]]:
    """The sample stats each of pymc_dp's steps declares (with those it records only when an
    option asks for them, e.g. the clip diagnostics'): the only stats a release keeps.

    Read from the step classes themselves (``stats_dtypes_shapes`` of every concrete
    :class:`~pymc_dp.steps.base.PrivateStep` subclass in :mod:`pymc_dp.steps`), so that a
    new step's stats are released as soon as the step declares them, and nothing else is.
    Subclasses defined outside pymc_dp are not trusted.

    Returns
    -------
    dict
        ``{step class name: {stat name: (dtype, shape)}}``.

    Examples
    --------
    >>> sorted(declared_stats()["DPPenalty"])  # doctest: +NORMALIZE_WHITESPACE
    ['accept', 'accepted', 'clip_bound', 'dp_clip_count', 'dp_clip_fraction',
     'dp_clip_fraction_sd', 'dp_clip_mu_chain', 'dp_clip_terms', 'dp_clip_window',
     'dp_delta', 'dp_mu', 'dp_mu_chain', 'dp_mu_shared_warmup', 'noise_multiplier', 'scaling']
    """
    return {
        cls.__name__: {**cls.stats_dtypes_shapes, **cls.optional_stats_dtypes_shapes}
        for cls in _own_step_classes()
    }


@functools.cache
def _required_privacy_stats() -> dict[str, set[str]]:
    """The privacy stats (``dp_``) every trace of each step records (not the optional ones,
    e.g. the clip diagnostics', recorded only when asked for)."""
    return {
        cls.__name__: {name for name in cls.stats_dtypes_shapes if name.startswith("dp_")}
        for cls in _own_step_classes()
    }


@functools.cache
def _own_step_classes() -> tuple[type, ...]:
    """The concrete private steps that pymc_dp defines (in :mod:`pymc_dp.steps`)."""
    import pymc_dp.steps as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    found, todo = [], list(PrivateStep.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith(f"{package.__name__}.") and cls.stats_dtypes_shapes:
            found.append(cls)
    return tuple(found)


def own_step_class(name: str) -> type | None:
    """The pymc_dp step class of that name (a trace's stats name their owner), or None."""
    return next((cls for cls in _own_step_classes() if cls.__name__ == name), None)


#: pymc_dp's mechanisms besides its steps whose results :func:`release` accepts; each
#: registers itself where it is defined (:func:`own_mechanism`).
_MECHANISMS: list[type] = []


def own_mechanism(cls: type | None = None, *, former_names: tuple[str, ...] = ()):
    """Class decorator: a mechanism of pymc_dp's own (not a step) whose results
    :func:`release` accepts. Only classes defined inside pymc_dp may register.
    ``former_names``: where the class lived before (results made then name it there)."""

    def register(cls: type) -> type:
        if not cls.__module__.startswith("pymc_dp."):
            raise TypeError(f"{qualified_name(cls)} is not defined in pymc_dp")
        _MECHANISMS.append(cls)
        _FORMER_NAMES.update(dict.fromkeys(former_names, cls))
        return cls

    return register if cls is None else register(cls)


#: Earlier qualified names of pymc_dp's own classes, as older results' reports name them.
_FORMER_NAMES: dict[str, type] = {}


def _own_mechanisms() -> tuple[type, ...]:
    """Every class whose results :func:`release` accepts: pymc_dp's steps and mechanisms."""
    return (*_own_step_classes(), *_MECHANISMS)


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def check_own_mechanism(obj) -> None:
    """Refuse an object whose class pymc_dp does not define (e.g. a user's subclass).

    What a release keeps is checked by name (the stats pymc_dp's steps declare, the
    variables of the model), not by how it was computed: a subclass can record values
    computed from the data under a declared name, or add less noise than its parent while
    reporting the parent's cost. Only pymc_dp's own classes are known to do what their
    reports say.

    Raises
    ------
    UnsupportedModelError
        ``type(obj)`` is not one of pymc_dp's private steps or mechanisms.
    """
    cls = type(obj)
    if cls not in _own_mechanisms():
        bases = [qualified_name(b) for b in cls.__mro__[1:] if b in _own_mechanisms()]
        parent = f" (a subclass of {bases[0]})" if bases else ""
        raise UnsupportedModelError(
            f"{qualified_name(cls)} is defined outside pymc_dp{parent}. pymc_dp cannot "
            "check what a class it does not define records and releases: a subclass can "
            "record values computed from the data under the names pymc_dp's steps declare, "
            "or add less noise than its report says. Use pymc_dp's own steps and mechanisms. "
            "Nothing was run and no budget was reserved."
        )


def stats_owner(idata) -> tuple[str, bool] | None:
    """Which pymc_dp step made the trace's sample stats, and whether its privacy stats are there.

    ``None`` if the trace has no sample stats. Raises if any stat is not one that a single
    pymc_dp step declares, with the declared shape: another sampler ran in the chains (PyMC
    stacks a stat that two samplers share along an extra dimension).
    """
    groups = [idata[g].to_dataset() for g in STATS_GROUPS if g in idata.children]
    shapes = {}
    for ds in groups:
        for name, da in ds.data_vars.items():
            shapes.setdefault(name, set()).add(da.ndim)
    if not groups:
        return None
    declared = declared_stats()
    fitting = [
        step
        for step, stats in declared.items()
        if all(
            name in stats and (stats[name][1] is None or ndims == {2 + len(stats[name][1])})
            for name, ndims in shapes.items()
        )
    ]
    for step in fitting:
        if _required_privacy_stats()[step] <= set(shapes):
            return step, True
    if fitting:
        return fitting[0], False
    known = set().union(*declared.values())
    unknown = sorted(set(shapes) - known)
    if unknown:
        why = f"sample stats that no pymc_dp step declares ({unknown})"
    else:
        why = (
            "sample stats recorded by more than one sampler, or stats of different pymc_dp "
            f"steps together ({sorted(shapes)})"
        )
    raise ValueError(
        f"This trace holds {why}: another sampler ran in its chains, and its stats are exact "
        "functions of the data (a Metropolis step that never moves still records its "
        "acceptance ratio). Nothing of it can be released, and its privacy cost is not "
        "covered. Sample with one pymc_dp step only (pymc_dp.sample refuses other steps)."
    )


def _released_record(idata) -> dict[str, list[str]] | None:
    """The variables of each group that :func:`release` kept, or ``None`` if never released."""
    record = idata.attrs.get(RELEASED_ATTR)
    return None if record is None else json.loads(record)["groups"]


def n_individuals(model) -> int | None:
    """n, the number of individuals: the leading length of the model's observed values.

    Public under replace-one neighbouring (every report states it). ``None`` if the
    observed values do not share one leading length (private steps refuse such models).
    Only shapes are read, never values.
    """
    from pymc_dp.model.data import numeric_value

    lengths = {
        np.shape(numeric_value(model.rvs_to_values[rv]))[:1] for rv in model.observed_RVs
    }
    return lengths.pop()[0] if len(lengths) == 1 and () not in lengths else None


def _per_person_lengths(idata, model) -> frozenset[int] | None:
    """The lengths of per-person dimensions: n, from every source that states it.

    The model (given or in context), the report (``n_data``), a minibatch step's
    ``dp_n_data`` stats and an earlier release's record. ``None`` if none states it: every
    dimension is then treated as per-person.
    """
    found = set()
    if model is not None and (n := n_individuals(model)) is not None:
        found.add(n)
    stated = json.loads(idata.attrs.get("dp_report", "{}")).get("n_data")
    if stated:
        found.add(int(stated))
    for group in STATS_GROUPS:
        if group in idata.children and "dp_n_data" in idata[group].data_vars:
            found.update(int(v) for v in np.unique(idata[group]["dp_n_data"].values))
    if RELEASED_ATTR in idata.attrs:
        found.update(json.loads(idata.attrs[RELEASED_ATTR]).get("per_person_lengths") or ())
    return frozenset(found) or None


def _is_per_person(size: int, per_person: frozenset[int] | None) -> bool:
    # (n entries or more: a dimension of two effects per person, flattened, has 2n)
    return per_person is None or size >= min(per_person)


def _positions(ds: xr.Dataset, dim: str) -> np.ndarray:
    return np.arange(ds.sizes[dim])


def unreleased_content(idata) -> list[str]:
    """What ``idata`` holds beyond what a release keeps (empty for a released result)."""
    record = _released_record(idata)
    found = [
        f"group {node.path.lstrip('/')!r}"
        for node in idata.subtree
        if node is not idata and node.path.lstrip("/") not in (record or RELEASED_GROUPS)
    ]
    if record is None:
        found.append("no record of a pymc_dp release (plain pm.sample keeps all it computed)")
        return found
    kept = json.loads(idata.attrs[RELEASED_ATTR])
    per_person = (
        frozenset(kept["per_person_lengths"]) if kept.get("per_person_lengths") else None
    )
    for group, names in record.items():
        if group in idata.children:
            ds = idata[group].to_dataset()
            extra = sorted(set(ds.data_vars) - set(names))
            found += [f"variable {v!r} of group {group!r}" for v in extra]
            found += [
                f"coordinate {c!r} of group {group!r}" for c in ds.coords if c not in ds.dims
            ]
            found += [
                f"labels of the per-person dimension {d!r} of group {group!r}"
                for d in ds.indexes
                if _is_per_person(ds.sizes[d], per_person)
                and not np.array_equal(ds[d].values, _positions(ds, d))
            ]
    return found


def release(idata, *, model=None, drop_vars: Iterable[str] = ()) -> xr.DataTree:
    """A new result with only what pymc_dp's private steps released, built from a whitelist.

    Keeps

    * the groups ``posterior``, ``sample_stats`` and their warm-up versions (so no
      ``observed_data``, ``constant_data``, ``log_likelihood``, nor predictive groups, which
      are computed with the data or its covariates);
    * in the posterior, free variables and deterministics that read neither data nor array
      constants (found from ``model``, or the model in context);
    * in the sample stats, the stats that pymc_dp's steps declare (:func:`declared_stats`);
    * the index coordinates (labels) of the dimensions a kept variable uses, and no other
      coordinate (one laid along a dimension, e.g. a data column, is dropped). Labels of a
      per-person dimension, one whose length is n, the number of individuals, or more (a
      flattened layout of several entries per person), become
      positions 0, …, n−1 (with a ``UserWarning``): identifiers, or a data column used as
      labels, would show who is in the data. n comes from the model, the report or a
      minibatch step's stats; if none states it, every dimension counts as per-person;
    * the group attributes in ``PUBLIC_GROUP_ATTRS`` (no timings) and the root attributes
      ``dp_epsilon``, ``dp_delta``, ``dp_report``;

    drops any ``drop_vars``, and records in the attribute ``dp_released`` what it kept.

    Parameters
    ----------
    idata : DataTree
        A result of ``pm.sample`` with a pymc_dp step, of :func:`pymc_dp.sample` or of
        :class:`pymc_dp.PosteriorSampling`.
    model : pm.Model, optional
        Required (given or in context) unless ``idata`` came from :func:`pymc_dp.sample`
        or was released before.
    drop_vars : iterable of str
        Further variables to leave out.

    Raises
    ------
    ValueError
        * the trace holds stats that no pymc_dp step declares, or stats of two samplers:
          another sampler ran in its chains;
        * nothing shows that a private step made the draws (no privacy stats, no report);
        * ``idata`` was released before and then extended with content computed from the
          data (``pm.compute_log_likelihood``,
          ``pm.sample_posterior_predictive(..., extend_inferencedata=True)``, added groups,
          variables or coordinates, labels of a per-person dimension);
        * its report does not name pymc_dp's own steps or mechanism as its maker (a
          subclass defined elsewhere, or a report of an older pymc_dp). A trace of plain
          ``pm.sample`` does not record its step's class: there, only the stats' names
          and shapes are checked.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp
    >>> with pm.Model() as m:
    ...     mu = pm.Normal("mu")
    ...     _ = pm.Normal("y", mu, 1, observed=np.zeros(30))
    ...     step = pymc_dp.DPPenalty(eps=1.0, clip_bound=1.0, chains=1)
    ...     idata = pm.sample(draws=5, tune=5, chains=1, step=step, progressbar=False,
    ...                       compute_convergence_checks=False)
    >>> sorted(idata.children)
    ['observed_data', 'posterior', 'sample_stats']
    >>> sorted(pymc_dp.release(idata, model=m).children)
    ['posterior', 'sample_stats']
    """
    if _released_record(idata) is not None:
        extra = unreleased_content(idata)
        if extra:
            raise ValueError(
                f"This result was released by pymc_dp and then extended with {', '.join(extra)}: "
                "computed from the data without noise (e.g. by pm.compute_log_likelihood or "
                "pm.sample_posterior_predictive(..., extend_inferencedata=True)). It is not "
                "safe to share: share the result as it was released (keep a copy before "
                "extending it), or drop what was added."
            )
    owner = stats_owner(idata)
    if "dp_report" not in idata.attrs and not (owner and owner[1]):
        raise ValueError(
            "Nothing shows that a pymc_dp step made these draws: the result has neither a "
            "privacy report (dp_report) nor the privacy stats of a pymc_dp step. Release only "
            "results of pymc_dp.sample, of pm.sample with a pymc_dp step (stats kept), or of "
            "pymc_dp.PosteriorSampling."
        )
    if model is None:
        try:
            model = modelcontext(None)
        except TypeError:
            if "dp_report" not in idata.attrs and _released_record(idata) is None:
                raise ValueError(
                    "release needs the model (model=... or a model context) to tell free "
                    "variables from deterministics computed from data."
                ) from None
    _check_made_by(idata)
    keep = None if model is None else set(releasable_names(model))
    per_person = _per_person_lengths(idata, model)
    stats = set().union(*declared_stats().values())
    groups, record, relabelled = {}, {}, set()
    for group in RELEASED_GROUPS:
        if group not in idata.children:
            continue
        ds = idata[group].to_dataset()
        allowed = stats if group in STATS_GROUPS else keep
        names = [
            v
            for v in ds.data_vars
            if v not in set(drop_vars) and (allowed is None or v in allowed)
        ]
        groups[group], replaced = _public_dataset(ds, names, per_person)
        relabelled.update(replaced)
        record[group] = names
    if relabelled:
        why = (
            "they have one entry per individual (their length is n)"
            if per_person is not None
            else "the number of individuals n is unknown (no model, report or earlier "
            "release states it), so every dimension is treated as per-person"
        )
        warn(
            f"The labels of dimensions {sorted(relabelled)} were replaced by positions "
            f"0, 1, …: {why}, and labels of individuals (identifiers, data columns) would "
            "show who is in the data.",
            UserWarning,
        )
    out = xr.DataTree.from_dict(groups)
    out.attrs = {k: v for k, v in idata.attrs.items() if k in RELEASE_ATTRS}
    lengths = None if per_person is None else sorted(per_person)
    out.attrs[RELEASED_ATTR] = json.dumps({"groups": record, "per_person_lengths": lengths})
    return out


def _check_made_by(idata) -> None:
    """Refuse a report that names a class pymc_dp does not define (or names none)."""
    if "dp_report" not in idata.attrs:
        return
    made_by = json.loads(idata.attrs["dp_report"]).get("made_by")
    own = {qualified_name(cls) for cls in _own_mechanisms()} | set(_FORMER_NAMES)
    if not made_by or not set(made_by) <= own:
        raise ValueError(
            "The privacy report of this result does not say it was made by pymc_dp's own "
            "steps or mechanisms (its 'made_by' names a class defined elsewhere, e.g. a "
            "subclass, or is missing: an older pymc_dp). pymc_dp cannot check what such a "
            "class recorded. Sample again with pymc_dp's own steps."
        )


def _public_dataset(
    ds: xr.Dataset, names: Sequence[str], per_person: frozenset[int] | None
) -> tuple[xr.Dataset, list[str]]:
    """The variables ``names`` of ``ds``, the labels of their dimensions, the public attributes.

    Built anew, so that no variable attribute, other coordinate or unused dimension comes
    along: only index coordinates (a dimension's labels) of dimensions that the variables
    use, never a coordinate laid along a dimension (a data column attached to the trace).
    Labels of a per-person dimension (length n or more) become positions: the identifiers of the
    individuals, or any data column, would show who is in the data.

    Returns the dataset and the dimensions whose labels were replaced.
    """
    used = dict.fromkeys(d for v in names for d in ds[v].dims)
    coords, replaced = {}, []
    for dim in used:
        if dim not in ds.indexes:
            continue
        labels = ds[dim].values
        if _is_per_person(ds.sizes[dim], per_person):
            if not np.array_equal(labels, _positions(ds, dim)):
                replaced.append(dim)
            labels = _positions(ds, dim)
        coords[dim] = labels
    data = {v: (ds[v].dims, ds[v].values) for v in names}
    attrs = {k: v for k, v in ds.attrs.items() if k in PUBLIC_GROUP_ATTRS}
    return xr.Dataset(data, coords=coords, attrs=attrs), replaced


