"""Exceptions of pymc_dp."""

__all__ = ["PrivacyBudgetExceeded", "UnsupportedModelError"]


class PrivacyBudgetExceeded(RuntimeError):
    """A run would spend more privacy than the step's budget allows.

    Raised before any data is read for the releases that would exceed the budget.
    """


class UnsupportedModelError(ValueError):
    """The model cannot be sampled privately by the requested step.

    Raised at construction, before any observed data is read into a release.
    """
