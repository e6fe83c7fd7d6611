"""Charts of the positional page's encodings: the added table's curves and whole matrix, wavelengths, similarities
and rotary angles. Arrays in, figures out (no Streamlit here): Plotly figures for the curves and profiles (laid out
with pictures/style.py), matrix-view boards for every matrix (pictures/boards.py). The offset and reordering
demonstrations are pictures/position_demo_charts.py's.

Matrix panels: pos_table, pos_similarity, pos_rope.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from pictures.attention_panels import FAINT, top_of
from pictures.boards import board, matrix_panel
from pictures.one_pass import merged
from pictures.style import (
    CATEGORY10,
    DISTINCT,
    LEGEND_FIRST_ROW_PX,
    LEGEND_ROW_PX,
    MAX_CELL_PX,
    RDBU,
    SUBTITLE_COLOUR,
    Ramp,
    axis,
    figure_layout,
    label_text,
    legend_below,
)

MAX_SIDE = 512  # rows or columns drawn in one heatmap; longer axes show every n-th (said in the title)
CURVE_POINTS = 8192  # points over all curves of one chart; longer curves keep the extremes of each stretch
TYPED_COLOUR = CATEGORY10[3]  # red
# red means "typed" on this page; curves take the colours a colour-blind eye tells apart too (DISTINCT), so the four
# pairs drawn by default are not blue and purple, orange and green, which protanopia makes one. Past six colours a
# curve takes the next dash (a learned table's default eight curves: the 7th and 8th dashed), not a seventh colour
# that some eye confuses with one of the six; a sinusoid's cosine is drawn in its sine's colour, in the round's second
# dash.
CURVE_DASHES = (("solid", "dot"), ("dash", "dashdot"), ("longdash", "longdashdot"))
LINE_COLOUR = CATEGORY10[0]  # blue: the one curve of a chart
REFERENCE_COLOUR = SUBTITLE_COLOUR  # grey: a line drawn for scale
TWILIGHT = ("#e2d9e2", "#9ebbc9", "#6785be", "#5e43a5", "#421257", "#471340", "#8e2c50", "#ba6657", "#ceac94",
            "#e2d9e2")  # fmt: skip  # cyclic: 0° and 360° share a colour
HEATMAP_PX = 640  # px along the longer side of a big heatmap
SMALL_MARKERS = 80  # a curve with at most this many points shows each point
TYPED_MARK_PX = 6  # a typed token's red mark: Plotly hovers the smaller of two marks on one point (a curve's point
# counts as 6 px), so a larger mark would lose its hover to the curve beneath it
# The curves' legend goes under the plot: beside it, its 164 px left a phone's 358 px chart a plot 116 px wide. Its
# rows are reserved for two entries a row, as a projector's page (564 px at 1024 with the sidebar) lays them out; a
# narrower window's extra rows grow the bottom margin as Plotly draws it.
LEGEND_PER_ROW = 2
CURVES_PX = 330  # px for the curves' plot and its axes, the legend's rows below them added
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


def _typed_tokens_hint(n_tokens: int, n_positions: int) -> str:
    """Which of `n_tokens` typed tokens' positions the red marks of a chart of `n_positions` positions show."""
    shown = min(n_tokens, n_positions)
    if n_tokens == 1:
        return "red: the typed token's position 0"
    if shown == n_tokens:
        return f"red: the {n_tokens} typed tokens' positions 0–{n_tokens - 1}"
    return f"red: the typed tokens' positions 0–{shown - 1} ({n_tokens - shown} typed tokens lie beyond)"


def _typed_frame_hint(n_tokens: int, n_positions: int) -> str:
    """_typed_tokens_hint for a matrix whose typed positions are framed in red: "red frame: the 3 typed tokens' ..."."""
    return "red frame: " + _typed_tokens_hint(n_tokens, n_positions).removeprefix("red: ")


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


def whole_numbers(low: float, high: float, title: str, **more: object) -> dict:
    """An axis of whole numbers (positions, pairs, offsets) from low to high: never a tick between two of them."""
    steps = {"tick0": 0, "dtick": 1} if high - low <= 12 else {}  # Plotly would tick 0.5 on a short axis
    return axis(title, numbers=",d", range=[low, high], **steps, **more)


def mode(n_points: int) -> str:
    """A curve of a few points shows each of them; a long one is a plain line."""
    return "lines+markers" if n_points <= SMALL_MARKERS else "lines"


def _typed_marks(table: np.ndarray, dims: list[int], names: list[str], tokens: list[str]) -> go.Scatter:
    """The typed tokens' points on every curve, red; hover names the dimension, the position and the token."""
    typed = len(tokens)
    name_of = np.repeat(np.asarray(names, dtype=object), typed)  # [dims * typed], dimension by dimension
    token_of = np.tile(np.asarray([label_text(t) for t in tokens], dtype=object), len(dims))  # escaped: user text
    return go.Scatter(
        x=np.tile(np.arange(typed, dtype=np.int32), len(dims)),
        y=table[:typed, dims].T.ravel().astype(np.float32),  # [dims * typed]
        customdata=np.stack([name_of, token_of], axis=1),  # [dims * typed, 2]
        mode="markers",
        cliponaxis=False,  # whole_numbers ends the axis on the last position: its marks are drawn whole
        name="typed tokens",
        marker={"color": TYPED_COLOUR, "size": TYPED_MARK_PX, "line": {"color": "white", "width": 1}},
        hovertemplate="%{customdata[0]}<br>position: %{x}<br>token: %{customdata[1]}<br>value: %{y:.4f}<extra></extra>",
    )


def curve_line(group: int, cosine: bool) -> dict:
    """The line of a chart's `group`-th curve (a sinusoid's pair or a learned dimension): DISTINCT's colours in turn,
    each round of them in the next dash of CURVE_DASHES; a cosine in its sine's colour, its round's second dash."""
    round_of, colour = divmod(group, len(DISTINCT))
    dashes = CURVE_DASHES[round_of % len(CURVE_DASHES)]
    return {"color": DISTINCT[colour], "width": 2, "dash": dashes[1] if cosine else dashes[0]}


def encoding_curves(
    table: np.ndarray, dims: list[int], tokens: list[str], kind: str, trained: bool = False
) -> go.Figure:
    """Encoding value against position, one line per chosen dimension; the typed tokens' positions are marked.

    A sine and its cosine share a colour (the cosine dotted). Curves longer than the chart's point budget keep the
    lowest and highest value of each stretch of positions (said in the subtitle). Hover any point of a curve.
    """
    n_positions = table.shape[0]  # table: [P, D]
    typed = min(len(tokens), n_positions)
    names = [pair_name(d, kind) for d in dims]
    groups = sorted({d // 2 if kind == "sinusoidal" else d for d in dims})
    budget = max(2, CURVE_POINTS // max(1, len(dims)))
    traces, drawn = [], 0
    for dim, name in zip(dims, names, strict=True):
        keep = extremes(table[:, dim], budget)  # [kept positions]
        drawn += len(keep)
        group = groups.index(dim // 2 if kind == "sinusoidal" else dim)
        traces.append(
            go.Scatter(
                x=keep.astype(np.int32),
                y=table[keep, dim].astype(np.float32),
                name=name,
                mode="lines",
                line=curve_line(group, kind == "sinusoidal" and dim % 2 == 1),
                hovertemplate=f"{name}<br>position: %{{x}}<br>value: %{{y:.4f}}<extra></extra>",
            )
        )  # fmt: skip
    if typed:  # after the curves: on a tie the last trace hovers, so a typed point names its token
        traces.append(_typed_marks(table, dims, names, [str(t) for t in tokens[:typed]]))
    note = _typed_tokens_hint(len(tokens), n_positions)
    if drawn < n_positions * len(dims):
        note += f" · long curves: the lowest and highest value of each stretch of {n_positions:,} positions drawn"
    what = "Sinusoidal encoding" if kind == "sinusoidal" else f"Learned position embedding ({_state(trained)})"
    shade = {"type": "rect", "xref": "x", "yref": "paper", "x0": -0.5, "x1": typed - 0.5, "y0": 0, "y1": 1,
             "fillcolor": TYPED_COLOUR, "opacity": 0.07, "line": {"width": 0}, "layer": "below"}  # fmt: skip
    rows = math.ceil(len(traces) / LEGEND_PER_ROW)
    height = CURVES_PX + LEGEND_FIRST_ROW_PX + LEGEND_ROW_PX * (rows - 1)
    layout = legend_below(
        figure_layout(f"{what}: value against position", note, height), rows, title={"text": "dimension"}
    )
    more = {
        "xaxis": whole_numbers(-0.5 if typed else 0, max(1, n_positions - 1), "position"),
        "yaxis": axis("value added to that dimension"),
        "shapes": [shade] if typed else [],
    }
    return go.Figure(traces, layout=merged(layout, more))  # one pass (pictures/one_pass.py): the page's first chart


def _diverging(values: np.ndarray) -> Ramp:
    top = float(max(np.abs(values).max(), 1e-6)) if values.size else 1.0
    return Ramp(RDBU, -top, top)


def table_colours(values: np.ndarray, kind: str, stretch: bool) -> tuple[Ramp, str | None]:
    """The encoding table's diverging colours and what a subtitle says of them. Off: the full range (±1 for sinusoids,
    ±the largest |value| for a learned table). Stretched: ±the 99th percentile of |value| (top_of, as the attention
    maps stretch), so one outlier cannot wash out the rest (MiniLM: one entry of 1.87 where 99 % lie within ±0.07)."""
    if not values.size:
        return Ramp(RDBU, -1.0, 1.0), None
    full = 1.0 if kind == "sinusoidal" else float(max(np.abs(values).max(), 1e-6))
    robust = top_of(np.abs(values))  # [P', D'] -> the 99th percentile of |value|
    if stretch:
        note = f"colours stretched: darkest = ±{robust:.2g} or more (the top 1 % of |value|)"
        return Ramp(RDBU, -robust, robust), note
    note = None
    if robust < FAINT * full:
        note = (
            f"99 % of the values lie within ±{robust:.2g}, pale next to the largest ({full:.3g}): try Stretch colours"
        )
    return Ramp(RDBU, -full, full), note


def encoding_heatmap(
    table: np.ndarray, tokens: list[str], kind: str, trained: bool = False, stretch: bool = False
) -> dict:
    """The whole [position, dimension] table as a matrix-view board (every cell hovers, at any size): positions
    down, dimensions across, the typed positions framed in red; `stretch`: colours over the middle 99 % of |values|
    (table_colours)."""
    n_positions, d_model = table.shape  # [P, D]
    rows, cols = every_nth(n_positions), every_nth(d_model)
    z = table[np.ix_(rows, cols)].astype(np.float32)  # [P', D']
    ramp, scale = table_colours(z, kind, stretch)
    state = "trained" if trained else "untrained, random init"
    what = "Sinusoidal encoding" if kind == "sinusoidal" else f"Learned position embedding ({state})"
    note = _shown_note(rows, n_positions, "position") + _shown_note(cols, d_model, "dimension")
    subtitle = _typed_frame_hint(len(tokens), n_positions) + note
    if kind == "sinusoidal":
        sines = "even dimensions sin, odd cos" if (cols % 2).any() else "only even dimensions (the sines) drawn"
        subtitle = f"{sines}; slower waves further right · " + subtitle
    if scale:
        subtitle += " · " + scale
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


def pair_dimensions(layout: str = "interleaved") -> str:
    """Which dimensions pair i turns together: (2i, 2i+1) in the paper's layout, (i, i + d_head/2) in Hugging Face
    Llama's ("half"), as SmolLM2 and OLMo 2 have it."""
    return "dimensions i and i + d_head/2" if layout == "half" else "dimensions 2i and 2i+1"


def wavelength_figure(
    lengths: np.ndarray,
    width: int,
    n_positions: int,
    what: str = "d_model",
    base: float = 10000.0,
    layout: str = "interleaved",
) -> go.Figure:
    """Period in positions of each sin/cos pair (log scale), with the max position drawn for scale; `layout`: which
    dimensions make a pair (pair_dimensions)."""
    pairs = np.arange(len(lengths), dtype=np.int32)
    if layout == "half":
        dims = [f"{i}, {i + width // 2}" for i in pairs]
    else:
        dims = [f"{2 * i}, {2 * i + 1}" if 2 * i + 1 < width else f"{2 * i}" for i in pairs]
    last = max(1, len(lengths) - 1)
    subtitle = (
        f"pair i repeats every 2π·{base:.0f}^(2i/{what}) positions: from {lengths[0]:,.1f} (pair 0) to "
        f"{lengths[-1]:,.0f} (pair {len(lengths) - 1}) · pairs above the dashed line do not complete one period "
        "within the positions shown"
    )
    figure = go.Figure(
        [
            go.Scatter(
                x=pairs,
                y=lengths.astype(np.float64),
                customdata=dims,
                name="wavelength of the pair",
                mode="lines+markers",
                cliponaxis=False,  # the axis ends on pair 0 and on the last pair: their markers are drawn whole
                line={"color": LINE_COLOUR, "width": 2},
                marker={"size": 6},
                hovertemplate="pair %{x}<br>dimensions: %{customdata}<br>wavelength (positions): %{y:,.1f}"
                "<extra></extra>",
            ),
            go.Scatter(
                x=[0, last],
                y=[n_positions, n_positions],
                name=f"positions shown ({n_positions:,})",
                mode="lines",
                line={"color": REFERENCE_COLOUR, "width": 1, "dash": "dash"},
                hovertemplate="positions shown: %{y:,}<extra></extra>",
            ),
        ]
    )
    figure.update_layout(
        figure_layout(f"Wavelength of each pair ({what} = {width})", subtitle, 300),
        xaxis=whole_numbers(0, last, f"pair i ({pair_dimensions(layout)})"),
        yaxis=axis("wavelength (positions, log scale)", numbers="~s", type="log"),
        legend={"x": 1, "xanchor": "right", "y": 0, "yanchor": "bottom", "bgcolor": "rgba(255, 255, 255, 0.85)"},
    )
    return figure


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
        "untrained": "random untrained vectors: no pattern, two positions alike only by chance",
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


def similarity_profile(row: np.ndarray, reference: int, metric: str, which: str = "") -> go.Figure:
    """similarity_to(table, reference): how alike position `reference` is to every position 0..P-1."""
    what = "Cosine similarity" if metric == "cosine" else "Dot product"
    which = f" ({which})" if which else ""
    figure = go.Figure(
        go.Scatter(
            x=np.arange(len(row), dtype=np.int32),
            y=row.astype(np.float32),
            name=f"{metric} with position {reference}",
            mode=mode(len(row)),
            cliponaxis=False,  # the axis ends on the first and last positions: their markers are drawn whole
            line={"color": LINE_COLOUR, "width": 2},
            marker={"size": 5},
            hovertemplate=f"position: %{{x}}<br>{metric} with position {reference}: %{{y:.4f}}<extra></extra>",
        )
    )
    rule = {"type": "line", "xref": "x", "yref": "paper", "x0": reference, "x1": reference, "y0": 0, "y1": 1,
            "line": {"color": TYPED_COLOUR, "dash": "dot", "width": 1.5}}  # fmt: skip
    figure.update_layout(
        figure_layout(f"{what} of position {reference}{which} with each position", "", 230),
        xaxis=whole_numbers(0, max(1, len(row) - 1), "position"),
        yaxis=axis(metric),
        shapes=[rule],
        showlegend=False,
    )
    return figure


def _slowest_turn(angles: np.ndarray) -> str:
    """How far the slowest pair of angles [P, K/2] has turned by the last position drawn, as the rope subtitle's
    clause (", the last (pair 31) 0.052° in all by position 63": SmolLM2's barely moves, while with d_head 4 the last
    pair turns 36°), or "" when pair 0 is the only pair."""
    n_positions, n_pairs = angles.shape
    if n_pairs < 2:
        return ""
    degrees = math.degrees(float(angles[-1, -1]))
    return f", the last (pair {n_pairs - 1}) {degrees:.2g}° in all by position {n_positions - 1}"


def rope_angle_heatmap(angles: np.ndarray, n_tokens: int, base: float = 10000.0, layout: str = "interleaved") -> dict:
    """[P, K/2] rotation angle of each pair at each position, wrapped to 0–360° on a cyclic colour scale, as a
    matrix-view board: every cell hovers with its angle in degrees and in radians, the typed positions framed;
    `layout`: which dimensions make a pair (pair_dimensions)."""
    n_positions, n_pairs = angles.shape
    rows = every_nth(n_positions)
    raw = angles[rows].astype(np.float32)  # [P', K/2] radians
    degrees = np.degrees(np.mod(raw.astype(np.float64), 2 * math.pi)).astype(np.float32)  # [P', K/2]
    subtitle = (
        f"angle of pair i at position p = p / {base:.0f}^(2i/d_head), shown modulo 360°; pair 0 turns a full radian "
        f"per position{_slowest_turn(angles)}"
        + (f" · {_typed_frame_hint(n_tokens, n_positions)}" if n_tokens else "")
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
        x_title=f"pair i ({pair_dimensions(layout)} of each head)",
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
