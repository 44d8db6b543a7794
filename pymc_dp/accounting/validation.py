"""Validation of privacy parameters, shared by every accountant and sampler.

Each checker returns the value as a plain ``float`` (or ``int``) so callers can write
``eps = check_epsilon(eps)`` and never carry a NumPy scalar, a string or a bool further.
They raise :class:`ValueError` with a message naming the offending value.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["check_delta", "check_epsilon", "check_releases"]


def _as_real(name: str, value) -> float:
    # bool is an Integral: refuse it explicitly, True is never a meant privacy parameter.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    return float(value)


def check_epsilon(eps, name: str = "epsilon") -> float:
    """Check that ``eps`` is a finite number > 0 and return it as a float.

    Parameters
    ----------
    eps : float
        The privacy parameter ε.
    name : str, optional
        How to call the value in the error message.

    Returns
    -------
    float
        ``eps`` as a Python float.

    Raises
    ------
    ValueError
        If ``eps`` is not a real number, is NaN, infinite, or ≤ 0.

    Examples
    --------
    >>> check_epsilon(1)
    1.0
    >>> check_epsilon(0.0)
    Traceback (most recent call last):
        ...
    ValueError: epsilon must be a finite number > 0, got 0.0
    """
    value = _as_real(name, eps)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {eps!r}")
    return value


def check_delta(delta, name: str = "delta") -> float:
    """Check that ``delta`` lies in the open interval (0, 1) and return it as a float.

    Parameters
    ----------
    delta : float
        The privacy parameter δ.
    name : str, optional
        How to call the value in the error message.

    Returns
    -------
    float
        ``delta`` as a Python float.

    Raises
    ------
    ValueError
        If ``delta`` is not a real number, is NaN, or is outside (0, 1).

    Examples
    --------
    >>> check_delta(1e-6)
    1e-06
    >>> check_delta(1.0)
    Traceback (most recent call last):
        ...
    ValueError: delta must be in the open interval (0, 1), got 1.0
    """
    value = _as_real(name, delta)
    if not 0.0 < value < 1.0:  # also False for NaN
        raise ValueError(f"{name} must be in the open interval (0, 1), got {delta!r}")
    return value


def check_releases(releases, name: str = "releases") -> int:
    """Check that ``releases`` is an integer ≥ 1 and return it as an int.

    Parameters
    ----------
    releases : int
        A number of noisy releases.
    name : str, optional
        How to call the value in the error message.

    Returns
    -------
    int
        ``releases`` as a Python int.

    Raises
    ------
    ValueError
        If ``releases`` is not an integer (bools included) or is < 1.

    Examples
    --------
    >>> check_releases(10)
    10
    >>> check_releases(0)
    Traceback (most recent call last):
        ...
    ValueError: releases must be an integer >= 1, got 0
    """
    if isinstance(releases, bool) or not isinstance(releases, numbers.Integral) or releases < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {releases!r}")
    return int(releases)
