"""Exceptions of pymc_dp, and how its warnings are given."""

import os
import warnings

__all__ = ["PrivacyBudgetExceeded", "UnsupportedModelError", "warn"]


class PrivacyBudgetExceeded(RuntimeError):
    """A run would spend more privacy than the step's budget allows.

    Raised before any data is read for the releases that would exceed the budget.
    """


class UnsupportedModelError(ValueError):
    """The model cannot be sampled privately by the requested step.

    Raised at construction, before any observed data is read into a release.
    """


def _library_dirs() -> tuple[str, ...]:
    import pymc
    import pytensor

    return tuple(os.path.dirname(m.__file__) + os.sep for m in (pymc, pytensor)) + (
        os.path.dirname(__file__) + os.sep,
    )


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the user's line: the first frame outside pymc_dp,
    PyMC and PyTensor (a step warns from deep inside ``pm.sample``; pointing at a line of
    the library told users nothing)."""
    warnings.warn(message, category, skip_file_prefixes=_library_dirs())
