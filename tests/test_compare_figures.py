"""Compare figures and downloads: one colour scale for A and B, A - B centred on 0, lines on the same axes, and
exports that hold the engine's numbers."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

import explorer
from explorer.compare import (
    MapPair,
    attention_difference,
    default_b,
    head_ranking,
    layer_values,
    model_for_b,
    paired_attention,
    per_layer_comparison,
)
from explorer.compare_export import comparison_dict, comparison_json, layers_csv, maps_csv, maps_frame, read_maps_csv
from explorer.compare_figures import (
    A_COLOUR,
    B_COLOUR,
    PAIR_PX,
    PER_LAYER,
    RANKING_PICK,
    STATISTIC_TITLES,
    WEIGHTS,
    difference_heatmap,
    difference_ramp,
    difference_range,
    difference_verdict,
    layer_lines,
    pair_heatmaps,
    pair_hovers,
    ranking_heatmap,
    whole_cells,
    x_labels,
)
from explorer.figures import picked_map
from explorer.gradients import gradient_norms, layer_gradient_totals
from explorer.trace import AttentionMaps
from explorer.vega import MASKED_COLOUR

TOKENS = "the cat sat on the mat"


def traces(a: explorer.ModelConfig, b: explorer.ModelConfig, tokens: str = TOKENS, target: str | None = None):
    model_a = explorer.build_model(a)
    model_b = model_for_b(model_a, b)
    return model_a, model_b, explorer.run(model_a, tokens, target), explorer.run(model_b, tokens, target)


@pytest.fixture(scope="module")
def post_pre():
    a = explorer.ModelConfig(n_layers=3, mask="causal")
    return (a, default_b(a), *traces(a, default_b(a)))


def grid(cells, column: str = "value") -> np.ndarray:
    """A matrix view's cell table back to a [Tq, Tk] array of one column."""
    out = np.zeros((int(cells["q"].max()) + 1, int(cells["k"].max()) + 1), dtype=cells[column].dtype)  # [Tq, Tk]
    out[cells["q"].to_numpy(), cells["k"].to_numpy()] = cells[column].to_numpy()
    return out


def colour(view: dict) -> dict:
    """The colour encoding of a matrix view (on its cell layer)."""
    return view["layer"][0]["encoding"]["color"]


def tooltip(view: dict) -> list[tuple[str, str]]:
    return [(t["field"], t["title"]) for t in view["layer"][0]["encoding"]["tooltip"]]


def self_attention(post_pre):
    *_, trace_a, trace_b = post_pre
    return trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]


def test_pair_heatmaps_share_one_colour_scale(post_pre):
    maps_a, maps_b = self_attention(post_pre)
    spec = pair_heatmaps(maps_a, maps_b, 2, 1)
    view_a, view_b = spec["hconcat"]
    assert [v["title"]["text"] for v in (view_a, view_b)] == ["A · layer 2 · head 1", "B · layer 2 · head 1"]
    assert spec["resolve"]["scale"]["color"] == "shared"  # one legend for both maps
    assert colour(view_a)["scale"] == colour(view_b)["scale"] == WEIGHTS.scale()
    assert colour(view_a)["scale"]["domain"][0] == 0.0 and colour(view_a)["scale"]["domain"][-1] == 1.0
    assert colour(view_a)["legend"]["title"] == colour(view_b)["legend"]["title"] == "weight"
    cells_a, cells_b = spec["datasets"]["side_0_cells"], spec["datasets"]["side_1_cells"]
    np.testing.assert_array_equal(grid(cells_a), maps_a.weights[2, 1])
    np.testing.assert_array_equal(grid(cells_b), maps_b.weights[2, 1])
    np.testing.assert_array_equal(grid(cells_a, "masked"), ~maps_a.allowed)  # grey where masked
    assert grid(cells_a, "masked").sum() == 15  # causal: the upper triangle of 6 x 6
    assert colour(view_a)["condition"] == {"test": "datum.masked", "value": MASKED_COLOUR}
    assert tooltip(view_a) == [("side", "model"), ("query", "query"), ("key", "key"), ("shown", "weight")]
    assert {"calculate": '"A"', "as": "side"} in view_a["layer"][0]["transform"]
    assert view_b["layer"][0]["encoding"]["y"]["axis"]["labels"] is False  # B's rows are A's queries


def test_pair_heatmaps_grey_out_masked_cells():
    a = explorer.ModelConfig(mask="causal")
    _, _, trace_a, trace_b = traces(a, default_b(a))
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    spec = pair_heatmaps(maps_a, maps_b, 0, 0)
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    for name in ("side_0_cells", "side_1_cells"):
        np.testing.assert_array_equal(grid(spec["datasets"][name], "masked"), upper)
    assert "masked: weight 0" in spec["hconcat"][0]["layer"][0]["transform"][-2]["calculate"]


def test_pair_heatmaps_say_what_a_side_lacks(post_pre):
    maps_a, _ = self_attention(post_pre)
    spec = pair_heatmaps(maps_a, None, 0, 0, missing=(None, "B has no cross-attention"))
    assert list(spec["datasets"]) == ["side_0_cells"]
    assert [v["title"]["text"] for v in spec["hconcat"]] == ["A · layer 0 · head 0", "B: B has no cross-attention"]
    spec = pair_heatmaps(maps_a, maps_a, 0, 6, missing=("A has no head 6 (it has 4)", None))
    assert spec["hconcat"][0]["title"]["text"] == "A: A has no head 6 (it has 4)"


def test_difference_heatmap_is_centred_on_zero_with_its_own_legend(post_pre):
    maps_a, maps_b = self_attention(post_pre)
    difference = attention_difference(maps_a, maps_b)[1, 2]
    spec = difference_heatmap(maps_a, maps_b, difference, 1, 2)
    scale = colour(spec)["scale"]
    half = np.abs(difference).max()
    assert scale["domain"] == pytest.approx([-half, 0.0, half])  # symmetric, white at 0
    assert scale["range"] == [B_COLOUR, "#ffffff", A_COLOUR]
    assert colour(spec)["legend"]["title"] == "A − B"
    cells = spec["datasets"]["difference_cells"]
    np.testing.assert_array_equal(grid(cells), difference)
    np.testing.assert_array_equal(grid(cells, "a"), maps_a.weights[1, 2])  # hover gives both weights
    np.testing.assert_array_equal(grid(cells, "b"), maps_b.weights[1, 2])
    assert tooltip(spec) == [("query", "query"), ("key", "key"), ("a", "A"), ("b", "B"), ("shown", "A − B")]
    assert spec["title"]["text"] == "A − B · layer 1 · head 2"
    assert spec["title"]["subtitle"] == [
        f"largest |A − B| = {half:.4f}",
        "blue: A attends more · red: B attends more",
    ]


def test_difference_of_identical_maps_is_exactly_zero():
    _, _, trace_a, trace_b = traces(explorer.ModelConfig(), explorer.ModelConfig())
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    spec = difference_heatmap(maps_a, maps_b, attention_difference(maps_a, maps_b)[0, 0], 0, 0)
    assert (spec["datasets"]["difference_cells"]["value"] == 0).all()
    assert spec["title"]["subtitle"][0] == "identical: every difference is exactly 0"
    assert colour(spec)["scale"]["domain"] == [-1.0, 0.0, 1.0]  # a readable legend, though nothing differs


def test_difference_verdict_tells_rounding_from_a_change():
    assert difference_verdict(0.0) == "identical: every difference is exactly 0"
    assert difference_verdict(3e-7) == "largest |A − B| = 3.0e-07: float32 rounding, A and B agree"
    assert difference_verdict(0.25) == "largest |A − B| = 0.2500"


def test_masked_in_one_only_is_drawn_and_masked_in_both_is_grey():
    a = explorer.ModelConfig()
    _, _, trace_a, trace_b = traces(a, a.replace(mask="causal"))
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    difference = attention_difference(maps_a, maps_b)[0, 0]
    cells = difference_heatmap(maps_a, maps_b, difference, 0, 0)["datasets"]["difference_cells"]
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    np.testing.assert_array_equal(grid(cells)[upper], maps_a.weights[0, 0][upper])  # B may not look there: A - 0
    assert not cells["masked"].any()  # no cell masked in both
    _, _, trace_a, trace_b = traces(a.replace(mask="causal"), a.replace(mask="causal", norm="pre"))
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    spec = difference_heatmap(maps_a, maps_b, attention_difference(maps_a, maps_b)[0, 0], 0, 0)
    np.testing.assert_array_equal(grid(spec["datasets"]["difference_cells"], "masked"), upper)
    assert "masked in A and B" in spec["layer"][0]["transform"][-1]["calculate"]


def test_big_maps_are_drawn_as_images(make_maps):
    tokens = [f"t{i}" for i in range(130)]  # 16 900 cells: one image instead of a rect per cell
    maps_a, maps_b = make_maps(1, 1, tokens, seed=0), make_maps(1, 1, tokens, seed=1)
    spec = difference_heatmap(maps_a, maps_b, attention_difference(maps_a, maps_b)[0, 0], 0, 0)
    assert "datasets" not in spec
    assert spec["layer"][0]["mark"]["type"] == "image"
    assert pair_heatmaps(maps_a, maps_b, 0, 0)["hconcat"][0]["layer"][0]["mark"]["type"] == "image"


def picture(view: dict) -> np.ndarray:
    """[H, W, 3] the PNG a picture view draws."""
    uri = view["layer"][0]["data"]["values"][0]["url"]
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_big_pair_maps_are_pictures_of_the_same_colours(make_maps):
    tokens = [f"t{i}" for i in range(40)]  # 1600 cells: above PAIR_MAX_CELLS
    causal = np.tril(np.ones((40, 40), dtype=bool))
    maps_a, maps_b = make_maps(2, 2, tokens, causal, seed=0), make_maps(2, 2, tokens, causal, seed=1)
    assert not pair_hovers(maps_a) and pair_hovers(make_maps(1, 1, tokens[:32]))
    spec = pair_heatmaps(maps_a, maps_b, 1, 0)
    assert not spec["datasets"]  # no cells to send: one picture per side
    for view, maps in zip(spec["hconcat"], (maps_a, maps_b), strict=True):
        image, legend = view["layer"]
        assert image["mark"]["type"] == "image"
        assert image["data"]["values"][0] | {"url": None} == {"url": None, "k": 0, "k_end": 40, "q": 0, "q_end": 40}
        pixels = picture(view)  # [40 f, 40 f, 3], each cell f x f pixels
        factor = pixels.shape[0] // 40
        assert pixels.shape == (40 * factor, 40 * factor, 3) and 40 * factor >= 2 * whole_cells(40, 40, PAIR_PX)
        expected = WEIGHTS.rgb(np.where(causal, maps.weights[1, 0], np.nan))  # grey where masked
        np.testing.assert_array_equal(pixels[factor // 2 :: factor, factor // 2 :: factor], expected)
        key = legend["encoding"]["color"]
        assert key["scale"] == WEIGHTS.scale() and key["legend"]["title"] == "weight"  # one legend, as cell by cell
        assert image["encoding"]["x"]["axis"]["title"] == "key"  # the same axes as a map drawn cell by cell
    assert spec["hconcat"][1]["layer"][0]["encoding"]["y"]["axis"]["labels"] is False


def test_small_maps_label_every_token_on_every_layer(make_maps):
    queries, keys = "le chat est assis sur le tapis".split(), "the cat sat on the mat".split()
    maps_a = make_maps(1, 1, queries, key_tokens=keys, seed=0)
    maps_b = make_maps(1, 1, queries, key_tokens=keys, seed=1)
    views = [
        *pair_heatmaps(maps_a, maps_b, 0, 0)["hconcat"],
        difference_heatmap(maps_a, maps_b, np.zeros((7, 6)), 0, 0),
    ]
    for view in views:
        text = view["layer"][1]  # the value in each cell: its axes must not replace the cells' (every other label)
        assert text["mark"]["type"] == "text"
        assert len(text["encoding"]["x"]["axis"]["values"]) == 6 and len(text["encoding"]["y"]["axis"]["values"]) == 7
        assert view["width"] == round(whole_cells(7, 6, PAIR_PX) / 7 * 6)


def test_long_difference_map_keeps_hover_with_a_picture_under_its_cells(make_maps):
    tokens = [f"t{i}" for i in range(100)]  # 1.8 px cells: seams between cells drawn one by one
    maps_a, maps_b = make_maps(1, 1, tokens, seed=0), make_maps(1, 1, tokens, seed=1)
    difference = attention_difference(maps_a, maps_b)[0, 0]
    spec = difference_heatmap(maps_a, maps_b, difference, 0, 0)
    under, cells = spec["layer"][:2]
    assert under["mark"]["type"] == "image" and cells["mark"]["type"] == "rect"
    assert under["encoding"]["x"]["axis"] == cells["encoding"]["x"]["axis"]
    np.testing.assert_array_equal(grid(spec["datasets"]["difference_cells"]), difference)  # hover as before
    pixels = picture(spec)
    factor = pixels.shape[0] // 100
    expected = difference_ramp(difference_range(difference)).rgb(difference)
    np.testing.assert_array_equal(pixels[factor // 2 :: factor, factor // 2 :: factor], expected)


def test_key_labels_slant_when_they_do_not_fit_a_cell():
    assert x_labels(["the", "cat"], 33.0) == {"labelAngle": 0, "labelLimit": 70}
    assert x_labels(["internationalization"], 33.0)["labelAngle"] == -45


def test_difference_range():
    assert difference_range(np.array([[0.0, -0.3], [np.nan, 0.1]])) == pytest.approx(0.3)
    assert difference_range(np.zeros((2, 2))) == 1.0


def test_ranking_heatmap_places_each_head_and_outlines_the_shown_one(post_pre):
    ranking = head_ranking(*self_attention(post_pre))
    spec = ranking_heatmap(ranking, 1, 3)
    cells = spec["datasets"]["ranking_cells"]
    for rank, row in enumerate(ranking.itertuples(), start=1):
        cell = cells[(cells["layer"] == row.layer) & (cells["head"] == row.head)]
        assert cell["value"].item() == pytest.approx(row.js_divergence, rel=1e-6)
        assert cell["max_abs_difference"].item() == pytest.approx(row.max_abs_difference, rel=1e-6)
        assert cell["rank"].item() == rank
    (outline,) = [layer for layer in spec["layer"] if layer["mark"].get("stroke") == "black"]
    assert outline["data"]["values"] == [{"k": 3, "k_end": 4, "q": 1, "q_end": 2}]
    assert spec["title"]["text"] == "How much each head changed (JS divergence, bits)"
    assert colour(spec)["legend"]["title"] == "bits"
    assert ("value", "JS divergence (bits)") in tooltip(spec)
    assert ranking_heatmap(ranking, 5, 0)["layer"][-1]["mark"].get("stroke") != "black"  # no such layer: no box


def test_ranking_heatmap_click_picks_the_changed_head():
    uniform = np.full((2, 3, 4, 4), 0.25, dtype=np.float32)  # [L, H, Tq, Tk]
    changed = uniform.copy()
    changed[1, 2] = np.eye(4, dtype=np.float32)  # only layer 1, head 2 differs: it looks at itself
    allowed = np.ones((4, 4), dtype=bool)
    tokens = list("abcd")
    maps_a = AttentionMaps("self-attention", uniform, uniform, allowed, tokens, tokens)
    maps_b = AttentionMaps("self-attention", changed, changed, allowed, tokens, tokens)
    spec = ranking_heatmap(head_ranking(maps_a, maps_b), 0, 0)
    (param,) = spec["layer"][0]["params"]
    assert param == {"name": RANKING_PICK, "select": {"type": "point", "fields": ["layer", "head"]}}
    cells = spec["datasets"]["ranking_cells"]
    hottest = cells.loc[cells["value"].idxmax()]
    assert (hottest["q"], hottest["k"]) == (1, 2)  # drawn in row L1, column H2
    others = np.ones((2, 3), dtype=bool)  # [L, H]
    others[1, 2] = False
    assert grid(cells)[others].max() == 0  # every other head: 0
    clicked = {RANKING_PICK: [{field: int(hottest[field]) for field in param["select"]["fields"]}]}
    assert picked_map(clicked) == (1, 2)  # what a click there hands the page
    text = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"]
    assert text and all(layer["mark"]["interactive"] is False for layer in text)  # clicks reach the cells


def lines_panels(spec: dict) -> list[dict]:
    return [panel for row in spec["vconcat"] for panel in row["hconcat"]]


def test_layer_lines_put_a_and_b_on_the_same_axes(post_pre):
    a, b, model_a, model_b, trace_a, trace_b = post_pre
    values = [
        layer_values(trace.first, layer_gradient_totals(gradient_norms(model, TOKENS)))
        for model, trace in ((model_a, trace_a), (model_b, trace_b))
    ]
    table = per_layer_comparison(*values)
    spec = layer_lines(table)
    panels = lines_panels(spec)
    assert [p["title"]["text"] for p in panels] == [STATISTIC_TITLES[s] for s in PER_LAYER]
    assert [p["title"]["text"] for p in panels][:1] == ["Residual stream RMS"]
    lines = spec["datasets"]["lines"]
    for statistic, panel in zip(PER_LAYER, panels, strict=True):
        assert panel["transform"][0] == {"filter": f'datum.statistic == "{statistic}"'}
        rows = table[table["statistic"] == statistic].sort_values("layer")
        for column, name in (("a", "A"), ("b", "B")):
            shown = lines[(lines["statistic"] == statistic) & (lines["model"] == name)].sort_values("layer")
            np.testing.assert_array_equal(shown["value"].to_numpy(), rows[column].to_numpy())
            np.testing.assert_array_equal(shown["layer"].to_numpy(), rows["layer"].to_numpy())
        line, points = panel["layer"]  # same depth: nothing shaded
        assert line["encoding"]["x"]["field"] == points["encoding"]["x"]["field"] == "layer"  # the same axes
        assert line["encoding"]["color"]["scale"]["range"] == [A_COLOUR, B_COLOUR]
        assert line["encoding"]["strokeDash"]["scale"]["range"] == [[1, 0], [6, 4]]  # A solid, B dashed
        assert ("value", statistic) in [(t["field"], t["title"]) for t in points["encoding"]["tooltip"]]
    x_axis = panels[0]["layer"][0]["encoding"]["x"]["axis"]
    assert x_axis["title"] == "after block" and x_axis["values"][0] == -1
    assert "'input'" in x_axis["labelExpr"]  # layer -1 is the input
    assert panels[2]["layer"][0]["encoding"]["x"]["axis"]["title"] == "block"
    assert spec["resolve"]["scale"]["y"] == "independent"


def test_layer_lines_shade_the_layers_one_model_lacks():
    values_a = layer_values(explorer.run(explorer.ModelConfig(n_layers=2), TOKENS).first)
    values_b = layer_values(explorer.run(explorer.ModelConfig(n_layers=4), TOKENS).first)
    spec = layer_lines(per_layer_comparison(values_a, values_b))
    panels = lines_panels(spec)
    shaded = [p["layer"][0]["data"]["values"] for p in panels if "layer" in p and "data" in p["layer"][0]]
    assert shaded == [[{"from": 1.5, "to": 3.5}]] * 3  # one per panel with data
    assert panels[2]["mark"]["type"] == "text"  # no gradient norms here: the panel says so
    assert panels[2]["data"]["values"] == [{"note": "not available"}]


def test_json_export_holds_both_configs_and_the_engine_differences(post_pre):
    a, b, _, _, trace_a, trace_b = post_pre
    pairs = paired_attention(trace_a, trace_b)
    tables = {"encoder": per_layer_comparison(layer_values(trace_a.first), layer_values(trace_b.first))}
    inputs = {"a_tokens": trace_a.tokens, "b_tokens": trace_b.tokens}
    data = json.loads(comparison_json(a, b, inputs, "shared", pairs, tables, "objective"))
    assert explorer.ModelConfig(**data["a"]) == a and explorer.ModelConfig(**data["b"]) == b
    (pair,) = data["attention"]
    expected = attention_difference(pairs[0].a, pairs[0].b)
    difference = np.array(pair["difference"], dtype=np.float64)
    np.testing.assert_array_equal(difference.astype(np.float32), expected)
    assert pair["head_ranking"][0]["js_divergence"] == head_ranking(pairs[0].a, pairs[0].b)["js_divergence"][0]
    rows = data["per_layer"]["encoder"]
    assert {r["statistic"] for r in rows} == {"residual RMS", "residual std", "attention entropy"}
    assert comparison_dict(a, b, inputs, "shared", pairs, tables, "objective")["weights"] == "shared"


def test_json_export_with_shapes_that_cannot_be_subtracted():
    a = explorer.ModelConfig()
    _, _, trace_a, trace_b = traces(a, a.replace(n_heads=8))
    data = json.loads(
        comparison_json(a, a.replace(n_heads=8), {}, "not shared", paired_attention(trace_a, trace_b), {}, "")
    )
    (pair,) = data["attention"]
    assert pair["difference"] is None and "same shape" in pair["not_compared"]
    assert pair["b_shape"] == [2, 8, 6, 6]


def test_csv_exports_read_back(post_pre):
    *_, trace_a, trace_b = post_pre
    pairs = paired_attention(trace_a, trace_b)
    frame = read_maps_csv(maps_csv(pairs))
    assert len(frame) == 3 * 4 * 6 * 6
    cell = frame[(frame["layer"] == 2) & (frame["head"] == 1) & (frame["query_index"] == 4) & (frame["key_index"] == 1)]
    assert cell["query_token"].item() == "the" and cell["key_token"].item() == "cat"
    assert cell["a"].item() == pairs[0].a.weights[2, 1, 4, 1]
    assert cell["b"].item() == pairs[0].b.weights[2, 1, 4, 1]
    assert cell["a_minus_b"].item() == attention_difference(pairs[0].a, pairs[0].b)[2, 1, 4, 1]
    assert not frame.loc[frame["key_index"] > frame["query_index"], "allowed_a"].any()  # causal
    lines = layers_csv({"encoder": per_layer_comparison(layer_values(trace_a.first), None)}).splitlines()
    assert lines[0] == "stack,statistic,layer,a,b,a_minus_b"
    assert maps_frame(MapPair("x", 0, pairs[0].a, None)).empty
