"""The norm-based map, grid and downloads on hand-made maps and norms: what is coloured is ‖α·f(x)‖ on a stated
scale, hover carries the weight and ‖f(x)‖, the downloads add the norms beside the weights and still read back, and
the notebook figure is the page's map."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.analysis.norm_attention import norm_attention, value_norms
from explorer.export import read_attention_csv, read_attention_json
from explorer.norm_export import norm_attention_csv, norm_attention_json
from pictures.attention_panels import attention_map_panel, grid_panel, key_value_norms, stretch_top
from pictures.boards import decode_floats
from pictures.norm_figures import norm_attention_figure, norm_maps_figure
from pictures.style import BLUES, Ramp
from tests.drawn import figure_json, figure_title, panel_matrix, sheet_maps


@pytest.fixture
def maps_and_norms(make_maps):
    """Random maps with a causal mask, and norms = weights x a per-(layer, head, key) size, as norm_attention makes."""
    allowed = np.tril(np.ones((6, 6), dtype=bool))
    maps = make_maps(n_layers=2, n_heads=3, allowed=allowed)
    sizes = np.random.default_rng(1).uniform(0.5, 4.0, size=(2, 3, 6)).astype(np.float32)  # [L, H, Tk]
    return maps, maps.weights * sizes[:, :, None, :], sizes


def test_the_map_colours_the_norms_from_0_to_the_largest_of_any_head(maps_and_norms):
    maps, norms, sizes = maps_and_norms
    panel = attention_map_panel(maps, 1, 2, stretch=False, norms=norms)
    drawn = panel_matrix(panel)
    allowed = maps.allowed
    np.testing.assert_array_equal(drawn.values[allowed], norms[1, 2][allowed])
    top = float(norms[:, :, allowed].max())
    np.testing.assert_array_equal(drawn.image, Ramp(BLUES, 0.0, top).rgb(np.where(allowed, norms[1, 2], np.nan)))
    assert f"darkest blue = {top:.3g}, the largest of any layer and head" in drawn.title
    hover = {row["title"]: decode_floats(row["values"], (6, 6)) for row in panel["extra"]}
    np.testing.assert_array_equal(hover["weight α"], maps.weights[1, 2])
    # ‖f(x)‖ = ‖α·f(x)‖ / α at the query weighing the key most: one float32 product and division, so 1e-6
    np.testing.assert_allclose(hover["‖f(x)‖ of the key"], np.broadcast_to(sizes[1, 2], (6, 6)), rtol=1e-6)
    stretched = panel_matrix(attention_map_panel(maps, 1, 2, stretch=True, norms=norms))
    own = stretch_top(norms[1, 2], allowed)  # stretched: this map's own top 1 %
    assert own < top and f"{own:.3g} or more" in stretched.title


def test_key_value_norms_is_nan_for_a_key_no_query_weighs():
    weights = np.array([[1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    np.testing.assert_array_equal(key_value_norms(weights, weights * 3), [3.0, np.nan])


def test_the_grid_draws_every_head_on_one_norm_scale(maps_and_norms):
    maps, norms, _ = maps_and_norms
    sheet = grid_panel(maps, norms=norms)
    top = float(norms[:, :, maps.allowed].max())
    ramp = Ramp(BLUES, 0.0, top)
    drawn = sheet_maps(sheet)
    for layer, head in [(0, 0), (1, 2)]:
        shown = np.where(maps.allowed, norms[layer, head], np.nan)  # [Tq, Tk]
        np.testing.assert_array_equal(drawn[f"L{layer} H{head}"], ramp.rgb(shown))
    assert f"darkest blue = {top:.3g}" in sheet["subtitle"] and "what each head adds" in sheet["title"]


def test_the_downloads_carry_the_norms_beside_the_weights_and_read_back(maps_and_norms):
    maps, norms, _ = maps_and_norms
    for head, expected in [(1, norms[0, 1]), (None, norms[0].mean(axis=0))]:
        frame = read_attention_csv(norm_attention_csv(maps, norms, 0, head))
        weights = maps.weights[0, 1] if head is not None else maps.weights[0].mean(axis=0)
        np.testing.assert_allclose(frame["weight"].to_numpy().reshape(6, 6), weights, rtol=1e-6)
        np.testing.assert_allclose(frame["norm"].to_numpy().reshape(6, 6), expected, rtol=1e-6)
        data = read_attention_json(norm_attention_json(maps, norms, 0, head))
        np.testing.assert_allclose(data["weights"], weights, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(data["norms"]), expected, rtol=1e-6)
        assert "Kobayashi" in data["norm_note"] and data["head"] == ("mean" if head is None else head)


def test_the_notebook_figure_is_the_norm_attention_of_the_model():
    model = explorer.build_model(explorer.ModelConfig(arch="decoder"))
    trace = explorer.run(model, "the cat sat on the mat")
    figure = figure_json(norm_attention_figure(model, trace, 1, 2))
    [heatmap] = figure["data"]
    expected = norm_attention(model, trace)[1, 2]
    allowed = trace.attention_maps()["self-attention"].allowed
    np.testing.assert_allclose(np.asarray(heatmap["z"], dtype=float)[allowed], expected[allowed], rtol=1e-6)
    assert np.isnan(np.asarray(heatmap["z"], dtype=float)[~allowed]).all()  # masked: gaps
    assert heatmap["zmax"] == pytest.approx(float(norm_attention(model, trace).max()), rel=1e-6)
    custom = np.asarray(heatmap["customdata"], dtype=float)  # [Tq, Tk, 2]: weight α, the key's ‖f(x)‖
    np.testing.assert_allclose(custom[..., 0], trace.attention[1, 2], rtol=1e-6)
    np.testing.assert_allclose(custom[0, 0, 1], value_norms(model, trace)[1, 2, 0], rtol=1e-5)
    assert "‖α·f(x)‖" in heatmap["hovertemplate"] and "weight α" in heatmap["hovertemplate"]
    with pytest.raises(ValueError, match="cross-attention"):
        norm_attention_figure(model, trace, kind="cross-attention")
    mean = figure_json(
        norm_maps_figure(trace.attention_maps()["self-attention"], norm_attention(model, trace), 0, None)
    )
    assert "‖f(x)‖" not in mean["data"][0]["hovertemplate"]  # one head's size, not a mean's


def test_the_notebook_norm_figure_stretches_to_its_own_top_one_percent():
    model = explorer.build_model(explorer.ModelConfig(arch="decoder"))
    trace = explorer.run(model, "the cat sat on the mat")
    norms = norm_attention(model, trace)[1, 2]  # [T, T]
    allowed = trace.attention_maps()["self-attention"].allowed
    stretched = figure_json(norm_attention_figure(model, trace, 1, 2, stretch=True))
    assert stretched["data"][0]["zmax"] == pytest.approx(float(np.quantile(norms[allowed], 0.99)), rel=1e-6)
    assert "colours stretched" in figure_title(stretched)
    plain = figure_json(norm_attention_figure(model, trace, 1, 2))
    assert "colours stretched" not in figure_title(plain) and "largest of any layer and head" in figure_title(plain)


def test_a_head_that_adds_little_is_pale_and_the_map_says_how_to_see_it(maps_and_norms):
    maps, norms, _ = maps_and_norms
    quiet = norms.copy()
    quiet[0, 0] /= 100  # a head whose every key adds a hundredth of the others': below FAINT of the top everywhere
    assert "turn on Stretch colours" in panel_matrix(attention_map_panel(maps, 0, 0, stretch=False, norms=quiet)).title
    assert (
        "turn on Stretch colours" not in panel_matrix(attention_map_panel(maps, 1, 2, stretch=False, norms=quiet)).title
    )


def test_a_zoom_window_cuts_the_norms_and_their_hover_rows_alike(maps_and_norms):
    maps, norms, _ = maps_and_norms
    panel = attention_map_panel(maps, 1, 0, window=(2, 5, 1, 4), stretch=False, norms=norms)
    drawn = panel_matrix(panel)
    window = (slice(2, 5), slice(1, 4))
    allowed = maps.allowed[window]
    np.testing.assert_array_equal(drawn.values[allowed], norms[1, 0][window][allowed])
    hover = {row["title"]: decode_floats(row["values"], (3, 3)) for row in panel["extra"]}
    np.testing.assert_array_equal(hover["weight α"], maps.weights[1, 0][window])
    assert f"darkest blue = {float(norms.max()):.3g}" in drawn.title  # the scale of the whole model, not the window
