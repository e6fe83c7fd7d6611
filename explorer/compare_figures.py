"""Vega-Lite charts for the Compare page: A and B on one colour scale, A - B on a diverging scale centred on 0, the
heads ranked by how much they changed (click one to show it), and per-layer statistics of A and B on the same
axes. Specs are dicts whose tables are DataFrames under "datasets" (see explorer/vega.py; no Streamlit here)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from explorer.compare import PER_LAYER
from explorer.figures import GRID_PICK, token_labels
from explorer.trace import AttentionMaps
from explorer.vega import BLUES, MAX_CELL_PX, Ramp, chart, concat, layer_head_axes, matrix_spec, png_uri

A_COLOUR = "#1f5fa8"  # A is blue everywhere: its lines, and A - B > 0 (A attends more)
B_COLOUR = "#c2410c"  # B is orange-red: its lines, and A - B < 0 (B attends more)
WEIGHTS = Ramp(BLUES, 0.0, 1.0)  # A's and B's weights: one scale, 0 = near white, 1 = dark blue
ORANGES = ("#fff5eb", "#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#a63603", "#7f2704")
MAX_CELL_TEXT_SIDE = 8  # write the value in each cell while a map is at most this many tokens a side
MAX_X_TICKS = 12  # token labels across a map (the maps are narrow); above this only every n-th is labelled
MAX_Y_TICKS = 24  # token labels down a map
PAIR_MAX_CELLS = 32 * 32  # A's and B's maps are drawn cell by cell (with hover) up to this, above as pictures
# Sizes that fit a 1400 px wide window with the sidebar open: A | B in 5/8 of the main column (580 px), A - B in
# 3/8 (345 px), each with token labels and a legend, whatever the tokens.
PAIR_PX = 180  # px along the longer side of A's and of B's map
DIFFERENCE_PX = 180  # px along the longer side of the A - B map
SMALL_MAP_PX = 200  # the same for maps of at most MAX_CELL_TEXT_SIDE tokens, whose labels are few and short
TICK_PX = 18  # px between two labelled ticks at least (labels are 14 px), so that they never overlap
SEAMLESS_PX = 4  # cells narrower than this, drawn one by one, show anti-aliased seams: a picture goes under them
FLUSH_PX = 8  # px: the first query label is kept inside the map, so A's and B's titles line up
LABEL_LIMIT = 70  # px: a long token is cut short (with …) on the maps' axes rather than squeezing the map
SLANTED_LABEL_LIMIT = 50  # px, for labels at -45°: they reach left under the previous map
LABEL_CHAR_PX = 6.5  # px per character of a 14 px label, about
ROUNDING = 1e-5  # |A - B| below this is float32 rounding (e.g. the same words in another order, no positions)
RANKING_PICK = GRID_PICK  # the ranking heatmap's click selection: {"pick": [{"layer": ..., "head": ...}]}
STATISTIC_TITLES = {
    "residual RMS": "Residual stream RMS",
    "residual std": "Residual stream std",
    "gradient norm": "Gradient norm of each block",
    "attention entropy": "Self-attention entropy (nats, mean of heads)",
}
LINE_WIDTH, LINE_HEIGHT = 400, 190  # px of each per-layer panel
MAX_LAYER_TICKS = 13


def difference_ramp(half: float) -> Ramp:
    """B's colour at -half, white at 0, A's colour at +half: the A - B scale, centred on 0."""
    return Ramp((B_COLOUR, "#ffffff", A_COLOUR), -half, half, dark="ends")


def whole_cells(tq: int, tk: int, max_px: int) -> int:
    """The longer side in px, at most max_px (SMALL_MAP_PX for a small map), that makes small cells a whole number
    of pixels wide: cells of 2.1 px drawn one by one leave anti-aliased seams between them."""
    n = max(tq, tk)
    if n <= MAX_CELL_TEXT_SIDE:
        return SMALL_MAP_PX
    whole = n * int(max_px // n)
    return whole if max_px / n < MAX_CELL_PX and whole >= 0.8 * max_px else max_px  # not a 1 px wide map


def tick_counts(tq: int, tk: int, max_px: int) -> tuple[int, int]:
    """How many token labels fit across (x) and down (y) a [Tq, Tk] map drawn at most max_px a side."""
    cell = min(MAX_CELL_PX, max_px / max(tq, tk))  # px per cell, as matrix_spec draws it
    across = max(2, min(MAX_X_TICKS, int(cell * tk / TICK_PX)))
    down = max(2, min(MAX_Y_TICKS, int(cell * tq / TICK_PX)))
    return across, down


def x_labels(labels: list[str], cell_px: float) -> dict:
    """Axis properties of a map's key labels: level while each fits its cell, else slanted and shorter."""
    widest = max((len(label) for label in labels), default=0) * LABEL_CHAR_PX
    if widest > cell_px:
        return {"labelAngle": -45, "labelLimit": SLANTED_LABEL_LIMIT}
    return {"labelAngle": 0, "labelLimit": LABEL_LIMIT}


def _literal(text: str) -> str:
    """A string literal for a Vega expression."""
    return json.dumps(text)


def _layers(spec: dict) -> list[dict]:
    """The cell layers of a matrix_spec view that hover (not the image or legend-only layers)."""
    return [layer for layer in spec.get("layer", []) if "tooltip" in layer.get("encoding", {})]


def _set_tooltip(spec: dict, tooltip: list[dict], transform: list[dict] | None = None) -> None:
    """Give every hovering layer of a matrix_spec view this tooltip (and the transforms it needs)."""
    for layer in _layers(spec):
        layer["encoding"]["tooltip"] = tooltip
        if transform:
            layer["transform"] = [*layer["transform"], *transform]


def _axis(spec: dict, channel: str, **props: object) -> None:
    """Change the axis of a matrix_spec view (it lives on its first layer)."""
    axis = spec["layer"][0]["encoding"][channel].get("axis")
    if axis is not None:
        axis.update(props)


def _share_axes(spec: dict) -> None:
    """Give every layer of a matrix view the axes of its first layer: a layer without them (the cell text) has
    default axes, and Vega-Lite may draw those instead, labelling every other token."""
    first = spec["layer"][0]["encoding"]
    for layer in spec["layer"][1:]:
        for channel in ("x", "y"):
            if channel in layer.get("encoding", {}) and "axis" in first.get(channel, {}):
                layer["encoding"][channel]["axis"] = first[channel]["axis"]


def _passive_text(spec: dict) -> None:
    """Cell text lets hover and clicks through to the cell under it."""
    for layer in spec.get("layer", []):
        if isinstance(layer.get("mark"), dict) and layer["mark"].get("type") == "text":
            layer["mark"]["interactive"] = False


def side_title(name: str, maps: AttentionMaps | None, layer: int, head: int, missing: str | None) -> str:
    """E.g. "A · layer 0 · head 1", or what the side lacks."""
    if maps is None or missing:
        return f"{name}: {missing or 'no such attention'}"
    return f"{name} · layer {layer} · head {head}"


def _legend_layer(ramp: Ramp, title: str) -> dict:
    """An invisible layer whose only job is the colour legend next to a picture."""
    return {
        "data": {"values": [{"value": ramp.low}, {"value": ramp.high}]},
        "mark": {"type": "point", "opacity": 0},
        "encoding": {
            "color": {"field": "value", "type": "quantitative", "scale": ramp.scale(), "legend": {"title": title}}
        },
    }


def _as_picture(view: dict, shown: np.ndarray, ramp: Ramp, px: int) -> None:
    """Redraw a matrix view made cell by cell as one picture of the same colours, axes and legend.

    `shown` is [Tq, Tk] with NaN where masked (grey). The browser draws a picture in no time, while each cell
    drawn one by one costs it a few tens of microseconds (Streamlit evaluates Vega expressions with an
    interpreter): the Compare page has three big maps, and the A - B map's hover gives A's and B's weights."""
    if "datasets" not in view:  # matrix_spec drew it as a picture already (above MAX_CELLS)
        return
    cells = view["layer"][0]["encoding"]
    view.pop("datasets", None)
    view["layer"] = [_picture_layer(shown, ramp, px, cells), _legend_layer(ramp, cells["color"]["legend"]["title"])]


def _picture_layer(shown: np.ndarray, ramp: Ramp, px: int, cells: dict) -> dict:
    """[Tq, Tk] values (NaN = masked, grey) as one image layer placed like the cells (`cells`: their encoding)."""
    tq, tk = shown.shape
    image = {"url": png_uri(ramp.rgb(shown), min_side=2 * px), "k": 0, "k_end": tk, "q": 0, "q_end": tq}
    return {
        "data": {"values": [image]},
        "mark": {"type": "image", "aspect": False},
        "encoding": {"x": cells["x"], "x2": {"field": "k_end"}, "y": cells["y"], "y2": {"field": "q_end"},
                     "url": {"field": "url", "type": "nominal"}},
    }  # fmt: skip


def _empty_side(title: str, px: int) -> dict:
    """A view with only a title and a word in the middle, for a side that has no such map."""
    return {
        "title": {"text": title, "anchor": "start"},
        "width": px,
        "height": px,
        "data": {"values": [{"note": "nothing to show"}]},
        "mark": {"type": "text", "color": "#888888", "fontSize": 13},
        "encoding": {"text": {"field": "note"}},
    }


def _side(maps: AttentionMaps, name: str, prefix: str, layer: int, head: int, show_queries: bool) -> dict:
    """One side of the pair: its map of [layer, head] as a matrix view whose hover starts with the side's name."""
    weights = np.asarray(maps.weights[layer, head], dtype=np.float32)  # [Tq, Tk]
    allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
    tq, tk = weights.shape
    cross = maps.kind == "cross-attention"
    x_title, y_title = ("key (source)", "query (target)") if cross else ("key", "query")
    px = whole_cells(tq, tk, PAIR_PX)
    across, down = tick_counts(tq, tk, px)
    view = matrix_spec(
        weights,
        allowed,
        WEIGHTS,
        name=prefix,
        x_labels=token_labels(maps.key_tokens),
        y_labels=token_labels(maps.query_tokens),
        x_title=x_title,
        y_title=y_title,
        value_title="weight",
        title=side_title(name, maps, layer, head, None),
        text_format=".2f" if max(tq, tk) <= MAX_CELL_TEXT_SIDE else None,
        masked_text="masked: weight 0",
        max_px=px,
        max_x_ticks=across,
        max_y_ticks=down,
    )
    tooltip = [
        {"field": "side", "title": "model"},
        {"field": "query", "title": y_title},
        {"field": "key", "title": x_title},
        {"field": "shown", "title": "weight"},
    ]
    _set_tooltip(view, tooltip, [{"calculate": _literal(name), "as": "side"}])
    _axis(view, "x", **x_labels(view["params"][0]["value"], view["width"] / tk))
    _axis(view, "y", labelLimit=LABEL_LIMIT, labelFlush=FLUSH_PX)
    if not show_queries:  # B's rows are A's queries: A's labels serve both
        _axis(view, "y", labels=False, title=None)
    _share_axes(view)
    if tq * tk > PAIR_MAX_CELLS:
        _as_picture(view, np.where(allowed, weights, np.nan), WEIGHTS, px)
    return view


def pair_heatmaps(
    maps_a: AttentionMaps | None,
    maps_b: AttentionMaps | None,
    layer: int,
    head: int,
    *,
    names: tuple[str, str] = ("A", "B"),
    missing: tuple[str | None, str | None] = (None, None),
) -> dict:
    """A's and B's map of one layer and head side by side on ONE colour scale (0 to 1, one legend "weight").

    A side is left empty, with its title saying why, when its maps are None or `missing` names what it lacks
    (e.g. "B has no layer 3"). Grey cells are masked (weight exactly 0). Up to PAIR_MAX_CELLS cells a map hovers
    (model, query, key, weight); a bigger one is a picture (pair_hovers says which), and the A − B map's hover
    gives both weights."""
    sides = []
    for maps, name, why in zip((maps_a, maps_b), names, missing, strict=True):
        usable = maps is not None and why is None and layer < maps.n_layers and head < maps.n_heads
        sides.append((maps if usable else None, name, why))
    same_queries = all(m is not None for m, _, _ in sides) and sides[0][0].query_tokens == sides[1][0].query_tokens
    views = []
    for i, (maps, name, why) in enumerate(sides):
        if maps is None:
            views.append(_empty_side(side_title(name, None, layer, head, why), PAIR_PX))
            continue
        views.append(_side(maps, name, f"side_{i}", layer, head, show_queries=not (same_queries and i == 1)))
    spec = concat(views, shared_colour=True)
    spec["spacing"] = 12 if same_queries else 24
    return spec


def pair_hovers(maps: AttentionMaps) -> bool:
    """Whether pair_heatmaps draws these maps cell by cell, with hover (else as pictures)."""
    return int(np.prod(maps.weights.shape[-2:])) <= PAIR_MAX_CELLS


def difference_range(difference: np.ndarray) -> float:
    """Half-width of the symmetric colour range: the largest |A - B| drawn (1 when every difference is 0)."""
    finite = np.abs(difference[np.isfinite(difference)])
    largest = float(finite.max()) if finite.size else 0.0
    return largest if largest > 0 else 1.0


def difference_verdict(largest: float) -> str:
    """What the largest |A - B| drawn means: exactly 0, float32 rounding, or a real difference."""
    if largest == 0:
        return "identical: every difference is exactly 0"
    if largest < ROUNDING:
        return f"largest |A − B| = {largest:.1e}: float32 rounding, A and B agree"
    return f"largest |A − B| = {largest:.4f}"


def difference_heatmap(
    maps_a: AttentionMaps,
    maps_b: AttentionMaps,
    difference: np.ndarray,
    layer: int,
    head: int,
) -> dict:
    """A - B of one layer and head ([Tq, Tk], from attention_difference) on a diverging scale centred on 0, with
    its own legend titled "A − B". Blue: A attends more; orange-red: B attends more; white: equal. Hover gives A,
    B and A − B. Cells masked in both are grey; a cell masked in one only is drawn, since its weight went to or
    from 0."""
    allowed_a, allowed_b = np.asarray(maps_a.allowed, bool), np.asarray(maps_b.allowed, bool)  # [Tq, Tk]
    either = allowed_a | allowed_b  # [Tq, Tk]
    values = np.asarray(difference, dtype=np.float32)  # [Tq, Tk]
    shown = np.where(either, values, np.nan)  # [Tq, Tk]
    largest = float(np.abs(shown[np.isfinite(shown)]).max()) if np.isfinite(shown).any() else 0.0
    tq, tk = values.shape
    cross = maps_a.kind == "cross-attention"
    x_title, y_title = ("key (source)", "query (target)") if cross else ("key", "query")
    px = whole_cells(tq, tk, DIFFERENCE_PX)
    across, down = tick_counts(tq, tk, px)
    ramp = difference_ramp(difference_range(shown))
    spec = matrix_spec(
        values,
        either,
        ramp,
        name="difference",
        x_labels=token_labels(maps_a.key_tokens),
        y_labels=token_labels(maps_a.query_tokens),
        x_title=x_title,
        y_title=y_title,
        value_title="A − B",
        title=f"A − B · layer {layer} · head {head}",
        subtitle=[difference_verdict(largest), "blue: A attends more · red: B attends more"],
        text_format=".2f" if max(tq, tk) <= MAX_CELL_TEXT_SIDE else None,
        masked_text="masked in A and B",
        max_px=px,
        max_x_ticks=across,
        max_y_ticks=down,
    )
    cells = spec.get("datasets", {}).get("difference_cells")
    if cells is not None:  # drawn cell by cell: hover gives both weights too
        cells["a"] = np.asarray(maps_a.weights[layer, head], dtype=np.float32).ravel()  # [Tq * Tk]
        cells["b"] = np.asarray(maps_b.weights[layer, head], dtype=np.float32).ravel()  # [Tq * Tk]
        tooltip = [
            {"field": "query", "title": y_title},
            {"field": "key", "title": x_title},
            {"field": "a", "title": "A", "format": ".4f"},
            {"field": "b", "title": "B", "format": ".4f"},
            {"field": "shown", "title": "A − B"},
        ]
        _set_tooltip(spec, tooltip)
    _axis(spec, "x", **x_labels(spec["params"][0]["value"], spec["width"] / tk))
    _axis(spec, "y", labelLimit=LABEL_LIMIT, labelFlush=FLUSH_PX)
    _share_axes(spec)
    if cells is not None and px / max(tq, tk) < SEAMLESS_PX:  # the same colours under the cells fill the seams
        spec["layer"].insert(0, _picture_layer(shown, ramp, px, spec["layer"][0]["encoding"]))
    return chart(spec)


def ranking_matrix(ranking: pd.DataFrame) -> np.ndarray:
    """head_ranking as a [layers, heads] array of JS divergence (NaN where a head is missing)."""
    n_layers, n_heads = int(ranking["layer"].max()) + 1, int(ranking["head"].max()) + 1
    z = np.full((n_layers, n_heads), np.nan, dtype=np.float32)  # [L, H]
    z[ranking["layer"].to_numpy(), ranking["head"].to_numpy()] = ranking["js_divergence"].to_numpy()
    return z


def ranking_heatmap(ranking: pd.DataFrame, layer: int | None = None, head: int | None = None) -> dict:
    """Jensen-Shannon divergence (bits) per [layer, head] from head_ranking; the shown head is outlined, and a
    click on a head selects it (the RANKING_PICK selection, read with explorer.figures.picked_map)."""
    z = ranking_matrix(ranking)  # [L, H]
    n_layers, n_heads = z.shape
    top = float(np.nanmax(z)) if np.isfinite(z).any() and np.nanmax(z) > 0 else 1.0
    spec = matrix_spec(
        z,
        None,
        Ramp(ORANGES, 0.0, top),
        name="ranking",
        **layer_head_axes(n_layers, n_heads),
        value_title="JS divergence",
        title="How much each head changed (JS divergence, bits)",
        subtitle=["click a head to show it above"],
        text_format=".3f" if n_layers * n_heads <= 64 else None,
        max_px=int(min(360, 44 * max(n_layers, n_heads))),
    )
    cells = spec.get("datasets", {}).get("ranking_cells")
    if cells is not None:
        order = ranking.set_index(["layer", "head"])
        index = pd.MultiIndex.from_arrays([cells["q"], cells["k"]])
        cells["layer"], cells["head"] = cells["q"], cells["k"]
        cells["rank"] = pd.Series(np.arange(1, len(ranking) + 1), index=order.index).reindex(index).to_numpy()
        cells["max_abs_difference"] = order["max_abs_difference"].reindex(index).to_numpy(dtype=np.float32)
        tooltip = [
            {"field": "query", "title": "layer"},
            {"field": "key", "title": "head"},
            {"field": "value", "title": "JS divergence (bits)", "format": ".4f"},
            {"field": "max_abs_difference", "title": "max |A − B|", "format": ".4f"},
            {"field": "rank", "title": f"rank (of {len(ranking)})"},
        ]
        _set_tooltip(spec, tooltip)
        first = spec["layer"][0]
        first["params"] = [{"name": RANKING_PICK, "select": {"type": "point", "fields": ["layer", "head"]}}]
        first["mark"]["cursor"] = "pointer"
        first["encoding"]["color"]["legend"]["title"] = "bits"
    _passive_text(spec)
    if layer is not None and head is not None and layer < n_layers and head < n_heads:
        spec["layer"].append(
            {
                "data": {"values": [{"k": head, "k_end": head + 1, "q": layer, "q_end": layer + 1}]},
                "mark": {"type": "rect", "filled": False, "stroke": "black", "strokeWidth": 2.5,
                         "interactive": False},
                "encoding": {"x": {"field": "k", "type": "quantitative"}, "x2": {"field": "k_end"},
                             "y": {"field": "q", "type": "quantitative"}, "y2": {"field": "q_end"}},
            }
        )  # fmt: skip
    _share_axes(spec)
    return chart(spec)


def lines_table(table: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """per_layer_comparison in long form: statistic, layer, model (A's or B's name) and value; a layer one model
    lacks has no row for that model."""
    long = table.melt(id_vars=["statistic", "layer"], value_vars=["a", "b"], var_name="model", value_name="value")
    long = long[long["value"].notna()].copy()
    long["model"] = long["model"].map({"a": names[0], "b": names[1]})
    long["layer"] = long["layer"].astype(np.int32)
    long["value"] = long["value"].astype(np.float64)
    return long.reset_index(drop=True)


def _panel(table: pd.DataFrame, statistic: str, names: tuple[str, str]) -> dict:
    """One statistic of per_layer_comparison: A and B as two lines on the same axes; the layers only one model
    has are shaded."""
    rows = table[table["statistic"] == statistic].sort_values("layer")
    layers = sorted(int(v) for v in rows["layer"].unique()) or [0]
    ticks = layers if len(layers) <= MAX_LAYER_TICKS else layers[:: math.ceil(len(layers) / MAX_LAYER_TICKS)]
    x = {
        "field": "layer",
        "type": "quantitative",
        "scale": {"domain": [layers[0] - 0.5, layers[-1] + 0.5], "nice": False, "zero": False},
        "axis": {
            "title": "after block" if statistic.startswith("residual") else "block",
            "values": ticks,
            "labelExpr": "datum.value == -1 ? 'input' : datum.value",
            "grid": True,
            "gridColor": "#eeeeee",
        },
    }
    y = {
        "field": "value",
        "type": "quantitative",
        "scale": {"zero": True},
        "axis": {"title": None, "gridColor": "#eeeeee", "format": "~g", "labelFlush": True},
    }
    model = {"field": "model", "type": "nominal", "title": None}
    colour = {**model, "scale": {"domain": list(names), "range": [A_COLOUR, B_COLOUR]}}
    dash = {**model, "scale": {"domain": list(names), "range": [[1, 0], [6, 4]]}}
    shape = {**model, "scale": {"domain": list(names), "range": ["circle", "diamond"]}}
    tooltip = [
        {"field": "model", "title": "model"},
        {"field": "layer_name", "title": "layer"},
        {"field": "value", "title": statistic, "format": ".4g"},
    ]
    layers_spec: list[dict] = []
    only_one = rows[rows["a"].isna() != rows["b"].isna()]["layer"]
    if len(only_one) and rows["b"].notna().any():
        layers_spec.append(
            {
                "data": {"values": [{"from": float(only_one.min()) - 0.5, "to": float(only_one.max()) + 0.5}]},
                "mark": {"type": "rect", "color": "#eeeeee", "interactive": False},
                "encoding": {"x": {"field": "from", "type": "quantitative"}, "x2": {"field": "to"}},
            }
        )
    layers_spec += [
        {
            "mark": {"type": "line", "strokeWidth": 2},
            "encoding": {"x": x, "y": y, "color": colour, "strokeDash": dash},
        },
        {
            "mark": {"type": "point", "filled": True, "size": 50, "opacity": 1},
            "encoding": {"x": x, "y": y, "color": colour, "shape": shape, "tooltip": tooltip},
        },
    ]
    title = {"text": STATISTIC_TITLES[statistic], "anchor": "start", "fontSize": 14}
    if rows.empty:  # e.g. no gradient norms: say so in the panel rather than draw bare axes
        return {
            "title": title,
            "width": LINE_WIDTH,
            "height": LINE_HEIGHT,
            "data": {"values": [{"note": "not available"}]},
            "mark": {"type": "text", "color": "#888888", "fontSize": 13},
            "encoding": {"text": {"field": "note"}},
        }
    return {
        "title": title,
        "width": LINE_WIDTH,
        "height": LINE_HEIGHT,
        "data": {"name": "lines"},
        "transform": [
            {"filter": f"datum.statistic == {_literal(statistic)}"},
            {"calculate": "datum.layer == -1 ? 'input' : '' + datum.layer", "as": "layer_name"},
        ],
        "layer": layers_spec,
    }


def layer_lines(table: pd.DataFrame, names: tuple[str, str] = ("A", "B")) -> dict:
    """A 2 x 2 grid, one panel per statistic of per_layer_comparison (each its own y scale), A (solid blue,
    circles) and B (dashed orange, diamonds) as two lines on the same axes. Layer -1 is the input (embedding +
    position), labelled "input"; layers only one model has are shaded."""
    panels = [_panel(table, statistic, names) for statistic in PER_LAYER]
    spec = {  # rows of an hconcat each: Streamlit draws nothing of a "concat" with "columns"
        "vconcat": [{"hconcat": panels[i : i + 2], "spacing": 40} for i in range(0, len(panels), 2)],
        "spacing": 30,
        "datasets": {"lines": lines_table(table, names)},
        "resolve": {
            "scale": {"x": "independent", "y": "independent", "color": "shared", "strokeDash": "shared",
                      "shape": "shared"},
        },
    }  # fmt: skip
    out = chart(spec)
    out["config"]["legend"] |= {
        "orient": "top",
        "direction": "horizontal",
        "symbolStrokeWidth": 2,
        "symbolSize": 90,
        "labelFontSize": 13,
    }
    return out
