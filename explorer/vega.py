"""Vega-Lite building blocks for matrix heatmaps: colour ramps, cell layers, PNG images (no Streamlit here).

Why Vega-Lite and not Plotly for heatmaps: Streamlit loads Plotly as a 4.7 MB script, which costs about 1.9 s
per page load in headless Chromium on this 2-core machine; its Vega-Lite chart costs about 0.4 s. Vega-Lite
draws one item per cell, which is slow above some ten thousand cells, so bigger matrices are drawn as one
PNG image coloured here with the very same ramp (`MAX_CELLS`).

Specs carry their tables as pandas DataFrames under "datasets"; Streamlit sends them to the browser as Arrow.
"""

from __future__ import annotations

import base64
import io
import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd
from PIL import Image

MASKED_COLOUR = "#9a9a9a"
MAX_CELLS = 16_384  # cells drawn one by one (with hover) up to 128 x 128; above this a matrix is an image
MAX_CELL_TEXT = 16 * 16  # write the value in each cell up to this many cells
MAX_CELL_PX = 56.0  # a cell is at most this wide, so a 3-token map is not a wall of colour
MAX_TICKS = 45  # token labels along one axis; above this only every n-th is labelled
IMAGE_SIDE = 768  # px: an image matrix is scaled up (nearest neighbour) to at least this, so cells stay sharp
FONT = "Source Sans, sans-serif"  # the font Streamlit ships and uses for the page text


@dataclass(frozen=True)
class Ramp:
    """A piecewise-linear colour scale in RGB: `colours` evenly spread from `low` to `high`, clamped outside."""

    colours: tuple[str, ...]
    low: float
    high: float
    dark: str = "high"  # which end is dark, so cell text there is written in white: "high", "low" or "ends"

    @property
    def stops(self) -> list[float]:
        return np.linspace(self.low, self.high, len(self.colours)).tolist()

    def scale(self) -> dict:
        """The Vega-Lite scale that colours exactly as `rgb` does."""
        return {"type": "linear", "domain": self.stops, "range": list(self.colours), "interpolate": "rgb",
                "clamp": True}  # fmt: skip

    def dark_test(self) -> str:
        """A Vega expression, true where a value's colour is dark enough for white text."""
        span = self.high - self.low
        if self.dark == "low":
            return f"datum.value < {self.low + 0.45 * span}"
        if self.dark == "ends":
            return f"abs(datum.value - {self.low + span / 2}) > {0.3 * span}"
        return f"datum.value > {self.low + 0.55 * span}"

    def rgb(self, values: np.ndarray) -> np.ndarray:
        """[...] values -> [..., 3] uint8 colours; NaN becomes the masked grey."""
        v = np.asarray(values, dtype=np.float64)
        channels = np.array([_hex_rgb(c) for c in self.colours], dtype=np.float64)  # [n_colours, 3]
        filled = np.where(np.isnan(v), self.low, v)
        out = np.stack([np.interp(filled, self.stops, channels[:, i]) for i in range(3)], axis=-1)  # [..., 3]
        out = np.rint(out).astype(np.uint8)
        out[np.isnan(v)] = _hex_rgb(MASKED_COLOUR)
        return out


def _hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
           "#fde725")  # fmt: skip


def png_uri(rgb: np.ndarray, min_side: int = IMAGE_SIDE) -> str:
    """[H, W, 3] uint8 -> a PNG data URI, scaled up by a whole factor (nearest) so it is at least min_side."""
    h, w, _ = rgb.shape
    factor = max(1, -(-min_side // max(h, w)))
    big = np.repeat(np.repeat(rgb, factor, axis=0), factor, axis=1)  # [H * f, W * f, 3]
    buffer = io.BytesIO()
    Image.fromarray(big, mode="RGB").save(buffer, format="PNG", optimize=False)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def ticks(n: int, most: int = MAX_TICKS) -> list[float]:
    """Cell centres to label along an axis of n cells: all while they fit, else every k-th."""
    every = -(-n // most)
    return [i + 0.5 for i in range(0, n, every)]


def index_axis(title: str, labels_param: str, n: int, most: int = MAX_TICKS, angle: int = 0) -> dict:
    """A quantitative axis over cells 0..n whose tick at cell i + 0.5 is labelled labels_param[i]."""
    return {
        "title": title,
        "values": ticks(n, most),
        "labelExpr": f"{labels_param}[floor(datum.value)]",
        "grid": False,
        "ticks": False,
        "domain": False,
        "labelAngle": angle,
        "labelOverlap": False,
    }


def layer_head_axes(n_layers: int, n_heads: int) -> dict:
    """matrix_spec's axis arguments for a [layer, head] matrix: heads across ("H0", ...), layers down."""
    return {
        "x_labels": [f"H{h}" for h in range(n_heads)],
        "y_labels": [f"L{layer}" for layer in range(n_layers)],
        "x_title": "head",
        "y_title": "layer",
    }


def matrix_table(values: np.ndarray, allowed: np.ndarray | None = None) -> pd.DataFrame:
    """[Tq, Tk] -> one row per cell: q, k (cell indices), value (float32) and masked (bool)."""
    tq, tk = values.shape
    q, k = np.meshgrid(np.arange(tq, dtype=np.int32), np.arange(tk, dtype=np.int32), indexing="ij")  # [Tq, Tk]
    masked = np.zeros((tq, tk), dtype=bool) if allowed is None else ~np.asarray(allowed, dtype=bool)
    return pd.DataFrame(
        {
            "q": q.ravel(),
            "k": k.ravel(),
            "value": np.asarray(values, dtype=np.float32).ravel(),
            "masked": masked.ravel(),
        }
    )


def matrix_spec(
    values: np.ndarray,
    allowed: np.ndarray | None,
    ramp: Ramp,
    *,
    name: str,
    x_labels: list[str],
    y_labels: list[str],
    x_title: str,
    y_title: str,
    value_title: str,
    title: str,
    subtitle: list[str] | None = None,
    value_format: str = ".4f",
    text_format: str | None = ".2f",
    masked_text: str = "masked: may not attend (weight 0)",
    max_px: int = 640,
    max_x_ticks: int = MAX_TICKS,
    max_y_ticks: int = MAX_TICKS,
) -> dict:
    """A [Tq, Tk] matrix as a Vega-Lite view: keys across (x), queries down (y, first on top), masked cells grey.

    Up to MAX_CELLS cells are drawn one by one, hover giving query, key and value (and the value written in
    each cell up to MAX_CELL_TEXT); bigger matrices are one image with the same colours. `name` prefixes the
    view's dataset and parameters, so that several views can sit in one chart (see `concat`).
    """
    tq, tk = values.shape
    cell = max(1.0, min(MAX_CELL_PX, max_px / max(tq, tk)))  # px per cell: square cells, at most max_px a side
    keys, queries = f"{name}_keys", f"{name}_queries"
    y_axis = index_axis(y_title, queries, tq, max_y_ticks)
    x_axis = index_axis(x_title, keys, tk, max_x_ticks, angle=-45 if tk > 12 else 0)
    position = {
        "x": {"field": "k", "type": "quantitative", "scale": {"domain": [0, tk], "nice": False, "zero": False},
              "axis": x_axis},
        "y": {"field": "q", "type": "quantitative",
              "scale": {"domain": [0, tq], "nice": False, "zero": False, "reverse": True}, "axis": y_axis},
    }  # fmt: skip
    spec: dict = {
        "title": {"text": title, "subtitle": subtitle or [], "anchor": "start"},
        "width": round(cell * tk),
        "height": round(cell * tq),
        "params": [{"name": keys, "value": list(x_labels)}, {"name": queries, "value": list(y_labels)}],
    }
    if tq * tk > MAX_CELLS:
        shown = values if allowed is None else np.where(allowed, values, np.nan)
        image = {"url": png_uri(ramp.rgb(shown)), "k": 0, "k_end": tk, "q": 0, "q_end": tq}
        spec["layer"] = [
            {
                "data": {"values": [image]},
                "mark": {"type": "image", "aspect": False},
                "encoding": {**position, "x2": {"field": "k_end"}, "y2": {"field": "q_end"},
                             "url": {"field": "url", "type": "nominal"}},
            },
            _colour_legend_layer(ramp, value_title),
        ]  # fmt: skip
        return spec
    label = [
        {"calculate": f"{queries}[datum.q]", "as": "query"},
        {"calculate": f"{keys}[datum.k]", "as": "key"},
        {"calculate": f"datum.masked ? '{masked_text}' : format(datum.value, '{value_format}')", "as": "shown"},
    ]
    tooltip = [{"field": "query", "title": y_title}, {"field": "key", "title": x_title},
               {"field": "shown", "title": value_title}]  # fmt: skip
    spec["datasets"] = {f"{name}_cells": matrix_table(values, allowed)}
    cells = {
        "data": {"name": f"{name}_cells"},
        "transform": [*cell_bounds(), *label],
        "mark": {"type": "rect", "stroke": "white", "strokeWidth": 1 if max(tq, tk) <= 40 else 0},
        "encoding": {
            **position,
            "x2": {"field": "k_end"},
            "y2": {"field": "q_end"},
            "color": {
                "condition": {"test": "datum.masked", "value": MASKED_COLOUR},
                "field": "value",
                "type": "quantitative",
                "scale": ramp.scale(),
                "legend": {"title": value_title, "gradientLength": min(200, round(cell * tq))},
            },
            "tooltip": tooltip,
        },
    }
    spec["layer"] = [cells]
    if text_format and tq * tk <= MAX_CELL_TEXT:
        dark = ramp.dark_test()
        spec["layer"].append(
            {
                "data": {"name": f"{name}_cells"},
                "transform": [{"filter": "!datum.masked"}, *cell_bounds(), *label],
                "mark": {"type": "text", "fontSize": 14 if cell >= 34 else 11},
                "encoding": {
                    "x": {**position["x"], "field": "k_mid"},  # the cells' scale and axis, or Vega-Lite may
                    "y": {**position["y"], "field": "q_mid"},  # merge in a default axis with its own ticks
                    "text": {"field": "value", "type": "quantitative", "format": text_format},
                    "color": {"condition": {"test": dark, "value": "white"}, "value": "black"},
                    "tooltip": tooltip,
                },
            }
        )
    return spec


def _colour_legend_layer(ramp: Ramp, title: str) -> dict:
    """An invisible layer whose only job is the colour legend next to an image matrix."""
    return {
        "data": {"values": [{"value": ramp.low}, {"value": ramp.high}]},
        "mark": {"type": "point", "opacity": 0},
        "encoding": {
            "color": {"field": "value", "type": "quantitative", "scale": ramp.scale(), "legend": {"title": title}},
        },
    }


def cell_bounds() -> list[dict]:
    """Transforms giving each cell its edges and centre from q and k."""
    return [
        {"calculate": "datum.k + 1", "as": "k_end"},
        {"calculate": "datum.q + 1", "as": "q_end"},
        {"calculate": "datum.k + 0.5", "as": "k_mid"},
        {"calculate": "datum.q + 0.5", "as": "q_mid"},
    ]


def chart(spec: dict) -> dict:
    """A top-level chart: drawn on canvas (fast for many cells), its own size (width and height are the plot
    area; axes, legend and title come on top), no view border, one font, and hover only on marks that have
    a tooltip of their own (see quiet)."""
    return quiet(
        {
            **spec,
            "autosize": {"type": "pad", "contains": "padding"},
            "usermeta": {"embedOptions": {"renderer": "canvas", "actions": False}},
            "config": {
                "view": {"stroke": None},
                "font": FONT,
                "axis": {"labelFontSize": 14, "titleFontSize": 14},
                "legend": {"labelFontSize": 13, "titleFontSize": 13},
                "title": {"fontSize": 17, "subtitleFontSize": 14},
            },
        }
    )


def concat(views: list[dict], direction: str = "hconcat", shared_colour: bool = True) -> dict:
    """Views side by side (or stacked) in one chart: their params and datasets move to the top level."""
    params: list[dict] = []
    datasets: dict = {}
    inner = []
    for view in views:
        view = dict(view)
        params += view.pop("params", [])
        datasets |= view.pop("datasets", {})
        inner.append(view)
    spec = {direction: inner, "params": params, "datasets": datasets}
    if shared_colour:
        spec["resolve"] = {"scale": {"color": "shared"}}
    return chart(spec)


# ---- general helpers for line and bar charts (appended; the matrix helpers above are unchanged) ----------------

CATEGORY10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
              "#17becf")  # fmt: skip
RDBU = ("#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b",
        "#67001f")  # fmt: skip  # diverging: negative blue, 0 near white, positive red
GRID_COLOUR = "#eeeeee"
CHAR_PX = 0.5  # average width of a character of FONT, in font sizes: how many characters fit a line


def wrap(text: str, width_px: float, font_px: float = 14) -> list[str]:
    """Lines of text that fit width_px (Vega cuts a long title or subtitle short instead of wrapping it);
    "\\n" starts a new line."""
    chars = max(20, int(width_px / (CHAR_PX * font_px)))
    return [line for part in text.split("\n") for line in (textwrap.wrap(part, chars) or [""])]


def heading(text: str, subtitle: str = "", width_px: float = 640) -> dict:
    """A chart title on the left, its subtitle wrapped to width_px."""
    return {"text": text, "subtitle": wrap(subtitle, width_px) if subtitle else [], "anchor": "start"}


def quiet(spec: dict) -> dict:
    """Turn hover off on every mark that has no tooltip of its own (a line, a band, an outline, an image).

    Streamlit's Vega-Lite config sets mark.tooltip = true, even with theme=None: such a mark would show its raw
    data row on hover (a line the first point of the line, an image its PNG)."""
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for child in spec.get(key, []):
            quiet(child)
    if "mark" in spec and "tooltip" not in spec.get("encoding", {}):
        mark = spec["mark"] if isinstance(spec["mark"], dict) else {"type": spec["mark"]}
        spec["mark"] = {**mark, "tooltip": None}
    return spec
