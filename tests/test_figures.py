"""explorer.figures: what the reader sees (labels, masked cells, values) is what the maps hold."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer.figures import (
    GRID_MAX_CELLS,
    GRID_PICK,
    WEIGHTS,
    attention_grid,
    attention_heatmap,
    attention_map_panel,
    entropy_panel,
    grid_board,
    grid_cells,
    picked_map,
    token_labels,
)
from explorer.stats import head_average, head_entropy
from explorer.trace import AttentionMaps
from explorer.vega import MASKED_COLOUR, MAX_CELLS
from tests.drawn import _decode_png, one_matrix, panel_matrix, title_text


def causal(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def tooltip_fields(layer: dict) -> list[str]:
    return [t["field"] for t in layer["encoding"]["tooltip"]]


def test_token_labels_unique_readable_and_raw():
    tokens = ["the", "cat", "the", "<b>x</b>", "the", "1"]
    assert token_labels(tokens) == ["the", "cat", "the·2", "<b>x</b>", "the·4", "1"]
    assert len(set(token_labels(["a", "a·1", "a"]))) == 3


def test_heatmap_values_axes_and_hover(make_maps):
    maps = make_maps(n_layers=2, n_heads=3)
    spec = attention_heatmap(maps, 1, 2)
    drawn = one_matrix(spec)
    assert drawn.values.dtype == np.float64 and spec["datasets"]["map_cells"]["value"].dtype == np.float32
    np.testing.assert_array_equal(drawn.values, maps.weights[1, 2])
    assert drawn.x_labels == ["the", "cat", "sat", "on", "the·4", "mat"] == drawn.y_labels
    assert (drawn.x_title, drawn.y_title) == ("key", "query")
    assert drawn.view["layer"][0]["encoding"]["y"]["scale"]["reverse"] is True  # first query on top
    assert "layer 1" in drawn.title and "head 2" in drawn.title
    cells = drawn.view["layer"][0]
    assert tooltip_fields(cells) == ["query", "key", "shown"]
    assert cells["encoding"]["tooltip"][2]["title"] == "weight"
    assert {"calculate": "map_queries[datum.q]", "as": "query"} in cells["transform"]
    assert "format(datum.value, '.4f')" in json.dumps(cells["transform"])
    scale = cells["encoding"]["color"]["scale"]
    assert (scale["domain"][0], scale["domain"][-1]) == (0.0, 1.0) and scale["range"][0] == WEIGHTS.colours[0]
    assert not drawn.masked.any() and "masked" not in drawn.title


def test_heatmap_masked_cells_are_grey_not_zero(make_maps):
    allowed = causal(6)
    maps = make_maps(allowed=allowed)
    spec = attention_heatmap(maps, 0, 0)
    drawn = one_matrix(spec)
    np.testing.assert_array_equal(drawn.masked, ~allowed)  # exactly the upper triangle
    assert np.isnan(drawn.values[~allowed]).all()
    np.testing.assert_array_equal(drawn.values[allowed], maps.weights[0, 0][allowed])
    colour = drawn.view["layer"][0]["encoding"]["color"]
    assert colour["condition"] == {"test": "datum.masked", "value": MASKED_COLOUR}
    assert "masked: may not attend" in json.dumps(drawn.view["layer"][0]["transform"])
    assert "grey = masked" in drawn.title and "15 of 36" in drawn.title
    text = drawn.view["layer"][1]
    assert text["mark"]["type"] == "text" and {"filter": "!datum.masked"} in text["transform"]


def test_heatmap_flags_empty_rows(make_maps):
    allowed = causal(4) & np.array([False, True, True, True])
    maps = make_maps(tokens=["[PAD]", "a", "b", "c"], allowed=allowed)
    drawn = one_matrix(attention_heatmap(maps, 0, 0))
    assert drawn.y_labels[0].startswith("⊘")
    assert not any(label.startswith("⊘") for label in drawn.y_labels[1:])
    assert "no allowed key" in drawn.title


def test_long_inputs_thin_the_labels_drop_borders_and_text(make_maps):
    tokens = [f"w{i}" for i in range(100)]
    drawn = one_matrix(attention_heatmap(make_maps(n_layers=1, n_heads=1, tokens=tokens), 0, 0))
    ticks = drawn.view["layer"][0]["encoding"]["y"]["axis"]["values"]
    assert 10 <= len(ticks) <= 45 and ticks[0] == 0.5
    assert drawn.view["layer"][0]["mark"]["strokeWidth"] == 0 and len(drawn.view["layer"]) == 1
    small = one_matrix(attention_heatmap(make_maps(n_layers=1, n_heads=1), 0, 0))
    assert small.view["layer"][0]["encoding"]["y"]["axis"]["values"] == [i + 0.5 for i in range(6)]
    assert small.view["layer"][0]["mark"]["strokeWidth"] == 1 and len(small.view["layer"]) == 2


def test_big_maps_are_one_image_with_the_same_colours(make_maps):
    side = 140  # 19,600 cells: above MAX_CELLS
    assert side * side > MAX_CELLS
    allowed = causal(side)
    maps = make_maps(n_layers=1, n_heads=1, tokens=[f"w{i}" for i in range(side)], allowed=allowed)
    spec = attention_heatmap(maps, 0, 0)
    drawn = one_matrix(spec)
    assert "datasets" not in spec and drawn.image is not None
    factor = drawn.image.shape[0] // side
    assert drawn.image.shape == (side * factor, side * factor, 3) and factor >= 1
    pixels = drawn.image[factor // 2 :: factor, factor // 2 :: factor]  # [side, side, 3]: one pixel per cell
    expected = WEIGHTS.rgb(np.where(allowed, maps.weights[0, 0], np.nan))
    np.testing.assert_array_equal(pixels, expected)
    grey = np.array([int(MASKED_COLOUR[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)
    assert (pixels[~allowed] == grey).all()
    image = drawn.view["layer"][0]
    assert image["encoding"]["x2"]["field"] == "k_end" and image["data"]["values"][0]["k_end"] == side
    assert drawn.x_labels[0] == "w0" and len(drawn.x_labels) == side


def test_heatmap_head_average_is_labelled(make_maps):
    maps = make_maps(n_heads=4)
    drawn = one_matrix(attention_heatmap(maps, 0, None))
    np.testing.assert_array_equal(drawn.values, head_average(maps, 0).astype(np.float32))
    assert "average of 4 heads" in drawn.title
    assert drawn.view["layer"][0]["encoding"]["tooltip"][2]["title"] == "mean weight"


def test_heatmap_keeps_user_text_as_data_not_markup(make_maps):
    maps = make_maps(tokens=["<script>", "&", "ok"])
    drawn = one_matrix(attention_heatmap(maps, 0, 0))
    assert drawn.x_labels == ["<script>", "&", "ok"]  # Vega-Lite draws labels as text, never as HTML
    rest = json.dumps({k: v for k, v in drawn.view.items() if k not in ("datasets", "params")})
    assert "<script>" not in rest  # the tokens travel only in the label parameters, as data


def test_cross_attention_heatmap_has_both_token_lists(make_maps):
    maps = make_maps(tokens=["le", "chat"], key_tokens=["the", "cat", "sat"])
    maps = AttentionMaps("cross-attention", maps.weights, maps.scores, maps.allowed, ["le", "chat"], maps.key_tokens)
    drawn = one_matrix(attention_heatmap(maps, 0, 1))
    assert drawn.x_labels == ["the", "cat", "sat"] and drawn.y_labels == ["le", "chat"]
    assert (drawn.x_title, drawn.y_title) == ("key (source)", "query (target)")
    np.testing.assert_array_equal(drawn.values, maps.weights[0, 1])


def test_grid_has_every_layer_and_head_coloured_like_the_big_map(make_maps):
    allowed = causal(6)
    maps = make_maps(n_layers=3, n_heads=5, allowed=allowed)
    spec = attention_grid(maps)
    table = spec["datasets"]["grid"]
    assert table["title"].tolist() == [f"L{layer} H{head}" for layer in range(3) for head in range(5)]
    for row in table.itertuples():
        image = _decode_png(row.url)
        factor = image.shape[0] // 6
        pixels = image[factor // 2 :: factor, factor // 2 :: factor]  # [6, 6, 3]
        shown = np.where(allowed, maps.weights[row.layer, row.head], np.nan)
        np.testing.assert_array_equal(pixels, WEIGHTS.rgb(shown))
    assert (table["x2"] > table["x"]).all() and (table["y2"] > table["y"]).all()
    boxes = list(zip(table["x"], table["y"], strict=True))
    assert len(set(boxes)) == 15  # no two maps in the same place
    assert "grey = masked" in title_text(spec)


def test_grid_click_selects_layer_and_head(make_maps):
    spec = attention_grid(make_maps(n_layers=3, n_heads=5))
    pickers = [layer for layer in spec["layer"] if layer.get("params")]
    assert len(pickers) == 1
    param = pickers[0]["params"][0]
    assert param["name"] == GRID_PICK and param["select"] == {"type": "point", "fields": ["layer", "head"]}
    assert tooltip_fields(pickers[0])[0] == "title"
    assert picked_map({GRID_PICK: [{"layer": 2, "head": 4}]}) == (2, 4)
    assert picked_map({GRID_PICK: []}) is None and picked_map({}) is None and picked_map(None) is None
    assert picked_map({GRID_PICK: [{"head": 1}]}) is None


def test_grid_size_does_not_grow_with_tokens(make_maps):
    maps = make_maps(n_layers=12, n_heads=12, tokens=[f"w{i}" for i in range(33)])
    assert grid_cells(maps) <= GRID_MAX_CELLS
    spec = attention_grid(maps)
    assert len(spec["datasets"]["grid"]) == 144
    assert spec["height"] <= 1200 and spec["width"] <= 1000
    small = attention_grid(make_maps(n_layers=12, n_heads=12))
    assert (small["width"], small["height"]) == (spec["width"], spec["height"])


def test_entropy_panel_values(make_maps):
    maps = make_maps(n_layers=2, n_heads=3, allowed=causal(6))
    df = head_entropy(maps)
    drawn = panel_matrix(entropy_panel(df))
    np.testing.assert_allclose(drawn.values, df["entropy"].to_numpy().reshape(2, 3), rtol=1e-6)
    legend = drawn.view["legend"]
    assert legend["high"] == df["max_entropy"].iloc[0] and legend["low"] == 0
    assert (drawn.x_title, drawn.y_title) == ("head", "layer")
    assert drawn.x_labels == ["H0", "H1", "H2"] and drawn.y_labels == ["L0", "L1"]


def test_grid_board_picks_and_outlines_each_map(make_maps):
    allowed = causal(6)
    maps = make_maps(n_layers=3, n_heads=4, allowed=allowed)
    grid = grid_board(maps, picked=(2, 1))
    assert grid["columns"] == 4 and grid["panels"][grid["picked"]]["title"] == "L2 H1"
    for panel in grid["panels"]:
        layer, head = panel["pick"]["layer"], panel["pick"]["head"]
        assert panel["title"] == f"L{layer} H{head}" and not panel["axes"]
        shown = np.where(allowed, maps.weights[layer, head], np.nan)
        np.testing.assert_array_equal(panel_matrix(panel).image, WEIGHTS.rgb(shown))
    assert grid_board(maps)["picked"] is None


def test_map_panel_and_chart_draw_the_same_map(make_maps):
    maps = make_maps(n_layers=2, n_heads=2, allowed=causal(6))
    panel = panel_matrix(attention_map_panel(maps, 1, 0))
    chart = one_matrix(attention_heatmap(maps, 1, 0))
    np.testing.assert_array_equal(panel.values, chart.values)
    np.testing.assert_array_equal(panel.masked, chart.masked)
    assert (panel.x_labels, panel.y_labels, panel.title) == (chart.x_labels, chart.y_labels, chart.title)


def test_a_window_draws_part_of_a_big_map_with_its_own_labels(make_maps):
    side = 140
    tokens = [f"w{i}" for i in range(side)]
    maps = make_maps(n_layers=1, n_heads=2, tokens=tokens, allowed=causal(side))
    drawn = one_matrix(attention_heatmap(maps, 0, 1, window=(10, 138, 5, 133)))
    assert drawn.image is None  # 128 x 128 cells: drawn one by one, with hover
    np.testing.assert_array_equal(drawn.masked, ~causal(side)[10:138, 5:133])
    allowed = ~drawn.masked
    np.testing.assert_array_equal(drawn.values[allowed], maps.weights[0, 1, 10:138, 5:133][allowed])
    assert drawn.x_labels[0] == "w5" and drawn.y_labels[0] == "w10" and len(drawn.y_labels) == 128
    assert "queries 10–137 and keys 5–132 of 140 × 140" in drawn.title
    with pytest.raises(ValueError, match="outside"):
        attention_heatmap(maps, 0, 1, window=(0, 141, 0, 10))
