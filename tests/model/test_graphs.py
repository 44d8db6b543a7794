"""Compiled functions reused for equal graphs (pymc_dp.model.graphs.compile_function)."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from pytensor.compile.mode import Mode

import pymc_dp
import pymc_dp.model.graphs as graphs

from pymc_dp.model import PrivateModel


@pytest.fixture
def compiles(monkeypatch):
    """The graphs compiled afresh (not reused) from here on, as a list of output counts."""
    made = []
    real = graphs.pm_compile

    def counting(inputs, outputs, **kwargs):
        made.append(len(outputs) if isinstance(outputs, list | tuple) else 1)
        return real(inputs, outputs, **kwargs)

    monkeypatch.setattr(graphs, "pm_compile", counting)
    return made


def _regression(n, seed, prior_sd=1.0, offset=None):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = x @ np.array([1.0, -0.5]) + rng.normal(size=n)
    with pm.Model() as model:
        X = pm.Data("X", x)
        b = pm.Normal("b", 0.0, prior_sd, shape=2)
        if offset is None:
            mu = X @ b
        else:
            shift = pm.Data("offset", offset)
            pymc_dp.public_data(shift)
            mu = X @ b + shift
        pm.Normal("y", mu, 1.0, observed=y)
    return model, x, y


def _loglik(x, y, b):
    return -0.5 * (y - x @ b) ** 2 - 0.5 * np.log(2 * np.pi)


def test_a_model_of_the_same_form_compiles_nothing_and_reads_its_own_data(compiles):
    first, _, _ = _regression(40, 0)
    PrivateModel(first).compile_gradients("reverse")
    compiles.clear()
    model, x, y = _regression(40, 1)  # other data (n is a constant in PyMC's graph)
    pmodel = PrivateModel(model)
    pmodel.compile_gradients("reverse")
    assert compiles == []
    _regression_n = _regression(41, 1)[0]
    PrivateModel(_regression_n)
    assert compiles  # (another n: another graph)
    q = np.array([0.3, -0.2])
    np.testing.assert_allclose(pmodel.loglik(q), _loglik(x, y, q), rtol=1e-12)
    current = pmodel.loglik(np.zeros(2))
    ratio = pmodel.clipped_ratio(q, current, 0.5)[1]
    np.testing.assert_allclose(
        ratio, np.clip(_loglik(x, y, q) - _loglik(x, y, np.zeros(2)), -0.5, 0.5).sum()
    )
    grads = (y - x @ q)[:, None] * x
    norms = np.linalg.norm(grads, axis=1, keepdims=True)
    expected = (grads * np.minimum(1.0, 0.8 / norms)).sum(axis=0)
    np.testing.assert_allclose(pmodel.clipped_gradient(q, 0.8, np.eye(2))[0], expected)


@pytest.mark.parametrize("change", ["prior constant", "shared variable", "check_bounds"])
def test_a_graph_that_differs_is_compiled_afresh(compiles, change):
    # Each pair differs in one thing only: the prior's sd (a constant), a public pm.Data
    # read by every row (a shared variable of its own), the model's check_bounds flag.
    (a, _, _), (b, x, y) = {
        "prior constant": lambda: (_regression(30, 0), _regression(30, 0, prior_sd=2.0)),
        "shared variable": lambda: (_regression(30, 0, offset=0.0), _regression(30, 0, offset=1.0)),
        "check_bounds": lambda: (_regression(30, 0), _regression(30, 0)),
    }[change]()
    b.check_bounds = change != "check_bounds"
    pa = PrivateModel(a)
    compiles.clear()
    with b:  # (pymc's compile reads check_bounds from the model in context)
        pb = PrivateModel(b)
    assert compiles  # compiled afresh
    q = np.array([0.3, -0.2])
    sd = 2.0 if change == "prior constant" else 1.0
    np.testing.assert_allclose(pb.logprior(q), -0.5 * np.sum((q / sd) ** 2) - np.log(sd) * 2
                               - np.log(2 * np.pi), rtol=1e-8)
    np.testing.assert_allclose(pa.logprior(q), -0.5 * np.sum(q**2) - np.log(2 * np.pi), rtol=1e-8)
    shift = 1.0 if change == "shared variable" else 0.0
    np.testing.assert_allclose(pb.loglik(q), _loglik(x, y - shift, q), rtol=1e-12)


def test_models_of_one_form_used_in_turn_each_read_their_own_data(compiles):
    (a, xa, ya), (b, xb, yb) = _regression(25, 4), _regression(25, 5)
    pa = PrivateModel(a)
    compiles.clear()
    pb = PrivateModel(b)
    assert compiles == [] and pb._loglik_fn is not pa._loglik_fn
    q = np.array([-0.4, 0.9])
    for _ in range(2):
        np.testing.assert_allclose(pa.loglik(q), _loglik(xa, ya, q), rtol=1e-12)
        np.testing.assert_allclose(pb.loglik(q), _loglik(xb, yb, q), rtol=1e-12)


def _swapped(a, b):
    return [a, b], a - b, [b, a], a - b, (5.0, 1.0), [-4.0]  # (b = 5, a = 1)


def _computed_input(a, b):
    t = 2 * b  # (given as an input: its value is taken, not computed from b)
    return [b], 2 * b + 1, [t], t + 1, (10.0,), [11.0]


def _negative_zero(a, b):
    return [a], a / pt.constant(0.0), [a], a / pt.constant(-0.0), (1.0,), [-np.inf]


def _missing_input(a, b):
    r = pt.vector("r")
    return [a, b], a + b, [a, b], a + r, (1.0, 2.0), None


@pytest.mark.parametrize("case", [_swapped, _computed_input, _negative_zero, _missing_input])
def test_what_equal_computations_would_take_as_equal_is_compiled_afresh(case):
    # From a review: equal_computations takes a variable met in both graphs as equal to
    # itself wherever it sits, compares a computed input by how it is computed and finds
    # -0.0 equal to 0.0. Each pair below would have been given the first one's function.
    a, b = pt.vector("a"), pt.vector("b")
    first_in, first_out, second_in, second_out, values, expected = case(a, b)
    graphs.compile_function(first_in, first_out, on_unused_input="ignore")
    if expected is None:  # (what pytensor.function says of a graph that reads a non-input)
        with pytest.raises(Exception, match="input"):
            graphs.compile_function(second_in, second_out)
        return
    fn = graphs.compile_function(second_in, second_out, on_unused_input="ignore")
    np.testing.assert_array_equal(fn(*[[v] for v in values]), expected)


def test_random_graphs_are_compiled_afresh_with_their_seed(compiles):
    x = pt.random.normal(size=2)
    draws = [graphs.compile_function([], x, random_seed=123)() for _ in range(2)]
    np.testing.assert_array_equal(draws[0], draws[1])
    assert compiles == [1, 1]
    compiles.clear()
    for _ in range(2):
        graphs.compile_function([], x)()
    assert compiles == [1, 1]


def test_a_mode_object_is_never_reused(compiles):
    x = pt.vector("x")
    mode = Mode(linker="py", optimizer="fast_compile")
    for _ in range(2):
        np.testing.assert_allclose(graphs.compile_function([x], 2 * x, mode=mode)([1.0]), [2.0])
    assert compiles == [1, 1]
    compiles.clear()
    for _ in range(2):
        graphs.compile_function([x], 3 * x)
    assert compiles == [1]
