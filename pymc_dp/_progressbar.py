"""PyMC's terminal progress bar on an install without matplotlib.

PyMC 6.4 draws the bar of ``pm.sample`` with ``pymc.progress_bar.rich_progress.CustomBarColumn``,
whose constructor imports ``matplotlib.colors.to_rgb`` only to turn the name of the colour
it shows on divergences ("tab:red") into RGB. matplotlib is a dependency of neither PyMC nor
pymc_dp, so on a fresh install every ``pm.sample`` with the default ``progressbar=True``
raises ``ImportError`` before the first draw.

When matplotlib cannot be found, :func:`install` replaces that class, in that module only, by
a subclass that takes the RGB of the colour from :data:`COLOURS` (or from rich) instead of
matplotlib; the bar looks and behaves as PyMC's. With matplotlib installed it does nothing.
"""

from __future__ import annotations

import importlib.util

__all__ = ["COLOURS", "install"]

#: RGB of the colours PyMC's bar uses, as matplotlib defines them.
COLOURS = {"tab:red": (214, 39, 40), "red": (255, 0, 0)}


def _rgb(name: str) -> list[int]:
    if name in COLOURS:
        return list(COLOURS[name])
    from rich.color import Color, ColorParseError

    try:
        triplet = Color.parse(name).get_truecolor()
    except ColorParseError:
        triplet = COLOURS["red"]
    return list(triplet)


def _matplotlib_missing() -> bool:
    try:
        return importlib.util.find_spec("matplotlib") is None
    except (ImportError, ValueError):
        return True


def install() -> bool:
    """Let PyMC's progress bar run without matplotlib; True if the fallback is in place.

    Does nothing when matplotlib is importable or when PyMC's bar no longer has the class
    (another PyMC version); idempotent.
    """
    try:
        from pymc.progress_bar import rich_progress
    except ImportError:  # a PyMC without this module: nothing to do
        return False
    original = getattr(rich_progress, "CustomBarColumn", None)
    if original is None:
        return False
    if getattr(original, "_pymc_dp_fallback", False):
        return True
    if not _matplotlib_missing():
        return False
    from rich.progress import BarColumn

    class CustomBarColumn(original):
        """PyMC's bar column; the failure colour's RGB without matplotlib."""

        _pymc_dp_fallback = True

        def __init__(self, *args, failing_color: str = "red", **kwargs):
            try:
                super().__init__(*args, failing_color=failing_color, **kwargs)
            except ImportError:  # matplotlib, for the colour name only
                BarColumn.__init__(self, *args, **kwargs)
                self.failing_color = failing_color
                self.failing_rgb = _rgb(failing_color)
                self.default_complete_style = self.complete_style
                self.default_finished_style = self.finished_style

    rich_progress.CustomBarColumn = CustomBarColumn
    return True
