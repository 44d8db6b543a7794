"""Settings that are fixed once an object is built: the privacy mechanism and its accounting.

A private step or mechanism reserves the cost that its settings (noise, clip bounds, release
counts, temperature, the budget and its ledger) define. Changing one of them afterwards
would make the object release more than it reserved, so :class:`FixedSettings` refuses it:
each class lists its own ``privacy_settings``, and together (over the class hierarchy) they
can be set only while the outermost ``__init__`` runs, or by the object itself inside
:meth:`FixedSettings._changing_settings` (its calibration, its plan).
"""

from __future__ import annotations

import functools

from contextlib import contextmanager

__all__ = ["FixedSettings"]


class FixedSettings:
    """Mixin: the attributes named in ``privacy_settings`` are fixed once ``__init__`` returns.

    Setting or deleting one of them afterwards raises ``AttributeError`` with a message
    that says why and what to do (``_fixed_owner``, ``_fixed_reason``).

    Examples
    --------
    >>> class Mechanism(FixedSettings):
    ...     privacy_settings = ("noise",)
    ...     def __init__(self, noise):
    ...         self.noise = noise
    >>> m = Mechanism(1.0)
    >>> m.noise = 1e-9  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AttributeError: Mechanism.noise defines the privacy mechanism ... is fixed once the object is built: ...
    """

    #: Attributes that define the mechanism or its accounting. Each class lists its own.
    privacy_settings: tuple[str, ...] = ()
    #: How messages name an object of the class, and why its settings are fixed.
    _fixed_owner = "object"
    _fixed_reason = "the cost it reserves is the cost these settings define."

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_seals_settings", False):
            cls.__init__ = _sealing(init)

    def __setattr__(self, name, value):
        self._check_may_change(name)
        super().__setattr__(name, value)

    def __delattr__(self, name):
        # deleting and setting again would change the setting just the same
        self._check_may_change(name)
        super().__delattr__(name)

    def _check_may_change(self, name: str) -> None:
        if (
            self.__dict__.get("_settings_sealed", False)
            and not self.__dict__.get("_settings_open", False)
            and name in _all_privacy_settings(type(self))
        ):
            raise AttributeError(
                f"{type(self).__name__}.{name} defines the privacy mechanism or its accounting "
                f"and is fixed once the {self._fixed_owner} is built: {self._fixed_reason} "
                f"Create a new {self._fixed_owner} with the setting you want."
            )

    @contextmanager
    def _changing_settings(self):
        """Let the object's own calibration and plan set its privacy settings."""
        previous = self.__dict__.get("_settings_open", False)
        object.__setattr__(self, "_settings_open", True)
        try:
            yield
        finally:
            object.__setattr__(self, "_settings_open", previous)


def _sealing(init):
    """``init`` that fixes the privacy settings once the outermost ``__init__`` returns."""

    @functools.wraps(init)
    def sealed_init(self, *args, **kwargs):
        depth = self.__dict__.get("_init_depth", 0)
        object.__setattr__(self, "_init_depth", depth + 1)
        try:
            init(self, *args, **kwargs)
        finally:
            object.__setattr__(self, "_init_depth", depth)
        if depth == 0:
            object.__setattr__(self, "_settings_sealed", True)

    sealed_init._seals_settings = True
    return sealed_init


@functools.cache
def _all_privacy_settings(cls) -> frozenset[str]:
    """The privacy settings of ``cls`` and of every class it derives from."""
    return frozenset(
        name for klass in cls.__mro__ for name in klass.__dict__.get("privacy_settings", ())
    )
