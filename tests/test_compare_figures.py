"""Compare figures and downloads: one colour scale for A and B, A - B centred on 0, lines on the same axes, and
exports that hold the engine's numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

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
    PER_LAYER,
    difference_heatmap,
    difference_range,
    layer_lines,
    pair_heatmaps,
    ranking_heatmap,
)
from explorer.gradients import gradient_norms, layer_gradient_totals

TOKENS = "the cat sat on the mat"


def traces(a: explorer.ModelConfig, b: explorer.ModelConfig, tokens: str = TOKENS, target: str | None = None):
    model_a = explorer.build_model(a)
    model_b = model_for_b(model_a, b)
    return model_a, model_b, explorer.run(model_a, tokens, target), explorer.run(model_b, tokens, target)


@pytest.fixture(scope="module")
def post_pre():
    a = explorer.ModelConfig(n_layers=3, mask="causal")
    return (a, default_b(a), *traces(a, default_b(a)))


def heatmaps(fig, name=None):
    return [t for t in fig.data if t.type == "heatmap" and (name is None or t.name == name)]


def test_pair_heatmaps_share_one_colour_scale(post_pre):
    *_, trace_a, trace_b = post_pre
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    fig = pair_heatmaps(maps_a, maps_b, 2, 1)
    (a,), (b,) = heatmaps(fig, "A"), heatmaps(fig, "B")
    assert a.coloraxis == b.coloraxis == "coloraxis"
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    assert fig.layout.coloraxis.colorbar.title.text == "weight"
    assert all(t.showscale is False for t in heatmaps(fig) if t.coloraxis is None)  # the grey masks: no bar
    allowed = maps_a.allowed
    np.testing.assert_array_equal(np.asarray(a.z)[allowed], maps_a.weights[2, 1][allowed])
    np.testing.assert_array_equal(np.asarray(b.z)[allowed], maps_b.weights[2, 1][allowed])
    assert np.isnan(np.asarray(a.z)[~allowed]).all()
    assert (a.xaxis, b.xaxis) == ("x", "x2")
    assert [ann.text for ann in fig.layout.annotations] == ["A · layer 2 · head 1", "B · layer 2 · head 1"]


def test_pair_heatmaps_say_what_a_side_lacks(post_pre):
    *_, trace_a, _ = post_pre
    maps_a = trace_a.attention_maps()["self-attention"]
    fig = pair_heatmaps(maps_a, None, 0, 0, missing=(None, "B has no cross-attention"))
    assert len(heatmaps(fig, "A")) == 1 and not heatmaps(fig, "B")
    assert fig.layout.annotations[1].text == "B: B has no cross-attention"


def test_difference_heatmap_is_centred_on_zero_with_its_own_bar(post_pre):
    *_, trace_a, trace_b = post_pre
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    difference = attention_difference(maps_a, maps_b)[1, 2]
    fig = difference_heatmap(maps_a, maps_b, difference, 1, 2)
    main = fig.data[0]
    assert main.colorbar.title.text == "A − B"
    assert main.zmid == 0 and main.zmin == -main.zmax
    assert main.coloraxis is None  # not the weights' scale
    z = np.asarray(main.z, dtype=np.float64)
    allowed = maps_a.allowed | maps_b.allowed
    np.testing.assert_array_equal(z[allowed], difference[allowed])
    assert np.isnan(z[~allowed]).all()
    assert main.zmax == pytest.approx(np.abs(difference).max())
    assert main.colorscale[0][1].lower() == B_COLOUR and main.colorscale[-1][1].lower() == A_COLOUR
    np.testing.assert_array_equal(np.asarray(main.customdata)[..., 0], maps_a.weights[1, 2])
    assert "layer 1 · head 2" in fig.layout.title.text


def test_difference_of_identical_maps_is_exactly_zero():
    _, _, trace_a, trace_b = traces(explorer.ModelConfig(), explorer.ModelConfig())
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    fig = difference_heatmap(maps_a, maps_b, attention_difference(maps_a, maps_b)[0, 0], 0, 0)
    assert (np.asarray(fig.data[0].z) == 0).all()
    assert "exactly 0" in fig.layout.title.text
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1.0, 1.0)  # a readable bar, though nothing differs


def test_masked_in_one_only_is_drawn():
    a = explorer.ModelConfig()
    _, _, trace_a, trace_b = traces(a, a.replace(mask="causal"))
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    difference = attention_difference(maps_a, maps_b)[0, 0]
    z = np.asarray(difference_heatmap(maps_a, maps_b, difference, 0, 0).data[0].z)
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    np.testing.assert_array_equal(z[upper], maps_a.weights[0, 0][upper])  # B may not look there: A - 0
    assert len(heatmaps(difference_heatmap(maps_a, maps_b, difference, 0, 0))) == 1  # no cell masked in both


def test_difference_range():
    assert difference_range(np.array([[0.0, -0.3], [np.nan, 0.1]])) == pytest.approx(0.3)
    assert difference_range(np.zeros((2, 2))) == 1.0


def test_ranking_heatmap_places_each_head(post_pre):
    *_, trace_a, trace_b = post_pre
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    ranking = head_ranking(maps_a, maps_b)
    fig = ranking_heatmap(ranking, 1, 3)
    z = np.asarray(fig.data[0].z)
    for row in ranking.itertuples():
        assert z[row.layer, row.head] == pytest.approx(row.js_divergence, rel=1e-6)
    (box,) = fig.layout.shapes
    assert (box.x0, box.y0) == (2.5, 0.5)


def test_layer_lines_put_a_and_b_on_the_same_axes(post_pre):
    a, b, model_a, model_b, trace_a, trace_b = post_pre
    values = [
        layer_values(trace.first, layer_gradient_totals(gradient_norms(model, TOKENS)))
        for model, trace in ((model_a, trace_a), (model_b, trace_b))
    ]
    table = per_layer_comparison(*values)
    fig = layer_lines(table)
    assert len(fig.data) == 2 * len(PER_LAYER)
    for i, statistic in enumerate(PER_LAYER):
        line_a, line_b = fig.data[2 * i], fig.data[2 * i + 1]
        assert (line_a.name, line_b.name) == ("A", "B")
        assert (line_a.xaxis, line_a.yaxis) == (line_b.xaxis, line_b.yaxis)  # the same axes
        rows = table[table["statistic"] == statistic].sort_values("layer")
        np.testing.assert_array_equal(line_a.y, rows["a"].to_numpy())
        np.testing.assert_array_equal(line_b.y, rows["b"].to_numpy())
    assert [ann.text for ann in fig.layout.annotations][:1] == ["Residual stream RMS"]
    assert not fig.layout.shapes  # same depth: nothing shaded


def test_layer_lines_shade_the_layers_one_model_lacks():
    values_a = layer_values(explorer.run(explorer.ModelConfig(n_layers=2), TOKENS).first)
    values_b = layer_values(explorer.run(explorer.ModelConfig(n_layers=4), TOKENS).first)
    fig = layer_lines(per_layer_comparison(values_a, values_b))
    assert len(fig.layout.shapes) == 3  # one per panel with data (no gradient norms here)
    assert (fig.layout.shapes[0].x0, fig.layout.shapes[0].x1) == (1.5, 3.5)


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
