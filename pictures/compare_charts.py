"""Charts for the Compare page: A's and B's maps on one colour scale, A - B on a diverging scale centred on 0, and
the heads ranked by how much they changed (click one to show it) as matrix-view panels (pictures.boards, drawn
by views/matrix_view.js), and A − B of what a head adds as a Plotly figure for the view's download (the per-layer
statistics are pictures.compare_lines_chart's). No Streamlit here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.numbers import readable
from explorer.trace import AttentionMaps
from pictures.attention_panels import (
    FAINT,
    NORM,
    axis_titles,
    norm_scale_note,
    token_hover_names,
    token_labels,
    top_of,
    weight_ramp,
)
from pictures.boards import matrix_panel
from pictures.style import (
    BLUES,
    HOVER_NUMBERS,
    MASKED_PLOT,
    TICK_PX,
    Ramp,
    axis,
    decimals_for,
    figure_layout,
    label_text,
    layer_head_axes,
    masked_map_axes,
    noted,
    plotly_scale,
)

A_COLOUR = "#1f5fa8"  # A is blue everywhere: its lines, and A - B > 0 (A attends more)
B_COLOUR = "#c2410c"  # B is orange-red: its lines, and A - B < 0 (B attends more)
ORANGES = ("#fff5eb", "#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#a63603", "#7f2704")
# Sizes that fit a 1366 px wide window (a common laptop) with the sidebar open, whose main column is 906 px: A | B
# side by side in at most 2 x 260 px and the board's 40 px between them, the row's 16 px gap, and A - B beside them in
# at most 330 px (906 px in all); a narrower window puts A - B under them at its size (views/compare.py).
# A panel is its map plus LEFT_PX and the widest query label on the left, and RIGHT_PX and its legend on the right;
# A and B share one scale, so only the last of them draws it.
PAIR_PX = 200  # px along the longer side of A's and of B's map, at most
DIFFERENCE_PX = 180  # px along the longer side of the A - B map, at most
PAIR_PANEL_PX = 260  # px one of A's and B's panels may take
DIFFERENCE_PANEL_PX = 330  # px the A - B panel may take
RANK = "rank (1: changed most)"  # a hover row of the ranking heatmap
RANKING_PX = 360  # px along the longer side of the ranking heatmap, at most
MIN_MAP_PX = 100  # a map is never smaller than this for long labels: B's panel wraps under A's, A − B's scrolls
LEFT_PX = 44  # axis title and gaps left of the query labels (measured in Chromium: 56 px with 2-character labels)
RIGHT_PX = 22  # gaps around the legend
LABEL_CHAR_PX = 6.0  # px per character of a 14 px label, about
TITLE_CHAR_PX = 7.5  # the same for the bold legend title
LEGEND_LABEL_PX = 48  # the legend's bar and its end labels ("-0.53")
WEIGHT_TEXT_PX, DIFFERENCE_TEXT_PX = 22, 26  # the values written in cells ("0.25", "-0.25") need cells this wide
RANKING_TEXT_PX = 28  # the same for the ranking's "0.123"
RANKING_CELL_PX = 44  # px of a ranking cell, at most RANKING_PX for them all
DIGIT_PX, DOT_PX = 7.1, 3.5  # px of a digit and of the point written at 14 px (the matrix view's text in cells of
# 34 px or more: Source Sans digits are 0.507 em wide)
ROUNDING = 1e-5  # |A - B| below this is float32 rounding (e.g. the same words in another order, no positions)


# What the maps show (the measure URL parameter): the legend title of A's and B's maps, what a masked cell is, and
# how the A − B map names its colours.
MEASURE_WORDS = {
    "weights": {"value": "weight", "masked": "masked: weight 0", "more": "attends more", "of": ""},
    "norms": {"value": NORM, "masked": f"masked: {NORM} 0", "more": "adds more", "of": f" of {NORM}"},
}


def measure_ramp(measure: str, top: float | None) -> Ramp:
    """A's and B's colour scale: weight_ramp for the weights (0 to 1, or stretched 0 to `top`); for the norms, white
    at 0 to dark blue at `top` (pair_norm_top, or stretched)."""
    if measure == "weights":
        return weight_ramp(top)
    return Ramp(BLUES, 0.0, top if top is not None and top > 0 else 1.0)


def pair_norm_top(sides: list[AttentionMaps], layer: int, head: int) -> float:
    """Where unstretched norm colours of A and B are darkest: the largest ‖α·f(x)‖ on an allowed cell of either's
    map of `layer` and `head` (`sides` carry the norms as their weights; 1e-6 at least). One scale for the two maps
    compared, not for every head: a head that adds 100 elsewhere would leave this pair white."""
    shown = [
        side.weights[layer, head][np.asarray(side.allowed, dtype=bool)]  # [allowed cells]
        for side in sides
        if layer < side.n_layers and head < side.n_heads
    ]
    values = np.concatenate(shown) if shown else np.zeros(0)
    return max(float(values.max()), 1e-6) if values.size else 1.0


def pair_norm_note(top: float, stretch: bool) -> str:
    """What the caption over A's and B's norm maps says of their colour scale (`top`: pair_norm_top, or pair_top
    when stretched)."""
    if stretch:
        return norm_scale_note(top, True)
    return (
        f"colour = {NORM}, what the head adds from each key: white = 0, darkest blue = {top:.3g}, the largest of "
        "the two maps"
    )


def difference_ramp(half: float) -> Ramp:
    """B's colour at -half, white at 0, A's colour at +half: the A - B scale, centred on 0."""
    return Ramp((B_COLOUR, "#ffffff", A_COLOUR), -half, half)


def map_px(most_px: float, panel_px: float, query_labels: list[list[str]], value_title: str) -> float:
    """px along the longer side of each of maps side by side, one per list of query labels, whose panels (query
    labels, map) and the one legend right of the last should fit in panel_px each: most_px, less when long labels
    or a long legend title would push them wider. One size for all, so their cells compare."""
    n = max(1, len(query_labels))
    lefts = sum(LEFT_PX + LABEL_CHAR_PX * max((len(label) for label in labels), default=0) for labels in query_labels)
    right = RIGHT_PX + max(LEGEND_LABEL_PX, TITLE_CHAR_PX * len(value_title))
    return max(MIN_MAP_PX, min(most_px, (n * panel_px - lefts - right) / n))


def difference_fits_beside(maps: AttentionMaps, measure: str = "weights") -> bool:
    """Whether the A − B map of `maps`' tokens fits its column beside A and B (DIFFERENCE_PANEL_PX). A map's cells
    are at least a pixel (matrix_panel), so past about 200 tokens its panel is wider than the column and the browser
    would shrink it, labels and all, to half their size: such a map goes under A and B, at full width."""
    labels = token_labels(maps.query_labels)
    value_title = f"A − B{MEASURE_WORDS[measure]['of']}"
    size = map_px(DIFFERENCE_PX, DIFFERENCE_PANEL_PX, [labels], value_title)
    left = LEFT_PX + LABEL_CHAR_PX * max((len(label) for label in labels), default=0)
    right = RIGHT_PX + max(LEGEND_LABEL_PX, TITLE_CHAR_PX * len(value_title))
    return left + max(size, len(maps.query_tokens), len(maps.key_tokens)) + right <= DIFFERENCE_PANEL_PX


def _token_map(maps: AttentionMaps, values: np.ndarray, allowed: np.ndarray, ramp: Ramp, **parts: object) -> dict:
    """A [Tq, Tk] map over maps' tokens as a panel: keys across, queries down, grey where not `allowed`."""
    x_title, y_title = axis_titles(maps.kind)
    return matrix_panel(
        values,
        allowed,
        ramp,
        x_labels=token_labels(maps.key_labels),
        y_labels=token_labels(maps.query_labels),
        x_title=x_title,
        y_title=y_title,
        tick_px=TICK_PX,
        **({"hover_names": token_hover_names(maps)} | parts),
    )


def side_title(name: str, maps: AttentionMaps | None, layer: int, head: int, missing: str | None) -> str:
    """E.g. "A · layer 0 · head 1", or what the side lacks."""
    if maps is None or missing:
        return f"{name}: {missing or 'no such attention'}"
    return f"{name} · layer {layer} · head {head}"


def pair_panels(
    maps_a: AttentionMaps | None,
    maps_b: AttentionMaps | None,
    layer: int,
    head: int,
    *,
    names: tuple[str, str] = ("A", "B"),
    missing: tuple[str | None, str | None] = (None, None),
    top: float | None = None,
    measure: str = "weights",
) -> tuple[list[dict], list[str]]:
    """A's and B's map of one layer and head as two panels (named by `names`) on ONE colour scale, WEIGHTS (0 to
    1; stretched, 0 to `top`: pair_top), maps of one size: the legend "weight" is drawn once, right of the last.
    Grey cells are masked (weight exactly 0); hover gives query, key and weight of every cell, and the A − B map's
    hover both weights. measure="norms": the maps carry ‖α·f(x)‖ (norm_attention) as their weights, drawn from 0
    to `top` (pair_norm_top, or stretched) and named so in the legend and hover.

    Returns the panels of the sides that have this map, and for each side left out a sentence saying why (e.g.
    "B: B has no layer 3"; `missing` names what a side lacks, and a side whose maps are None has no such attention).
    """
    shown, notes = [], []
    for maps, name, why in zip((maps_a, maps_b), names, missing, strict=True):
        if maps is None or why is not None or layer >= maps.n_layers or head >= maps.n_heads:
            notes.append(side_title(name, None, layer, head, why))
        else:
            shown.append((maps, name))
    words = MEASURE_WORDS[measure]
    size = map_px(PAIR_PX, PAIR_PANEL_PX, [token_labels(maps.query_labels) for maps, _ in shown], words["value"])
    ramp = measure_ramp(measure, top)
    panels = [
        _token_map(
            maps,
            maps.weights[layer, head],
            maps.allowed,
            ramp,
            max_px=size,
            text_px=WEIGHT_TEXT_PX,
            name=name,
            title=side_title(name, maps, layer, head, None),
            value_title=words["value"],
            masked_text=words["masked"],
            legend=i == len(shown) - 1,
        )
        for i, (maps, name) in enumerate(shown)
    ]
    return panels, notes


def pair_top(sides: list[AttentionMaps], layer: int, head: int) -> float:
    """The weight stretched colours draw darkest on A's and B's map of one layer and head: one scale for both
    (figures.top_of over the allowed weights of the sides that have that map)."""
    shown = [
        side.weights[layer, head][np.asarray(side.allowed, dtype=bool)]  # [allowed cells]
        for side in sides
        if layer < side.n_layers and head < side.n_heads
    ]
    return top_of(np.concatenate(shown) if shown else np.zeros(0))


def difference_range(difference: np.ndarray) -> float:
    """Half-width of the symmetric colour range: the largest |A - B| drawn (1 when every difference is 0)."""
    finite = np.abs(difference[np.isfinite(difference)])
    largest = float(finite.max()) if finite.size else 0.0
    return largest if largest > 0 else 1.0


def difference_scale(shown: np.ndarray, stretch: bool, what: str = "A − B") -> tuple[float, str | None]:
    """The A − B colour range's half-width and what the subtitle says of it, from the differences drawn ([Tq, Tk],
    NaN where masked): the largest |A − B| (difference_range), or stretched the top 1 % of |A − B| (top_of), as
    the maps' Stretch colours; unstretched, a hint when 99 % of the differences are pale next to the largest (a
    512-piece map whose few large differences leave every other cell white). `what` names the difference."""
    finite = np.abs(shown[np.isfinite(shown)])  # [cells drawn]
    largest = difference_range(shown)
    if not finite.size or float(finite.max()) < ROUNDING:  # nothing to see but float32 rounding, or exactly 0
        return largest, None
    robust = top_of(finite)
    if stretch:
        return robust, f"colours stretched: darkest = ±{robust:.2g} or more (the top 1 % of |{what}|)"
    if robust < FAINT * largest:
        return largest, f"99 % of |{what}| is below {robust:.2g}, pale next to the largest: turn on Stretch colours"
    return largest, None


def difference_verdict(largest: float, scale: float = 1.0) -> str:
    """What the largest |A - B| drawn means: exactly 0, float32 rounding (below ROUNDING x `scale`, the size of
    the values subtracted: 1 for weights), or a real difference."""
    if largest == 0:
        return "identical: every difference is exactly 0"
    if largest < ROUNDING * scale:
        return f"largest |A − B| = {readable(largest, 2)}: float32 rounding, A and B agree"
    return f"largest |A − B| = {largest:.4f}" if scale <= 1.0 else f"largest |A − B| = {readable(largest, 4)}"


def difference_panel(
    maps_a: AttentionMaps,
    maps_b: AttentionMaps,
    difference: np.ndarray,
    layer: int,
    head: int,
    measure: str = "weights",
    stretch: bool = False,
) -> dict:
    """A - B of one layer and head ([Tq, Tk], from attention_difference) on a diverging scale centred on 0, with
    its own legend titled "A − B". Blue: A attends more; orange-red: B attends more; white: equal. Hover gives A − B,
    A and B. Cells masked in both are grey; a cell masked in one only is drawn, since its weight went to or from 0.
    measure="norms": the maps carry ‖α·f(x)‖ as their weights, and the title, legend and hover say so (blue: A adds
    more). `stretch`: the scale ends at the top 1 % of |A − B| (difference_scale)."""
    words = MEASURE_WORDS[measure]
    either = np.asarray(maps_a.allowed, bool) | np.asarray(maps_b.allowed, bool)  # [Tq, Tk]
    values = np.asarray(difference, dtype=np.float32)  # [Tq, Tk]
    shown = np.where(either, values, np.nan)  # [Tq, Tk]
    largest = float(np.abs(shown[np.isfinite(shown)]).max()) if np.isfinite(shown).any() else 0.0
    sides = (maps_a.weights[layer, head], maps_b.weights[layer, head])  # [Tq, Tk] each
    scale = 1.0 if measure == "weights" else max(1.0, *(float(np.abs(side).max()) for side in sides))
    value_title = f"A − B{words['of']}"
    half, note = difference_scale(shown, stretch)
    subtitle = f"{difference_verdict(largest, scale)} · blue: A {words['more']} · red: B {words['more']}"
    names_a, names_b = token_hover_names(maps_a), token_hover_names(maps_b)
    paired_names = None if names_a is None or names_b is None else tuple(map(_paired, names_a, names_b))
    return _token_map(
        paired_tokens(maps_a, maps_b),
        values,
        either,
        difference_ramp(half),
        max_px=map_px(DIFFERENCE_PX, DIFFERENCE_PANEL_PX, [token_labels(maps_a.query_labels)], value_title),
        text_px=DIFFERENCE_TEXT_PX,
        name="difference",
        title=f"A − B{words['of']} · layer {layer} · head {head}",
        subtitle=noted(subtitle, note),
        value_title=value_title,
        masked_text="masked in A and B",
        extra={f"A{words['of']}": sides[0], f"B{words['of']}": sides[1]},
        wrap_subtitle=True,  # the page sizes A − B's box to the map, not to this long line (views/compare.py)
        hover_names=paired_names,
    )


def paired_tokens(maps_a: AttentionMaps, maps_b: AttentionMaps) -> AttentionMaps:
    """maps_a, its token lists as labels (query_labels) naming B's too where B read another one there ("the / a"): A − B
    subtracts position by position, so with two inputs a cell is A's tokens and B's, not A's alone."""

    return replace(  # each side's tokens as labelled, paired: A's SmolLM2 pieces beside B's MiniLM pieces read alike
        maps_a,
        query_tokens=_paired(maps_a.query_labels, maps_b.query_labels),
        key_tokens=_paired(maps_a.key_labels, maps_b.key_labels),
        byte_level=False,
    )


def _paired(a: list[str], b: list[str]) -> list[str]:
    """A's names, each with B's beside it where B's differs ("the / a")."""
    return [x if x == y else f"{x} / {y}" for x, y in zip(a, b, strict=True)]


def ranking_matrix(ranking: pd.DataFrame, column: str = "js_divergence") -> np.ndarray:
    """One column of head_ranking as a [layers, heads] array (NaN where a head is missing)."""
    n_layers, n_heads = int(ranking["layer"].max()) + 1, int(ranking["head"].max()) + 1
    z = np.full((n_layers, n_heads), np.nan, dtype=np.float32)  # [L, H]
    z[ranking["layer"].to_numpy(), ranking["head"].to_numpy()] = ranking[column].to_numpy()
    return z


def ranking_text_px(decimals: int) -> float:
    """How wide a ranking cell must be to hold its value written with `decimals`: RANKING_TEXT_PX for three; more
    digits at the matrix view's 14 px need DIGIT_PX each (a 43 px cell had written "0.00079" over its neighbours)."""
    return RANKING_TEXT_PX if decimals <= 3 else DIGIT_PX * (decimals + 1) + DOT_PX + 2


def ranking_panel(
    ranking: pd.DataFrame, layer: int | None = None, head: int | None = None, panel_px: float = 760
) -> dict:
    """Jensen-Shannon divergence (bits) per [layer, head] from head_ranking, heads across and layers down; hover
    adds the head's largest |A − B| and its rank (1: changed most). A click on a cell sends back {"row": layer,
    "col": head}. The head shown above (`layer`, `head`) is framed in red and named in the subtitle, when the matrix
    has it."""
    z = ranking_matrix(ranking)  # [L, H]
    n_layers, n_heads = z.shape
    top = float(np.nanmax(z)) if np.isfinite(z).any() and np.nanmax(z) > 0 else 1.0
    axes = layer_head_axes(n_layers, n_heads)
    value_title = "JS divergence (bits)"
    shown = layer is not None and head is not None and layer < n_layers and head < n_heads
    decimals = max(3, decimals_for(top))  # three, or more when the largest change is smaller (below)
    text_px = ranking_text_px(decimals)
    cell = max(RANKING_CELL_PX, text_px)  # cells as wide as their text, unless the panel cannot take it
    return matrix_panel(
        z,
        None,
        Ramp(ORANGES, 0.0, top),
        name="ranking",
        **axes,
        value_title=value_title,
        title="How much each head changed (JS divergence, bits)",
        subtitle=(f"shown above: layer {layer}, head {head} · " if shown else "") + "click a head to show it above",
        value_digits=4,
        # three decimals, or more when the largest change is smaller: at 0.0017 nearly every cell had read "0.001"; the
        # cells widen to hold them (ranking_text_px), and a panel too narrow for that writes none rather than overlap
        text_digits=decimals if n_layers * n_heads <= 64 else None,
        max_px=map_px(min(RANKING_PX, cell * max(n_layers, n_heads)), panel_px, [axes["y_labels"]], value_title),
        pick="cell",
        extra={
            "max |A − B|": ranking_matrix(ranking, "max_abs_difference"),
            RANK: (ranking_matrix(ranking.assign(rank=ranking.index + 1), "rank"), 0),  # head_ranking: most first
        },
        outline=(layer, head) if shown else None,
        tick_px=TICK_PX,
        text_px=text_px,
    )


def norm_difference_figure(
    maps_a: AttentionMaps, maps_b: AttentionMaps, layer: int, head: int, stretch: bool = False
) -> go.Figure:
    """A − B of what one head adds, ‖α·f(x)‖, as a Plotly heatmap (the view's HTML download): `maps_a` and `maps_b`
    carry the norms as their weights; blue where A adds more, red where B does; hover gives A − B, A and B. Its
    colour range is the page's (difference_scale, `stretch`ed or not)."""
    a, b = maps_a.weights[layer, head].astype(np.float64), maps_b.weights[layer, head].astype(np.float64)  # [Tq, Tk]
    difference = a - b  # [Tq, Tk]
    either = np.asarray(maps_a.allowed, bool) | np.asarray(maps_b.allowed, bool)  # [Tq, Tk]
    top, note = difference_scale(np.where(either, difference, np.nan), stretch)
    labels = paired_tokens(maps_a, maps_b)
    x_title, y_title = axis_titles(maps_a.kind)
    figure = go.Figure(
        go.Heatmap(
            z=np.where(either, difference, np.nan),  # masked in both: grey (MASKED_PLOT), as the page draws it
            x=[label_text(t) for t in token_labels(labels.key_labels)],
            y=[label_text(t) for t in token_labels(labels.query_labels)],
            customdata=np.stack([a, b], axis=-1),  # [Tq, Tk, 2]
            zmin=-top,
            zmax=top,
            colorscale=plotly_scale((B_COLOUR, "#ffffff", A_COLOUR)),
            colorbar={"title": {"text": f"A − B of {NORM}"}},
            hovertemplate=f"query %{{y}}<br>key %{{x}}<br>A − B %{{z:{HOVER_NUMBERS}}}<br>A %{{customdata[0]:"
            f"{HOVER_NUMBERS}}}<br>B %{{customdata[1]:{HOVER_NUMBERS}}}<extra></extra>",
        )
    )
    figure.update_layout(
        figure_layout(
            f"A − B of {NORM} · layer {layer} · head {head}",
            noted("blue: A adds more · red: B adds more", note),
            420,
            **MASKED_PLOT,
        ),
        xaxis=axis(x_title),
        yaxis=axis(y_title),
    )
    return masked_map_axes(figure)
