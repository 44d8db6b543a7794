"""Statistics with known sensitivity, written once for the data holder and the analyst.

Each function accepts NumPy arrays (the data holder computing the statistic to release) or
PyTensor tensors (the analyst's model of the same statistic on latent records), so the
statistic that was released and the one that is modelled are the same code.

Linear regression (Xiong, Ju & Zhang, section 4.2; Ju et al. 2022): clamp predictors and
response to public bounds, rescale them to [−1, 1], and release the sufficient statistics

    (x̃ᵀỹ, ỹᵀỹ, upper triangle of x̃ᵀx̃ without its constant (1,1) entry)

with x̃ the design matrix including the intercept column: ``(p + 1) + 1 + (p + 1)(p + 2)/2 − 1``
entries (nine for p = 2). Their ℓ1 sensitivity under replacement of one record is
``p² + 3p + 3`` on sums, ``(p² + 3p + 3)/n`` on means.
"""

from __future__ import annotations

import numbers

import numpy as np
import pytensor.tensor as pt

from pytensor.graph.basic import Variable

from pymc_dp.mechanisms.release import Release, _check_bounds, _numeric, clamp, laplace_release

__all__ = [
    "linear_regression_records",
    "linear_regression_release",
    "linear_regression_sensitivity",
    "unpack_linear_regression",
]


def _is_symbolic(*xs) -> bool:
    return any(isinstance(x, Variable) for x in xs)


def _rescale(v, bounds, *, clip: bool, what: str):
    """Clamp ``v`` to ``bounds`` and map the interval affinely onto [−1, 1]."""
    if bounds is None:
        raise ValueError(f"{what}_bounds are required, public inputs (lower, upper)")
    try:
        lower, upper = bounds
    except (TypeError, ValueError):
        raise ValueError(f"{what}_bounds must be a pair (lower, upper)") from None
    lo, hi = _check_bounds(lower, upper)
    if _is_symbolic(v):
        # The analyst's model always applies the clamp: inside the bounds it is the identity.
        v = pt.clip(v, lo, hi)
    else:
        v = clamp(v, lower=lo, upper=hi, clip=clip)
    return 2.0 * (v - lo) / (hi - lo) - 1.0


def linear_regression_records(x, y, *, x_bounds, y_bounds, clip: bool = True):
    """Per-record contributions to the regression sufficient statistics.

    Row ``i`` holds, for the clamped and rescaled record (x̃_i, ỹ_i), x̃_i = (1, x̃_i1..x̃_ip):
    ``x̃_i ỹ_i`` (p + 1 entries), ``ỹ_i²``, and the products ``x̃_ij x̃_ik`` for
    ``j ≤ k`` except the constant ``j = k = 0``. Summing the rows over records gives the
    sums; averaging gives the means of Xiong, Ju & Zhang (their s̃_vec).

    Parameters
    ----------
    x : array_like or TensorVariable, shape (n, p)
        Predictors (without the intercept column).
    y : array_like or TensorVariable, shape (n,)
        Response.
    x_bounds : pair
        Public ``(lower, upper)`` bounds of the predictors (scalars or one per column).
    y_bounds : pair
        Public ``(lower, upper)`` bounds of the response.
    clip : bool, default True
        For NumPy input: clamp (True) or insist the data already lie within the bounds
        (False; a value outside is an error). Symbolic input is always clamped.

    Returns
    -------
    numpy.ndarray or TensorVariable, shape (n, p² / 2 + 5p / 2 + 2)
        The rows (nine columns for p = 2).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[5.0, -20.0], [0.0, 2.0]])
    >>> y = np.array([10.0, -5.0])
    >>> linear_regression_records(x, y, x_bounds=(-10, 10), y_bounds=(-10, 10)).round(2)
    array([[ 1.  ,  0.5 , -1.  ,  1.  ,  0.5 , -1.  ,  0.25, -0.5 ,  1.  ],
           [-0.5 , -0.  , -0.1 ,  0.25,  0.  ,  0.2 ,  0.  ,  0.  ,  0.04]])
    """
    symbolic = _is_symbolic(x, y)
    xp = pt if symbolic else np
    if not symbolic:
        x, y = _numeric(x, "x"), _numeric(y, "y")
        if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise ValueError("x must have shape (n, p) and y shape (n,)")
    else:
        x, y = pt.as_tensor_variable(x), pt.as_tensor_variable(y)
    xt = _rescale(x, x_bounds, clip=clip, what="x")
    yt = _rescale(y, y_bounds, clip=clip, what="y")
    p = x.shape[1] if not symbolic else x.type.shape[1]
    if p is None:
        raise ValueError("the number of predictors (x.shape[1]) must be known statically")
    ones = xp.ones_like(yt)
    design = xp.stack([ones] + [xt[:, j] for j in range(p)], axis=1)  # (n, p + 1)
    cols = [design[:, j] * yt for j in range(p + 1)]
    cols.append(yt * yt)
    for j in range(p + 1):
        for k in range(j, p + 1):
            if j == k == 0:
                continue
            cols.append(design[:, j] * design[:, k])
    return xp.stack(cols, axis=1)


def linear_regression_sensitivity(p: int) -> int:
    """ℓ1 sensitivity ``p² + 3p + 3`` of the summed regression statistics.

    Under replacement of one record with all values in [−1, 1] (Xiong, Ju & Zhang, section
    4.2, refining Ju et al. 2022). Divide by ``n`` for the means.

    Examples
    --------
    >>> linear_regression_sensitivity(2)
    13
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Integral) or p < 1:
        raise ValueError(f"p must be an integer >= 1, got {p!r}")
    return int(p * p + 3 * p + 3)


def linear_regression_release(x, y, *, x_bounds, y_bounds, epsilon, rng, clip: bool = True,
                              name: str = "regression_statistics") -> Release:
    """Release the regression sufficient statistics (means) with Laplace noise.

    ``mean of linear_regression_records(...) + Lap(Δ/ε)`` per entry with
    ``Δ = (p² + 3p + 3)/n``; ε-DP under replacement of one record (n public).

    Parameters
    ----------
    x, y : array_like
        Confidential predictors ``(n, p)`` and response ``(n,)``.
    x_bounds, y_bounds : pair
        Public clamping bounds.
    epsilon : float
        ε > 0.
    rng : numpy.random.Generator or int
        Source of the noise.
    clip : bool, default True
        Clamp, or require the data to lie within the bounds.
    name : str, optional
        Name of the ledger entry.

    Returns
    -------
    Release

    Examples
    --------
    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> x, y = g.normal(size=(100, 2)), g.normal(size=100)
    >>> rel = linear_regression_release(x, y, x_bounds=(-10, 10), y_bounds=(-10, 10),
    ...                                 epsilon=1.0, rng=g)
    >>> rel.value.shape, rel.sensitivity, rel.noise_scale
    ((9,), 0.13, 0.13)
    """
    rows = linear_regression_records(x, y, x_bounds=x_bounds, y_bounds=y_bounds, clip=clip)
    n, _ = rows.shape
    p = np.asarray(x).shape[1]
    return laplace_release(
        rows.mean(axis=0), sensitivity=linear_regression_sensitivity(p) / n, epsilon=epsilon,
        rng=rng, name=name,
    )


def unpack_linear_regression(stats, p: int):
    """Split the statistic vector into ``(x̃ᵀỹ, ỹᵀỹ, x̃ᵀx̃)``, x̃ᵀx̃ as a full matrix.

    The constant (1, 1) entry of x̃ᵀx̃ is not released; it is filled with 1, which is right
    for means (use ``n`` for sums).

    Examples
    --------
    >>> import numpy as np
    >>> xty, yty, xtx = unpack_linear_regression(np.arange(9.0), 2)
    >>> xty, yty
    (array([0., 1., 2.]), 3.0)
    >>> xtx
    array([[1., 4., 5.],
           [4., 6., 7.],
           [5., 7., 8.]])
    """
    stats = np.asarray(stats, dtype=float)
    q = p + 1
    if stats.shape[-1] != q + 1 + q * (q + 1) // 2 - 1:
        raise ValueError(f"expected {q + q * (q + 1) // 2} entries for p = {p}")
    xty = stats[..., :q]
    yty = stats[..., q]
    xtx = np.ones((*stats.shape[:-1], q, q))
    idx = q + 1
    for j in range(q):
        for k in range(j, q):
            if j == k == 0:
                continue
            xtx[..., j, k] = xtx[..., k, j] = stats[..., idx]
            idx += 1
    return xty, (float(yty) if yty.ndim == 0 else yty), xtx
