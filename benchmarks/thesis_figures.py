"""The thesis' Fig 6.3 (MMD) and its banana acceptance rates, read from the figures' drawings.

Raisa (2021) gives its comparison of the DP MCMC samplers on the banana models (Fig 6.3)
only as a figure. The figure's source is ``Thesis/figures/banana_mmd.pdf`` in
github.com/oraisa/masters-thesis (last changed in commit e08f605, "Finalise the thesis",
2021-03-31): a vector PDF that the thesis' ``code/plot_banana.py`` drew with seaborn box
plots, one box per sampler and ε over 20 chains. Its drawing commands hold every box's
coordinates, so the medians can be read exactly rather than by eye. How this script reads
them (:func:`read_figure`):

* the page's content stream is inflated (zlib) and its path operators replayed: moves,
  lines, rectangles, fill and stroke colours, dash patterns and the clip rectangle that
  marks each panel;
* a box is a filled closed path of four corners inside a panel; its median is the stroked
  horizontal segment that spans exactly the box's width (whiskers are vertical, caps half
  as wide);
* the y axis is mapped linearly from its tick marks to their labels (checked to be evenly
  spaced); a box's ε is the label of the nearest x tick; its sampler is the legend entry
  whose swatch has the box's fill colour;
* the dashed full-width lines are the figure's black lines, the MMD of exact posterior
  samples.

The drawing's coordinates carry six decimals and one point is 0.0046 MMD units, so the
values below, rounded to three decimals, are exact to that rounding. One box is missing
from the figure itself (d = 10, flat, minibatch penalty OCU+GWMH at ε = 1: ``None``). The
acceptance rates come the same way from ``Thesis/figures/banana_acceptance.pdf`` of the same
repository (its experiment summary; the thesis prints no acceptance figure): they let a
re-run check that it ran the thesis' sampler, before comparing MMDs.

Usage::

    git clone https://github.com/oraisa/masters-thesis
    git -C masters-thesis show e08f605:Thesis/figures/banana_mmd.pdf > banana_mmd.pdf
    git -C masters-thesis show e08f605:Thesis/figures/banana_acceptance.pdf > banana_acc.pdf
    python benchmarks/thesis_figures.py banana_mmd.pdf banana_acc.pdf

reads both files again, prints their medians and exits with status 1 if any differs from
the tables below by more than their rounding.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import zlib

#: Panels of Fig 6.3 (top to bottom), samplers (legend order) and the ε of its x axis.
PANELS = ("d = 2, non-tempered", "d = 2, tempered", "d = 10, non-tempered", "d = 10, tempered")
SAMPLERS = ("DP HMC", "DP Penalty", "DP Penalty OCU+GWMH", "Minibatch DP Penalty",
            "Minibatch DP Penalty OCU+GWMH", "DP Barker")
EPSILONS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)

# Median over the 20 chains of each box, at ε = 1, ..., 6 (rows in SAMPLERS order).
_MMD = {
    "d = 2, non-tempered": (
        (0.478, 0.320, 0.299, 0.263, 0.183, 0.163),
        (0.367, 0.342, 0.250, 0.153, 0.111, 0.122),
        (0.356, 0.260, 0.244, 0.207, 0.114, 0.127),
        (0.664, 0.651, 0.562, 0.542, 0.450, 0.466),
        (0.686, 0.636, 0.591, 0.526, 0.542, 0.427),
        (0.679, 0.632, 0.591, 0.575, 0.481, 0.432),
    ),
    "d = 2, tempered": (
        (0.389, 0.278, 0.229, 0.202, 0.163, 0.138),
        (0.494, 0.405, 0.388, 0.316, 0.266, 0.271),
        (0.467, 0.418, 0.354, 0.277, 0.284, 0.226),
        (0.512, 0.459, 0.404, 0.415, 0.357, 0.320),
        (0.502, 0.477, 0.357, 0.349, 0.326, 0.296),
        (0.404, 0.287, 0.224, 0.349, 0.250, 0.217),
    ),
    "d = 10, non-tempered": (
        (0.715, 0.615, 0.543, 0.520, 0.438, 0.383),
        (0.663, 0.489, 0.361, 0.334, 0.363, 0.270),
        (0.707, 0.527, 0.443, 0.373, 0.337, 0.276),
        (0.779, 0.768, 0.759, 0.748, 0.751, 0.743),
        (None, 0.772, 0.775, 0.733, 0.703, 0.724),
        (0.790, 0.752, 0.721, 0.668, 0.609, 0.651),
    ),
    "d = 10, tempered": (
        (0.333, 0.271, 0.306, 0.270, 0.198, 0.203),
        (0.475, 0.433, 0.353, 0.326, 0.330, 0.296),
        (0.531, 0.488, 0.437, 0.412, 0.398, 0.404),
        (0.702, 0.491, 0.450, 0.427, 0.404, 0.350),
        (0.591, 0.476, 0.429, 0.407, 0.369, 0.363),
        (0.549, 0.456, 0.345, 0.278, 0.253, 0.250),
    ),
}
#: Median of the ten black lines (exact samples against the reference) per panel.
FIG_6_3_EXACT = {"d = 2, non-tempered": 0.024, "d = 2, tempered": 0.019,
                 "d = 10, non-tempered": 0.020, "d = 10, tempered": 0.019}

_ACCEPTANCE = {
    "d = 2, non-tempered": (
        (0.652, 0.664, 0.667, 0.639, 0.652, 0.636),
        (0.357, 0.368, 0.363, 0.371, 0.360, 0.367),
        (0.571, 0.562, 0.547, 0.560, 0.560, 0.558),
        (0.333, 0.438, 0.424, 0.431, 0.430, 0.431),
        (0.667, 0.608, 0.616, 0.623, 0.606, 0.613),
        (0.500, 0.505, 0.498, 0.500, 0.499, 0.502),
    ),
    "d = 2, tempered": (
        (0.755, 0.777, 0.764, 0.762, 0.769, 0.756),
        (0.487, 0.515, 0.429, 0.487, 0.467, 0.449),
        (0.641, 0.609, 0.622, 0.613, 0.599, 0.598),
        (0.535, 0.482, 0.486, 0.512, 0.480, 0.424),
        (0.509, 0.518, 0.504, 0.519, 0.501, 0.516),
        (0.217, 0.217, 0.202, 0.176, 0.197, 0.194),
    ),
    "d = 10, non-tempered": (
        (0.700, 0.634, 0.637, 0.640, 0.637, 0.645),
        (0.327, 0.319, 0.313, 0.317, 0.316, 0.319),
        (0.793, 0.788, 0.779, 0.781, 0.778, 0.776),
        (0.429, 0.369, 0.369, 0.373, 0.373, 0.374),
        (None, 0.548, 0.555, 0.550, 0.551, 0.552),
        (0.490, 0.483, 0.501, 0.490, 0.494, 0.487),
    ),
    "d = 10, tempered": (
        (0.708, 0.713, 0.678, 0.670, 0.660, 0.647),
        (0.360, 0.344, 0.325, 0.326, 0.322, 0.301),
        (0.678, 0.669, 0.661, 0.652, 0.647, 0.644),
        (0.342, 0.236, 0.228, 0.220, 0.218, 0.211),
        (0.720, 0.681, 0.668, 0.671, 0.671, 0.668),
        (0.206, 0.194, 0.195, 0.185, 0.183, 0.188),
    ),
}


def _by_key(table):
    return {(panel, sampler, eps): value
            for panel, rows in table.items()
            for sampler, row in zip(SAMPLERS, rows, strict=True)
            for eps, value in zip(EPSILONS, row, strict=True)}


#: ``(panel, sampler, ε) ↦`` median MMD of Fig 6.3 (``None``: no box in the figure).
FIG_6_3_MMD = _by_key(_MMD)
#: ``(panel, sampler, ε) ↦`` median acceptance rate (banana_acceptance.pdf).
ACCEPTANCE = _by_key(_ACCEPTANCE)


# ---------------------------------------------------------------------- reading a figure
_TOKEN = re.compile(rb"\((?:[^()\\]|\\.)*\)|\[[^\]]*\]|/[^\s/\[\]()<>]+|[^\s/\[\]()<>]+")
_PAINT = {b"S", b"B", b"f", b"b", b"B*", b"f*"}


def _page_content(pdf: bytes) -> bytes:
    """The inflated page content stream: the longest stream (the others are glyphs)."""
    streams = []
    for match in re.finditer(rb"stream\r?\n(.*?)endstream", pdf, re.S):
        try:
            streams.append(zlib.decompress(match.group(1)))
        except zlib.error:
            continue
    return max(streams, key=len)


def _replay(content: bytes):
    """Painted sub-paths (with fill, clip and dash state) and shown texts with positions."""
    operands, path, saved, paths, texts = [], [], [], [], []
    state = dict(clip=None, fill=None, dash=False)
    position = (0.0, 0.0)
    for token in _TOKEN.findall(content):
        try:
            operands.append(float(token))
            continue
        except ValueError:
            if token[:1] in b"([/":
                operands.append(token)
                continue
        op = token
        if op == b"q":
            saved.append(dict(state))
        elif op == b"Q":
            state = saved.pop()
        elif op == b"m":
            path.append([tuple(operands[-2:])])
        elif op == b"l":
            path[-1].append(tuple(operands[-2:]))
        elif op == b"re":
            x, y, w, h = operands[-4:]
            path.append([(x, y), (x + w, y), (x + w, y + h), (x, y + h)])
        elif op == b"W":
            state["clip"] = path[-1][0] + path[-1][2]  # (x0, y0, x1, y1)
        elif op == b"n":
            path = []
        elif op == b"rg":
            state["fill"] = tuple(round(c, 6) for c in operands[-3:])
        elif op == b"d":
            state["dash"] = operands[-2].strip(b"[] ") != b""
        elif op in _PAINT:
            paths += [dict(op=op, points=sub, **state) for sub in path]
            path = []
        elif op in (b"Td", b"Tm"):
            position = tuple(operands[-2:])
        elif op == b"Tj":
            texts.append((position, operands[-1][1:-1].decode("latin-1")))
        if op not in (b"m", b"l", b"re"):
            operands = []
    return paths, texts


def _close(a: float, b: float, tol: float = 1e-3) -> bool:
    return abs(a - b) < tol


def read_figure(pdf: bytes) -> dict:
    """``(panel title, sampler, ε) ↦ median`` of every box, and ``(panel, "exact")`` lines.

    Panels are told apart by their clip rectangles; everything a panel's reading needs
    (ticks, labels, legend) lies within a margin of it. Raises ``ValueError`` when the
    drawing does not have the structure described in the module docstring.
    """
    paths, texts = _replay(_page_content(pdf))
    corners = {p["clip"] for p in paths if p["clip"]}
    out = {}
    for x0, y0, x1, y1 in corners:
        inside = [p for p in paths if p["clip"] == (x0, y0, x1, y1)]
        near = [(xy, s) for xy, s in texts if x0 - 40 <= xy[0] and y0 - 40 <= xy[1] <= y1 + 20]
        unclipped = [p for p in paths if p["clip"] is None and len(p["points"]) == 2]
        x_ticks = sorted(p["points"][0][0] for p in unclipped
                         if _close(p["points"][0][1], y0) and _close(p["points"][1][1], y0 - 3.5))
        y_ticks = sorted(p["points"][0][1] for p in unclipped
                         if _close(p["points"][0][0], x0) and _close(p["points"][1][0], x0 - 3.5)
                         and y0 - 1 <= p["points"][0][1] <= y1 + 1)
        x_labels = sorted((xy[0], s) for xy, s in near if xy[1] < y0 and xy[0] > x0
                          and s[:1].isdigit())
        y_labels = [float(s) for _, s in sorted((xy[1], s) for xy, s in near if xy[0] < x0
                                                and s[:1].isdigit())]
        if len(x_ticks) != len(x_labels) or len(y_ticks) != len(y_labels) or len(y_ticks) < 2:
            raise ValueError("axis ticks and labels do not pair up")
        slope = (y_labels[-1] - y_labels[0]) / (y_ticks[-1] - y_ticks[0])
        if any(not _close(y_labels[0] + (t - y_ticks[0]) * slope, v, 1e-6)
               for t, v in zip(y_ticks, y_labels)):
            raise ValueError("the y axis is not linear")

        def value(y, y_ticks=y_ticks, y_labels=y_labels, slope=slope):
            return y_labels[0] + (y - y_ticks[0]) * slope

        titles = [s for xy, s in near if xy[1] > y1 and x0 < xy[0] < x1]
        legend = {}
        for (lx, ly), name in near:
            if lx > x1:
                swatch = [p for p in paths if p["clip"] is None and p["op"] == b"B"
                          and len(p["points"]) == 4 and _close(p["points"][0][1], ly, 1e-2)
                          and p["points"][0][0] > x1]
                if swatch:
                    legend[swatch[0]["fill"]] = name
        lines = [p for p in inside if p["op"] == b"S" and len(p["points"]) == 2
                 and _close(p["points"][0][1], p["points"][1][1])]
        panel = titles[0] if titles else f"panel at y={y0:g}"
        for box in inside:
            if box["op"] != b"B" or len(box["points"]) != 5 or box["fill"] not in legend:
                continue
            (bx0, _), (bx1, _) = box["points"][:2]
            if bx1 - bx0 < 1:
                continue  # the legend's empty placeholders
            medians = [p for p in lines if not p["dash"] and _close(p["points"][0][0], bx0)
                       and _close(p["points"][1][0], bx1)]
            if len(medians) != 1:
                raise ValueError("a box without exactly one median line")
            centre = (bx0 + bx1) / 2
            tick = min(range(len(x_ticks)), key=lambda i: abs(x_ticks[i] - centre))
            key = (panel, legend[box["fill"]], float(x_labels[tick][1]))
            out[key] = value(medians[0]["points"][0][1])
        exact = [value(p["points"][0][1]) for p in lines if p["dash"]]
        if exact:
            out[(panel, "exact")] = statistics.median(exact)
    return out


def _compare(label: str, read: dict, table: dict, exact: dict | None = None) -> int:
    wrong = 0
    for key, expected in table.items():
        got = read.get(key)
        if (got is None) != (expected is None) or (got is not None and abs(got - expected) > 6e-4):
            print(f"  {label} {key}: table {expected}, figure {got}")
            wrong += 1
    for panel, expected in (exact or {}).items():
        if abs(read[(panel, "exact")] - expected) > 6e-4:
            print(f"  {label} {panel} exact: table {expected}, figure {read[(panel, 'exact')]}")
            wrong += 1
    extra = {k for k in read if len(k) == 3} - set(table)
    for key in sorted(extra):
        print(f"  {label} {key}: in the figure, not in the table")
    return wrong + len(extra)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mmd_pdf", help="Thesis/figures/banana_mmd.pdf (Fig 6.3)")
    parser.add_argument("acceptance_pdf", nargs="?", help="Thesis/figures/banana_acceptance.pdf")
    args = parser.parse_args(argv)
    with open(args.mmd_pdf, "rb") as f:
        mmd = read_figure(f.read())
    print("Fig 6.3, median MMD over 20 chains (eps = 1 ... 6):")
    for panel in PANELS:
        print(f"  {panel} (exact samples: {mmd[(panel, 'exact')]:.3f})")
        for sampler in SAMPLERS:
            row = [mmd.get((panel, sampler, e)) for e in EPSILONS]
            cells = ("  -  " if v is None else f"{v:.3f}" for v in row)
            print(f"    {sampler:<30} " + " ".join(cells))
    wrong = _compare("MMD", mmd, FIG_6_3_MMD, FIG_6_3_EXACT)
    if args.acceptance_pdf:
        with open(args.acceptance_pdf, "rb") as f:
            wrong += _compare("acceptance", read_figure(f.read()), ACCEPTANCE)
    print("tables match the figures" if not wrong else f"{wrong} differences")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
