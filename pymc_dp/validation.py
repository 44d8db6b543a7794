"""Validation of public parameters, shared by every accountant, step and release.

Two rules cover almost every parameter: "a positive finite number" (:func:`check_positive`)
and "a positive int, not a bool" (:func:`check_int`); the privacy parameters add their own
range (:func:`check_epsilon`, :func:`check_delta`, :func:`check_releases`,
:func:`check_fraction`). Each checker returns the value as a plain ``float`` (or ``int``) so
callers can write ``eps = check_epsilon(eps)`` and never carry a NumPy scalar, a string or a
bool further. They raise :class:`ValueError` with a message naming the parameter; a number
is echoed (parameters are public), anything else only by its type.

Range checks that need more than the value alone (a budget too small for any noise to be
represented, a noise scale lost to rounding) live where that is computed:
:func:`pymc_dp.accounting.gaussian.max_gaussian_mu`,
:func:`pymc_dp.accounting.gaussian.noise_multiplier_for_mu` and the release functions of
:mod:`pymc_dp.mechanisms.release`.
"""

from __future__ import annotations

import math
import numbers

__all__ = [
    "EPSILON_MIN",
    "check_delta",
    "check_epsilon",
    "check_fraction",
    "check_int",
    "check_positive",
    "check_releases",
]


#: The smallest ε accepted: the spacing of doubles at 1. Below it ``1 + ε == 1`` in floating
#: point, so ``e^ε`` — through which every accountant and every pure-DP mechanism reads ε —
#: cannot be told from that of ε = 0, and no computation here could check the guarantee.
EPSILON_MIN = 2.0**-52


def _shown(value) -> str:
    """How a bad value appears in a message: numbers by repr, anything else by type only."""
    if value is None or isinstance(value, bool | numbers.Number):
        return repr(value)
    return f"a {type(value).__name__}"


def _as_real(name: str, value, what: str) -> float:
    # bool is an Integral: refuse it explicitly, True is never a meant number.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {what}, got {_shown(value)}")
    return float(value)


def check_positive(value, name: str = "value") -> float:
    """Check that ``value`` is a finite real number > 0 (not a bool) and return it as a float.

    Parameters
    ----------
    value : float
        The value to check.
    name : str, optional
        How to call the value in the error message.

    Returns
    -------
    float
        ``value`` as a Python float.

    Raises
    ------
    ValueError
        If ``value`` is not a real number (a bool, a string, None, an array), is NaN,
        infinite, or ≤ 0.

    Examples
    --------
    >>> check_positive(2, "clip_bound")
    2.0
    >>> check_positive(True, "clip_bound")
    Traceback (most recent call last):
        ...
    ValueError: clip_bound must be a finite number > 0, got True
    """
    what = "a finite number > 0"
    number = _as_real(name, value, what)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be {what}, got {_shown(value)}")
    return number


def check_int(value, name: str = "value", *, minimum: int = 1) -> int:
    """Check that ``value`` is an integer ≥ ``minimum`` (not a bool) and return it as an int.

    Parameters
    ----------
    value : int
        The value to check (a Python or NumPy integer).
    name : str, optional
        How to call the value in the error message.
    minimum : int, optional
        The smallest value allowed (default 1).

    Raises
    ------
    ValueError
        If ``value`` is not an integer (bools and floats included) or is below ``minimum``.

    Examples
    --------
    >>> check_int(4, "chains")
    4
    >>> check_int(True, "chains")
    Traceback (most recent call last):
        ...
    ValueError: chains must be an integer >= 1 (not a bool), got True
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum} (not a bool), got {_shown(value)}")
    return int(value)


def check_fraction(value, name: str = "value", *, include_one: bool = False) -> float:
    """Check that ``value`` lies in (0, 1) (or (0, 1] with ``include_one``) and return it.

    Examples
    --------
    >>> check_fraction(0.4, "budget_split")
    0.4
    >>> check_fraction(1, "tempering", include_one=True)
    1.0
    """
    interval = "(0, 1]" if include_one else "(0, 1)"
    what = f"a number in {interval}"
    number = _as_real(name, value, what)
    if not (0.0 < number < 1.0 or (include_one and number == 1.0)):  # False for NaN
        raise ValueError(f"{name} must be {what}, got {_shown(value)}")
    return number


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
        If ``eps`` is not a real number, is NaN, infinite, ≤ 0, or below
        :data:`EPSILON_MIN` (≈ 2.2e-16: too small for double precision to hold).

    Examples
    --------
    >>> check_epsilon(1)
    1.0
    >>> check_epsilon(0.0)
    Traceback (most recent call last):
        ...
    ValueError: epsilon must be a finite number > 0, got 0.0
    """
    value = check_positive(eps, name)
    if value < EPSILON_MIN:
        raise ValueError(
            f"{name} = {value:.3g} is below {EPSILON_MIN:.3g}, the spacing of doubles at 1: "
            f"1 + {name} == 1 in floating point, so no accountant can tell this budget from 0 "
            f"and the guarantee cannot be checked. Use {name} >= {EPSILON_MIN:.3g}."
        )
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
    what = "in the open interval (0, 1)"
    value = _as_real(name, delta, what)
    if not 0.0 < value < 1.0:  # also False for NaN
        raise ValueError(f"{name} must be {what}, got {_shown(delta)}")
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
    ValueError: releases must be an integer >= 1 (not a bool), got 0
    """
    return check_int(releases, name)
