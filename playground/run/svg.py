"""Small inline SVG charts for the HTML report: line (and step) charts, bars with intervals, a labelled scatter.

Hand-written rather than drawn by a plotting library: the report is a core command and
needs no extra dependency, the SVG stays small (a few KB a chart, text as text), and it
renders in any browser without scripts. Every function returns one `<svg>` element as a
string, with a `<title>` per mark so hovering shows the exact value.
"""

from __future__ import annotations

import math
import re
from html import escape
from typing import Sequence

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
FONT = 'font-family="sans-serif" font-size="11"'


def color(index: int) -> str:
    """The palette's colour for series `index` (cycling)."""
    return PALETTE[index % len(PALETTE)]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), default=magnitude * 10)
    ticks = [math.floor(low / step) * step]
    while ticks[-1] < high - step * 1e-9:  # up to the first tick at or above `high`
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _label(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:g}" if value == int(value) else f"{value:.2f}".rstrip("0")


class _Frame:
    """A plot area with linear x and y scales and its axes."""

    def __init__(self, width: int, height: int, x_range: tuple[float, float], y_range: tuple[float, float],
                 left: int = 56, bottom: int = 40, top: int = 12, right: int = 16) -> None:
        self.width, self.height = width, height
        self.left, self.bottom, self.top, self.right = left, bottom, top, right
        self.x_ticks = nice_ticks(*x_range)
        self.y_ticks = nice_ticks(*y_range)
        self.x0, self.x1 = min(self.x_ticks[0], x_range[0]), max(self.x_ticks[-1], x_range[1])
        self.y0, self.y1 = min(self.y_ticks[0], y_range[0]), max(self.y_ticks[-1], y_range[1])

    def x(self, value: float) -> float:
        span = (self.x1 - self.x0) or 1
        return self.left + (value - self.x0) / span * (self.width - self.left - self.right)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1
        return self.height - self.bottom - (value - self.y0) / span * (self.height - self.top - self.bottom)

    def axes(self, x_label: str, y_label: str, x_format=_label, y_format=_label) -> list[str]:
        parts = []
        for tick in self.y_ticks:
            y = self.y(tick)
            parts.append(f'<line x1="{self.left}" x2="{self.width - self.right}" y1="{y:.1f}" y2="{y:.1f}" '
                         'stroke="#e5e5e5"/>')
            parts.append(f'<text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT}>'
                         f'{escape(y_format(tick))}</text>')
        base = self.height - self.bottom
        for tick in self.x_ticks:
            x = self.x(tick)
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" stroke="#333"/>')
            parts.append(f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle" {FONT}>'
                         f'{escape(x_format(tick))}</text>')
        parts.append(f'<line x1="{self.left}" x2="{self.width - self.right}" y1="{base}" y2="{base}" stroke="#333"/>')
        parts.append(f'<line x1="{self.left}" x2="{self.left}" y1="{self.top}" y2="{base}" stroke="#333"/>')
        parts.append(f'<text x="{(self.left + self.width - self.right) / 2:.1f}" y="{self.height - 6}" '
                     f'text-anchor="middle" {FONT}>{escape(x_label)}</text>')
        parts.append(f'<text transform="translate(12,{(self.top + base) / 2:.1f}) rotate(-90)" text-anchor="middle" '
                     f'{FONT}>{escape(y_label)}</text>')
        return parts


def _svg(width: int, height: int, parts: list[str], label: str) -> str:
    return (f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(label)}">' + "".join(parts) + "</svg>")


def legend(names: Sequence[str], colors: Sequence[str]) -> str:
    """An HTML legend: a coloured swatch and the name of each series."""
    items = "".join(f'<span class="key"><span class="swatch" style="background:{c}"></span>{escape(n)}</span>'
                    for n, c in zip(names, colors))
    return f'<div class="legend">{items}</div>'


def line_chart(series: Sequence[tuple[str, Sequence[tuple[float, float]], str]], x_label: str, y_label: str,
               width: int = 640, height: int = 300, step: bool = False, y_min: float | None = 0,
               y_format=_label) -> str:
    """Lines (or steps, holding each value until the next x) of (name, points, colour) series."""
    points = [p for _, pts, _ in series for p in pts]
    if not points:
        return _svg(width, 40, [f'<text x="8" y="24" {FONT}>no data</text>'], y_label)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    low = min(ys) if y_min is None else min(y_min, min(ys))
    frame = _Frame(width, height, (min(xs), max(xs)), (low, max(ys)))
    parts = frame.axes(x_label, y_label, y_format=y_format)
    for name, pts, stroke in series:
        if not pts:
            continue
        coords = []
        for i, (x, y) in enumerate(pts):
            if step and i:
                coords.append(f"{frame.x(x):.1f},{frame.y(pts[i - 1][1]):.1f}")
            coords.append(f"{frame.x(x):.1f},{frame.y(y):.1f}")
        parts.append(f'<polyline fill="none" stroke="{stroke}" stroke-width="2" points="{" ".join(coords)}">'
                     f'<title>{escape(name)}</title></polyline>')
        x, y = pts[-1]
        parts.append(f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="3" fill="{stroke}">'
                     f'<title>{escape(name)}: {escape(y_format(y))} at {escape(_label(x))}</title></circle>')
    return _svg(width, height, parts, y_label)


def interval_bars(rows: Sequence[tuple[str, float | None, float | None, float | None, str]], x_label: str,
                  width: int = 640, row_height: int = 22, x_max: float = 1.0, percent: bool = True) -> str:
    """Horizontal bars of (label, value, low, high, colour) rows, the interval drawn as a whisker; None: no bar."""
    left = min(260, 12 + 7 * max((len(r[0]) for r in rows), default=4))
    height = 44 + row_height * len(rows)
    fmt = (lambda v: f"{v:.0%}") if percent else _label
    frame = _Frame(width, height, (0.0, x_max), (0.0, 1.0), left=left, bottom=36, top=8, right=56)
    parts = frame.axes(x_label, "", x_format=fmt)[2 * len(frame.y_ticks):]  # x axis only
    for i, (label, value, low, high, fill) in enumerate(rows):
        top = 8 + i * row_height
        middle = top + row_height / 2
        parts.append(f'<text x="{left - 6}" y="{middle + 4:.1f}" text-anchor="end" {FONT}>{escape(label)}</text>')
        if value is None:
            parts.append(f'<text x="{left + 4}" y="{middle + 4:.1f}" {FONT} fill="#777">no data</text>')
            continue
        span = f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else ""
        parts.append(f'<rect x="{left}" y="{top + 3}" width="{max(0.5, frame.x(value) - left):.1f}" '
                     f'height="{row_height - 6}" fill="{fill}" opacity="0.8"><title>{escape(label)}: {fmt(value)}'
                     f'{escape(span)}</title></rect>')
        if low is not None and high is not None:
            parts.append(f'<line x1="{frame.x(low):.1f}" x2="{frame.x(high):.1f}" y1="{middle:.1f}" '
                         f'y2="{middle:.1f}" stroke="#111" stroke-width="1.5"/>')
            for end in (low, high):
                parts.append(f'<line x1="{frame.x(end):.1f}" x2="{frame.x(end):.1f}" y1="{middle - 5:.1f}" '
                             f'y2="{middle + 5:.1f}" stroke="#111" stroke-width="1.5"/>')
        parts.append(f'<text x="{frame.x(high if high is not None else value) + 6:.1f}" y="{middle + 4:.1f}" '
                     f'{FONT}>{escape(fmt(value))}</text>')
    return _svg(width, height, parts, x_label)


def stacked_bars(rows: Sequence[tuple[str, Sequence[tuple[float, str, str]]]], x_label: str,
                 width: int = 640, row_height: int = 20) -> str:
    """Horizontal bars made of segments: (label, [(value, colour, title), ...]) rows, with the total at the end."""
    left = min(300, 12 + 7 * max((len(r[0]) for r in rows), default=4))
    height = 44 + row_height * len(rows)
    most = max((sum(v for v, _, _ in segments) for _, segments in rows), default=1) or 1
    frame = _Frame(width, height, (0.0, most), (0.0, 1.0), left=left, bottom=36, top=8, right=40)
    parts = frame.axes(x_label, "")[2 * len(frame.y_ticks):]
    for i, (label, segments) in enumerate(rows):
        top = 8 + i * row_height
        parts.append(f'<text x="{left - 6}" y="{top + row_height / 2 + 4:.1f}" text-anchor="end" {FONT}>'
                     f'{escape(label)}</text>')
        start = 0.0
        for value, fill, title in segments:
            if value <= 0:
                continue
            width_px = frame.x(start + value) - frame.x(start)
            parts.append(f'<rect x="{frame.x(start):.1f}" y="{top + 3}" width="{width_px:.1f}" '
                         f'height="{row_height - 6}" fill="{fill}"><title>{escape(title)}</title></rect>')
            start += value
        parts.append(f'<text x="{frame.x(start) + 4:.1f}" y="{top + row_height / 2 + 4:.1f}" {FONT}>'
                     f'{escape(_label(start))}</text>')
    return _svg(width, height, parts, x_label)


def scatter(points: Sequence[tuple[str, float, float, float | None, float | None, str]], x_label: str, y_label: str,
            width: int = 640, height: int = 320) -> str:
    """Labelled points (name, x, y, y_low, y_high, colour), the y interval as a whisker; y is a share (0-100%)."""
    if not points:
        return _svg(width, 40, [f'<text x="8" y="24" {FONT}>no data</text>'], y_label)
    xs = [p[1] for p in points]
    frame = _Frame(width, height, (0.0, max(xs) * 1.1 or 1.0), (0.0, 1.0), top=28, right=120)
    parts = frame.axes(x_label, y_label, y_format=lambda v: f"{v:.0%}")
    placed: list[tuple[float, float]] = []
    for name, x, y, low, high, fill in points:
        cx, cy = frame.x(x), frame.y(y)
        label_y = cy - 6
        while any(abs(label_y - py) < 12 and abs(cx - px) < 7 * len(name) for px, py in placed):
            label_y -= 12  # keep labels of nearby points apart
        placed.append((cx, label_y))
        if low is not None and high is not None:
            parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{frame.y(low):.1f}" y2="{frame.y(high):.1f}" '
                         f'stroke="{fill}" stroke-width="1.5"/>')
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{fill}"><title>{escape(name)}: '
                     f'{y:.0%} success at {escape(_label(x))}</title></circle>')
        parts.append(f'<text x="{cx + 8:.1f}" y="{label_y:.1f}" {FONT}>{escape(name)}</text>')
    return _svg(width, height, parts, y_label)


def standalone(chart: str, names: Sequence[str], colors: Sequence[str]) -> str:
    """A chart of this module as a standalone SVG file (an image for docs): the SVG namespace added, and the legend
    (`names`, `colors`) drawn inside the image below the chart instead of as HTML."""
    head = re.match(r'<svg class="chart" width="(\d+)" height="(\d+)" viewBox="0 0 \d+ \d+"', chart)
    if head is None or not chart.endswith("</svg>"):
        raise ValueError("not a chart of playground.run.svg")
    width, height = int(head.group(1)), int(head.group(2))
    total = height + 18 * len(names) + 8
    keys = "".join(f'<rect x="60" y="{height + 4 + 18 * i}" width="12" height="12" fill="{c}"/>'
                   f'<text x="78" y="{height + 14 + 18 * i}" {FONT}>{escape(n)}</text>'
                   for i, (n, c) in enumerate(zip(names, colors)))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{total}" '
            f'viewBox="0 0 {width} {total}"' + chart[head.end():-len("</svg>")] + keys + "</svg>")
