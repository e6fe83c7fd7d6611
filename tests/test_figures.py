"""explorer.figures: what the reader sees (labels, masked cells, values) is what the maps hold."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio

from explorer.figures import (
    GRID_MAX_CELLS,
    MASKED_COLOUR,
    attention_grid,
    attention_heatmap,
    entropy_heatmap,
    grid_cells,
    picked_map,
    token_labels,
)
from explorer.stats import head_average, head_entropy
from explorer.trace import AttentionMaps


def causal(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def spec(fig) -> dict:
    """The figure as the browser receives it."""
    return json.loads(pio.to_json(fig, validate=False))


def test_token_labels_unique_readable_and_escaped():
    labels = token_labels(["the", "cat", "the", "<b>x</b>", "the", "1"])
    assert labels == ["the", "cat", "the·2", "&lt;b&gt;x&lt;/b&gt;", "the·4", "1"]
    assert len(set(token_labels(["a", "a·1", "a"]))) == 3


def test_heatmap_values_axes_and_hover(make_maps, plotly_array):
    maps = make_maps(n_layers=2, n_heads=3)
    fig = spec(attention_heatmap(maps, 1, 2))
    main = fig["data"][0]
    z = plotly_array(main["z"])
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, maps.weights[1, 2])
    assert main["x"] == ["the", "cat", "sat", "on", "the·4", "mat"] == main["y"]
    assert (main["zmin"], main["zmax"]) == (0, 1)
    assert "%{z:.4f}" in main["hovertemplate"] and "query %{y}" in main["hovertemplate"]
    layout = fig["layout"]
    assert layout["xaxis"]["title"]["text"] == "key"
    assert layout["yaxis"]["title"]["text"] == "query"
    assert layout["yaxis"]["autorange"] == "reversed"
    assert layout["xaxis"]["type"] == layout["yaxis"]["type"] == "category"
    assert "layer 1" in layout["title"]["text"] and "head 2" in layout["title"]["text"]
    assert len(fig["data"]) == 1  # nothing masked: no masked layer, no legend entry


def test_heatmap_masked_cells_are_grey_not_zero(make_maps, plotly_array):
    allowed = causal(6)
    maps = make_maps(allowed=allowed)
    fig = spec(attention_heatmap(maps, 0, 0))
    z = plotly_array(fig["data"][0]["z"])
    assert np.isnan(z[~allowed]).all()  # masked cells are not drawn as weight 0 ...
    np.testing.assert_array_equal(z[allowed], maps.weights[0, 0][allowed])
    grey = fig["data"][1]
    assert grey["type"] == "heatmap" and grey["showscale"] is False
    assert {c for _, c in grey["colorscale"]} == {MASKED_COLOUR}
    gz = plotly_array(grey["z"])
    assert (gz[~allowed] == 1).all() and np.isnan(gz[allowed]).all()  # ... but by the grey layer
    assert "masked" in grey["hovertemplate"]
    assert any(t.get("showlegend") and "masked" in t["name"] for t in fig["data"])
    assert "grey = masked" in fig["layout"]["title"]["text"]
    assert np.triu(np.ones((6, 6), dtype=bool), 1)[np.isnan(z)].all()  # exactly the upper triangle


def test_heatmap_flags_empty_rows(make_maps):
    allowed = causal(4) & np.array([False, True, True, True])
    maps = make_maps(tokens=["[PAD]", "a", "b", "c"], allowed=allowed)
    fig = spec(attention_heatmap(maps, 0, 0))
    assert fig["layout"]["yaxis"]["ticktext"][0].startswith("⊘")
    assert not any(t.startswith("⊘") for t in fig["layout"]["yaxis"]["ticktext"][1:])
    assert "no allowed key" in fig["layout"]["title"]["text"]


def test_long_inputs_thin_the_query_labels_and_drop_cell_borders(make_maps):
    tokens = [f"w{i}" for i in range(300)]
    fig = attention_heatmap(make_maps(n_layers=1, n_heads=1, tokens=tokens), 0, 0)
    assert 10 <= len(fig.layout.yaxis.tickvals) <= 45 and fig.layout.yaxis.tickvals[0] == "w0"
    assert fig.data[0].xgap == 0 and fig.data[0].texttemplate is None
    small = attention_heatmap(make_maps(n_layers=1, n_heads=1), 0, 0)
    assert len(small.layout.yaxis.tickvals) == 6 and small.data[0].xgap == 1


def test_heatmap_head_average_is_labelled(make_maps, plotly_array):
    maps = make_maps(n_heads=4)
    fig = spec(attention_heatmap(maps, 0, None))
    np.testing.assert_array_equal(plotly_array(fig["data"][0]["z"]), head_average(maps, 0))
    assert "average of 4 heads" in fig["layout"]["title"]["text"]
    assert "mean weight" in fig["data"][0]["hovertemplate"]


def test_heatmap_escapes_user_text(make_maps):
    maps = make_maps(tokens=["<script>", "&", "ok"])
    fig = spec(attention_heatmap(maps, 0, 0))
    assert fig["data"][0]["x"] == ["&lt;script&gt;", "&amp;", "ok"]
    assert "<script>" not in json.dumps(fig)


def test_cross_attention_heatmap_has_both_token_lists(make_maps):
    maps = make_maps(tokens=["le", "chat"], key_tokens=["the", "cat", "sat"])
    maps = AttentionMaps("cross-attention", maps.weights, maps.scores, maps.allowed, ["le", "chat"], maps.key_tokens)
    fig = spec(attention_heatmap(maps, 0, 1))
    assert fig["data"][0]["x"] == ["the", "cat", "sat"] and fig["data"][0]["y"] == ["le", "chat"]
    assert fig["layout"]["xaxis"]["title"]["text"] == "key (source)"
    assert fig["layout"]["yaxis"]["title"]["text"] == "query (target)"


def grid_block(spec: dict, z: np.ndarray, layer: int, head: int) -> np.ndarray:
    """The [Tq, Tk] block of map (layer, head) in the grid mosaic."""
    geo = spec["layout"]["meta"]["grid"]
    top = geo["row_pitch"] - geo["tq"]
    r0, c0 = layer * geo["row_pitch"] + top, head * geo["col_pitch"]
    return z[r0 : r0 + geo["tq"], c0 : c0 + geo["tk"]]


def test_grid_has_every_layer_and_head(make_maps, plotly_array):
    maps = make_maps(n_layers=3, n_heads=5, allowed=causal(6))
    figure = attention_grid(maps)
    fig = spec(figure)
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles == [f"L{layer} H{head}" for layer in range(3) for head in range(5)]
    assert [t["type"] for t in fig["data"]] == ["heatmap", "heatmap", "scatter"]  # few traces, however many heads
    z = plotly_array(fig["data"][0]["z"])
    grey = plotly_array(fig["data"][1]["z"])
    for layer in range(3):
        for head in range(5):
            block = grid_block(fig, z, layer, head)
            np.testing.assert_array_equal(block[causal(6)], maps.weights[layer, head][causal(6)])
            assert np.isnan(block[~causal(6)]).all()
            assert (grid_block(fig, grey, layer, head)[~causal(6)] == 1).all()
    assert np.isnan(z).sum() == z.size - 15 * causal(6).sum()  # gaps and masked cells only
    assert fig["data"][0]["zmin"] == 0 and fig["data"][0]["zmax"] == 1
    assert "grey = masked" in fig["layout"]["title"]["text"]


def test_grid_click_maps_back_to_layer_and_head(make_maps):
    maps = make_maps(n_layers=3, n_heads=5, allowed=causal(6))
    figure = attention_grid(maps)
    pick = figure.data[-1]
    assert len(pick.x) == 3 * 5 * 36  # small maps: a point on every cell
    for x, y, text in zip(pick.x, pick.y, pick.text, strict=True):
        layer, head = picked_map(figure, {"x": x, "y": y})
        assert text.startswith(f"L{layer} H{head}<br>")
    assert picked_map(figure, {"x": 10_000, "y": 0}) is None
    assert picked_map(figure, {"curve_number": 0}) is None
    first = pick.text[:2]
    assert first[0].endswith("weight " + f"{maps.weights[0, 0, 0, 0]:.4f}") and first[1].endswith("masked")


def test_grid_pick_points_are_a_lattice_on_large_maps(make_maps):
    tokens = [f"t{i}" for i in range(40)]
    figure = attention_grid(make_maps(n_layers=1, n_heads=2, tokens=tokens))
    pick = figure.data[-1]
    assert len(pick.x) == 2 * 16 * 16 and set(pick.text) == {"L0 H0", "L0 H1"}
    assert {picked_map(figure, {"x": x, "y": y}) for x, y in zip(pick.x, pick.y, strict=True)} == {(0, 0), (0, 1)}


def test_grid_is_compact_for_twelve_by_twelve(make_maps):
    maps = make_maps(n_layers=12, n_heads=12, tokens=[f"w{i}" for i in range(33)])
    assert grid_cells(maps) <= GRID_MAX_CELLS
    fig = attention_grid(maps)
    assert len(fig.layout.annotations) == 144 and len(fig.data) == 2
    assert fig.layout.height <= 1200
    assert len(fig.data[-1].x) <= 5_000


def test_entropy_heatmap_values(make_maps, plotly_array):
    maps = make_maps(n_layers=2, n_heads=3, allowed=causal(6))
    df = head_entropy(maps)
    fig = spec(entropy_heatmap(df))
    z = plotly_array(fig["data"][0]["z"])
    np.testing.assert_allclose(z, df["entropy"].to_numpy().reshape(2, 3), rtol=1e-6)
    assert fig["data"][0]["zmax"] == df["max_entropy"].iloc[0]
    assert fig["layout"]["xaxis"]["title"]["text"] == "head"
    assert fig["layout"]["yaxis"]["title"]["text"] == "layer"
