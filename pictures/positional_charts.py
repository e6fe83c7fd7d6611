"""Charts of the positional page: encodings, wavelengths, similarities, rotary angles, offset scores and the
permutation demonstration. Arrays in, dicts out (no Streamlit here): Vega-Lite specs for the curves and profiles
(see pictures/style.py), matrix-view boards for every matrix (pictures/boards.py).

Vega-Lite tables (under "datasets"): pos_curves, pos_typed, pos_wavelengths, pos_profile, pos_offsets. Matrix
panels: pos_table, pos_similarity, pos_rope, pos_offset, perm_typed, perm_moved, perm_rerun.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from explorer.numbers import readable
from explorer.position_analysis import OffsetScores, PermutationDemo
from pictures.attention_panels import WEIGHTS, token_labels
from pictures.boards import board, matrix_panel
from pictures.style import (
    CATEGORY10,
    GRID_COLOUR,
    MAX_CELL_PX,
    RDBU,
    VIRIDIS,
    Ramp,
    chart,
    heading,
)

MAX_SIDE = 512  # rows or columns drawn in one heatmap; longer axes show every n-th (said in the title)
CURVE_POINTS = 8192  # points over all curves of one chart; longer curves keep the extremes of each stretch
TYPED_COLOUR = "#d62728"
CURVE_COLOURS = tuple(c for c in CATEGORY10 if c != TYPED_COLOUR)  # red means "typed" on this page
TWILIGHT = ("#e2d9e2", "#9ebbc9", "#6785be", "#5e43a5", "#421257", "#471340", "#8e2c50", "#ba6657", "#ceac94",
            "#e2d9e2")  # fmt: skip  # cyclic: 0° and 360° share a colour
LINE_WIDTH = 640  # px of the plot area of a line chart
HEATMAP_PX = 640  # px along the longer side of a big heatmap
SMALL_MARKERS = 80  # a curve with at most this many points shows each point
OFFSET_PX = 300  # px along each side of the offset-score matrix, and the height of the line chart beside it
PERMUTATION_PX = 190  # px along each side of the three reordering maps: they fit side by side
TABLE_TICK_PX = 28  # px at least between two labels on an axis of the encoding table


def every_nth(n: int, limit: int = MAX_SIDE) -> np.ndarray:
    """Indices 0, s, 2s ... below n with s = ceil(n / limit): at most `limit` of them, evenly spread."""
    return np.arange(0, n, max(1, math.ceil(n / limit)))


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _shown_note(shown: np.ndarray, n: int, what: str) -> str:
    """ " · every 8th position drawn (512 of 4,096)" when an axis was thinned, else ""."""
    if len(shown) == n:
        return ""
    step = int(shown[1] - shown[0]) if len(shown) > 1 else n
    return f" · every {ordinal(step)} {what} drawn ({len(shown)} of {n:,})"


def _state(trained: bool) -> str:
    return "trained" if trained else "untrained"


def _typed_tokens_hint(tokens: list[str], n_positions: int) -> str:
    shown = min(len(tokens), n_positions)
    if shown == len(tokens):
        return f"red: the {len(tokens)} typed tokens' positions 0–{len(tokens) - 1}"
    return f"red: the typed tokens' positions 0–{shown - 1} ({len(tokens) - shown} typed tokens lie beyond)"


def pair_name(dim: int, kind: str) -> str:
    """'dim 6 (sin of pair 3)' for the sinusoidal table, 'dim 6' for a learned one."""
    if kind != "sinusoidal":
        return f"dim {dim}"
    return f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'} of pair {dim // 2})"


def extremes(values: np.ndarray, budget: int) -> np.ndarray:
    """Indices of the points of a curve [P] to draw: all while P <= budget; else the first, the last and the
    lowest and highest point of each of budget / 2 equal stretches (what a screen shows of a dense curve), sorted."""
    n = len(values)
    if n <= budget:
        return np.arange(n)
    size = math.ceil(n / max(1, budget // 2))
    padded = np.full(math.ceil(n / size) * size, np.nan)
    padded[:n] = values
    stretches = padded.reshape(-1, size)  # [n_stretches, size]
    starts = np.arange(stretches.shape[0]) * size
    low = starts + np.nanargmin(stretches, axis=1)
    high = starts + np.nanargmax(stretches, axis=1)
    return np.unique(np.concatenate([[0, n - 1], low, high]))


def _line_axis(title: str, **extra: object) -> dict:
    return {"title": title, "grid": True, "gridColor": GRID_COLOUR, **extra}


def encoding_curves(table: np.ndarray, dims: list[int], tokens: list[str], kind: str, trained: bool = False) -> dict:
    """Encoding value against position, one line per chosen dimension; the typed tokens' positions are marked.

    A sine and its cosine share a colour (the cosine dotted). Curves longer than the chart's point budget keep the
    lowest and highest value of each stretch of positions (said in the subtitle). Hover any point of a curve.
    """
    n_positions = table.shape[0]  # table: [P, D]
    typed = min(len(tokens), n_positions)
    names = [pair_name(d, kind) for d in dims]
    groups = sorted({d // 2 if kind == "sinusoidal" else d for d in dims})
    colours = [CURVE_COLOURS[groups.index(d // 2 if kind == "sinusoidal" else d) % len(CURVE_COLOURS)] for d in dims]
    dashes = [[2, 3] if kind == "sinusoidal" and d % 2 else [1, 0] for d in dims]
    budget = max(2, CURVE_POINTS // max(1, len(dims)))
    parts = []
    for dim, name in zip(dims, names, strict=True):
        keep = extremes(table[:, dim], budget)  # [kept positions]
        parts.append(pd.DataFrame({"position": keep.astype(np.int32), "dimension": name,
                                   "value": table[keep, dim].astype(np.float32)}))  # fmt: skip
    curves = pd.concat(parts, ignore_index=True)
    curves["dimension"] = pd.Categorical(curves["dimension"], categories=names)
    labels = [str(t) for t in tokens[:typed]]  # hover names the position too: a repeated token needs no suffix
    marks = pd.DataFrame(
        {
            "position": np.tile(np.arange(typed, dtype=np.int32), len(dims)),
            "dimension": pd.Categorical(np.repeat(names, typed), categories=names),
            "token": np.tile(np.asarray(labels, dtype=object), len(dims)),
            "value": table[:typed, dims].T.ravel().astype(np.float32),  # [dims * typed], dimension by dimension
        }
    )
    x = {"field": "position", "type": "quantitative", "axis": _line_axis("position"),
         "scale": {"domain": [-0.5 if typed else 0, n_positions - 1], "nice": False, "zero": False}}  # fmt: skip
    y = {"field": "value", "type": "quantitative", "axis": _line_axis("value added to that dimension")}
    colour = {"field": "dimension", "type": "nominal", "title": "dimension",
              "scale": {"domain": names, "range": colours},
              "legend": {"symbolType": "stroke", "symbolStrokeWidth": 2, "symbolSize": 300}}  # fmt: skip
    dash = {"field": "dimension", "type": "nominal", "title": "dimension", "scale": {"domain": names, "range": dashes}}
    layers: list[dict] = []
    if typed:
        layers.append(
            {
                "data": {"values": [{"from": -0.5, "to": typed - 0.5}]},
                "mark": {"type": "rect", "color": TYPED_COLOUR, "opacity": 0.07},
                "encoding": {"x": {"field": "from", "type": "quantitative"}, "x2": {"field": "to"}},
            }
        )
    tooltip = [{"field": "dimension"}, {"field": "position"}, {"field": "value", "format": ".4f"}]
    layers += [
        {
            "data": {"name": "pos_curves"},
            "mark": {"type": "line", "strokeWidth": 2},
            "encoding": {"x": x, "y": y, "color": colour, "strokeDash": dash},
        },
        {
            "data": {"name": "pos_curves"},
            "mark": {"type": "point", "filled": True, "size": 40, "opacity": 0},
            "encoding": {"x": x, "y": y, "tooltip": tooltip},
        },
        {
            "data": {"name": "pos_typed"},
            "mark": {"type": "point", "filled": True, "size": 45, "color": TYPED_COLOUR, "opacity": 1,
                     "stroke": "white", "strokeWidth": 1},
            "encoding": {"x": x, "y": y,
                         "tooltip": [tooltip[0], tooltip[1], {"field": "token"}, tooltip[2]]},
        },
    ]  # fmt: skip
    kept = len(curves) < n_positions * len(dims)
    note = _typed_tokens_hint(tokens, n_positions)
    if kept:
        note += f" · long curves: the lowest and highest value of each stretch of {n_positions:,} positions drawn"
    what = "Sinusoidal encoding" if kind == "sinusoidal" else f"Learned position embedding ({_state(trained)})"
    return chart(
        {
            "title": heading(f"{what}: value against position", note, LINE_WIDTH + 150),
            "width": LINE_WIDTH,
            "height": 330,
            "datasets": {"pos_curves": curves, "pos_typed": marks},
            "layer": layers,
        }
    )


def _diverging(values: np.ndarray) -> Ramp:
    top = float(max(np.abs(values).max(), 1e-6)) if values.size else 1.0
    return Ramp(RDBU, -top, top)


def encoding_heatmap(table: np.ndarray, tokens: list[str], kind: str, trained: bool = False) -> dict:
    """The whole [position, dimension] table as a matrix-view board (every cell hovers, at any size): positions
    down, dimensions across, the typed positions framed in red."""
    n_positions, d_model = table.shape  # [P, D]
    rows, cols = every_nth(n_positions), every_nth(d_model)
    z = table[np.ix_(rows, cols)].astype(np.float32)  # [P', D']
    ramp = Ramp(RDBU, -1.0, 1.0) if kind == "sinusoidal" else _diverging(z)
    state = "trained" if trained else "untrained, random init"
    what = "Sinusoidal encoding" if kind == "sinusoidal" else f"Learned position embedding ({state})"
    note = _shown_note(rows, n_positions, "position") + _shown_note(cols, d_model, "dimension")
    subtitle = "red frame: " + _typed_tokens_hint(tokens, n_positions).removeprefix("red: ") + note
    if kind == "sinusoidal":
        subtitle = "even dimensions sin, odd cos; slower waves further right · " + subtitle
    typed = int(np.searchsorted(rows, min(len(tokens), n_positions)))  # rows drawn for typed positions
    panel = matrix_panel(
        z,
        None,
        ramp,
        name="pos_table",
        x_labels=[str(c) for c in cols],
        y_labels=[str(r) for r in rows],
        x_title="dimension",
        y_title="position",
        value_title="value",
        title=f"{what}: the whole [position, dimension] matrix",
        subtitle=subtitle,
        text_digits=None,
        plot_px=(HEATMAP_PX, min(HEATMAP_PX, max(240, 10 * len(rows)))),
        frame=(typed, len(cols)) if typed else None,
        tick_px=TABLE_TICK_PX,
    )
    return board([panel])


def wavelength_figure(
    lengths: np.ndarray, width: int, n_positions: int, what: str = "d_model", base: float = 10000.0
) -> dict:
    """Period in positions of each sin/cos pair (log scale), with the max position drawn for scale."""
    pairs = np.arange(len(lengths))
    dims = [f"{2 * i}, {2 * i + 1}" if 2 * i + 1 < width else f"{2 * i}" for i in pairs]
    line_name, max_name = "wavelength of the pair", f"max position shown ({n_positions:,})"
    frame = pd.DataFrame({"pair": pairs.astype(np.int32), "dims": dims, "wavelength": lengths.astype(np.float64)})
    series = {"type": "nominal", "title": None,
              "scale": {"domain": [line_name, max_name], "range": ["#1f77b4", "#555555"]},
              "legend": {"orient": "bottom-right", "fillColor": "#ffffffd9", "symbolType": "stroke",
                         "symbolStrokeWidth": 2, "symbolSize": 300}}  # fmt: skip
    dash = {"type": "nominal", "title": None, "scale": {"domain": [line_name, max_name], "range": [[1, 0], [6, 4]]}}
    x = {"field": "pair", "type": "quantitative", "axis": _line_axis("pair i (dimensions 2i and 2i+1)", tickMinStep=1),
         "scale": {"nice": False, "domain": [0, max(1, len(lengths) - 1)]}}  # fmt: skip
    y = {"field": "wavelength", "type": "quantitative", "scale": {"type": "log"},
         "axis": _line_axis("wavelength (positions, log scale)", format="~s")}  # fmt: skip
    subtitle = (
        f"pair i repeats every 2π·{base:.0f}^(2i/{what}) positions: here from {lengths[0]:,.1f} (pair 0) up to "
        f"{lengths[-1]:,.0f} (pair {len(lengths) - 1})\n"
        "pairs above the dashed line do not complete one period within the positions shown"
    )
    return chart(
        {
            "title": heading(f"Wavelength of each pair ({what} = {width})", subtitle, LINE_WIDTH + 40),
            "width": LINE_WIDTH,
            "height": 300,
            "datasets": {"pos_wavelengths": frame},
            "layer": [
                {
                    "data": {"name": "pos_wavelengths"},
                    "transform": [{"calculate": f"'{line_name}'", "as": "series"}],
                    "mark": {"type": "line", "strokeWidth": 2},
                    "encoding": {
                        "x": x,
                        "y": y,
                        "color": {"field": "series", **series},
                        "strokeDash": {"field": "series", **dash},
                    },
                },
                {
                    "data": {"name": "pos_wavelengths"},
                    "mark": {"type": "point", "filled": True, "size": 30, "opacity": 1, "color": "#1f77b4"},
                    "encoding": {
                        "x": x,
                        "y": y,
                        "tooltip": [
                            {"field": "pair"},
                            {"field": "dims", "title": "dimensions"},
                            {"field": "wavelength", "title": "wavelength (positions)", "format": ",.1f"},
                        ],
                    },
                },
                {
                    "data": {"values": [{"wavelength": n_positions, "series": max_name}]},
                    "mark": {"type": "rule", "strokeWidth": 1},
                    "encoding": {
                        "y": {"field": "wavelength", "type": "quantitative"},
                        "color": {"field": "series", **series},
                        "strokeDash": {"field": "series", **dash},
                    },
                },
            ],
        }
    )


def similarity_heatmap(
    sim: np.ndarray, positions: np.ndarray, metric: str, n_tokens: int, kind: str, trained: bool = False
) -> dict:
    """[P', P'] similarity between the encodings of positions (the given, possibly thinned, position indices), as a
    matrix-view board: every cell hovers, the typed positions framed in red."""
    n_all = int(positions[-1]) + 1 if len(positions) else 0
    label = "cosine" if metric == "cosine" else "dot product"
    ramp = Ramp(RDBU, -1.0, 1.0) if metric == "cosine" else _diverging(sim)
    step = int(positions[1] - positions[0]) if len(positions) > 1 else 1
    note = f" · every {ordinal(step)} position drawn" if step > 1 else ""
    which = "sinusoidal encodings" if kind == "sinusoidal" else f"learned ({_state(trained)}) embeddings"
    subtitle = {
        "sinusoidal": "nearby positions look alike: a dark red band along the diagonal",
        "untrained": "random untrained vectors: alike only with themselves (the diagonal)",
        "trained": "vectors shaped by training, not by a formula: alike where training made them so",
    }["sinusoidal" if kind == "sinusoidal" else _state(trained)]
    subtitle += f" · red frame: the typed tokens' positions{note}"
    title = f"{'Cosine similarity' if metric == 'cosine' else 'Dot product'} between the {which} of two positions"
    labels = [str(p) for p in positions]
    typed = int(np.searchsorted(positions, min(n_tokens, n_all)))
    side = max(240.0, min(HEATMAP_PX, MAX_CELL_PX * len(positions)))  # px: at least 240 for a few positions
    panel = matrix_panel(
        sim.astype(np.float32),
        None,
        ramp,
        name="pos_similarity",
        x_labels=labels,
        y_labels=labels,
        x_title="position",
        y_title="position",
        value_title=label,
        title=title,
        subtitle=subtitle,
        text_digits=None,
        plot_px=(side, side),
        frame=(typed, typed) if typed else None,
        tick_px=TABLE_TICK_PX,
        hover_titles=("row position", "column position"),
    )
    return board([panel])


def similarity_profile(row: np.ndarray, reference: int, metric: str, which: str = "") -> dict:
    """similarity_to(table, reference): how alike position `reference` is to every position 0..P-1."""
    frame = pd.DataFrame({"position": np.arange(len(row), dtype=np.int32), "value": row.astype(np.float32)})
    x = {"field": "position", "type": "quantitative", "axis": _line_axis("position"),
         "scale": {"domain": [0, max(1, len(row) - 1)], "nice": False, "zero": False}}  # fmt: skip
    y = {"field": "value", "type": "quantitative", "axis": _line_axis(metric)}
    what = "Cosine similarity" if metric == "cosine" else "Dot product"
    which = f" ({which})" if which else ""
    return chart(
        {
            "title": heading(f"{what} of position {reference}{which} with each position"),
            "width": LINE_WIDTH,
            "height": 230,
            "datasets": {"pos_profile": frame},
            "layer": [
                {
                    "data": {"name": "pos_profile"},
                    "mark": {"type": "line", "strokeWidth": 2, "color": "#1f77b4"},
                    "encoding": {"x": x, "y": y},
                },
                {
                    "data": {"name": "pos_profile"},
                    "mark": {"type": "point", "filled": True, "size": 30, "color": "#1f77b4",
                             "opacity": 1 if len(row) <= SMALL_MARKERS else 0},
                    "encoding": {"x": x, "y": y, "tooltip": [
                        {"field": "position"},
                        {"field": "value", "title": f"{metric} with position {reference}", "format": ".4f"},
                    ]},
                },
                {
                    "data": {"values": [{"position": reference}]},
                    "mark": {"type": "rule", "color": TYPED_COLOUR, "strokeDash": [2, 3], "strokeWidth": 1.5},
                    "encoding": {"x": {"field": "position", "type": "quantitative"}},
                },
            ],
        }
    )  # fmt: skip


def rope_angle_heatmap(angles: np.ndarray, n_tokens: int, base: float = 10000.0) -> dict:
    """[P, K/2] rotation angle of each pair at each position, wrapped to 0–360° on a cyclic colour scale, as a
    matrix-view board: every cell hovers with its angle in degrees and in radians, the typed positions framed."""
    n_positions, n_pairs = angles.shape
    rows = every_nth(n_positions)
    raw = angles[rows].astype(np.float32)  # [P', K/2] radians
    degrees = np.degrees(np.mod(raw.astype(np.float64), 2 * math.pi)).astype(np.float32)  # [P', K/2]
    subtitle = (
        f"angle of pair i at position p = p / {base:.0f}^(2i/d_head), shown modulo 360°; pair 0 turns a full radian "
        "per position, the last pairs barely move · red frame: the typed tokens"
        + _shown_note(rows, n_positions, "position")
    )
    typed = int(np.searchsorted(rows, min(n_tokens, n_positions)))  # rows drawn for typed positions
    panel = matrix_panel(
        degrees,
        None,
        Ramp(TWILIGHT, 0.0, 360.0),
        name="pos_rope",
        x_labels=[str(i) for i in range(n_pairs)],
        y_labels=[str(r) for r in rows],
        x_title="pair i (dimensions 2i and 2i+1 of each head)",
        y_title="position",
        hover_titles=("position", "pair"),
        value_title="angle mod 360 (°)",
        value_digits=1,
        extra={"angle (rad)": (raw, 4)},
        title="Rotary encoding: how far each pair of a query or key is turned",
        subtitle=subtitle,
        text_digits=None,
        plot_px=(min(HEATMAP_PX, max(400, 40 * n_pairs)), min(520, max(240, 8 * len(rows)))),
        frame=(typed, n_pairs) if typed else None,
        tick_px=TABLE_TICK_PX,
        legend_marks=[90.0, 180.0, 270.0],  # quarter turns
    )
    return board([panel])


def _flat_ramp(colours: tuple[str, ...], values: np.ndarray) -> Ramp:
    """A ramp over the finite values (a little wider when they are all equal, e.g. no positions at all)."""
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if high - low < 1e-6 * max(1.0, abs(low)):
        low, high = low - 0.5e-3 * max(1.0, abs(low)), high + 0.5e-3 * max(1.0, abs(high))
    return Ramp(colours, low, high)


def offset_scores_panel(result: OffsetScores) -> dict:
    """The [query position, key position] scores of one head on a repeated token, as a matrix-view board (masked
    keys grey)."""
    scores = np.where(np.isfinite(result.scores), result.scores, np.nan).astype(np.float32)  # [P, P]
    allowed = np.isfinite(scores)  # [P, P]
    labels = [str(i) for i in range(scores.shape[0])]
    panel = matrix_panel(
        np.nan_to_num(scores),
        allowed,
        _flat_ramp(VIRIDIS, scores),
        name="pos_offset",
        x_labels=labels,
        y_labels=labels,
        x_title="key position",
        y_title="query position",
        value_title="score",
        title="score of query position vs key position",
        text_digits=None,
        masked_text="masked: this key may not be attended to",
        max_px=OFFSET_PX,
        tick_px=TABLE_TICK_PX,
    )
    return board([panel])


def offset_profile_figure(result: OffsetScores) -> dict:
    """The score against the offset (query minus key position): the mean over each diagonal, and its range."""
    scores = np.where(np.isfinite(result.scores), result.scores, np.nan)  # [P, P]
    n = scores.shape[0]
    low, high = [], []
    for offset in result.offsets:
        diagonal = np.diagonal(scores, offset=-int(offset))  # query m, key m - offset
        finite = diagonal[np.isfinite(diagonal)]
        low.append(float(finite.min()) if finite.size else np.nan)
        high.append(float(finite.max()) if finite.size else np.nan)
    frame = pd.DataFrame(
        {
            "offset": result.offsets.astype(np.int32),
            "mean": result.by_offset.astype(np.float32),
            "lowest": np.asarray(low, dtype=np.float32),
            "highest": np.asarray(high, dtype=np.float32),
        }
    )
    mean_name, range_name = "mean score at this offset", "range over the diagonal"
    series = {"type": "nominal", "title": None,
              "scale": {"domain": [mean_name, range_name], "range": ["#1f77b4", "rgba(214, 39, 40, 0.25)"]},
              "legend": {"orient": "bottom", "direction": "horizontal", "symbolStrokeWidth": 2}}  # fmt: skip
    present = result.offsets[np.isfinite(result.by_offset)]  # a causal mask leaves only offsets >= 0
    first, last = (int(present.min()), int(present.max())) if present.size else (-(n - 1), n - 1)
    x = {"field": "offset", "type": "quantitative", "axis": _line_axis("offset: query position − key position"),
         "scale": {"domain": [first, last], "nice": False, "zero": False}}  # fmt: skip
    y = {"field": "mean", "type": "quantitative", "scale": {"zero": False},
         "axis": _line_axis("score q·k / √d_head")}  # fmt: skip
    return chart(
        {
            "title": heading("score against offset (query − key)"),
            "width": 380,
            "height": OFFSET_PX,
            "datasets": {"pos_offsets": frame},
            "data": {"name": "pos_offsets"},
            "layer": [
                {
                    "transform": [{"calculate": f"'{range_name}'", "as": "series"}],
                    "mark": {"type": "area"},
                    "encoding": {"x": x, "y": {**y, "field": "lowest"}, "y2": {"field": "highest"},
                                 "color": {"field": "series", **series}},
                },
                {
                    "transform": [{"calculate": f"'{mean_name}'", "as": "series"}],
                    "mark": {"type": "line", "strokeWidth": 2},
                    "encoding": {"x": x, "y": y, "color": {"field": "series", **series}},
                },
                {
                    "mark": {"type": "point", "filled": True, "size": 20, "color": "#1f77b4",
                             "opacity": 1 if len(frame) <= SMALL_MARKERS else 0},
                    "encoding": {"x": x, "y": y, "tooltip": [
                        {"field": "offset"},
                        {"field": "mean", "title": "mean score", "format": ".4f"},
                        {"field": "lowest", "format": ".4f"},
                        {"field": "highest", "format": ".4f"},
                    ]},
                },
            ],
        }
    )  # fmt: skip


def offset_verdict(result: OffsetScores, positional: str) -> str:
    """What the offset scores show, in one sentence: whether each diagonal is constant."""
    n = result.scores.shape[0]
    means = result.by_offset[np.isfinite(result.by_offset)]  # [offsets with a score]
    if result.spread < 1e-4 and means.size and float(means.max() - means.min()) < 1e-4:
        verdict = "every score is the same: the score depends on neither the positions nor the offset"
    elif result.spread < 1e-4:
        verdict = "each diagonal is constant: the score depends on the offset only"
    else:
        verdict = "the diagonals vary: the score depends on where both tokens sit, not just the offset"
    return (
        f"{positional}: layer {result.layer}, head {result.head} scores when {result.token!r} fills all {n} "
        f"positions: {verdict} (largest spread along a diagonal: {readable(result.spread, 2)})"
    )


def permutation_figure(demo: PermutationDemo, layer: int, head: int) -> dict:
    """Three maps of one head as a matrix-view board: on the typed tokens; the same map with rows and columns moved
    along with the reordered tokens; and the map of a run on the reordered tokens. The last two agree when order
    is invisible. One weight scale, 0 to 1, so only the last map draws its legend; masked cells are grey."""
    typed, shuffled = token_labels(demo.tokens), token_labels(demo.shuffled)
    maps = (  # every map has a subtitle, so the three line up
        ("perm_typed", demo.attention, demo.allowed, typed, "① typed order", "a run on the typed tokens"),
        ("perm_moved", demo.permuted_attention, demo.permuted_allowed, shuffled, "② map ①, moved",
         "rows and columns follow the tokens"),
        ("perm_rerun", demo.shuffled_attention, demo.shuffled_allowed, shuffled, "③ reordered run",
         "a run on the reordered tokens"),
    )  # fmt: skip
    panels = [
        matrix_panel(
            weights[layer, head].astype(np.float32),  # [T, T]
            allowed,
            WEIGHTS,
            name=name,
            x_labels=labels,
            y_labels=labels,
            x_title="key",
            y_title="query",
            value_title="weight",
            title=title,
            subtitle=subtitle,
            max_px=PERMUTATION_PX,
            legend=name == "perm_rerun",
        )
        for name, weights, allowed, labels, title, subtitle in maps
    ]
    return board(panels)


def permutation_verdict(demo: PermutationDemo, layer: int, head: int) -> str:
    """What the three maps of permutation_figure show, in one sentence."""
    difference = float(np.abs(demo.permuted_attention[layer, head] - demo.shuffled_attention[layer, head]).max())
    same = "② and ③ agree" if difference < 1e-5 else "② and ③ differ"
    return (
        f"Layer {layer}, head {head}: does reordering the tokens only move the map? {same}: largest |② − ③| in "
        f"this head = {readable(difference)}"
    )
