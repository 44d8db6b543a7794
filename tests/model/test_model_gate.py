"""The model adapter's gate (issue 12): the row-locality proof decides, fail closed.

* the models people write are proven row-local, for every graph a step runs (the per-datum
  log-likelihood, its gradient, batches of rows), and keep working with every step;
* what the proof cannot show row-local is refused, naming the operation: indexing
  per-person values by a per-row array (x[g]), Scan, as_op, custom Ops;
* integer index arrays are bounds-checked when the step is built;
* containers declared public are frozen; observed values of no rows, or computed from data
  other than row by row, are refused with messages that hold nothing computed from data.
"""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pytensor.compile.ops import as_op
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

import pymc_dp

from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model import PrivateModel
from pymc_dp.steps.dp_hmc import DPHMC
from pymc_dp.steps.dp_penalty import DPPenalty
from pymc_dp.steps.minibatch_penalty import MinibatchDPPenalty

N = 30
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 2))
Y = X @ [0.5, -1.0] + RNG.normal(size=N)
GROUP = np.arange(N) % 4
CATEGORY = RNG.integers(0, 3, size=N)
COUNTS = RNG.poisson(2.0, size=N)
EXPOSURE = RNG.uniform(1.0, 3.0, size=N)

STEPS = {
    "DPPenalty": lambda: DPPenalty(eps=1.0, clip_bound=1.0, chains=1),
    "DPHMC": lambda: DPHMC(eps=1.0, grad_clip=1.0, loglik_clip=1.0, chains=1),
    "MinibatchDPPenalty": lambda: MinibatchDPPenalty(
        eps=1.0, delta=1e-5, batch_size=10, clip_bound=1.0, tempering=0.5, chains=1
    ),
}


def _regression_with_dims():
    Xd = pm.Data("X", X, dims=("obs", "feature"))
    beta = pm.Normal("beta", 0, 1, dims="feature")
    sigma = pm.HalfNormal("sigma", 1)
    pm.Normal("y", Xd @ beta, sigma, observed=pm.Data("yd", Y, dims="obs"), dims="obs")


def _hierarchical():
    mu = pm.Normal("mu")
    a = pm.Normal("a", mu, 1, shape=4)
    pm.Normal("y", a[pm.Data("group", GROUP)], 1, observed=Y)


def _normal_mixture_ordered():
    w = pm.Dirichlet("w", np.ones(2))
    mus = pm.Normal("mus", [-1, 1], 1, transform=pm.distributions.transforms.ordered)
    pm.NormalMixture("y", w, mus, 1, observed=Y)


def _mixture_of_two_families():
    w = pm.Dirichlet("w", np.ones(2))
    mu = pm.Normal("mu")
    components = [pm.Normal.dist(mu, 1), pm.StudentT.dist(nu=3, mu=-mu, sigma=1)]
    pm.Mixture("y", w, components, observed=Y)


def _censored():
    mu = pm.Normal("mu")
    pm.Censored("y", pm.Normal.dist(mu, 1), lower=-1, upper=1, observed=np.clip(Y, -1, 1))


def _truncated():
    mu = pm.Normal("mu")
    pm.Truncated("y", pm.Normal.dist(mu, 1), lower=-5, upper=5, observed=Y)


def _custom_logp():
    mu = pm.Normal("mu")
    pm.CustomDist("y", mu, logp=lambda v, m: -0.5 * (v - m) ** 2 - pt.log1p(v**2), observed=Y)


def _mvnormal_rows():
    m = pm.Normal("m", shape=2)
    chol, *_ = pm.LKJCholeskyCov("c", n=2, eta=2, sd_dist=pm.Exponential.dist(1))
    pm.MvNormal("z", mu=m, chol=chol, observed=X)


def _categorical():
    p = pm.Dirichlet("p", np.ones(3))
    pm.Categorical("y", p=p, observed=CATEGORY)


def _categorical_softmax_regression():
    B = pm.Normal("B", 0, 1, shape=(2, 3))
    pm.Categorical("y", p=pm.math.softmax(pm.Data("X", X) @ B, axis=-1), observed=CATEGORY)


def _poisson_with_exposure():
    b = pm.Normal("b")
    pm.Poisson("y", pm.math.exp(b + np.log(EXPOSURE)), observed=COUNTS)


def _student_t():
    mu = pm.Normal("mu")
    pm.StudentT("y", nu=4, mu=mu, sigma=1, observed=Y)


def _logistic_regression():
    beta = pm.Normal("beta", 0, 1, shape=2)
    pm.Bernoulli("y", logit_p=pm.Data("X", X) @ beta, observed=(Y > 0).astype(int))


def _probit_regression():
    beta = pm.Normal("beta", 0, 1, shape=2)
    pm.Bernoulli("y", p=pm.math.invprobit(pm.Data("X", X) @ beta), observed=(Y > 0).astype(int))


ACCEPTED = [
    _regression_with_dims,
    _hierarchical,
    _normal_mixture_ordered,
    _mixture_of_two_families,
    _censored,
    _truncated,
    _custom_logp,
    _mvnormal_rows,
    _categorical,
    _categorical_softmax_regression,
    _poisson_with_exposure,
    _student_t,
    _logistic_regression,
    _probit_regression,
]


def _model(build):
    with pm.Model(coords={"obs": np.arange(N), "feature": ["a", "b"]}) as m:
        build()
    return m


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("build", ACCEPTED, ids=lambda f: f.__name__.strip("_"))
def test_ordinary_models_are_proven_row_local_for_every_step(build, step):
    with _model(build):
        built = STEPS[step]()
    pmodel = built.private_model
    q = pmodel.ravel(pmodel._initial_point)
    rows = np.array([4, 0, 17])
    np.testing.assert_allclose(pmodel.loglik_rows(q, rows), pmodel.loglik(q)[rows], rtol=1e-10)


# ---------------------------------------------------------------------- refused models
def _person_covariate(kind):
    """x[g]: a per-person covariate read through a per-row index, most rows at person 0."""
    g = np.zeros(N, dtype=int)
    g[:5] = np.arange(5)
    xd = pm.Data("x", RNG.normal(size=N))
    if kind == "pm.Data":
        index = pm.Data("g", g)
    elif kind == "public":
        index = pm.Data("g", g)
        pymc_dp.public_data(index)
    else:
        index = g
    b = pm.Normal("b")
    pm.Normal("y", b * xd[index], 1, observed=Y)


def _scan(value, mu):
    doubled = pytensor.scan(lambda v: 2 * v, sequences=[value], return_updates=False)
    return -0.5 * (doubled - mu) ** 2


@as_op(itypes=[pt.dvector, pt.dvector], otypes=[pt.dvector])
def _as_op_logp(value, mu):
    return -0.5 * (value - mu) ** 2


@as_op(itypes=[pt.dscalar], otypes=[pt.dscalar])
def _as_op_of_parameters(mu):
    return np.asarray(2.0 * mu)  # a closure could hold the data: refused even row-free


class _UnknownOp(Op):
    def make_node(self, value, mu):
        value, mu = pt.as_tensor(value), pt.as_tensor(mu)
        return Apply(self, [value, mu], [value.type()])

    def perform(self, node, inputs, outputs):
        value, mu = inputs
        outputs[0][0] = -0.5 * (value - mu) ** 2


REFUSED = {
    "x[g], g pm.Data": (lambda: _person_covariate("pm.Data"), "AdvancedSubtensor"),
    "x[g], g NumPy": (lambda: _person_covariate("NumPy"), "AdvancedSubtensor"),
    "x[g], g declared public": (lambda: _person_covariate("public"), "AdvancedSubtensor"),
    "Scan": (lambda: pm.CustomDist("y", pm.Normal("mu"), logp=_scan, observed=Y), "Scan"),
    "as_op": (
        lambda: pm.CustomDist("y", pm.Normal("mu"), logp=_as_op_logp, observed=Y),
        "FromFunctionOp",
    ),
    "as_op of the parameters": (
        lambda: pm.Normal("y", _as_op_of_parameters(pm.Normal("mu")), 1, observed=Y),
        "FromFunctionOp",
    ),
    "unknown Op": (
        lambda: pm.CustomDist("y", pm.Normal("mu"), logp=_UnknownOp(), observed=Y),
        "_UnknownOp",
    ),
}


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("which", list(REFUSED))
def test_what_the_proof_cannot_show_row_local_is_refused_naming_the_op(which, step):
    build, op_name = REFUSED[which]
    with pm.Model():
        build()
        with pytest.raises(UnsupportedModelError, match=op_name) as err:
            STEPS[step]()
    assert "docs/private-mcmc.md" in str(err.value)  # says how to rewrite the model


def test_the_refused_person_covariate_really_mixes_rows():
    # Not an arbitrary refusal: person 0's covariate moves the clipped ratio sum of many rows
    # (DPPenalty's release), far beyond the 2b a replace-one neighbour may move it.
    with pm.Model() as m:
        _person_covariate("pm.Data")
    rows_loglik = m.compile_logp(vars=m.observed_RVs, sum=False, jacobian=False)
    bound = 1.0

    def clipped_ratio_sum():
        new, old = (rows_loglik({"b": b})[0] for b in (1.0, 0.0))
        return np.clip(new - old, -bound, bound).sum()

    x = m["x"].get_value()
    before = clipped_ratio_sum()
    moved = x.copy()
    moved[0] += 5.0  # one person's covariate
    pm.set_data({"x": moved}, model=m)
    assert abs(clipped_ratio_sum() - before) > 10 * 2 * bound


# ---------------------------------------------------------------------- index bounds
def _grouped(kind, group, index=lambda g: g):
    with pm.Model() as m:
        if kind == "NumPy":
            g = group
        else:
            g = pm.Data("group", group)
            if kind == "public":
                pymc_dp.public_data(g)
        a = pm.Normal("a", shape=4)
        pm.Normal("y", a[index(g)], 1, observed=Y)
    return m


@pytest.mark.parametrize("kind", ["pm.Data", "NumPy", "public"])
@pytest.mark.parametrize("bad", [4, -1, 10**12])
def test_index_arrays_outside_their_table_are_refused_when_the_step_is_built(kind, bad):
    group = GROUP.copy()
    group[7] = bad
    for step in ("DPPenalty", "MinibatchDPPenalty"):
        with _grouped(kind, group):
            with pytest.raises(UnsupportedModelError, match="outside the table") as err:
                STEPS[step]()
        assert str(bad) not in str(err.value) and "7" not in str(err.value)
        assert "Negative indices are refused" in str(err.value)


@pytest.mark.parametrize("kind", ["pm.Data", "NumPy", "public"])
def test_index_arrays_in_range_are_accepted(kind):
    # (A public index array is not data: it does not follow a minibatch's rows.)
    with _grouped(kind, GROUP):
        step = STEPS["DPPenalty" if kind == "public" else "MinibatchDPPenalty"]()
    q = np.arange(4.0)
    expected = -0.5 * (Y - q[GROUP]) ** 2 - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(step.private_model.loglik(q), expected)
    if kind != "public":
        rows = np.array([3, 1])
        np.testing.assert_allclose(step.private_model.loglik_rows(q, rows), expected[rows])


@pytest.mark.parametrize("kind", ["pm.Data", "NumPy"])
def test_an_index_computed_from_data_alone_is_bounded_by_its_values(kind):
    # 1-based group codes, g - 1: bounded by its values on the data, as the arrays passed
    # in are; one step past the table is refused, for the full-data and the minibatch steps.
    for step in ("DPPenalty", "MinibatchDPPenalty"):
        with _grouped(kind, GROUP + 1, index=lambda g: g - 1):
            built = STEPS[step]()
        q = np.arange(4.0)
        expected = -0.5 * (Y - q[GROUP]) ** 2 - 0.5 * np.log(2 * np.pi)
        np.testing.assert_allclose(built.private_model.loglik(q), expected)
        with _grouped(kind, GROUP + 1, index=lambda g: g % 5):  # (g = 4 reads a[4])
            with pytest.raises(UnsupportedModelError, match="outside the table"):
                STEPS[step]()


def test_an_index_computed_from_the_parameters_is_refused():
    # Its range cannot be bounded once for every evaluation.
    with pm.Model():
        a = pm.Normal("a", shape=4)
        shift = pm.Normal("shift")
        index = (pt.as_tensor(GROUP) + pt.round(shift).astype("int64")) % 4
        pm.Normal("y", a[index], 1, observed=Y)
        with pytest.raises(UnsupportedModelError, match="from the parameters"):
            STEPS["DPPenalty"]()


def test_an_index_inside_an_inner_graph_is_refused():
    # The bounds check does not follow indices into an OpFromGraph: refused, not waved through.
    from pytensor.compile.builders import OpFromGraph

    with pm.Model():
        group = pm.Data("group", GROUP)
        table, index = pt.dvector(), group.type()
        take = OpFromGraph([table, index], [table[index]])
        a = pm.Normal("a", shape=4)
        pm.Normal("y", take(a, group), 1, observed=Y)
        with pytest.raises(UnsupportedModelError, match="inner graph"):
            STEPS["DPPenalty"]()


# ---------------------------------------------------------------------- public containers
@pytest.mark.parametrize("where", ["prior", "likelihood"])
def test_public_containers_are_frozen_once_the_step_is_built(where):
    with pm.Model():
        table = pm.Data("table", np.array([0.0, 1.0, 2.0, 3.0]))
        pymc_dp.public_data(table)
        if where == "prior":
            mu = pm.Normal("mu", 0, table[1])
            pm.Normal("y", mu, 1, observed=Y)
        else:
            mu = pm.Normal("mu")
            pm.Normal("y", mu + table[GROUP], 1, observed=Y)
        step = DPPenalty(eps=1.0, clip_bound=1.0, chains=1)
        pm.set_data({"table": np.array([0.0, 5.0, 2.0, 30.0])})
        with pytest.raises(ValueError, match="changed after the step was built"):
            pymc_dp.sample(step=step, draws=2, tune=0, chains=1, progressbar=False,
                           compute_convergence_checks=False)


# ---------------------------------------------------------------------- bad observed values
def test_a_likelihood_written_as_a_potential_is_refused_without_saying_there_is_no_data():
    # (a new user's trial: the refusal said "there is no data to protect" of a model whose
    # pm.Potential reads every person's record, and pointed to pm.sample)
    from pymc_dp.posterior_sampling.lipschitz import lipschitz_bound

    x = np.random.default_rng(0).normal(size=50)
    y = (x > 0).astype(float)
    with pm.Model() as m:
        a, b = pm.Normal("a", 0, 2), pm.Normal("b", 0, 2)
        eta = a + b * x
        pm.Potential("loglik", (y * eta - pm.math.log1pexp(eta)).sum())
    for build in (lambda: PrivateModel(m), lambda: lipschitz_bound(m)):
        with pytest.raises(UnsupportedModelError, match="no observed variables") as refused:
            build()
        assert "no data to protect" not in str(refused.value)
        assert "pm.Potential" in str(refused.value) and "observed=" in str(refused.value)


def test_an_observed_variable_without_rows_is_refused():
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=np.zeros(0))
    with pytest.raises(UnsupportedModelError, match="has no rows"):
        PrivateModel(m)


@pytest.mark.parametrize("alone", [True, False])
def test_observed_values_selected_by_the_data_print_no_count(alone):
    # y[y > 0]: its length is a count of the data, and its rows are not the data's rows.
    with pm.Model() as m:
        yd = pm.Data("yd", Y)
        mu = pm.Normal("mu")
        if not alone:
            pm.Normal("y", mu, 1, observed=yd)
        pm.Normal("y_positive", mu, 1, observed=yd[yd > 0])
    with pytest.raises(UnsupportedModelError, match="observed value of 'y_positive'") as err:
        PrivateModel(m)
    count = int((Y > 0).sum())
    assert str(count) not in str(err.value)


# ---------------------------------------------------------------------- the probe
def test_the_probe_moves_rows_drawn_at_random(monkeypatch):
    with pm.Model() as m:
        _student_t()
    pmodel = PrivateModel(m)
    seen = []
    monkeypatch.setattr(
        pmodel, "_probe_rows", lambda point, base, rows, work: seen.append(set(rows))
    )
    for _ in range(6):
        pmodel._probe_rows_are_independent()
    assert len({frozenset(r) for r in seen}) > 2  # not the same rows every time


def test_the_probe_passes_over_the_data_a_fixed_number_of_times():
    # Building a step must not grow with n faster than a few passes (issue 14): the rows
    # are moved together in one working copy, three probes at each of two points.
    y = np.random.default_rng(0).normal(size=100_000)
    with pm.Model() as m:
        pm.Normal("y", pm.Normal("mu"), 1, observed=y)
    pmodel = PrivateModel(m)
    calls, compiled = [], pmodel._loglik_fn
    pmodel._loglik_fn = lambda q, *data: calls.append(1) or compiled(q, *data)
    pmodel._probe_rows_are_independent()
    assert len(calls) == 2 * (1 + 3)
    np.testing.assert_array_equal(pmodel._data_values[0], y)  # the data itself untouched


def test_the_probes_comparison_sees_every_watched_row_block_by_block():
    # (compared a block of rows at a time, so that set-up's memory stays near the data's)
    from pymc_dp.model.probes import _unmoved

    base = np.array([0.0, 1.0, np.nan, 3.0, 4.0, 5.0, np.inf, 7.0, 8.0, 9.0])
    watched = np.ones(10, dtype=bool)
    watched[5] = False
    assert _unmoved(base.copy(), base, watched, chunk=4)
    # (a row whose ℓ is infinite is watched too: it once had an infinite tolerance)
    for k, value in [(9, 9.5), (7, np.nan), (2, 2.0), (6, -np.inf), (6, 5.0), (0, 1e-6)]:
        moved = base.copy()
        moved[k] = value
        assert not _unmoved(moved, base, watched, chunk=4), k
    near = base * (1 + 1e-14)
    near[5] = 100.0  # (a row the probe moved: not watched)
    assert _unmoved(near, base, watched, chunk=4)


@pytest.mark.parametrize("n", [2, 3, 2_000])
def test_the_probe_still_refuses_rows_that_mix(monkeypatch, n):
    # The probe is the second line behind the proof: with the proof switched off (as if one
    # of its rules were wrong) a model centring its data by its own mean is still refused,
    # also with so few rows that moving three would leave none to watch (the review's case).
    x = np.random.default_rng(1).normal(2.0, 3.0, size=n)
    monkeypatch.setattr(PrivateModel, "_check_graph", lambda self, *a, **k: None)
    with pm.Model() as m:
        xd = pm.Data("x", x)
        pm.Normal("y", pm.Normal("mu") + (xd - xd.mean()), 1, observed=x)
    with pytest.raises(UnsupportedModelError, match="changes the log-likelihood of other rows"):
        PrivateModel(m)


def test_a_prior_whose_draws_read_data_is_refused():
    # The logp ignores x, the random= reads it: the warm-up starts from prior draws
    # (PrivateModel.plausible_start), so its start would hold mean(x). (Reviewer's case.)
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.normal(size=200))
        theta = pm.CustomDist(
            "theta", x, logp=lambda v, loc: -0.5 * (v / 100.0) ** 2,
            random=lambda loc, rng=None, size=None: rng.normal(np.mean(loc), 1.0, size=size),
            signature="(n)->()",
        )
        pm.Normal("y", theta + 0.0 * x, 1.0, observed=rng.normal(size=200))
    with pytest.raises(UnsupportedModelError, match="The prior of 'theta' depends on data"):
        PrivateModel(model)


def test_a_public_container_the_observations_are_computed_from_is_data_for_the_prior_too():
    # Declaring x public cannot make the observed values x·1 public; a prior reading
    # x.mean() would then be added (and start the chain) without noise. (Reviewer's case.)
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.normal(size=200))
        pymc_dp.public_data(x)
        mu = pm.Normal("mu", mu=x.mean(), sigma=1.0)
        pm.Normal("y", mu, 1.0, observed=x * 1.0)
    with pytest.raises(UnsupportedModelError, match="The prior of 'mu' depends on data"):
        PrivateModel(model)


# --------------------------------------------- what only the log-density's graphs show (review 26)
def _shared_data():
    return pytensor.shared(np.random.default_rng(1).normal(size=200), name="z")


def test_a_shared_array_read_only_inside_a_customdist_logp_is_data():
    # A logp= builds its graph when the model's density is built: the shared array it reads
    # is not among the variables' ancestors, and was taken for a parameter-like constant.
    z = _shared_data()

    def logp(value, mu):
        return pm.logp(pm.Normal.dist(mu + z.mean() - z[::-1], 1.0), value)

    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 5)
        pm.CustomDist("y", mu, logp=logp, observed=z.get_value())
    assert any(v is z for v in pymc_dp.model.data.private_data_variables(model))
    with pytest.raises(UnsupportedModelError, match="other rows"):
        PrivateModel(model)


def test_a_prior_customdist_whose_logp_reads_a_shared_array_is_refused():
    # Its prior term, added without noise, pinned mu at the data's mean to 1e-3.
    z = _shared_data()
    with pm.Model() as model:
        mu = pm.CustomDist("mu", logp=lambda v: -0.5 * ((v - z.mean()) / 1e-3) ** 2)
        pm.Normal("y", mu, 1.0, observed=z.get_value())
    with pytest.raises(UnsupportedModelError, match="The prior of 'mu' depends on data"):
        PrivateModel(model)


def _python_op():
    @as_op(itypes=[pt.dscalar], otypes=[pt.dscalar])
    def shifted(mu):  # (its Python may hold anything: here it reads Y)
        return np.asarray(mu + 0.0 * Y.mean())

    return shifted


@pytest.mark.filterwarnings("ignore:pytensor.as_op is deprecated")
@pytest.mark.parametrize("where", ["potential", "prior", "check"])
def test_python_ops_are_refused_where_no_row_proof_runs(where):
    # Priors, potentials and a check's condition on parameters enter every acceptance test
    # without noise; the row-locality proof never meets their Ops.
    from pytensor.raise_op import Assert

    op = _python_op()
    with pm.Model() as model:
        if where == "prior":
            mu = pm.CustomDist("mu", logp=lambda v: -0.5 * op(v) ** 2)
        else:
            mu = pm.Normal("mu")
        if where == "potential":
            pm.Potential("pot", -0.5 * op(mu) ** 2)
        loc = Assert("a check")(mu, pt.gt(op(mu), -1e9)) if where == "check" else mu
        pm.Normal("y", loc, 1.0, observed=Y)
    with pytest.raises(UnsupportedModelError, match="FromFunctionOp: an operation that runs code"):
        PrivateModel(model)


class _Spoofed(Op):
    """An Op that names PyTensor's module as its own, computing from data in its closure."""

    __module__ = "pytensor.tensor.basic"

    def make_node(self, mu):
        mu = pt.as_tensor(mu)
        return Apply(self, [mu], [mu.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.asarray(inputs[0] - Y.mean())


def test_an_op_that_names_a_library_module_as_its_own_is_refused():
    # Whether an Op is PyTensor's was read off its class's __module__, which any class may
    # set; the code that computes its values says where it comes from. (Review 26.)
    with pm.Model() as model:
        mu = pm.Normal("mu")
        pm.Potential("pot", -0.5 * _Spoofed()(mu) ** 2)
        pm.Normal("y", mu, 1.0, observed=Y)
    with pytest.raises(UnsupportedModelError, match="_Spoofed: an operation that runs code"):
        PrivateModel(model)


def test_a_fixed_zero_inflation_is_refused_with_the_way_to_declare_it_public():
    # PyMC stacks a fixed psi into the weight vector (1 − psi, psi): an array off the datum
    # axis, which could as well hold people's values. The message says what to do, and
    # doing it is accepted.
    with pm.Model() as fixed:
        a = pm.Normal("a")
        pm.ZeroInflatedPoisson("y", 0.7, pm.math.exp(a) * EXPOSURE, observed=COUNTS)
    with pytest.raises(UnsupportedModelError, match="fixed psi of a zero-inflated"):
        PrivateModel(fixed)
    with pm.Model() as declared:
        psi = pm.Data("psi", 0.7)
        pymc_dp.public_data(psi)
        a = pm.Normal("a")
        pm.ZeroInflatedPoisson("y", psi, pm.math.exp(a) * EXPOSURE, observed=COUNTS)
    assert PrivateModel(declared).dim == 1
