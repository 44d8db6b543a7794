"""The Gaussian likelihood on the likelihood's own parameters (pymc_dp.kernels.surrogate):
post-processing of the warm-up's releases; exact when the likelihood is quadratic in φ."""

import numpy as np
import pytest

from scipy.optimize import minimize

from pymc_dp.kernels.surrogate import (
    gaussian_likelihood,
    in_parameters,
    independent_rows,
    surrogate_mode,
)


class Intercepts:
    """φ(θ) = μ + exp(s)·z for θ = (μ, s, z₁, z₂, z₃): three group intercepts from five
    numbers (the non-centred hierarchical model's map)."""

    def __call__(self, q):
        return q[0] + np.exp(q[1]) * q[2:]

    def jacobian(self, q):
        k = len(q) - 2
        jac = np.zeros((k, len(q)))
        jac[:, 0] = 1.0
        jac[:, 1] = np.exp(q[1]) * q[2:]
        jac[np.arange(k), 2 + np.arange(k)] = np.exp(q[1])
        return jac

    def vjp(self, q, w):
        return self.jacobian(q).T @ w

    def curvature(self, q, w):
        h = np.zeros((len(q), len(q)))
        h[1, 1] = np.exp(q[1]) * (w @ q[2:])
        h[1, 2:] = h[2:, 1] = np.exp(q[1]) * w
        return h


A = np.array([[40.0, 5.0, 0.0], [5.0, 30.0, 2.0], [0.0, 2.0, 50.0]])
M = np.array([1.5, 0.7, 2.2])


def loglik(params, q):
    d = params(q) - M
    return -0.5 * d @ A @ d


def prior(q):  # N(0, 1) on μ, s and z: the public prior
    return -0.5 * q @ q, -q


def exact_derivatives(params, q):
    """The log-likelihood's gradient and negative Hessian on θ, by the chain rule."""
    jac = params.jacobian(q)
    g_phi = -A @ (params(q) - M)
    return jac.T @ g_phi, jac.T @ A @ jac - params.curvature(q, g_phi)


def test_independent_rows_drop_repeats_and_zeros():
    jac = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    rows = independent_rows(jac)
    assert len(rows) == 2 and 3 in rows and 1 not in rows
    assert independent_rows(np.zeros((2, 3))).size == 0


def test_the_chain_rule_recovers_the_curvature_on_phi():
    params = Intercepts()
    q = np.array([0.3, -0.2, 0.5, -1.0, 0.8])
    grad, neg_hess = exact_derivatives(params, q)
    rows, g, h = in_parameters(params.jacobian(q), grad, neg_hess, lambda w: params.curvature(q, w))
    np.testing.assert_array_equal(rows, [0, 1, 2])
    np.testing.assert_allclose(h, A, atol=1e-6)
    np.testing.assert_allclose(g, -A @ (params(q) - M), rtol=1e-10)


def test_the_surrogate_mode_is_the_posterior_mode_when_the_likelihood_is_quadratic_in_phi():
    params = Intercepts()
    q = np.array([0.0, 0.0, 0.0, 0.0, 0.0])  # far from the mode: a Newton step on θ misses
    grad, neg_hess = exact_derivatives(params, q)
    rows, g, h = in_parameters(params.jacobian(q), grad, neg_hess, lambda w: params.curvature(q, w))
    found = surrogate_mode(q, params, rows, g, h, lambda t: prior(t)[0], lambda t: prior(t)[1])

    def negative(t):
        return -(loglik(params, t) + prior(t)[0])

    best = minimize(negative, np.array([1.0, 0.0, 0.5, -0.3, 1.2]), method="BFGS", tol=1e-12).x
    np.testing.assert_allclose(found, best, atol=1e-4)
    # (a Newton step on θ from the same point lands elsewhere)
    newton = q + np.linalg.solve(neg_hess + np.eye(5), grad + prior(q)[1])
    assert np.max(np.abs(newton - best)) > 0.1


def test_the_gaussian_likelihood_at_the_mode_is_the_likelihood():
    params = Intercepts()
    mode = minimize(lambda t: -(loglik(params, t) + prior(t)[0]), np.ones(5), method="BFGS",
                    tol=1e-12).x
    _, neg_hess = exact_derivatives(params, mode)
    found = gaussian_likelihood(
        params(mode), params.jacobian(mode), neg_hess, prior(mode)[1],
        lambda w: params.curvature(mode, w),
    )
    np.testing.assert_allclose(found.center, M, atol=1e-5)
    np.testing.assert_allclose(found.precision, A, atol=1e-4)
    # The noise of the mode widens it: precision (A⁻¹ + J Σ Jᵀ)⁻¹.
    cov = 0.01 * np.eye(5)
    widened = gaussian_likelihood(
        params(mode), params.jacobian(mode), neg_hess, prior(mode)[1],
        lambda w: params.curvature(mode, w), cov,
    )
    jac = params.jacobian(mode)
    np.testing.assert_allclose(
        widened.precision, np.linalg.inv(np.linalg.inv(A) + jac @ cov @ jac.T), rtol=1e-6
    )
    # Raised to T, the likelihood's own covariance is 1/T times larger; its centre's
    # uncertainty (the noise of the mode) is not tempered: (A⁻¹/T + J Σ Jᵀ)⁻¹.
    tempered = gaussian_likelihood(
        params(mode), params.jacobian(mode), neg_hess, prior(mode)[1],
        lambda w: params.curvature(mode, w), cov, 0.1,
    )
    np.testing.assert_allclose(tempered.center, widened.center)
    np.testing.assert_allclose(
        tempered.precision, np.linalg.inv(np.linalg.inv(A) / 0.1 + jac @ cov @ jac.T), rtol=1e-6
    )


def test_a_likelihood_that_reads_nothing_of_theta_is_refused():
    with pytest.raises(ValueError):
        in_parameters(np.zeros((2, 3)), np.zeros(3), np.eye(3), lambda w: np.zeros((3, 3)))
