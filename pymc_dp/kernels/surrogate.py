"""A Gaussian likelihood in the likelihood's own parameters, from the private warm-up's
releases (post-processing only: nothing here reads data).

The private Laplace approximation ``N(θ̂, Ĥ⁻¹ + Σ̂)`` treats the whole posterior as Gaussian
on the value space θ. Where the prior is not Gaussian there, or the likelihood depends on θ
through a curved map (a hierarchical model's group intercepts ``a = μ + σ·z``), that is
poor even without noise: at n = 10⁴ the exact Laplace approximation of a six-group
hierarchical model is 1.3 posterior sds off with sds twice too wide. The likelihood alone,
written in the parameters its rows read, ``φ = φ(θ)`` (:mod:`pymc_dp.model.likelihood_parameters`),
is close to Gaussian at such n. So the warm-up's released mode and curvature are turned
into a Gaussian likelihood for φ,

    log L̃(θ) = −½ (φ(θ) − m)ᵀ Λ (φ(θ) − m),

and the posterior approximation is the exact public prior times it, ``p(θ) L̃(θ)``, which a
sampler that reads no data can explore (:mod:`pymc_dp.steps.surrogate`).

From the released mode θ̂ and negative log-likelihood Hessian ``H_θ`` on θ (the warm-up's
last release), with ``J = ∂φ/∂θ`` at θ̂ (r independent rows kept), ``J⁺ = Jᵀ(JJᵀ)⁻¹`` and
the chain rule ``H_θ = Jᵀ H_φ J − Σ_k g_k ∇²φ_k``:

* the likelihood's gradient on φ at θ̂, from the mode condition ``Jᵀ g = −∇ log p(θ̂)``:
  ``g = −J⁺ᵀ ∇ log p(θ̂)``;
* its curvature ``H_φ = J⁺ᵀ (H_θ + Σ_k g_k ∇²φ_k) J⁺`` (made positive definite);
* its centre ``m = φ(θ̂) + H_φ⁻¹ g`` (the Newton step of the likelihood alone);
* the noise in θ̂ (covariance Σ̂ over the releases' noise) moves m by about ``J Σ̂ Jᵀ``,
  which widens the likelihood: ``Λ = (H_φ⁻¹ + J Σ̂ Jᵀ)⁻¹``, as the Gaussian approximation's
  ``Ĥ⁻¹ + Σ̂`` does.

With φ = θ and a Gaussian prior this is the Gaussian approximation again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from pymc_dp.kernels.curvature import hessian_curvature

__all__ = [
    "GaussianLikelihood", "gaussian_likelihood", "in_parameters", "independent_rows",
    "surrogate_mode",
]

#: Singular values of J below this fraction of the largest count as zero.
RANK_TOLERANCE = 1e-8


@dataclass(frozen=True)
class GaussianLikelihood:
    """``−½ (φ_S(θ) − center)ᵀ precision (φ_S(θ) − center)``, S = ``rows`` of φ."""

    rows: np.ndarray
    center: np.ndarray
    precision: np.ndarray

    def logdensity(self, phi: np.ndarray) -> float:
        diff = np.asarray(phi, dtype=float)[self.rows] - self.center
        return float(-0.5 * diff @ self.precision @ diff)


def independent_rows(jacobian: np.ndarray) -> np.ndarray:
    """Indices of a largest set of linearly independent rows of ``jacobian``, in order.

    Components of φ that are (locally) functions of the others add nothing to a quadratic
    approximation and would make it singular: a parameter read twice, a zero above the
    diagonal of a Cholesky factor. Pivoted QR of Jᵀ picks them.
    """
    jac = np.asarray(jacobian, dtype=float)
    if jac.size == 0:
        return np.zeros(0, dtype=int)
    _, r, pivots = scipy.linalg.qr(jac.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    if diag.size == 0 or diag[0] == 0.0:
        return np.zeros(0, dtype=int)
    rank = int(np.sum(diag > RANK_TOLERANCE * diag[0]))
    return np.sort(pivots[:rank])


def in_parameters(jacobian, loglik_grad, loglik_hessian, curvature):
    """The likelihood's gradient and curvature on φ from those on θ (chain rule).

    Returns ``(rows, g, H_φ)``: the independent components of φ kept
    (:func:`independent_rows`), ``g = J⁺ᵀ ∇_θ ℓ`` and
    ``H_φ = J⁺ᵀ (H_θ + Σ_k g_k ∇²φ_k) J⁺`` made positive definite, with
    ``curvature(w) = ∇²_θ (w · φ)``.

    Raises
    ------
    ValueError
        If J has rank 0 (the likelihood reads nothing of θ).
    """
    jac = np.asarray(jacobian, dtype=float)
    rows = independent_rows(jac)
    if rows.size == 0:
        raise ValueError("the likelihood's parameters do not move with θ")
    js = jac[rows]
    lift = np.linalg.solve(js @ js.T, js).T  # J⁺ = Jᵀ(JJᵀ)⁻¹, shape (dim θ, r)
    g = lift.T @ np.asarray(loglik_grad, dtype=float)
    weights = np.zeros(jac.shape[0])
    weights[rows] = g
    h_theta = np.asarray(loglik_hessian, dtype=float) + np.asarray(curvature(weights), dtype=float)
    return rows, g, hessian_curvature(lift.T @ h_theta @ lift, 0.0, 0.0, floor=1e-10)


def gaussian_likelihood(
    phi: np.ndarray,
    jacobian: np.ndarray,
    loglik_hessian: np.ndarray,
    prior_grad: np.ndarray,
    curvature,
    noise_cov: np.ndarray | None = None,
    tempering: float = 1.0,
) -> GaussianLikelihood:
    """The Gaussian likelihood on φ (see the module docstring) at the released mode θ̂.

    Parameters
    ----------
    phi, jacobian : ndarray
        ``φ(θ̂)`` and ``J = ∂φ/∂θ`` at θ̂ (public functions of a released point).
    loglik_hessian : ndarray
        The released negative Hessian of the log-likelihood on θ (positive semi-definite).
    prior_grad : ndarray
        ``∇ log p(θ̂)``, the public prior's gradient (zeros: the likelihood is centred at
        ``φ(θ̂)``, for a θ̂ that is not a mode).
    curvature : callable
        ``w ↦ ∇²_θ (w · φ)(θ̂)`` (public).
    noise_cov : ndarray, optional
        Covariance of θ̂ over the releases' noise.
    tempering : float
        T ≤ 1: the likelihood raised to T, whose own covariance is 1/T times larger; the
        uncertainty of its centre (the noise in θ̂) is not tempered.

    Raises
    ------
    ValueError
        If J has rank 0 (the likelihood reads nothing of θ) or the result is not finite.
    """
    # At the mode the likelihood's gradient balances the prior's: Jᵀ g = −∇ log p(θ̂).
    rows, g, h_phi = in_parameters(
        jacobian, -np.asarray(prior_grad, dtype=float), loglik_hessian, curvature
    )
    js = np.asarray(jacobian, dtype=float)[rows]
    center = np.asarray(phi, dtype=float)[rows] + np.linalg.solve(h_phi, g)
    cov = np.linalg.inv(h_phi) / tempering
    if noise_cov is not None and np.all(np.isfinite(noise_cov)):
        cov = cov + js @ np.asarray(noise_cov, dtype=float) @ js.T
    precision = np.linalg.inv(0.5 * (cov + cov.T))
    precision = 0.5 * (precision + precision.T)
    if not (np.all(np.isfinite(center)) and np.all(np.isfinite(precision))):
        raise ValueError("the Gaussian likelihood is not finite")
    return GaussianLikelihood(rows=rows, center=center, precision=precision)


def surrogate_mode(
    q: np.ndarray, params, rows: np.ndarray, g: np.ndarray, h: np.ndarray, prior_logp_fn,
    prior_grad_fn,
) -> np.ndarray:
    """The mode of ``p(θ) · exp(Q(φ_S(θ)))``, Q the likelihood's quadratic expansion on the
    components S = ``rows`` of φ at ``q``, with gradient ``g`` and negative Hessian ``h``
    there: a Newton step that keeps the prior exact and follows the curved map θ ↦ φ
    (post-processing: released values, the public prior and the public map φ).

    Along a direction the likelihood does not inform (a hierarchical model's
    ``μ + σ·z = a`` ridge) a Newton step on θ follows the ridge's tangent and leaves the
    ridge; this step stays on it and lands where the prior puts the mode.

    ``params(θ) = φ(θ)`` and ``params.vjp(θ, w) = J(θ)ᵀw``. Returns ``q`` itself if the
    optimisation finds no better point.
    """
    from scipy.optimize import minimize

    q = np.asarray(q, dtype=float)
    phi0 = params(q)
    size, phi0 = phi0.size, phi0[rows]

    def objective(theta):
        with np.errstate(all="ignore"):
            lp = prior_logp_fn(theta)
            if not np.isfinite(lp):
                return np.inf, np.zeros_like(theta)
            delta = params(theta)[rows] - phi0
            value = lp + g @ delta - 0.5 * delta @ h @ delta
            w = np.zeros(size)
            w[rows] = g - h @ delta
            gradient = np.asarray(prior_grad_fn(theta), dtype=float) + params.vjp(theta, w)
        if not (np.isfinite(value) and np.all(np.isfinite(gradient))):
            return np.inf, np.zeros_like(theta)
        return -value, -gradient

    start_value, _ = objective(q)
    found = minimize(objective, q, jac=True, method="L-BFGS-B", options={"maxiter": 500})
    if not (np.isfinite(found.fun) and found.fun <= start_value and np.all(np.isfinite(found.x))):
        return q
    return np.asarray(found.x, dtype=float)
