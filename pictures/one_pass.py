"""Plotly figures made in one pass: the traces and the layout written as plain dicts, validated once when the figure
is made.

Plotly validates every add_trace, update_layout and update_xaxes call on its own, and make_subplots builds and
validates a whole figure first. Built that way, the Activations page's 2 x 2 chart took 145-190 ms of the server's
CPU on every page load, and 50-60 ms in one pass, with the same figure as a result.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence

from plotly.subplots import make_subplots

from pictures.style import PANEL_TITLE_FONT


def merged(base: dict, extra: dict) -> dict:
    """`base` with `extra` written over it, nested dicts merged key by key as Plotly's update_layout merges them, and
    any other value (a list of shapes, say) replaced whole. Neither is changed."""
    out = dict(base)
    for key, value in extra.items():
        inner = out.get(key)
        out[key] = merged(inner, value) if isinstance(value, dict) and isinstance(inner, dict) else value
    return out


@functools.lru_cache(maxsize=32)
def _grid(rows: int, cols: int, titles: tuple[str, ...], spacing: tuple[tuple[str, object], ...]) -> dict:
    figure = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles) or None, **dict(spacing))
    entries = figure.layout.to_plotly_json()
    entries.pop("template", None)  # figure_layout names the template
    if "annotations" in entries:  # the panels' titles
        entries["annotations"] = [merged(title, {"font": PANEL_TITLE_FONT}) for title in entries["annotations"]]
    return entries


def subplot_grid(rows: int, cols: int, titles: Sequence[str] = (), **options: object) -> dict:
    """The layout entries make_subplots writes for a grid of panels: each panel's axes (domain, anchor, shared axes)
    and its title as an annotation, in the pages' panel-title font (PANEL_TITLE_FONT, as every grid here).
    `options`: make_subplots' (shared_xaxes, vertical_spacing ...). A new copy each call, so a figure may change it."""
    return copy.deepcopy(_grid(rows, cols, tuple(titles), tuple(sorted(options.items()))))


def panel_axes(row: int, col: int, cols: int) -> dict[str, str]:
    """A trace's axes for the panel at `row`, `col` (from 1) of a grid `cols` wide: make_subplots numbers the panels
    row by row, the first one's axes plain "x" and "y"."""
    n = (row - 1) * cols + col
    suffix = "" if n == 1 else str(n)
    return {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}


def axis_name(reference: str) -> str:
    """A trace's axis reference as the layout names that axis: "x2" -> "xaxis2"."""
    return f"{reference[0]}axis{reference[1:]}"
