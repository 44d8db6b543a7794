"""ABCDP's rules on the data: the simulator must not hold it; NaN, inf, huge values refused.

Every refusal happens before any budget is reserved: at construction (no ledger exists yet) or
in ``setup_chain`` before the reservation. A chain that runs out of prior draws keeps going.
"""

from __future__ import annotations

import array
import collections
import decimal
import functools
import itertools
import logging
import sys
import types
import warnings
import weakref

import numpy as np
import pandas as pd
import pymc as pm
import pytest

import pymc_dp

from pymc_dp.abcdp.distances import BoundDistance, ClippedDistance, Distance, MMD, RandomFeatureMMD
from pymc_dp.errors import UnsupportedModelError
from pymc_dp.abcdp.simulator import SimulatorModel
from pymc_dp.steps.abcdp import ABCDP

N = 40
Y = np.random.default_rng(0).normal(1.0, 1.0, size=N)
Y_GLOBAL = Y  # read by the simulators below through a module global


@pytest.fixture(autouse=True)
def _quiet():
    logging.getLogger("pymc").setLevel(logging.ERROR)


def normal_sim(rng, mu, size):
    return rng.normal(mu, 1.0, size=size)


def model_of(simulator, observed=Y, *params):
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        pm.Simulator("y", simulator, mu, *params, observed=observed)
    return model


def build(model, ledger, **kwargs):
    with model:
        return ABCDP(eps=1.0, threshold=0.2, chains=1, ledger_dir=ledger, **kwargs)


def no_ledger(ledger) -> bool:
    """Nothing was reserved: the step never got as far as creating its ledger."""
    return not ledger.exists() or not any(ledger.iterdir())


# ---------------------------------------------------------------- simulators that hold the data
def _closure_over(data):
    def simulate(rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + 0 * len(data)

    return simulate


def _closure_holding(held):
    def simulate(rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + 0.0 * (held is None)

    return simulate


def _global_reader(rng, mu, size):
    return rng.normal(mu, 1.0, size=size) + 0 * Y_GLOBAL[0]


def _nested_global_reader(rng, mu, size):
    scale = (lambda: Y_GLOBAL.std())()  # the global is named only in a nested code object
    return rng.normal(mu, 1.0 + 0 * scale, size=size)


def _helper():
    return Y_GLOBAL.std()


def _helper_caller(rng, mu, size):
    return rng.normal(mu, 1.0 + 0 * _helper(), size=size)


def _default_arg(rng, mu, size, data=Y):
    return rng.normal(mu, 1.0, size=size)


def _keyword_default(rng, mu, size, *, data=Y[:10]):
    return rng.normal(mu, 1.0, size=size)


def _with_data(rng, mu, size, data=None):
    return rng.normal(mu, 1.0, size=size)


class _Holder:
    def __init__(self, data):
        self.data = data

    def simulate(self, rng, mu, size):
        return rng.normal(mu, 1.0, size=size)

    def __call__(self, rng, mu, size):
        return rng.normal(mu, 1.0, size=size)


class _ClassHolder:
    data = Y  # read as self.data: the class, not the instance, holds it

    def __call__(self, rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + 0 * self.data[0]


class _BaseHolder:
    table = Y.copy()


class _DerivedSimulator(_BaseHolder):
    def __call__(self, rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + 0 * self.table[0]


def _property_reading(data):
    class Simulator:
        @property
        def shift(self):
            return 0 * data[0]

        def __call__(self, rng, mu, size):
            return rng.normal(mu, 1.0, size=size) + self.shift

    return Simulator()


class _StaticReader:
    @staticmethod
    def shift():
        return 0 * Y_GLOBAL[0]

    def __call__(self, rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + self.shift()


class _ClassMethodReader:
    @classmethod
    def shift(cls):
        return 0 * Y_GLOBAL[0]

    def __call__(self, rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + self.shift()


class _DataMeta(type):
    data = Y.copy()


class _MetaHolder(metaclass=_DataMeta):
    def __call__(self, rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + 0 * type(self).data[0]


_DATA_MODULE = types.ModuleType("abcdp_test_private_data")
_DATA_MODULE.y = Y.copy()
sys.modules[_DATA_MODULE.__name__] = _DATA_MODULE


def _module_attribute_reader(rng, mu, size):
    import abcdp_test_private_data

    return rng.normal(mu, 1.0, size=size) + 0 * abcdp_test_private_data.y[0]


HOLDING = {
    "closure": _closure_over(Y),
    "closure, a slice (view)": _closure_over(Y[3:17]),
    "closure, a strided view": _closure_over(Y[::3]),
    "closure, an equal copy": _closure_over(Y.copy()),
    "closure, a list of the values": _closure_over(Y.tolist()),
    "closure, a table with the data as a column": _closure_over(
        np.column_stack([np.ones(N), Y.copy()])
    ),
    "closure, a DataFrame column": _closure_over(pd.DataFrame({"a": np.arange(N), "y": Y})),
    "closure, a dict of arrays": _closure_over({"y": Y.copy()}),
    "global": _global_reader,
    "global named in a nested function": _nested_global_reader,
    "global of a helper function": _helper_caller,
    "default argument": _default_arg,
    "keyword-only default": _keyword_default,
    "partial keyword": functools.partial(_with_data, data=Y),
    "partial argument": functools.partial(lambda data, rng, mu, size: rng.normal(mu, 1, size), Y),
    "bound method": _Holder(Y.copy()).simulate,
    "callable object": _Holder({"y": Y}),
    "class attribute": _ClassHolder(),
    "attribute of a base class": _DerivedSimulator(),
    "property": _property_reading(Y),
    "staticmethod": _StaticReader(),
    "classmethod": _ClassMethodReader(),
    "metaclass attribute": _MetaHolder(),
    "attribute of an imported module": _module_attribute_reader,
    # (review 26: the same memory, or the values, behind containers the walk did not open)
    "closure, a memoryview": _closure_over(memoryview(Y)),
    "closure, a weak reference": _closure_holding(weakref.ref(Y)),
    "closure, an object array holding it": _closure_over(np.array([Y, None], dtype=object)),
    "closure, a deque of the values": _closure_over(collections.deque(Y)),
    "closure, an array.array of the values": _closure_over(array.array("d", Y)),
    "closure, a dict keyed by the values": _closure_over({tuple(Y): 1}),
    # (review of session 36: the numbers among other items, and a walk that gave up)
    "closure, a dict of the values by position": _closure_over(dict(enumerate(Y))),
    "closure, the values and a None": _closure_over([*Y, None]),
    # (a third review: a set, complex values, numeric attributes, rows with an odd one
    # out, and the data with an entry appended)
    "closure, a set of the values": _closure_over(set(Y)),
    "closure, complex values": _closure_over(Y.astype(complex)),
    "closure, an object with the values as attributes": _closure_holding(
        types.SimpleNamespace(**{f"v{i}": float(v) for i, v in enumerate(Y)})
    ),
    "closure, rows and an odd one out": _closure_over([[i, v] for i, v in enumerate(Y)] + [None]),
    "closure, rows and one of text": _closure_over([(v,) for v in Y] + [("x",)]),
    "closure, the values and one more": _closure_over(np.append(Y, 0.0)),
    # (a fourth review: numbers of other types, an object array, records)
    "closure, rows of decimals": _closure_over([(i, decimal.Decimal(v)) for i, v in enumerate(Y)]),
    "closure, an object array": _closure_over(Y.astype(object)),
    "closure, records": _closure_over([{"id": i, "y": v} for i, v in enumerate(Y)]),
}


@pytest.mark.parametrize("simulator", HOLDING.values(), ids=HOLDING.keys())
def test_a_simulator_that_holds_the_data_is_refused_before_any_budget(simulator, tmp_path):
    ledger = tmp_path / "ledger"
    with pytest.raises(UnsupportedModelError,
                       match="can reach the observed data|references away") as err:
        build(model_of(simulator), ledger)
    assert no_ledger(ledger)
    assert str(Y[0])[:6] not in str(err.value)


def test_a_public_constant_equal_to_the_data_is_refused(tmp_path):
    ledger = tmp_path / "ledger"

    def shifted(rng, mu, offset, size):
        return rng.normal(mu, 1.0, size=size) + 0 * offset

    with pytest.raises(UnsupportedModelError, match="constant of the priors"):
        build(model_of(shifted, Y, Y.copy()), ledger)
    assert no_ledger(ledger)


@pytest.mark.parametrize("layout", ["as the data", "flattened pairs"])
def test_whether_a_held_array_is_refused_never_depends_on_the_datas_values(layout, tmp_path):
    # (a review) refusing an array because it equals the data told, with nothing spent,
    # whether one person's value was the one guessed: neighbours gave accept / refuse
    guess = np.r_[Y[:-1], 1.0]
    held = guess if layout == "as the data" else np.stack([guess, guess], axis=1).ravel()
    messages = []
    for last in (1.0, 0.0):  # the last person's value: equal to the guess, or not
        observed = np.r_[Y[:-1], last]

        def simulate(rng, mu, size, _table=held):
            return rng.normal(mu, 1.0, size=size)

        ledger = tmp_path / f"ledger{last}"
        with pytest.raises(UnsupportedModelError, match="may hold them") as err:
            build(model_of(simulate, observed), ledger)
        assert no_ledger(ledger)
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_the_data_check_is_repeated_before_each_chain(tmp_path):
    # The closure is filled after the step was built: setup_chain looks again, before reserving.
    box = []

    def simulate(rng, mu, size):
        return rng.normal(mu, 1.0, size=size) + 0 * len(box)

    model = model_of(simulate)
    step = build(model, tmp_path / "ledger")
    box.append(Y.copy())
    with pytest.raises(UnsupportedModelError, match="can reach the observed data"):
        step.setup_chain(np.random.default_rng(0), 0, 2)
    assert step.guard.reservations() == []


_SCALES = np.linspace(0.5, 1.5, 7)


def _public_covariate_sim(rng, mu, size, scale=_SCALES):
    return rng.normal(mu, scale.mean(), size=size)


ORDINARY = {
    "module function": normal_sim,
    "lambda": lambda rng, mu, size: rng.normal(mu, 1.0, size),
    "public default array": _public_covariate_sim,
    "partial with public keyword": functools.partial(_with_data, data=np.zeros(3)),
    "method of an object without data": _Holder(None).simulate,
}


def test_a_simulator_reaching_an_object_whose_state_cannot_be_read_is_refused(tmp_path):
    class Lazy:
        def __getattribute__(self, name):
            if name == "__dict__":
                raise RuntimeError("not configured yet")
            return object.__getattribute__(self, name)

    ledger = tmp_path / "ledger"
    with pytest.raises(UnsupportedModelError, match="could not read the state of a Lazy"):
        build(model_of(_closure_holding(Lazy())), ledger)
    assert no_ledger(ledger)


def test_a_simulator_reaching_an_iterator_it_cannot_see_into_is_refused(tmp_path):
    ledger = tmp_path / "ledger"
    with pytest.raises(UnsupportedModelError, match="could not inspect a cycle"):
        build(model_of(_closure_holding(itertools.cycle([Y]))), ledger)
    assert no_ledger(ledger)


@pytest.mark.parametrize("simulator", ORDINARY.values(), ids=ORDINARY.keys())
def test_an_ordinary_simulator_is_accepted_and_runs(simulator, tmp_path):
    model = model_of(simulator)
    step = build(model, tmp_path / "ledger")
    with model:
        idata = pymc_dp.sample(step=step, draws=1, chains=1, random_seed=1, progressbar=False)
    assert idata.posterior["mu"].shape == (1, 1)


def test_a_generator_method_is_accepted_other_c_functions_must_be_wrapped(tmp_path):
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        # called as Generator.normal(rng, mu, 1.0, size): reads nothing but its arguments
        pm.Simulator("y", np.random.Generator.normal, mu, 1.0, observed=Y)
    build(model, tmp_path / "a")
    ledger = tmp_path / "b"
    with pytest.raises(UnsupportedModelError, match="cannot inspect.*Wrap it"):
        build(model_of(np.random.normal), ledger)  # a method of numpy's global RandomState
    assert no_ledger(ledger)


# ---------------------------------------------------------------- missing, infinite, huge values
def test_missing_values_are_refused_not_imputed(tmp_path):
    y = Y.copy()
    y[[2, 5]] = np.nan
    ledger = tmp_path / "ledger"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pm.ImputationWarning)
        model = model_of(normal_sim, y)
    with pytest.raises(UnsupportedModelError, match="missing values") as err:
        build(model, ledger)
    assert no_ledger(ledger)
    assert "2" not in str(err.value)  # not how many


@pytest.mark.parametrize(
    "bad,container",
    [(np.nan, "array")]  # pm.Data itself refuses NaN; set_data is tested below
    + [(v, c) for v in (np.inf, -np.inf, 1e308, -1e200) for c in ("array", "pm.Data")],
)
def test_non_finite_or_huge_observations_fail_before_any_budget(bad, container, tmp_path):
    y = Y.copy()
    y[7] = bad
    ledger = tmp_path / "ledger"
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        obs = pm.Data("y_data", y) if container == "pm.Data" else y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pm.ImputationWarning)
            pm.Simulator("y", normal_sim, mu, observed=obs)
    with pytest.raises(ValueError) as err:  # UnsupportedModelError is a ValueError
        build(model, ledger)
    assert no_ledger(ledger)
    message = str(err.value)
    assert "308" not in message and "200" not in message  # no value, not even rounded
    assert not any(str(v)[:6] in message for v in Y)


@pytest.mark.parametrize(
    "distance,limit",
    [(RandomFeatureMMD(bandwidth=1.0), 1e30), (MMD(bandwidth=1.0), 1e150),
     (RandomFeatureMMD(bandwidth=1.0, precision="float64"), 1e150)],
)
def test_the_range_is_the_distances(distance, limit, tmp_path):
    y = Y.copy()
    y[0] = limit / 2
    build(model_of(normal_sim, y), tmp_path / "a", distance=distance)
    y[0] = -limit * 2
    with pytest.raises(ValueError, match="magnitude above"):
        build(model_of(normal_sim, y), tmp_path / "b", distance=distance)


@pytest.mark.parametrize("bad", [np.nan, np.inf, 2.0])
def test_data_changed_after_construction_is_refused_before_the_reservation(bad, tmp_path):
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        data = pm.Data("y_data", Y)
        pm.Simulator("y", normal_sim, mu, observed=data)
    step = build(model, tmp_path / "ledger")
    y = Y.copy()
    y[3] = bad
    with model:
        pm.set_data({"y_data": y})
    with pytest.raises(ValueError, match="changed after the step was built"):
        step.setup_chain(np.random.default_rng(0), 0, 2)
    assert step.guard.reservations() == []


def test_a_distance_that_fails_on_any_data_is_refused_before_the_reservation(tmp_path):
    def leaky(obs, sim):
        raise ValueError(f"first observation {obs[0]!r}")

    model = model_of(normal_sim)
    step = build(model, tmp_path / "ledger",
                 distance=ClippedDistance(leaky, clip=1.0, sensitivity=0.1))
    with model, pytest.raises(ValueError, match="standing in for the observations") as err:
        pymc_dp.sample(step=step, draws=1, chains=1, random_seed=1, progressbar=False)
    assert "first observation" not in str(err.value)
    assert step.guard.reservations() == []


MARK = 7.25  # one person's value; the distances below fail on it


def _marked():
    y = Y.copy()
    y[0] = MARK
    return y


def _run(model, step, seed=3):
    with model:
        return pymc_dp.sample(step=step, draws=3, chains=1, random_seed=seed, progressbar=False)


def _same_release(a, b):
    np.testing.assert_array_equal(a.posterior["mu"].values, b.posterior["mu"].values)
    for stat in ("accepted", "prior_draws_chain"):
        np.testing.assert_array_equal(a.sample_stats[stat].values, b.sample_stats[stat].values)


def test_a_distance_that_fails_on_the_data_values_counts_as_its_largest_value(tmp_path):
    # Before: the error was re-raised (by type): whether person 0 has the value, exactly,
    # outside ε. Now the run is that of the same distance with the failure read as clip.
    def raising(obs, sim):
        if MARK in obs:
            raise ArithmeticError("person 0")
        return abs(float(obs.mean()) - float(sim.mean()))

    def clipped(obs, sim):
        return 1.0 if MARK in obs else abs(float(obs.mean()) - float(sim.mean()))

    model = model_of(normal_sim, _marked())
    runs = [
        _run(model, build(model, tmp_path / name, distance=ClippedDistance(
            fn, clip=1.0, sensitivity=0.1)))
        for name, fn in (("raising", raising), ("clipped", clipped))
    ]
    _same_release(*runs)


class _FailsToBind(Distance):
    """Binds to any data but data holding MARK (a user distance with a data-dependent bug)."""

    max_value = 1.0

    def sensitivity(self, n_rows):
        return 0.1

    def _bind(self, observed):
        if np.any(observed == MARK):
            raise ArithmeticError("person 0")
        n, d = observed.shape
        return BoundDistance(lambda summary: 0.0, sensitivity=0.1, n_rows=n, row_dim=d,
                             max_value=1.0)


def test_a_bind_that_fails_on_the_data_values_makes_every_distance_the_largest(tmp_path):
    model = model_of(normal_sim, _marked())
    failing = _run(model, build(model, tmp_path / "a", distance=_FailsToBind()))
    largest = ClippedDistance(lambda obs, sim: 1.0, clip=1.0, sensitivity=0.1)
    _same_release(failing, _run(model, build(model, tmp_path / "b", distance=largest)))


def test_the_observations_are_read_after_the_reservation_only(tmp_path, monkeypatch):
    model = model_of(normal_sim)
    step = build(model, tmp_path / "ledger")
    reserved_when_read = []
    observed = SimulatorModel.observed

    def spy(self):
        reserved_when_read.append(len(step.guard.reservations()))
        return observed(self)

    monkeypatch.setattr(SimulatorModel, "observed", spy)
    step.setup_chain(np.random.default_rng(0), 0, 2)  # fits the distance, draws the threshold
    assert reserved_when_read == []
    _run(model, step)
    assert reserved_when_read == [1]  # once per chain, after its reservation


# ---------------------------------------------------------------- simulations that fail
def _fragile_sim(rng, mu, size):
    m = float(np.ravel(mu)[0])
    if m < -1.5:
        raise FloatingPointError("no")
    x = rng.normal(m, 1.0, size=size)
    return x * np.inf if m > 3.5 else x  # non-finite for rare draws


def test_a_draw_whose_simulation_fails_is_rejected(tmp_path):
    # Before: the chain stopped with an error after its reservation (ε spent, nothing out).
    model = model_of(_fragile_sim)

    def run(batch_size, ledger):
        with model, pytest.warns(RuntimeWarning, match="could not be simulated") as record:
            step = ABCDP(eps=1.0, threshold=0.3, chains=1, ledger_dir=ledger,
                         batch_size=batch_size)
            idata = pymc_dp.sample(step=step, draws=4, chains=1, random_seed=5,
                                   progressbar=False)
        return idata, [str(w.message) for w in record if "simulated" in str(w.message)]

    idata, message = run(256, tmp_path / "a")
    mu = idata.posterior["mu"].values.ravel()
    assert bool(idata.sample_stats["accepted"].all())
    assert np.all((mu >= -1.5) & (mu <= 3.5))
    draws = idata.sample_stats["prior_draws"].values.ravel()
    np.testing.assert_array_equal(np.cumsum(draws),
                                  idata.sample_stats["prior_draws_chain"].values.ravel())
    # failed draws are used in order like the others: nothing depends on the batches
    other, other_message = run(7, tmp_path / "b")
    _same_release(idata, other)
    assert message == other_message and len(message) == 1


def test_a_simulator_that_fails_after_validation_is_refused_before_the_reservation(tmp_path):
    calls = []

    def once(rng, mu, size):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("fails from the second call on")
        return rng.normal(mu, 1.0, size=size)

    model = model_of(once)
    step = build(model, tmp_path / "ledger")  # the validation simulation succeeds
    with model, pytest.raises(ValueError, match="pilot prior-predictive simulations"):
        pymc_dp.sample(step=step, draws=1, chains=1, random_seed=1, progressbar=False)
    assert step.guard.reservations() == []


# ---------------------------------------------------------------- running out of prior draws
def _exhausting_step(model, ledger, max_prior_draws):
    with model:
        return ABCDP(eps=1.0, threshold=1e-9, chains=1, max_prior_draws=max_prior_draws,
                     batch_size=4, ledger_dir=ledger)


def _check_filled(idata, draws, max_prior_draws):
    accepted = idata.sample_stats["accepted"].values.ravel()
    n_acc = int(accepted.sum())
    assert n_acc <= max_prior_draws < draws - 1  # at least two draws to fill
    assert list(accepted) == [True] * n_acc + [False] * (draws - n_acc)
    mu = idata.posterior["mu"].values.ravel()
    assert np.all(np.isfinite(mu[:n_acc])) and np.all(np.isnan(mu[n_acc:]))
    # the filler draws test no prior draw; the chain's count stays at the cap
    assert np.all(idata.sample_stats["prior_draws"].values.ravel()[n_acc + 1 :] == 0)
    assert idata.sample_stats["prior_draws_chain"].values.ravel()[-1] == max_prior_draws
    return n_acc


@pytest.mark.parametrize("sampler", ["pymc_dp.sample", "pm.sample"])
def test_a_chain_out_of_prior_draws_fills_every_remaining_draw(sampler, tmp_path):
    # Before: the second filler draw raised "Another step changed the variables".
    model = model_of(normal_sim)
    step = _exhausting_step(model, tmp_path / "ledger", max_prior_draws=2)
    sample = pymc_dp.sample if sampler == "pymc_dp.sample" else functools.partial(
        pm.sample, compute_convergence_checks=False
    )
    with model, pytest.warns(RuntimeWarning, match="of 5 samples accepted"):
        idata = sample(step=step, draws=5, chains=1, random_seed=1, progressbar=False)
    _check_filled(idata, 5, 2)
    assert len(step.guard.reservations()) == 1  # the one chain, reserved once


def test_out_of_draws_with_integer_and_float_variables(tmp_path):
    def shifted(rng, mu, k, size):
        return rng.normal(mu + k, 1.0, size=size)

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        k = pm.Poisson("k", 2.0)
        pm.Simulator("y", shifted, mu, k, observed=Y)
    step = _exhausting_step(model, tmp_path / "ledger", max_prior_draws=1)
    with model, pytest.warns(RuntimeWarning, match="of 4 samples accepted"):
        idata = pymc_dp.sample(step=step, draws=4, chains=1, random_seed=1, progressbar=False)
    n_acc = _check_filled(idata, 4, 1)
    # an integer variable has no NaN: its fillers are the smallest int64
    assert np.all(idata.posterior["k"].values.ravel()[n_acc:] == np.iinfo(np.int64).min)


# ---------------------------------------------------------------- priors and parameters that read data
def _container(kind, value):
    import pytensor

    return pm.Data("x", value) if kind == "pm.Data" else pytensor.shared(value, name="x")


@pytest.mark.parametrize("kind", ["pm.Data", "unregistered shared"])
def test_a_prior_that_reads_data_is_refused_before_any_budget(kind, tmp_path):
    # ABCDP's prior draws are released as they are: a prior centred on a mean of the data
    # would publish it. A plain pytensor.shared array is data too (one rule for what holds
    # data, pymc_dp.model.data), not only what pm.Data registered.
    with pm.Model() as model:
        x = _container(kind, Y)
        mu = pm.Normal("mu", x.mean(), 2.0)
        pm.Simulator("y", normal_sim, mu, observed=Y)
    with pytest.raises(UnsupportedModelError, match="prior of 'mu' reads"):
        build(model, tmp_path / "ledger")
    assert no_ledger(tmp_path / "ledger")


@pytest.mark.parametrize("kind", ["pm.Data", "unregistered shared"])
def test_simulator_parameters_that_read_data_are_refused(kind, tmp_path):
    with pm.Model() as model:
        x = _container(kind, Y)
        mu = pm.Normal("mu", 0.0, 2.0)
        pm.Simulator("y", lambda rng, m, s, size: rng.normal(m, 1.0, size), mu, x.std(),
                     observed=Y)
    with pytest.raises(UnsupportedModelError, match="parameters of simulator 'y' read"):
        build(model, tmp_path / "ledger")
    assert no_ledger(tmp_path / "ledger")


def _prior_centred_on(make_location):
    import pytensor.tensor as pt

    with pm.Model() as model:
        mu = pm.CustomDist(
            "mu", dist=lambda size: pm.Normal.dist(make_location(pt), 2.0, size=size)
        ) if make_location is not None else None
        pm.Simulator("y", normal_sim, mu, observed=Y)
    return model


@pytest.mark.parametrize("copy", [
    lambda pt: pt.as_tensor(np.sort(Y)).mean(),           # inside a CustomDist's graph
    lambda pt: pt.as_tensor(Y + 1e-9).mean(),
    lambda pt: pt.as_tensor(Y.astype(np.float32)).mean(),
])
def test_a_prior_holding_a_copy_of_the_observations_is_refused(copy, tmp_path):
    # (a copy, not the observations themselves: an array of one entry per row is refused
    # as the model adapter refuses it in priors)
    with pytest.raises(UnsupportedModelError, match="prior of 'mu' holds an array"):
        build(_prior_centred_on(copy), tmp_path / "ledger")
    assert no_ledger(tmp_path / "ledger")


def test_a_prior_reading_a_dimension_length_as_a_value_is_refused(tmp_path):
    import pytensor

    with pm.Model() as model:
        model.add_coord("k", length=pytensor.shared(np.int64((Y > 1).sum())))
        mu = pm.Normal("mu", model.dim_lengths["k"].astype("float64"), 2.0)
        pm.Simulator("y", normal_sim, mu, observed=Y)
    with pytest.raises(UnsupportedModelError, match="length of a dimension"):
        build(model, tmp_path / "ledger")
    assert no_ledger(tmp_path / "ledger")


def test_a_prior_with_a_dimension_is_accepted(tmp_path):
    import pytensor

    with pm.Model(coords={"k": range(3)}) as model:
        model.add_coord("m", length=pytensor.shared(np.int64(2)))
        w = pm.Normal("w", 0.0, 1.0, dims="m")
        z = pm.ZeroSumNormal("z", dims="k")  # (its parameters read k's length: a shape)
        pm.Simulator("y", lambda rng, w, z, size: rng.normal(w.sum() + z[0], 1.0, size), w, z,
                     observed=Y)
    build(model, tmp_path / "ledger")
