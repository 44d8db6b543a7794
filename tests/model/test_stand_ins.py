"""The per-datum log-likelihood built on stand-ins for the data
(pymc_dp.model.stand_ins): its structure, and every decision read from it, is the same on
neighbouring datasets, whatever PyMC would fold by value."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pytensor.graph.traversal import io_toposort

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model import PrivateModel
from pymc_dp.model.stand_ins import likelihood_on_stand_ins

N = 30


def _linear(x, y):
    a, b = pm.Normal("a"), pm.Normal("b")
    pm.Normal("y", a + b * x, 1.0, observed=y)


def _switch(x, y):
    a = pm.Normal("a")
    pm.Normal("y", pt.switch(x > 5, pt.abs(a - x), a * x), 1.0, observed=y)


def _masked(x, y):
    a, b = pm.Normal("a"), pm.Normal("b")
    pm.Normal("y", a + b * (x == 1), 1.0, observed=y)


def _censored(x, y):
    mu = pm.Normal("mu")
    pm.Censored("y", pm.Normal.dist(mu, 1.0), lower=None, upper=1.0, observed=np.minimum(y, 1.0))


def _poisson(x, y):
    b = pm.Normal("b")
    pm.Poisson("y", pt.exp(b * x), observed=(y > 0.5).astype(int))


def _bernoulli(x, y):
    b = pm.Normal("b")
    pm.Bernoulli("y", logit_p=b * x, observed=(y > 0.5).astype(int))


def _indexed(x, y):
    z = pm.Normal("z", shape=2)
    pm.Normal("y", z[(x > 0.5).astype(int)], 1.0, observed=y)


MODELS = [_linear, _switch, _masked, _censored, _poisson, _bernoulli, _indexed]

#: (x, y) on two neighbouring datasets, chosen so that PyMC folds differently: nobody, or
#: one person, exposed (x = 0 or 1), above a threshold, censored, counted
NEIGHBOURS = [
    (np.zeros(N), np.zeros(N)),
    (np.r_[np.zeros(N - 1), 9.0], np.r_[np.zeros(N - 1), 2.0]),
]


def _fingerprint(pmodel):
    """What the steps read of the likelihood's structure: its operations, the likelihood's
    parameters, its kinks."""
    ops = [type(node.op).__name__ + str(getattr(node.op, "scalar_op", ""))
           for node in io_toposort([], [pmodel._per_datum_graph])]
    params = pmodel.likelihood_parameters()
    size = None if params is None else params(pmodel.ravel(pmodel._initial_point)).size
    return ops, size, pmodel.likelihood_kinks()


@pytest.mark.parametrize("build", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_the_likelihood_and_what_is_read_from_it_never_depend_on_data_values(build):
    found = []
    for x, y in NEIGHBOURS:
        with pm.Model() as model:
            build(x, y)
        found.append(_fingerprint(PrivateModel(model)))
    assert found[0] == found[1]


def test_the_stand_in_likelihood_computes_the_models_own():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=N), rng.normal(size=N)
    for build in MODELS:
        with pm.Model() as model:
            build(x, y)
        pmodel = PrivateModel(model)
        point = model.initial_point()
        q = pmodel.ravel(point) + 0.3
        moved = pmodel.unravel(q)
        expected = sum(
            np.atleast_1d(t).reshape(N, -1).sum(1)
            for t in model.compile_logp(vars=model.observed_RVs, sum=False)(moved)
        )
        np.testing.assert_allclose(pmodel.loglik(q), expected, rtol=1e-10)


def _censored_per_row(x, y):
    # pm.Censored drops a bound that is infinite in every row when it is created
    a, s = pm.Normal("a"), pm.HalfNormal("s")
    lower = np.where(x > 5, 0.5, -np.inf)
    pm.Censored("y", pm.StudentT.dist(nu=3, mu=a * x, sigma=s), lower=lower, upper=None,
                observed=np.maximum(y, lower))


def _closure(x, y):
    # x enters with the function's graph; nothing reads its values while the density is
    # built (no rewrite runs inside), so it is an input like any other
    a, b = pm.Normal("a"), pm.Normal("b")

    def logp(value, a, b):
        return pm.logp(pm.Laplace.dist(a + b * x, 1.0), value)

    pm.CustomDist("y", a, b, logp=logp, observed=y)


@pytest.mark.parametrize("build", [_censored_per_row, _closure], ids=["censored", "closure"])
def test_arrays_met_while_the_density_is_built_never_decide(build):
    test_the_likelihood_and_what_is_read_from_it_never_depend_on_data_values(build)


def _closure_across_rows(x, y):
    # pm.logp inside the function runs PyMC's rewrites there: x - mean(x) would be folded
    # into a new array with one row per person, which no check of the model could see
    a, b = pm.Normal("a"), pm.Normal("b")

    def logp(value, a, b):
        mu = a + b * (x - pt.mean(x))
        return pm.logp(pt.exp(pm.Normal.dist(mu, 1.0, size=N)), value)

    pm.CustomDist("y", a, b, logp=logp, observed=np.exp(y))


def _closure_switch(x, y):
    # on data where no x exceeds 5 the folding drops x altogether
    a = pm.Normal("a")

    def logp(value, a):
        mu = pt.switch(x > 5, pt.cumsum(a * x), a)
        return pm.logp(pt.exp(pm.Normal.dist(mu, 1.0, size=N)), value)

    pm.CustomDist("y", a, logp=logp, observed=np.exp(y))


def _premade_constant(x, y):
    # an array made a constant before the function is called
    xc = pt.as_tensor(x)
    a = pm.Normal("a")

    def logp(value, a):
        return pm.logp(pt.exp(pm.Normal.dist(pt.switch(xc > 5, a + 1.0, a), 1.0, size=N)),
                       value)

    pm.CustomDist("y", a, logp=logp, observed=np.exp(y))


def _shape_and_captured(x, y):
    # (second review) the model's graph reads the array as a shape only, and the function
    # captures the same object and folds it: the model's own arrays go in as copies, and
    # the original is watched
    xc = pt.as_tensor(x)
    a, b = pm.Normal("a"), pm.Normal("b")

    def logp(value, a, b):
        return pm.logp(pt.exp(pm.Normal.dist(a + b * xc, 1.0)), value)

    pm.CustomDist("y", a, b, logp=logp, observed=np.exp(y), shape=xc.shape)


def _laid_out_sideways(x, y):
    # (second review) one row per person along the second axis: max over people, folded
    # into a number every row reads
    xt = pt.as_tensor(x[None, :])
    a, b = pm.Normal("a"), pm.Normal("b")

    def logp(value, a, b):
        return pm.logp(pt.exp(pm.Normal.dist(a + b * pt.max(xt), 1.0, size=N)), value)

    pm.CustomDist("y", a, b, logp=logp, observed=np.exp(y))


def _inner(x, y):
    a, b = pm.Normal("a"), pm.Normal("b")

    def dist(a, b, size):
        return pm.Laplace.dist(a + b * x, 1.0, size=size)

    pm.CustomDist("y", a, b, dist=dist, observed=y)


@pytest.mark.parametrize(
    "build", [_closure_across_rows, _closure_switch, _premade_constant, _shape_and_captured,
              _laid_out_sideways, _inner],
    ids=lambda f: f.__name__.strip("_"))
def test_an_array_the_stand_ins_cannot_reach_is_refused_whatever_its_values(build):
    # The array is in a function PyMC calls while it builds the density, where it would
    # be folded by value: refused on both neighbours, saying what to do.
    for x, y in NEIGHBOURS:
        with pm.Model() as model:
            build(x, y)
        with pytest.raises(UnsupportedModelError, match="Pass the array as a parameter"):
            PrivateModel(model)


def test_the_same_arrays_passed_as_parameters_get_the_full_treatment():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=N), rng.normal(size=N)
    with pm.Model() as model:
        a, b = pm.Normal("a"), pm.Normal("b")
        pm.CustomDist("y", a, b, x, observed=y,
                      logp=lambda v, a, b, x: pm.logp(pm.Laplace.dist(a + b * x, 1.0), v))
    pmodel = PrivateModel(model)
    assert pmodel.likelihood_kinks() == ("Abs",)
    assert pmodel.likelihood_parameters() is not None
    assert any("NumPy array" in d.label for d in pmodel.datum_inputs)


def test_arrays_used_as_values_get_stand_ins_and_shapes_keep_theirs():
    x = np.arange(3.0)
    with pm.Model() as model:
        a = pm.Normal("a")
        pm.Normal("y", a * x, 1.0, observed=np.zeros(3), shape=(3,))
    built = likelihood_on_stand_ins(model, 3)
    held = {tuple(np.asarray(c.data).ravel()) for c in built.data}
    assert held == {(0.0, 1.0, 2.0), (0.0, 0.0, 0.0)}  # x and the observed value, not (3,)


def test_watch_windows_nest_and_put_the_attribute_back():
    import threading

    from pytensor.tensor.variable import TensorConstant

    from pymc_dp.model.stand_ins import _array_values_read

    c = pt.as_tensor(np.arange(5.0))
    with _array_values_read(5, []) as outer:
        with _array_values_read(5, []) as inner:
            pass
        c.data  # noqa: B018 (a read while only the outer window is open)
    assert outer and not inner
    assert "data" not in TensorConstant.__dict__
    # another thread's window waits for this one: no read is lost, nothing is removed
    # under it
    seen, started = {}, threading.Event()

    def other():
        started.set()
        with _array_values_read(5, []) as read:
            c.data  # noqa: B018
        seen["other"] = set(read)

    with _array_values_read(5, []) as mine:
        thread = threading.Thread(target=other)
        thread.start()
        started.wait()
        c.data  # noqa: B018
    thread.join()
    assert mine and seen["other"]
    assert "data" not in TensorConstant.__dict__


def test_a_priors_array_with_one_entry_per_person_is_refused_whatever_its_values():
    # (second review) one with equal entries was taken for a public constant
    for x, _ in NEIGHBOURS:
        with pm.Model() as model:
            x_true = pm.Normal("x_true", mu=x + 1.0, sigma=0.5, shape=N)
            b = pm.Normal("b")
            pm.Normal("y", b * x_true, 1.0, observed=np.zeros(N))
        with pytest.raises(UnsupportedModelError):
            PrivateModel(model)


@pytest.mark.parametrize("n, d", [(10, 4), (30, 6)])
def test_a_public_covariance_with_more_entries_than_rows_is_accepted(n, d):
    # (third review) PyMC folds the copy of eye(d) into a new (1, d, d) constant while it
    # builds the density: made during the build, it counts by its axes only
    rng = np.random.default_rng(4)
    with pm.Model() as model:
        mu = pm.Normal("mu", shape=d)
        pm.MvNormal("y", mu=mu, cov=np.eye(d), observed=rng.normal(size=(n, d)))
    pmodel = PrivateModel(model)
    q = pmodel.ravel(model.initial_point()) + 0.2
    expected = model.compile_logp(vars=model.observed_RVs, sum=False)(pmodel.unravel(q))[0]
    np.testing.assert_allclose(pmodel.loglik(q), expected)


def test_a_per_person_table_is_refused_whatever_its_values():
    # (third review) a table read through a per-row index is refused even when every
    # entry is equal: otherwise one person's differing entry would decide the refusal
    g = np.arange(N) % 5
    for income in (np.full(5, 40.0), np.r_[np.full(4, 40.0), 55.0]):
        with pm.Model() as model:
            a, b = pm.Normal("a"), pm.Normal("b")
            pm.Normal("y", a + b * pt.as_tensor(income)[g], 1.0, observed=np.zeros(N))
        with pytest.raises(UnsupportedModelError, match="not on the datum axis"):
            PrivateModel(model)
