import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import scipy.stats as st

import pymc_dp
from pymc_dp.errors import UnsupportedModelError
from pymc_dp.model import PrivateModel, data_dependent_deterministics


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    n = 200
    X = rng.normal(size=(n, 2))
    y = X @ [1.0, -2.0] + rng.normal(size=n)
    Z = rng.normal(size=(n, 2))
    with pm.Model() as m:
        Xd = pm.Data("X", X)
        beta = pm.Normal("beta", 0, 10, shape=2)
        s = pm.HalfNormal("s", 1)
        pm.Normal("y", Xd @ beta, s, observed=y)
        pm.MvNormal("z", mu=pt.zeros(2), cov=np.eye(2), observed=Z)
        pm.Deterministic("fit", Xd @ beta)
        pm.Deterministic("beta_sum", beta.sum())
    return m, X, y, Z


def test_per_datum_loglik_sums_every_observed_element_of_a_row(regression):
    m, X, y, Z = regression
    pmodel = PrivateModel(m)
    assert pmodel.n_data == 200 and pmodel.dim == 3
    q = np.array([0.5, -1.0, np.log(2.0)])  # beta, log(s)
    expected = st.norm(X @ q[:2], 2.0).logpdf(y) + st.multivariate_normal(
        np.zeros(2), np.eye(2)
    ).logpdf(Z)
    np.testing.assert_allclose(pmodel.loglik(q), expected, rtol=1e-10)


def test_logprior_is_on_the_value_space_with_jacobian(regression):
    m, *_ = regression
    pmodel = PrivateModel(m)
    q = np.array([0.5, -1.0, np.log(2.0)])
    expected = (
        st.norm(0, 10).logpdf(q[:2]).sum() + st.halfnorm(scale=1).logpdf(2.0) + np.log(2.0)
    )
    assert pmodel.logprior(q) == pytest.approx(expected, rel=1e-7)


def test_pm_data_observed_and_batch_rows():
    y = np.arange(6.0)
    with pm.Model() as m:
        yd = pm.Data("yd", y)
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=yd)
    pmodel = PrivateModel(m)
    np.testing.assert_allclose(pmodel.loglik(np.array([1.0])), st.norm(1, 1).logpdf(y))
    assert pmodel.unravel(pmodel.ravel({"mu": np.array(0.3)}))["mu"] == pytest.approx(0.3)


def test_data_dependent_deterministics_are_found(regression):
    m, *_ = regression
    assert data_dependent_deterministics(m) == ["fit"]


def test_a_deterministic_of_public_data_and_parameters_is_kept():
    # From a new user's trial: a group-level effect computed from a covariate declared
    # public was dropped from the draws as "computed from data". Declared public, it is a
    # constant of the analysis; a container the observations are computed from stays
    # private whatever is declared, and so does one that is not declared.
    from pymc_dp import public_data

    rng = np.random.default_rng(0)
    g = rng.integers(0, 4, 50)
    with pm.Model() as m:
        u = pm.Data("u", np.linspace(-1.0, 1.0, 4))
        v = pm.Data("v", np.ones(4))
        shift = pm.Data("shift", np.zeros(50))
        public_data(u, shift)
        slope = pm.Normal("slope")
        z = pm.Normal("z", shape=4)
        a = pm.Deterministic("a", slope * u + z)
        pm.Deterministic("b", slope * v)
        pm.Deterministic("c", slope + shift.sum())
        pm.Normal("y", a[pm.Data("g", g)], 1.0, observed=rng.normal(size=50) + shift)
    assert sorted(data_dependent_deterministics(m)) == ["b", "c"]


def test_deterministics_that_may_hold_data_are_found_however_they_read_it():
    # From a privacy review: each of these put data into the released draws.
    import pytensor.tensor as pt

    from pytensor.compile.builders import OpFromGraph

    from pymc_dp import public_data
    from pymc_dp.results.sharing import releasable_names

    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 2))
    with pm.Model(coords={"sick": range(7)}) as m:
        b = pm.Normal("b", shape=2)
        xd = pm.Data("x", x)
        # a clone of a private container shares its storage: declaring the clone public
        # does not make the data public
        clone = xd.clone()
        public_data(clone)
        pm.Deterministic("through_a_clone", clone[:, 0] + 0 * b.sum())
        # a NumPy array inside an inner graph is an array constant like any other
        inner = pt.vector("inner")
        pm.Deterministic("inside_an_op", OpFromGraph([inner], [pt.as_tensor(x) @ inner])(b))
        # the length of a dimension no variable has may be a count of the data
        pm.Deterministic("a_count", b.sum() * 0 + m.dim_lengths["sick"])
        pm.Deterministic("kept", 2 * b)
        pm.Normal("y", xd @ b, 1, observed=rng.normal(size=30))
    found = data_dependent_deterministics(m)
    assert sorted(found) == ["a_count", "inside_an_op", "through_a_clone"]
    assert releasable_names(m) == ["b", "kept"]


def _model(**kw):
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=kw.get("y", np.zeros(5)))
    return m


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pm.Normal("x", 0, 1), "no observed"),
        (
            lambda: (
                pm.Normal("y1", pm.Normal("a"), 1, observed=np.zeros(5)),
                pm.Normal("y2", 0, 1, observed=np.zeros(4)),
            ),
            "leading",
        ),
        (
            lambda: (pm.Poisson("k", 3), pm.Normal("y", 0, 1, observed=np.zeros(3))),
            "discrete",
        ),
        (lambda: pm.Normal("y", pm.Normal("a"), 1, observed=np.array(1.0)), "scalar"),
        (
            lambda: (
                a := pm.Normal("a"),
                d := pm.Data("d", np.ones(3)),
                pm.Normal("y", a, 1, observed=np.zeros(3)),
                pm.Potential("p", (d * a).sum()),
            ),
            "Potential",
        ),
        (
            lambda: (
                d := pm.Data("d", np.ones(3)),
                a := pm.Normal("a", d.mean(), 1),
                pm.Normal("y", a, 1, observed=d),
            ),
            "prior",
        ),
    ],
    ids=["no-observed", "leading-lengths", "discrete", "scalar-observed", "potential", "prior"],
)
def test_unsupported_models_are_refused(build, message):
    with pm.Model() as m:
        build()
    with pytest.raises(UnsupportedModelError, match=message):
        PrivateModel(m)


def test_a_step_must_cover_every_free_variable():
    with pm.Model() as m:
        a = pm.Normal("a")
        b = pm.Normal("b")
        pm.Normal("y", a + b, 1, observed=np.zeros(3))
    with pytest.raises(UnsupportedModelError, match="NUTS"):
        PrivateModel(m, vars=[a])


def test_non_finite_data_is_refused_without_echoing_it():
    y = np.array([1.2345678, np.nan, 3.0])
    with pytest.raises(ValueError, match="non-finite") as err:
        PrivateModel(_model(y=y))
    assert "1.2345678" not in str(err.value)


def test_infinite_data_is_refused():
    with pytest.raises(ValueError, match="non-finite"):
        PrivateModel(_model(y=np.array([1.0, np.inf, 3.0])))


def test_one_row_must_not_move_other_rows():
    x = np.random.default_rng(1).normal(2.0, 3.0, size=50)
    with pm.Model() as m:
        xd = pm.Data("x", x)
        mu = pm.Normal("mu")
        standardised = (xd - xd.mean()) / xd.std()  # mixes every row into every ℓ_j
        pm.Normal("y", mu, 1, observed=standardised)
    with pytest.raises(UnsupportedModelError, match="other rows"):
        PrivateModel(m)


def test_numpy_covariates_are_data_too():
    # Per-individual covariates written into the model as a NumPy array are people's data
    # like pm.Data: the row probe must move their rows too, and refuse centring an effect
    # of them inside the model.
    rng = np.random.default_rng(4)
    x, y = rng.normal(2.0, 3.0, size=50), rng.normal(size=50)
    with pm.Model() as m:
        b = pm.Normal("b")
        effect = b * pt.as_tensor(x)
        pm.Normal("y", effect - effect.mean(), 1, observed=y)
    with pytest.raises(UnsupportedModelError, match="other rows"):
        PrivateModel(m)
    with pm.Model() as m:
        b = pm.Normal("b")
        pm.Normal("y", b * (x - x.mean()), 1, observed=y)  # centred in NumPy first: fine
    assert "NumPy array" in PrivateModel(m).datum_inputs[1].label


def _covariate_means(b, x, g):
    # NumPy covariates in shapes PyMC folds into new constants (found by the second review:
    # they were found on one logp graph and compiled from another).
    return {
        "scaled": b[0] * x,
        "folded log": b[0] * pt.log(x),
        "broadcast column": (b * pt.as_tensor(x)[:, None]).sum(axis=1),
        "stacked design": pt.dot(pt.stack([x, x**2], axis=1), b),
        "folded group index": b[pt.as_tensor(g) % 2],
    }


@pytest.mark.parametrize("which", list(_covariate_means(pt.vector(), np.ones(3), np.ones(3, int))))
def test_numpy_covariates_are_probed_and_differentiated(which):
    rng = np.random.default_rng(5)
    x, g, y = rng.uniform(0.5, 2.0, size=50), rng.integers(0, 4, size=50), rng.normal(size=50)
    with pm.Model() as m:
        b = pm.Normal("b", shape=2)
        pm.Normal("y", _covariate_means(b, x, g)[which], 1, observed=y)
    pmodel = PrivateModel(m)
    assert any("NumPy array" in d.label for d in pmodel.datum_inputs)
    # every per-datum input is read by the compiled likelihood (none is a dead placeholder)
    moved = [v.copy() for v in pmodel._data_values]
    q = np.array([0.3, -0.7])
    base = pmodel.loglik(q)
    for k, d in enumerate(pmodel.datum_inputs):
        changed = list(pmodel._data_values)
        changed[k] = moved[k].copy()
        changed[k][3] = changed[k][3] + 1
        assert not np.array_equal(pmodel._loglik_fn(q, *changed), base), d.label
    pmodel.compile_gradients()
    h = 1e-6
    fd = np.stack(
        [(pmodel.loglik(q + h * e) - pmodel.loglik(q - h * e)) / (2 * h) for e in np.eye(2)],
        axis=1,
    )
    np.testing.assert_allclose(pmodel.clipped_gradient(q, 1e12)[0], fd.sum(axis=0), rtol=1e-6)


def test_numpy_covariates_with_n_on_another_axis_are_refused():
    rng = np.random.default_rng(6)
    xt = rng.normal(size=(2, 50))  # transposed covariates: one column per person
    with pm.Model() as m:
        b = pm.Normal("b", shape=2)
        mu = pt.dot(b, xt)
        pm.Normal("y", mu - mu.mean(), 1, observed=rng.normal(size=50))
    with pytest.raises(UnsupportedModelError, match="axis other than the first"):
        PrivateModel(m)


def test_a_public_table_whose_length_happens_to_be_n():
    # 40 people in 40 public regions: the region effects table has n rows by coincidence.
    rng = np.random.default_rng(7)
    region, y = rng.integers(0, 40, size=40), rng.normal(size=40)

    def build(public):
        with pm.Model() as m:
            shift = pm.Data("shift", np.linspace(-1, 1, 40))  # public, per region
            if public:
                pymc_dp.public_data(shift)
            mu = pm.Normal("mu")
            pm.Normal("y", mu + shift[region], 1, observed=y)
        return m

    with pytest.raises(UnsupportedModelError, match="other rows"):
        PrivateModel(build(public=False))  # taken for per-person rows, mixed by the index
    labels = [d.label for d in PrivateModel(build(public=True)).datum_inputs]
    assert labels == ["observed variable 'y'", "a NumPy array with one row per individual (#0, in the log-likelihood of 'y')"]  # y and region


CROSS_ROW_NUMPY = [
    "centred covariate",
    "mean of the observed",
    "max threshold",
    "transposed covariates, centred",
    "inside CustomDist(dist=...)",
    "in a prior",
]


@pytest.mark.parametrize("which", CROSS_ROW_NUMPY)
def test_cross_row_expressions_of_numpy_arrays_alone_are_refused(which):
    # Found by the third and fourth reviews: PyMC folds these into new constants when it
    # builds the log-densities, so the row probe would only see their results.
    rng = np.random.default_rng(11)
    x, y = rng.normal(size=80), rng.normal(size=80)
    xt, yt, xT = pt.as_tensor(x), pt.as_tensor(y), pt.as_tensor(np.stack([x, x**2]))

    def centred_dist(b, size):
        return pm.Normal.dist(b * (xt - xt.mean()), 1, size=size)

    with pm.Model() as m:
        b = pm.Normal("b")
        if which == "inside CustomDist(dist=...)":
            pm.CustomDist("y", b, dist=centred_dist, observed=y)
        elif which == "in a prior":
            mu = pm.Normal("mu", yt.mean(), 1)  # the data's mean, without noise
            pm.Normal("y", mu, 1, observed=y)
        else:
            mean = {
                "centred covariate": b * (xt - xt.mean()),
                "mean of the observed": b + yt.mean(),
                "max threshold": b * x + (xt > pt.max(xt) - 1e-9),
                "transposed covariates, centred": b * (xT[0] - xT[0].mean()),
            }[which]
            pm.Normal("y", mean, 1, observed=y)
    with pytest.raises(UnsupportedModelError, match="computes across the rows"):
        PrivateModel(m)


def test_row_local_expressions_of_numpy_arrays_are_fine():
    rng = np.random.default_rng(12)
    x, X, y = rng.uniform(1, 2, size=80), rng.normal(size=(80, 3)), rng.normal(size=80)
    with pm.Model() as m:
        b = pm.Normal("b", shape=3)
        design = pt.as_tensor(X) * pt.log(pt.as_tensor(x))[:, None]  # folded, row by row
        pm.Normal("y", pt.dot(design, b), 1, observed=y)
    PrivateModel(m).compile_gradients()


@pytest.mark.parametrize(
    "length, derive, match",
    [
        (40, lambda xd: xd - xd.mean(), "other rows"),  # every row reads the mean of x
        (41, lambda xd: xd[1:] - xd[:-1], "other rows"),  # lags of n + 1 values
    ],
)
def test_declaring_data_public_cannot_make_observed_values_computed_from_it_public(
    length, derive, match
):
    # Found by the third and fourth reviews: observed=f(x) with x declared public would
    # have left the observed rows unprobed.
    rng = np.random.default_rng(8)
    with pm.Model() as m:
        xd = pm.Data("x", rng.normal(size=length))
        pymc_dp.public_data(xd)
        mu = pm.Normal("mu")
        pm.Normal("y1", mu, 1, observed=rng.normal(size=40))
        pm.Normal("y2", mu, 1, observed=derive(xd))
    with pytest.raises(UnsupportedModelError, match=match):
        PrivateModel(m)


def test_per_person_censoring_bounds_may_be_infinite_but_not_nan():
    rng = np.random.default_rng(9)
    y = rng.normal(size=60)
    censored = rng.random(60) < 0.3
    upper = np.where(censored, 1.0, np.inf)

    def build(upper):
        with pm.Model() as m:
            mu = pm.Normal("mu")
            pm.Censored("y", pm.Normal.dist(mu, 1), lower=None, upper=upper,
                        observed=np.minimum(y, upper))
        return m

    pmodel = PrivateModel(build(upper))
    assert np.all(np.isfinite(pmodel.loglik(np.array([0.1]))))
    pmodel.compile_gradients()
    with pytest.raises(ValueError, match=r"non-finite values \(NaN\)") as err:
        PrivateModel(build(np.where(censored, np.nan, np.inf)))
    assert "nan" not in str(err.value).replace("NaN", "")


def test_per_datum_data_read_only_by_a_deterministic_is_fine_for_gradients():
    rng = np.random.default_rng(10)
    with pm.Model() as m:
        z = pm.Data("z", rng.normal(size=30))  # n rows, not in the likelihood
        mu = pm.Normal("mu")
        pm.Deterministic("shifted", mu + z)
        pm.Normal("y", mu, 1, observed=rng.normal(size=30))
    pmodel = PrivateModel(m)
    pmodel.compile_gradients()
    assert np.isfinite(pmodel.clipped_gradient(np.array([0.2]), 1.0)[0]).all()


def test_a_check_failed_by_one_row_does_not_touch_the_others():
    # Found by the fifth review: PyMC compiles a parameter check to switch(all(cond), logp,
    # -inf) over all rows, so one person's mode outside the bounds set every ℓ_j to -inf.
    c = np.linspace(-1, 1, 40)
    y = np.clip(c, -0.5, 0.5)

    def loglik(c0):
        cc = c.copy()
        cc[0] = c0
        with pm.Model() as m:
            lower = pm.Normal("lower", -3, 1)
            upper = pm.Normal("upper", 3, 1)
            pm.Triangular("y", lower=lower, c=cc, upper=upper, observed=y)
        return PrivateModel(m).loglik(np.array([-0.98, 3.0]))  # lower > c0 = -1: invalid

    inside, outside = loglik(0.0), loglik(-1.0)
    assert np.all(np.isfinite(inside))
    np.testing.assert_array_equal(outside[1:], inside[1:])  # only row 0 may differ


@pytest.mark.parametrize("where", ["prior", "likelihood"])
def test_plain_shared_variables_are_data(where):
    # Found by the fifth review: pytensor.shared arrays not registered with pm.Data.
    import pytensor

    rng = np.random.default_rng(18)
    y = rng.normal(size=40)
    with pm.Model() as m:
        shared = pytensor.shared(y, name="ys")
        if where == "prior":
            mu = pm.Normal("mu", shared.mean(), 1)  # the data's mean, without noise
            pm.Normal("y", mu, 1, observed=y)
        else:
            b = pm.Normal("b")
            pm.Normal("y", b * (shared - shared.mean()), 1, observed=y)
    match = "depends on data" if where == "prior" else "other rows"
    with pytest.raises(UnsupportedModelError, match=match):
        PrivateModel(m)


def test_public_containers_may_set_priors():
    # Found by the sixth review: public_data's own example (a prior scale) was refused.
    import pytensor

    y = np.random.default_rng(19).normal(size=30)
    for make in (lambda: pm.Data("scale", 2.0), lambda: pytensor.shared(2.0, name="scale")):
        with pm.Model() as m:
            scale = make()
            pymc_dp.public_data(scale)
            mu = pm.Normal("mu", 0, scale)
            pm.Normal("y", mu, 1, observed=y)
        assert PrivateModel(m).logprior(np.array([0.0])) == pytest.approx(
            st.norm(0, 2).logpdf(0)
        )
        with pm.Model() as m:
            scale = make()  # not declared public: it may hold data
            mu = pm.Normal("mu", 0, scale)
            pm.Normal("y", mu, 1, observed=y)
        with pytest.raises(UnsupportedModelError, match="depends on data"):
            PrivateModel(m)


def test_lengths_computed_from_data_are_not_printed():
    x = np.random.default_rng(17).normal(size=40)
    with pm.Model() as m:
        xd = pm.Data("x", x)
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=xd)
        pm.Normal("y2", mu, 1, observed=xd[xd > 0])  # its length is a count of the data
    # (Refused as an observed value not computed row by row: its rows would be a count.)
    with pytest.raises(UnsupportedModelError, match="observed value of 'y2'") as err:
        PrivateModel(m)
    assert str(int((x > 0).sum())) not in str(err.value)


CROSS_ROW_TERMS = {
    # Found by an independent review (session 2): the log-likelihood of every row switches
    # on the largest value in the data. Invisible to a one-unit bump, and to any change at
    # μ = 0 (the initial point), where the switched factor multiplies zero.
    "a threshold on the largest value": lambda value, mu: -0.5
    * (value - pt.switch(pt.max(value) > 100.0, 3.0, 1.0) * mu) ** 2,
    # Found by the fifth review: a probe moves three rows at two points; the structural
    # check sees every operation that moves values between rows.
    "switched on far from the probe": lambda value, mu: -0.5 * (value - mu) ** 2
    + pt.switch(mu > 3, 10 * mu * value.sum(), 0.0),
    "on rows the probe never moves": lambda value, mu: -0.5 * (value - mu) ** 2
    + pt.set_subtensor(pt.zeros_like(value)[5:10], 10 * mu * value[6:11]),
}


def test_a_row_that_makes_every_row_non_finite_is_a_cross_row_effect():
    # The probe used to skip a change that made every ℓ_j non-finite as "uninformative"
    # (PyMC's checks over all rows did that; they are now taken out of the graph). Here one
    # far-away row switches every row to -inf behind LogSumExp over the rows, which the
    # structural proof now follows into its inner graph (a max over the datum axis).
    def logp(value, mu):
        return -0.5 * (value - mu) ** 2 + pt.switch(pt.logsumexp(value) < 1e5, 0.0, -np.inf)

    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist("y", mu, logp=logp, observed=np.random.default_rng(0).normal(size=30))
    with pytest.raises(UnsupportedModelError, match="other rows"):
        PrivateModel(m)


@pytest.mark.parametrize("which", list(CROSS_ROW_TERMS))
def test_cross_row_terms_are_refused(which):
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist(
            "y", mu, logp=CROSS_ROW_TERMS[which],
            observed=np.random.default_rng(3).normal(size=100),
        )
    with pytest.raises(UnsupportedModelError, match="other rows"):
        PrivateModel(m)


def test_a_per_person_table_indexed_by_rows_is_refused_unless_public():
    rng = np.random.default_rng(2)
    person = rng.integers(0, 10, size=40)
    with pm.Model() as m:
        table = pm.Data("person_effect", rng.normal(size=10))
        idx = pm.Data("person", person)
        mu = pm.Normal("mu")
        pm.Normal("y", mu + table[idx], 1, observed=rng.normal(size=40))
    with pytest.raises(UnsupportedModelError, match="person_effect"):
        PrivateModel(m)
    from pymc_dp.model import public_data

    public_data(m["person_effect"])
    assert PrivateModel(m).n_data == 40


def test_potentials_holding_array_constants_are_refused():
    y = np.random.default_rng(3).normal(size=30)
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.Normal("z", mu, 1, observed=np.zeros(3))
        pm.Potential("lik", pm.logp(pm.Normal.dist(mu, 1), y).sum())  # data hidden in a constant
    with pytest.raises(UnsupportedModelError, match="lik"):
        PrivateModel(m)


def test_initial_values_computed_from_data_are_refused():
    y = np.random.default_rng(4).normal(size=20)
    with pm.Model() as m:
        yd = pm.Data("yd", y)
        mu = pm.Normal("mu", initval=yd.mean())
        pm.Normal("y", mu, 1, observed=yd)
    with pytest.raises(UnsupportedModelError, match="start of .mu.*initval="):
        PrivateModel(m)


def test_layout_follows_the_model_whatever_the_order_of_vars():
    with pm.Model() as m:
        a = pm.Normal("a")
        b = pm.Normal("b", shape=2)
        pm.Normal("y", a + b.sum(), 1, observed=np.zeros(3))
    pmodel = PrivateModel(m, vars=[b, a])
    assert [v.name for v in pmodel.value_vars] == ["a", "b"]


def test_multivariate_observed_without_datum_axis_is_refused():
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.MvNormal("y", mu * np.ones(4), np.eye(4), observed=np.zeros(4))
    with pytest.raises(UnsupportedModelError, match="no datum axis") as err:
        PrivateModel(m)
    # (and says what to do, where to read more)
    assert "row by row" in str(err.value) and "What the model must look like" in str(err.value)


def test_a_random_walk_over_the_rows_is_refused_saying_what_to_do():
    # (a new user's trial: the refusal had said why, not what to do)
    with pm.Model() as m:
        sigma = pm.HalfNormal("sigma")
        pm.GaussianRandomWalk("y", sigma=sigma, init_dist=pm.Normal.dist(), steps=9,
                              observed=np.cumsum(np.ones(10)))
    with pytest.raises(UnsupportedModelError, match="no datum axis") as err:
        PrivateModel(m)
    assert "random walk" in str(err.value) and "row by row" in str(err.value)


# ---------------------------------------------------------------------- one fused pass
def _uniform_model():
    # ℓ_j = −log θ on [0, θ], −inf above: moves across the largest y give ±inf and NaN terms
    y = np.array([0.2, 0.9, 1.7, 2.5, 3.1])
    with pm.Model() as m:
        upper = pm.Uniform("upper", 0.0, 10.0)
        pm.Uniform("y", 0.0, upper, observed=y)
    return PrivateModel(m)


@pytest.mark.parametrize("bound", [0.0, 0.05, 1.0, 1e300])
def test_the_compiled_clipped_ratio_is_the_kernels_rule(bound):
    from pymc_dp.kernels.penalty import clipped_ratio_from

    pmodel = _uniform_model()
    reference = clipped_ratio_from(pmodel.loglik)
    # upper = 10·sigmoid(u): 1.0 leaves two rows outside the support, 3.5 none, 2.0 three
    points = [np.array([np.log(p / (10 - p))]) for p in (1.0, 3.5, 2.0, 1.0)]
    for current_at, new_at in zip(points, points[1:]):
        current = pmodel.loglik(current_at)
        new, ratio = pmodel.clipped_ratio(new_at, current, bound)
        new_ref, ratio_ref = reference(new_at, current, bound)
        np.testing.assert_array_equal(new, new_ref)
        assert ratio == pytest.approx(ratio_ref, rel=1e-12, abs=1e-12)
    assert not np.all(np.isfinite(current))  # the rule's non-finite branches were exercised


def test_the_clipped_ratio_refuses_a_cache_of_the_wrong_length_or_a_bad_bound():
    pmodel = _uniform_model()
    current = pmodel.loglik(np.zeros(1))
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        pmodel.clipped_ratio(np.zeros(1), np.zeros(4), 1.0)
    for bound in (np.nan, np.inf, -1.0):  # (a NaN clamp would leave every term as it is)
        with pytest.raises(ValueError, match="finite number >= 0"):
            pmodel.clipped_ratio(np.zeros(1), current, bound)


def test_a_float32_model_clamps_and_sums_in_float64():
    # Found by the review of the fused ratio: clamped in float32, a bound of 0.1 became
    # float32(0.1) > 0.1, and the sum was rounded to a step growing with n, so one person
    # could move the released sum by more than the 2b its noise is scaled for.
    import pytensor

    y = np.linspace(-50.0, 50.0, 1000).astype("float32")
    with pytensor.config.change_flags(floatX="float32"):
        with pm.Model() as m:
            pm.Normal("y", pm.Normal("mu", 0.0, 10.0), 1.0, observed=y)
        pmodel = PrivateModel(m)
        q = np.zeros(1, dtype="float32")
        current = pmodel.loglik(q)
        assert current.dtype == np.float32
        # every |difference| is far above the bound: the sum is n·(±b), exactly in float64
        _, ratio = pmodel.clipped_ratio(q + 5.0, current, 0.1)
        clamps = np.sign(np.asarray(pmodel.loglik(q + 5.0), dtype=float) - current)
    assert isinstance(ratio, float)
    assert ratio == pytest.approx(0.1 * clamps.sum(), rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("step", ["DPPenalty", "DPHMC"])
def test_the_fused_ratio_gives_the_draws_of_the_numpy_reference(step, monkeypatch):
    # Nothing changes but time: the same seed gives the same draws with the compiled ratio
    # as with the NumPy rule it replaced (sums agree to rounding; decisions then agree).
    from pymc_dp.kernels.penalty import clipped_ratio_from

    y = np.random.default_rng(0).normal(1.0, 1.0, 200)
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=y)
    settings = {
        "DPPenalty": dict(clip_bound=2.0, scaling=0.1),
        "DPHMC": dict(grad_clip=3.0, loglik_clip=3.0, step_size=0.02, n_steps=3),
    }[step]

    def run():
        with m:
            s = getattr(pymc_dp, step)(eps=100.0, warmup=False, chains=1, **settings)
            idata = pymc_dp.sample(step=s, draws=200, tune=0, chains=1, random_seed=3,
                                   progressbar=False, compute_convergence_checks=False)
        return idata["posterior"]["mu"].values.ravel()

    fused = run()
    monkeypatch.setattr(
        PrivateModel, "clipped_ratio",
        lambda self, q, current, bound: clipped_ratio_from(self.loglik)(q, current, bound),
    )
    numpy_rule = run()
    np.testing.assert_allclose(fused, numpy_rule, rtol=0, atol=1e-12)
    assert np.unique(fused).size > 20  # the chain moved: decisions were compared


def test_a_clipped_sum_that_comes_back_in_float32_is_refused():
    # The second line behind the backend check at construction (a JAX without float64).
    pmodel = _uniform_model()
    current = pmodel.loglik(np.zeros(1))
    pmodel.clipped_ratio(np.zeros(1), current, 1.0)
    compiled = pmodel._ratio_fn
    pmodel._ratio_fn = lambda *args: (lambda out: (out[0], np.float32(out[1])))(compiled(*args))
    with pytest.raises(RuntimeError, match="came back in float32"):
        pmodel.clipped_ratio(np.zeros(1), current, 1.0)


def test_a_dimension_length_read_as_a_value_is_refused_unless_a_variable_has_it():
    import pytensor

    y = np.random.default_rng(0).normal(size=50)
    with pm.Model(coords={"g": range(3)}) as m:
        m.add_coord("k", length=pytensor.shared(np.int64((y > 1).sum())))
        mu = pm.Normal("mu", m.dim_lengths["k"].astype("float64"), 2.0)
        pm.Normal("y", mu, 1.0, observed=y)
    with pytest.raises(UnsupportedModelError, match="length of a dimension no variable has"):
        PrivateModel(m)
    with pm.Model(coords={"g": range(3)}) as m:  # the length of g is the shape of z: public
        z = pm.ZeroSumNormal("z", dims="g")
        pm.Normal("y", z[0], 1.0, observed=y)
    PrivateModel(m)


def test_a_deterministic_holding_any_array_constant_is_left_out():
    # (a review: exempting index arrays and shapes (so that an LKJ's _corr and _stds, which
    # scatter a triangle's indices, were released) released 5 ages read back as indices,
    # written as positions, or read back as a shape; and, split over three Deterministics
    # of 10, all 30)
    import pytensor.tensor as pt

    ages = np.array([34, 71, 19, 52, 46])
    with pm.Model() as m:
        b = pm.Normal("b")
        pm.Deterministic("read_back", b + pt.arange(100)[ages])
        pm.Deterministic("positions", b + pt.zeros(100)[ages].set(1.0))
        pm.Deterministic("a_shape", b + pt.reshape(pt.zeros(int(np.prod(ages[:3]))),
                                                   ages[:3]).shape)
        pm.Deterministic("kept", 2 * b)
        pm.Normal("obs", b, 1, observed=np.random.default_rng(0).normal(size=30))
    assert sorted(data_dependent_deterministics(m)) == ["a_shape", "positions", "read_back"]
