import numpy as np
import pytest

from pymc_dp.accounting import gaussian_epsilon
from pymc_dp.testing.auditing import epsilon_lower_bound
from pymc_dp.kernels.clipping import clipped_sum
from pymc_dp.kernels.penalty import (
    PenaltyState,
    clipped_ratio_from,
    guided_directions_after,
    penalty_transition,
    propose,
)


def test_clipped_sum_has_sensitivity_two_bound():
    rng = np.random.default_rng(0)
    bound = 0.7
    worst = 0.0
    for _ in range(200):
        v = rng.normal(scale=3, size=20)
        w = v.copy()
        w[rng.integers(20)] = rng.normal(scale=100)
        worst = max(worst, abs(clipped_sum(v, bound) - clipped_sum(w, bound)))
    assert worst <= 2 * bound + 1e-12
    assert worst > 1.5 * bound  # the bound is reached, not just respected
    assert clipped_sum(np.array([np.inf, -np.inf, np.nan]), 1.0) == 0.0


def test_proposals():
    rng = np.random.default_rng(1)
    q = np.zeros(4)
    scale = np.array([1.0, 2.0, 3.0, 4.0])
    rw = propose(rng, q, scale, "random_walk")
    assert rw.coordinate is None and np.all(rw.q != 0)
    ocu = propose(rng, q, scale, "one_component")
    assert np.count_nonzero(ocu.q) == 1 and ocu.q[ocu.coordinate] != 0
    directions = np.array([1.0, -1.0, 1.0, -1.0])
    for _ in range(50):
        g = propose(rng, q, scale, "guided", directions)
        assert np.sign(g.q[g.coordinate]) == directions[g.coordinate]
    assert np.array_equal(guided_directions_after(directions, 2, True), directions)
    assert guided_directions_after(directions, 2, False)[2] == -1.0
    with pytest.raises(ValueError, match="proposal"):
        propose(rng, q, scale, "hmc")


def _normal_loglik(x):
    return lambda q: -0.5 * (x - q[0]) ** 2


def _compiled_loglik_and_ratio(x):
    """The per-datum log-likelihood and clipped ratio PyMC-compiled for N(θ, 1) rows ``x``
    (the path the steps use: :meth:`pymc_dp.model.PrivateModel.clipped_ratio`)."""
    import pymc as pm

    from pymc_dp.model import PrivateModel

    with pm.Model() as model:
        pm.Normal("y", pm.Flat("theta"), 1.0, observed=x)
    pmodel = PrivateModel(model)
    return pmodel.loglik, pmodel.clipped_ratio


def _released_log_accepts(x, noise_multiplier, clip_bound, runs, seed, path="numpy"):
    """log α of one iteration from θ = 0 to θ' = 0.1, many times (an affine map of R̂).

    ``path``: the clipped ratio from the NumPy reference rule, or compiled by PyMC and
    PyTensor in one fused pass."""
    rng = np.random.default_rng(seed)
    if path == "numpy":
        loglik = _normal_loglik(x)
        ratio_fn = clipped_ratio_from(loglik)
    else:
        loglik, ratio_fn = _compiled_loglik_and_ratio(x)
    state = PenaltyState(q=np.zeros(1), loglik=loglik(np.zeros(1)), logprior=0.0)
    out = np.empty(runs)
    for i in range(runs):
        _, info = penalty_transition(
            rng,
            state,
            np.array([0.1]),
            ratio_fn,
            lambda q: 0.0,
            clip_bound=clip_bound,
            noise_multiplier=noise_multiplier,
        )
        out[i] = info.log_accept
    return out


def test_noise_sd_is_noise_multiplier_times_sensitivity():
    z, b = 1.3, 2.0
    x = np.zeros(10)
    log_accepts = _released_log_accepts(x, z, b, 4000, seed=2)
    expected_sd = z * 2 * b * 0.1
    assert np.std(log_accepts) == pytest.approx(expected_sd, rel=0.05)
    # mean: R + prior ratio − σ²/2, R = Σ −(0.1²)/2 (no clipping at this bound)
    expected_mean = 10 * (-0.005) - 0.5 * expected_sd**2
    assert np.mean(log_accepts) == pytest.approx(expected_mean, abs=4 * expected_sd / np.sqrt(4000))


# Neighbours: one row at +100 or at −100, so its clipped ratio sits at +b‖Δθ‖ or −b‖Δθ‖:
# the released ratios differ by exactly the sensitivity 2b‖Δθ‖.
D = np.array([0.0, 0.0, 0.0, 100.0])
D_PRIME = np.array([0.0, 0.0, 0.0, -100.0])


def _audit(noise_used, runs=20_000, delta=1e-3, path="numpy"):
    a = _released_log_accepts(D, noise_used, 1.0, runs, seed=3, path=path)
    b = _released_log_accepts(D_PRIME, noise_used, 1.0, runs, seed=4, path=path)
    return epsilon_lower_bound(a, b, delta=delta)


# The compiled path end to end (issue 14: the clamp and sum fused into the log-likelihood's
# own compiled loop), on the same neighbouring data sets as the reference rule.
PATHS = ["numpy", "compiled"]


@pytest.mark.parametrize("path", PATHS)
def test_empirical_audit_of_one_iteration_stays_below_the_claim(path):
    z, delta = 1.0, 1e-3
    claimed = gaussian_epsilon(1 / (2 * z**2), delta)
    assert _audit(z, delta=delta, path=path) <= claimed


@pytest.mark.parametrize("path", PATHS)
def test_the_audit_catches_noise_half_as_large_as_claimed(path):
    z, delta = 1.0, 1e-3
    claimed = gaussian_epsilon(1 / (2 * z**2), delta)
    assert _audit(z / 2, delta=delta, path=path) > claimed


def test_the_audit_catches_a_compiled_clamp_twice_as_wide(monkeypatch):
    # A compiled clamp at 2b (the bound the noise was not scaled for) is caught end to end.
    import pymc_dp.model.adapter as model_module

    clipped_scalar_sum = model_module.clipped_scalar_sum
    monkeypatch.setattr(
        model_module, "clipped_scalar_sum", lambda terms, bound: clipped_scalar_sum(terms, 2 * bound)
    )
    z, delta = 1.0, 1e-3
    claimed = gaussian_epsilon(1 / (2 * z**2), delta)
    assert _audit(z, delta=delta, path="compiled") > claimed


def test_a_ratio_function_that_does_not_clip_is_refused_before_any_release():
    # The kernels trust ratio_fn to clip; a sum no clipped terms could give is refused.
    from pymc_dp.kernels.penalty import noisy_clipped_ratio

    unclipped = lambda q, current, bound: (current + 100.0, float(np.sum(current + 100.0)))  # noqa: E731
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(RuntimeError, match="does not clip"):
        noisy_clipped_ratio(rng, unclipped, np.zeros(1), np.zeros(3), 0.5,
                            clip_bound=1.0, noise_multiplier=1.0)
    assert rng.bit_generator.state == state  # no noise was drawn
