"""Charts of the positional page's two demonstrations: one head's scores when a token fills every position (do they
depend on the offset only?) and the maps of a run on reordered tokens. Arrays in, figures out (no Streamlit here):
a Plotly line chart for the score against the offset, matrix-view boards for the maps (pictures/boards.py).

Matrix panels: pos_offset, perm_typed, perm_moved, perm_rerun.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.analysis.position_analysis import OffsetScores, PermutationDemo
from explorer.numbers import readable, readable_share
from pictures.attention_panels import scale_note, spelled_names, token_labels, top_of, weight_ramp
from pictures.boards import board, matrix_panel, noted_board
from pictures.positional_charts import LINE_COLOUR, TABLE_TICK_PX, TYPED_COLOUR, mode, whole_numbers
from pictures.style import MASKED_OFF_VIRIDIS, VIRIDIS, Ramp, axis, figure_layout

OFFSET_PX = 300  # px along each side of the offset-score matrix, and the height of the line chart beside it
PERMUTATION_PX = 190  # px along each side of the three reordering maps: they fit side by side
CONSTANT_SPREAD = 1e-4  # a spread along a diagonal below this is none (float32 rounding on a small model's scores)
OFFSET_ONLY = ("rope", "none")  # encodings whose scores on a repeated token depend on the offset alone, exactly
ROUNDING_SHARE = 1e-3  # with those, a spread below this share of the largest |score| is float32 rounding
RANGE_COLOUR = "rgba({}, {}, {}, 0.25)".format(*(int(TYPED_COLOUR[i : i + 2], 16) for i in (1, 3, 5)))


def _flat_ramp(colours: tuple[str, ...], values: np.ndarray) -> Ramp:
    """A ramp over the finite values (a little wider when they are all equal, e.g. no positions at all); masked cells
    white (MASKED_OFF_VIRIDIS: on VIRIDIS the grey reads as a mid score to a colour-blind eye)."""
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if high - low < 1e-6 * max(1.0, abs(low)):
        low, high = low - 0.5e-3 * max(1.0, abs(low)), high + 0.5e-3 * max(1.0, abs(high))
    return Ramp(colours, low, high, MASKED_OFF_VIRIDIS)


def offset_scores_panel(result: OffsetScores) -> dict:
    """The [query position, key position] scores of one head on a repeated token, as a matrix-view board (masked
    keys white)."""
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


def _diagonal_ranges(scores: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[offsets] lowest and highest finite score on each diagonal (query m, key m - offset); NaN where none."""
    low, high = [], []
    for offset in offsets:
        diagonal = np.diagonal(scores, offset=-int(offset))
        finite = diagonal[np.isfinite(diagonal)]
        low.append(float(finite.min()) if finite.size else np.nan)
        high.append(float(finite.max()) if finite.size else np.nan)
    return np.asarray(low, dtype=np.float32), np.asarray(high, dtype=np.float32)


def offset_profile_figure(result: OffsetScores) -> go.Figure:
    """The score against the offset (query minus key position): the mean over each diagonal, and its range. Offsets
    whose every key is masked (a causal mask leaves only offsets >= 0) have no score and are not drawn."""
    n = result.scores.shape[0]
    low, high = _diagonal_ranges(result.scores, result.offsets)  # [2P - 1] each
    present = np.isfinite(result.by_offset)  # [2P - 1]
    offsets = result.offsets[present].astype(np.int32)
    first, last = (int(offsets.min()), int(offsets.max())) if offsets.size else (-(n - 1), n - 1)
    band = {"x": offsets, "mode": "lines", "line": {"width": 0}, "legendgroup": "range"}
    figure = go.Figure(
        [
            go.Scatter(y=low[present], name="lowest", showlegend=False,
                       hovertemplate="offset %{x}<br>lowest: %{y:.4f}<extra></extra>", **band),
            go.Scatter(y=high[present], name="range over the diagonal", fill="tonexty", fillcolor=RANGE_COLOUR,
                       hovertemplate="offset %{x}<br>highest: %{y:.4f}<extra></extra>", **band),
            go.Scatter(
                x=offsets,
                y=result.by_offset[present].astype(np.float32),
                customdata=np.stack([low[present], high[present]], axis=1),  # [offsets, 2]
                name="mean score at this offset",
                mode=mode(len(offsets)),
                cliponaxis=False,  # the axis ends on the first and last offsets: their markers are drawn whole
                line={"color": LINE_COLOUR, "width": 2},
                marker={"size": 5},
                hovertemplate="offset %{x}<br>mean score: %{y:.4f}<br>lowest: %{customdata[0]:.4f}"
                "<br>highest: %{customdata[1]:.4f}<extra></extra>",
            ),
        ]
    )  # fmt: skip
    figure.update_layout(
        figure_layout("score against offset (query − key)", "", OFFSET_PX),
        xaxis=whole_numbers(first, last, "offset (query − key position)"),
        yaxis=axis("score q·k / √d_head"),
        legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top"},
        margin={"b": 96},
    )
    return figure


def offset_tolerance(result: OffsetScores, positional: str) -> float:
    """The spread along a diagonal below which offset_verdict calls it constant: CONSTANT_SPREAD, or with rope or no
    encoding, whose diagonals are constant in exact arithmetic, ROUNDING_SHARE of the largest |score| when that is
    more. Measured, float32 rounding spreads them by up to 1.2 × 10⁻⁴ of it: SmolLM2's layer 11, whose residual
    stream is hundreds of times a score."""
    if positional not in OFFSET_ONLY:
        return CONSTANT_SPREAD
    finite = result.scores[np.isfinite(result.scores)]  # [allowed cells]
    largest = float(np.abs(finite).max()) if finite.size else 0.0
    return max(CONSTANT_SPREAD, ROUNDING_SHARE * largest)


def offset_verdict(result: OffsetScores, positional: str, label: str | None = None) -> str:
    """What the offset scores show, in one sentence: whether each diagonal is constant (up to float32 rounding,
    offset_tolerance). `label`: the token as the page's axes write it (SmolLM2's "Ġthe" is "␣the"); the token as it is
    when None."""
    n = result.scores.shape[0]
    means = result.by_offset[np.isfinite(result.by_offset)]  # [offsets with a score]
    tolerance = offset_tolerance(result, positional)
    flat = tolerance if positional == "none" else CONSTANT_SPREAD  # only no encoding makes every score equal exactly
    rounding = " up to float32 rounding" if result.spread > 0 else ""
    if result.spread < tolerance and means.size and float(means.max() - means.min()) < flat:
        verdict = f"every score is the same{rounding}: the score depends on neither the positions nor the offset"
    elif result.spread < tolerance:
        verdict = f"each diagonal is constant{rounding}: the score depends on the offset only"
    else:
        verdict = "the diagonals vary: the score depends on where both tokens sit, not just the offset"
    token = result.token if label is None else label
    return (
        f"{positional}: layer {result.layer}, head {result.head} scores when {token!r} fills all {n} "
        f"positions: {verdict} (largest spread along a diagonal: {readable(result.spread, 2)})"
    )


def permutation_figure(demo: PermutationDemo, layer: int, head: int, stretch: bool = False) -> dict:
    """Three maps of one head as a matrix-view board: on the typed tokens; the same map with rows and columns moved
    along with the reordered tokens; and the map of a run on the reordered tokens. The last two agree when order
    is invisible. One weight scale, so only the last map draws its legend; masked cells are grey. The scale is 0 to
    1, or `stretch`ed to the top 1 % of the three maps' weights (weight_ramp), as the attention maps: a long text
    spreads each row over hundreds of keys, white on 0 to 1. The first map's subtitle says which (scale_note)."""
    typed, shuffled = token_labels(demo.labels), token_labels(demo.shuffled_labels)
    typed_names = spelled_names(demo.tokens, demo.byte_level)  # hover: each piece's spelling beside its label
    shuffled_names = spelled_names(demo.shuffled, demo.byte_level)
    maps = (  # every map has a subtitle, so the three line up; each [T, T]
        ("perm_typed", demo.attention[layer, head], demo.allowed, typed, typed_names, "① typed order",
         "a run on the typed tokens"),
        ("perm_moved", demo.permuted_map(layer, head), demo.permuted_allowed, shuffled, shuffled_names,
         "② map ①, moved", "rows and columns follow the tokens"),
        ("perm_rerun", demo.shuffled_attention[layer, head], demo.shuffled_allowed, shuffled, shuffled_names,
         "③ reordered run", "a run on the reordered tokens"),
    )  # fmt: skip
    top = top_of(np.concatenate([weights[allowed] for _, weights, allowed, *_ in maps]))
    ramp = weight_ramp(top if stretch else None)
    panels = [
        matrix_panel(
            weights.astype(np.float32),  # [T, T]
            allowed,
            ramp,
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
            hover_names=None if names is None else (names, names),
        )
        for name, weights, allowed, labels, names, title, subtitle in maps
    ]
    return noted_board(panels, scale_note(top, stretch))


def permutation_verdict(demo: PermutationDemo, layer: int, head: int) -> str:
    """What the three maps of permutation_figure show, in one sentence."""
    difference = float(np.abs(demo.permuted_map(layer, head) - demo.shuffled_attention[layer, head]).max())
    same = "② and ③ agree" if difference < 1e-5 else "② and ③ differ"
    return (
        f"Layer {layer}, head {head}: does reordering the tokens only move the map? {same}: largest |② − ③| in "
        f"this head = {readable_share(difference)}"
    )
