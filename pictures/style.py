"""What every picture shares, defined once (no Streamlit and no plotly import here): the colour ramps, which the
matrix view paints as PNGs and Plotly uses as colour scales; the font, number formats and axis settings of every
Plotly figure; and the layout each figure starts from.

Lines, bars and curves are Plotly figures (pictures/*_charts.py, pictures/notebook_figures.py). The app's matrices
are drawn by the matrix view (pictures/boards.py says why), coloured with the same ramps.
"""

from __future__ import annotations

import html
import math
import struct
import textwrap
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # a type only: this module imports no plotly
    import plotly.graph_objects as go

MASKED_COLOUR = "#9a9a9a"
# A masked cell on VIRIDIS (or cividis): the grey is a mid-ramp colour there to a colour-blind eye. Simulated
# deuteranopia (Machado et al. 2009) puts VIRIDIS's teal at 0.57 within CIEDE2000 5.1 of #9a9a9a (protanopia 4.6,
# and 2.4 once a projector lifts black to a quarter of white); white is off the ramp, at least 12.5 from every colour
# of it under each deficiency
MASKED_OFF_VIRIDIS = "#ffffff"
# A Plotly heatmap's layout: Plotly leaves a NaN cell out, showing the plot's background, white in plotly_white, so a
# masked cell read as weight 0 (BLUES's 0, #f7fbff, is CIEDE2000 2.6 from white); behind a map it shows the grey
MASKED_PLOT = {"plot_bgcolor": MASKED_COLOUR}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # the first eight bytes of every PNG
MAX_CELL_TEXT = 16 * 16  # write the value in each cell up to this many cells
MAX_CELL_PX = 56.0  # a cell is at most this wide, so a 3-token map is not a wall of colour
MAX_TICKS = 45  # token labels along one axis; above this only every n-th is labelled
TICK_PX = 18  # px between two labelled ticks at least (labels are 14 px), so that they never overlap
RGB_CHUNK = 1 << 16  # values Ramp.rgb colours at a time
FONT = "Source Sans, sans-serif"  # the font Streamlit ships and uses for the page text


@dataclass(frozen=True)
class Ramp:
    """A piecewise-linear colour scale in RGB: `colours` evenly spread from `low` to `high`, clamped outside; a NaN
    (masked) value is drawn `masked`."""

    colours: tuple[str, ...]
    low: float
    high: float
    masked: str = MASKED_COLOUR

    @property
    def stops(self) -> list[float]:
        return np.linspace(self.low, self.high, len(self.colours)).tolist()

    def rgb(self, values: np.ndarray) -> np.ndarray:
        """[...] values -> [..., 3] uint8 colours; NaN becomes the ramp's masked colour.

        RGB_CHUNK values at a time, each chunk's float64 work in a few hundred kB that stay in cache: over the whole
        array at once, SmolLM2's grid of 270 small maps (1.1 million pixels) made about 100 MB of float64 arrays,
        whose first writes cost this VM more than the interpolation (0.2 s in a fresh process, 0.06 s in chunks)."""
        flat = np.asarray(values).reshape(-1)  # [N]
        channels = np.array([_hex_rgb(c) for c in self.colours], dtype=np.float64)  # [n_colours, 3]
        stops = self.stops  # made once, not for each chunk and channel
        out = np.empty((flat.size, 3), dtype=np.uint8)  # [N, 3]
        for start in range(0, flat.size, RGB_CHUNK):
            v = flat[start : start + RGB_CHUNK].astype(np.float64)  # [n], a copy
            masked = np.isnan(v)
            v[masked] = self.low
            part = out[start : start + RGB_CHUNK]  # [n, 3], a view
            for i in range(3):
                channel = np.interp(v, stops, channels[:, i])  # [n]
                part[:, i] = np.rint(channel, out=channel)
            part[masked] = _hex_rgb(self.masked)
        return out.reshape(*np.shape(values), 3)  # [..., 3]


def _hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
           "#fde725")  # fmt: skip


def png_bytes(rgb: np.ndarray) -> bytes:
    """[H, W, 3] uint8 -> a PNG, one pixel per cell (the matrix view scales it up unsmoothed).

    Written here, not by Pillow: Pillow tries all five PNG row filters on every row and lets no caller choose, and on
    these pictures of colour ramps plain rows (filter 0) compress smaller. SmolLM2's 512-piece pictures took 84 ms
    and 1.56 MB through Pillow (at its compress_level 1), and take 34 ms and 1.29 MB here. zlib at level 1: at its
    default 6, SmolLM2's grid had taken 0.27 s more through Pillow, for a fifth fewer bytes."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8 or 0 in rgb.shape:
        raise ValueError(f"a PNG is drawn from a non-empty [H, W, 3] uint8 array, not {rgb.dtype} {rgb.shape}")
    height, width, _ = rgb.shape
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # [H, 1 + 3W]: filter type 0, then the row's pixels
    rows[:, 1:] = rgb.reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits a channel, RGB, no interlacing
    pixels = zlib.compress(rows, 1)
    return PNG_SIGNATURE + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", pixels) + _png_chunk(b"IEND", b"")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: its length, its type, its data and the CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def ticks(n: int, most: int = MAX_TICKS) -> list[float]:
    """Cell centres to label along an axis of n cells: those of tick_positions."""
    return [i + 0.5 for i in tick_positions(n, most)]


def tick_positions(n: int, most: int = MAX_TICKS) -> list[int]:
    """Positions 0..n-1 to label on a Plotly axis of n bars or columns: all while they fit, else every k-th. Plotly
    measures every tick label it is given: 512 of them on each of three panels took 15 s of a page load."""
    return list(range(0, n, -(-n // most)))


def layer_head_axes(n_layers: int, n_heads: int) -> dict:
    """matrix_panel's axis arguments for a [layer, head] matrix: heads across ("H0", ...), layers down."""
    return {
        "x_labels": [f"H{h}" for h in range(n_heads)],
        "y_labels": [f"L{layer}" for layer in range(n_layers)],
        "x_title": "head",
        "y_title": "layer",
    }


CATEGORY10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
              "#17becf")  # fmt: skip
RDBU = ("#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b",
        "#67001f")  # fmt: skip  # diverging: negative blue, 0 near white, positive red
# Line colours told apart by colour alone, also by a colour-blind eye: under simulated protanopia, deuteranopia and
# tritanopia (Machado et al. 2009) any two are at least CIEDE2000 15.8 apart (the first three 39.4, four 22.4), where
# CATEGORY10's orange and green are 1.3 apart to a protanope, its green and red 4.6 to a deuteranope
DISTINCT = (CATEGORY10[0], CATEGORY10[1], "#000000", CATEGORY10[5], CATEGORY10[9], CATEGORY10[7])
GRID_COLOUR = "#eeeeee"
# Axis numbers (d3-format): up to 4 significant digits, trailing zeros trimmed, never in e-notation ("~g" writes 10
# as "1e+1" on a gradient axis).
AXIS_NUMBERS = ".4~r"
# A log axis's numbers as powers of ten (10⁻⁶, 10⁶): written out, "0.000001" and "1000000" ran into the y title of a
# narrow panel (Compare's per-layer lines at 1024 px)
LOG_NUMBERS = {"type": "log", "tickformat": "", "exponentformat": "power"}


# Plotly figures: what every line, bar and curve chart of the app and of a notebook shares.
HOVER_NUMBERS = ".4g"  # a value in a hover label: 4 significant digits
TEXT_COLOUR = "#31333f"  # Streamlit's text colour, so a chart's words read like the page's
SUBTITLE_COLOUR = "#6b6f7b"
# Plotly never wraps a title: a subtitle is broken into lines of at most this many characters. A chart in an expander
# at 1024 px with the sidebar open is 530 px wide: 92 characters at 5.6 px (13 px text with √, Φ and − in it) and the
# title's 8 px pad take 523 px. At 100, Activations' GELU note ran 2 px past the chart and lost its ")".
SUBTITLE_CHARS = 92
LINE_PX = 19  # px one subtitle line takes


LEGEND_BELOW = {"orientation": "h", "x": 0.0, "xanchor": "left", "yref": "container", "y": 0.0, "yanchor": "bottom"}
# px a legend under the plot takes: its first row (with the legend's padding), then each further row. Measured in
# Chromium as the margin Plotly grew to once drawn: 31.2 px on the Activations page (Source Sans, 13 px), 19 for a
# further row; about 3 px to spare. A margin too small by even 0.2 px makes Plotly's automargin grow it after the
# first draw and draw the whole figure again: 80-100 ms more for the 2 x 2 panels of the Activations page's first chart
# (tests/test_browser_positional_activations_anatomy.py checks that it is not grown).
LEGEND_FIRST_ROW_PX, LEGEND_ROW_PX = 34, 22
PANEL_TITLE_FONT = {"size": 14}  # the titles of a figure's panels (make_subplots' annotations), in the page's size
PANEL_TITLE_PX = 12  # px more above a figure's panels, so that their titles stand clear of the subtitle


def legend_below(layout: dict, rows: int = 1, **legend: object) -> dict:
    """figure_layout's `layout` with its legend in `rows` rows under the plot, so the panels keep their whole width,
    and the bottom margin grown to hold them. `legend`: any other legend settings."""
    layout["legend"] |= LEGEND_BELOW | legend
    layout["margin"]["b"] += LEGEND_FIRST_ROW_PX + LEGEND_ROW_PX * (rows - 1)
    return layout


def plotly_scale(colours: tuple[str, ...]) -> list[list]:
    """A colour ramp (evenly spread hex colours) as a Plotly colorscale: [[0.0, first], ..., [1.0, last]]."""
    stops = np.linspace(0.0, 1.0, len(colours))
    return [[float(stop), colour] for stop, colour in zip(stops, colours, strict=True)]


MOST_DECIMALS = 6  # a cell's text beyond this is longer than the change it writes is worth


def decimals_for(top: float, significant: int = 2) -> int:
    """Fixed decimals that write `top` (a map's or board's largest value, > 0) with `significant` digits: 2 for
    0.53, 4 for 0.0017, 0 for 47. Its smaller values then have as many decimals, no more (every cell of a Plotly
    heatmap is written at the size its longest text fits)."""
    if not math.isfinite(top) or top <= 0:  # nothing to scale to (an all-zero or empty board)
        return significant
    return min(MOST_DECIMALS, max(0, significant - 1 - math.floor(math.log10(top))))


def label_text(text: str) -> str:
    """User text (a token, a file name) for a Plotly string: Plotly reads a small HTML subset in every title, tick
    and hover label, so "<b>" must arrive as text, not as bold."""
    return html.escape(str(text), quote=False)


def noted(subtitle: str, note: str | None) -> str:
    """A subtitle with a note of its colour scale (or any other) after it, joined by " · " as a subtitle's parts are;
    the subtitle alone when there is no note."""
    return f"{subtitle} · {note}" if note else subtitle


def subtitle_lines(subtitle: str, most: int = SUBTITLE_CHARS) -> list[str]:
    """A subtitle in lines of at most `most` characters, broken at its " · " separators where it can, so that no line
    starts with a separator."""
    lines: list[str] = []
    for part in subtitle.split(" · ") if subtitle else []:
        if lines and len(lines[-1]) + 3 + len(part) <= most:
            lines[-1] += " · " + part
        else:
            lines.extend(textwrap.wrap(part, most, break_on_hyphens=False) or [""])  # "sub-layer" stays whole
    return lines


def figure_layout(title: str, subtitle: str = "", height: int = 340, **more: object) -> dict:
    """The layout every Plotly figure starts from: a title on the left with its subtitle wrapped below it, the page's
    font, a white background with light grid lines, and `height` px for the plot and its axes (the title's lines
    come on top). `more`: any other layout settings (legend, axes, margins)."""
    lines = [html.escape(line, quote=False) for line in subtitle_lines(subtitle)]
    top = 44 + LINE_PX * len(lines)
    layout = {
        "title": {
            "text": html.escape(title, quote=False),
            "subtitle": {"text": "<br>".join(lines), "font": {"size": 13, "color": SUBTITLE_COLOUR}},
            "x": 0.0,
            "xanchor": "left",
            "xref": "container",
            "y": 1.0,
            "yanchor": "top",
            "yref": "container",
            "pad": {"t": 10, "l": 8},
            "font": {"size": 17},
        },
        "font": {"family": FONT, "size": 13, "color": TEXT_COLOUR},
        "template": "plotly_white",
        "height": height + top,
        "margin": {"t": top + 16, "l": 64, "r": 24, "b": 56},
        "hoverlabel": {"font": {"family": FONT, "size": 13}},
        "legend": {"font": {"size": 13}},
    }
    return layout | more


def axis(title: str | None, numbers: str = AXIS_NUMBERS, **more: object) -> dict:
    """A value axis: its title, light grid lines, and numbers as AXIS_NUMBERS writes them (or `numbers`)."""
    return {"title": {"text": title or ""}, "gridcolor": GRID_COLOUR, "tickformat": numbers, "zeroline": False} | more


def masked_map_axes(figure: go.Figure, **both: object) -> go.Figure:
    """A Plotly map's axes where masked cells show the grey background: the first query on top, the keys' ticks
    tilted, and no grid line across a grey masked gap. `both`: more settings of both axes."""
    figure.update_yaxes(autorange="reversed", showgrid=False, **both)
    figure.update_xaxes(tickangle=-45, showgrid=False, **both)
    return figure


def block_label(layer: int) -> str:
    """A block index as an axis and a hover label write it: -1 (the input to the first block) is "input"."""
    return "input" if layer == -1 else str(layer)


def block_axis(title: str | None, layers: list[int], most: int, margin: float = 0.5) -> dict:
    """An x axis over block indices (-1 labelled "input"), with at most `most` labels, every block inside the frame."""
    shown = layers if len(layers) <= most else layers[:: math.ceil(len(layers) / most)]
    return axis(
        title,
        numbers="d",
        tickmode="array",
        tickvals=shown,
        ticktext=[block_label(layer) for layer in shown],
        range=[layers[0] - margin, layers[-1] + margin],
    )
