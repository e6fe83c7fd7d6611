"""The positional, activations and anatomy pages through streamlit.testing: what they draw is what the engine
computes for the sidebar's settings, page controls change it, and bad input gives a sentence, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
import views.caches as caches
from explorer.analysis import position_analysis
from explorer.analysis.activations import layer_statistics, token_norms
from explorer.analysis.gradients import GRADIENT_OBJECTIVE, gradient_norms, layer_gradient_totals
from explorer.analysis.position_analysis import (
    encoding_table,
    offset_scores,
    permutation_demo,
    reorder,
    rope_angle_table,
    similarity,
    similarity_to,
    wavelengths,
)
from explorer.analysis.stats import head_entropy, head_grid, head_mean_distance, head_sparsity
from explorer.anatomy import block_diagram, forward_steps, multiply_adds, parameter_counts
from explorer.config import ModelConfig
from explorer.numbers import readable_share
from pictures.style import RDBU, Ramp
from tests.drawn import (
    app_boards,
    app_figures,
    app_matrices,
    figure_title,
    figure_titled,
    figure_trace,
    table_as_read,
)

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
TOKENS = "the cat sat on the mat"
POSITIONAL, ACTIVATIONS, ANATOMY = "views/positional.py", "views/activations.py", "views/anatomy.py"
# The URL parameters that open the sections below each page's first screen (views/lazy_sections.py)
POSITIONAL_SECTIONS = (
    "pos_open_table",
    "pos_open_wavelengths",
    "pos_open_similarity",
    "pos_open_offset",
    "pos_open_order",
)
ACTIVATION_SECTIONS = ("act_open_norms", "act_open_tokens", "act_open_histogram", "act_open_zeros", "act_open_heads",
                       "act_open_gradients")  # fmt: skip
OPEN = {POSITIONAL: dict.fromkeys(POSITIONAL_SECTIONS, "true"), ACTIVATIONS: dict.fromkeys(ACTIVATION_SECTIONS, "true")}


def open_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update(params)
    at.switch_page(page).run()
    assert_ok(at)
    return at


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def errors(at: AppTest) -> str:
    return " ".join(e.value for e in at.error)


# ---- positional page -------------------------------------------------------------------------------------------


def plotly_strings(node) -> list[str]:
    """Every string of a drawn Plotly figure (titles, names, hover templates, custom data), however deep."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in plotly_strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in plotly_strings(value)]
    return []


def curve_names(figure: dict) -> list[str]:
    """The curves of the encoding chart, in legend order (not the typed tokens' marks)."""
    return [trace["name"] for trace in figure["data"] if trace["name"] != "typed tokens"]


def test_positional_default_draws_the_sinusoids():
    at = open_page(POSITIONAL, **OPEN[POSITIONAL])
    assert not at.error
    model = explorer.build_model(ModelConfig())
    table = encoding_table(model, 64)  # what the model adds, for the default max position
    curves = figure_titled(at, "value against position")
    dim0 = figure_trace(curves, "dim 0 (sin of pair 0)")
    np.testing.assert_array_equal(dim0["x"], np.arange(64))
    np.testing.assert_array_equal(dim0["y"], table[:, 0])
    np.testing.assert_allclose(dim0["y"], np.sin(np.arange(64)), atol=1e-6)
    typed = figure_trace(curves, "typed tokens")  # on each curve, dimension by dimension: dim 0's come first
    assert [row[1] for row in typed["customdata"][:6]] == TOKENS.split()
    assert {row[0] for row in typed["customdata"][:6]} == {"dim 0 (sin of pair 0)"}
    np.testing.assert_array_equal(typed["x"][:6], np.arange(6))
    np.testing.assert_array_equal(typed["y"][:6], table[:6, 0])
    heat = app_matrices(at)["pos_table"]  # a matrix-view board: every cell hovers
    assert "whole [position, dimension] matrix" in heat.title
    np.testing.assert_array_equal(heat.values, table)
    assert heat.x_title == "dimension"
    sim = app_matrices(at)["pos_similarity"]
    assert "Cosine similarity between" in sim.title
    np.testing.assert_allclose(sim.values, similarity(table, "cosine"), atol=1e-6)
    waves = figure_titled(at, "Wavelength of each pair (d_model = 64)")
    np.testing.assert_allclose(figure_trace(waves, "wavelength of the pair")["y"], wavelengths(64))
    assert list(figure_trace(waves, "positions shown (64)")["y"]) == [64, 64]
    profile = figure_titled(at, "Cosine similarity of position 5 (the last typed token) with each position")
    np.testing.assert_allclose(profile["data"][0]["y"], similarity_to(table, 5, "cosine"), atol=1e-6)
    assert any("fills all 48 positions" in m.value for m in at.markdown)
    offsets = figure_titled(at, "score against offset")
    expected = offset_scores(ModelConfig(), "the", 48)  # the first typed token, repeated; layer 0, head 0
    mean = figure_trace(offsets, "mean score at this offset")
    np.testing.assert_array_equal(mean["x"], expected.offsets)
    np.testing.assert_allclose(mean["y"], expected.by_offset, rtol=1e-5, atol=1e-6)
    assert "pos_offset" in app_matrices(at) and len(app_figures(at)) == 4
    assert len(at.get("download_button")) == 5  # and the view as HTML
    assert not at.get("arrow_data_frame")  # the typed rows' table only on request (it loads a heavy script)
    assert not any("Untrained" in w.value for w in at.warning)  # only the learned table is untrained
    at.toggle(key="pos_typed_table").set_value(True).run()
    (typed_rows,) = [d.value for d in at.dataframe]
    np.testing.assert_array_equal(typed_rows["dim_3"], table[:6, 3])


def test_positional_page_controls_change_the_drawing():
    at = open_page(POSITIONAL, pos_open_similarity="true")
    at.number_input(key="pos_max").set_value(200)
    at.text_input(key="pos_dims").input("2, 5-6")
    at.radio(key="pos_metric").set_value("dot")
    at.run()
    assert_ok(at)
    assert not at.error
    curves = figure_titled(at, "value against position")
    names = ["dim 2 (sin of pair 1)", "dim 5 (cos of pair 2)", "dim 6 (sin of pair 3)"]
    assert curve_names(curves) == names
    table = encoding_table(explorer.build_model(ModelConfig()), 200)
    dim5 = figure_trace(curves, names[1])
    np.testing.assert_array_equal(dim5["x"], np.arange(200))
    np.testing.assert_array_equal(dim5["y"], table[:, 5])
    sim = app_matrices(at)["pos_similarity"]  # 200 x 200 cells, every one hovers
    assert "Dot product between" in sim.title
    expected = similarity(table, "dot")  # [200, 200]
    np.testing.assert_allclose(sim.values, expected, rtol=1e-5, atol=1e-5)
    top = float(np.abs(expected).max())
    colours = Ramp(RDBU, -top, top).rgb(expected.astype(np.float32))
    assert np.abs(sim.image.astype(int) - colours.astype(int)).max() <= 1  # one pixel per cell
    profile = figure_titled(at, "Dot product of position 5")
    np.testing.assert_allclose(profile["data"][0]["y"], similarity_to(table, 5, "dot"), rtol=1e-6)
    assert at.number_input(key="pos_max").value == 200


def test_positional_url_params_set_the_page_controls():
    at = open_page(POSITIONAL, pos_max="32", pos_dims="4", pos_metric="dot")
    assert at.number_input(key="pos_max").value == 32
    assert at.text_input(key="pos_dims").value == "4"
    curves = figure_titled(at, "value against position")
    assert curve_names(curves) == ["dim 4 (sin of pair 2)"]
    assert len(figure_trace(curves, "dim 4 (sin of pair 2)")["x"]) == 32
    assert "Dot product between" in app_matrices(at)["pos_similarity"].title


def test_positional_tokens_reach_plotly_as_text():
    """A typed token is escaped in every Plotly string (Plotly reads HTML there): hovering its mark shows it as typed
    (test_browser_positional_activations_anatomy), never in bold."""
    at = open_page(POSITIONAL, tokens="<b>bold</b> x", **OPEN[POSITIONAL])
    typed = figure_trace(figure_titled(at, "value against position"), "typed tokens")
    assert [row[1] for row in typed["customdata"][:2]] == ["&lt;b&gt;bold&lt;/b&gt;", "x"]
    for figure in app_figures(at):
        assert not any("<b>bold" in s for s in plotly_strings(figure))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pos_dims": "0, 1, 64"}, "Dimension 64 does not exist: d_model is 64, so dimensions run from 0 to 63."),
        ({"pos_dims": "one"}, "is not a whole number"),
        ({"pos_dims": "0-40"}, "at most 16"),
        ({"pos_max": "10000000"}, "Max position 10,000,000 is out of range; use 1 to 4,096."),
        ({"pos_max": "0"}, "Max position 0 is out of range"),
        ({"positional": "learned", "pos_max": "600"}, "The learned table has 512 positions"),
    ],
)
def test_positional_bad_input_is_a_sentence(params, message):
    at = open_page(POSITIONAL, **params, pos_open_offset="true", pos_open_order="true")
    assert message in errors(at)
    assert "perm_rerun" in app_matrices(at)  # the rest of the page still works
    assert figure_titled(at, "score against offset")
    # No positions to draw, so no view to download (it raised the page's error on the click, outside the page)
    views = [b for b in at.get("download_button") if b.proto.label == "Download this view (HTML)"]
    assert len(views) == (0 if "pos_max" in params else 1)


def test_positional_recovers_from_a_bad_dimension():
    at = open_page(POSITIONAL, pos_dims="99")
    assert "Dimension 99 does not exist" in errors(at)
    at.text_input(key="pos_dims").input("3").run()
    assert_ok(at)
    assert not at.error
    assert curve_names(figure_titled(at, "value against position")) == ["dim 3 (cos of pair 1)"]


def test_learned_positions_are_labelled_untrained():
    at = open_page(POSITIONAL, positional="learned", pos_max="20", pos_open_table="true")
    assert any("Untrained" in w.value for w in at.warning)
    heat = app_matrices(at)["pos_table"]
    assert "Learned position embedding (untrained, random init)" in heat.title
    table = encoding_table(explorer.build_model(ModelConfig(positional="learned")), 20)
    np.testing.assert_array_equal(heat.values, table)
    curves = figure_titled(at, "Learned position embedding (untrained): value against position")
    np.testing.assert_array_equal(figure_trace(curves, "dim 0")["y"], table[:, 0])
    assert not [f for f in app_figures(at) if "Wavelength" in figure_title(f)]


def test_rope_shows_angles_and_offset_only_scores():
    at = open_page(POSITIONAL, positional="rope", **OPEN[POSITIONAL])
    angles = app_matrices(at)["pos_rope"]
    assert angles.title.startswith("Rotary encoding")
    expected = np.degrees(np.mod(rope_angle_table(64, 16).astype(np.float64), 2 * np.pi))  # [P, K/2]
    np.testing.assert_allclose(angles.values, expected, atol=5e-5)  # drawn as float32
    waves = figure_titled(at, "Wavelength of each pair (d_head = 16)")
    np.testing.assert_allclose(figure_trace(waves, "wavelength of the pair")["y"], wavelengths(16))
    assert any("fills all 48 positions" in m.value and "depends on the offset only" in m.value for m in at.markdown)
    offsets = figure_titled(at, "score against offset")
    low, high = figure_trace(offsets, "lowest")["y"], figure_trace(offsets, "range over the diagonal")["y"]
    assert len(high) == 95 and (high - low).max() < 1e-4  # every offset of 48 positions, each diagonal constant
    assert at.text_input(key="pos_dims").disabled


def test_no_positions_and_no_causal_mask_only_move_the_maps():
    at = open_page(POSITIONAL, positional="none")
    assert any("only moved the maps" in s.value for s in at.success)
    assert at.number_input(key="pos_max").disabled and at.radio(key="pos_metric").disabled
    assert any("None of these controls is used with no positions" in c.value for c in at.caption)  # says why
    cfg = ModelConfig(positional="none")
    demo = permutation_demo(cfg, TOKENS, reorder(6, "reversed"))
    assert demo.max_difference < 1e-6
    assert at.metric[0].value == readable_share(demo.max_difference)  # e.g. "1.49 × 10⁻⁷", not "1.49e-07"
    assert any("does reordering the tokens only move the map? ② and ③ agree" in m.value for m in at.markdown)
    drawn = app_matrices(at)
    np.testing.assert_array_equal(drawn["perm_typed"].values, demo.attention[0, 0])
    np.testing.assert_array_equal(drawn["perm_rerun"].values, demo.shuffled_attention[0, 0])
    np.testing.assert_allclose(drawn["perm_moved"].values, drawn["perm_rerun"].values, atol=1e-6)
    assert drawn["perm_rerun"].x_labels == ["mat", "the", "on", "sat", "cat", "the·5"]
    at.selectbox(key="mask").select("causal").run()
    assert_ok(at)
    warning = " ".join(w.value for w in at.warning)
    assert "causal mask also carries position" in warning and "encoding gives" not in warning
    assert float(at.metric[0].value) > 0.01


@pytest.mark.parametrize("removed", ["", "L1H0"])
def test_the_reordering_runs_only_the_reordered_tokens_when_the_page_has_every_head(monkeypatch, removed):
    """The page's own run gives the typed order's maps (a second run of SmolLM2 on 512 pieces held 627 MB more); with
    a head removed the page's run is not the demo's model, so the demo runs the typed tokens itself."""
    runs = []
    original = position_analysis.run

    def counted(model, tokens, *args, **kwargs):
        runs.append(list(tokens))
        return original(model, tokens, *args, **kwargs)

    monkeypatch.setattr(position_analysis, "run", counted)
    caches.cached_permutation.clear()
    at = open_page(POSITIONAL, pos_open_order="true", n_layers="3", ablate=removed)
    typed = TOKENS.split()
    assert runs == ([typed[::-1]] if not removed else [typed, typed[::-1]])
    demo = permutation_demo(ModelConfig(n_layers=3), TOKENS, reorder(6, "reversed"))  # every head, run here in full
    drawn = app_matrices(at)
    np.testing.assert_array_equal(drawn["perm_typed"].values, demo.attention[0, 0])
    np.testing.assert_array_equal(drawn["perm_moved"].values, demo.permuted_attention[0, 0])
    np.testing.assert_array_equal(drawn["perm_rerun"].values, demo.shuffled_attention[0, 0])
    assert at.metric[0].value == readable_share(demo.max_difference)


def test_the_reordering_maps_stretch_by_their_own_switch_and_link():
    at = open_page(POSITIONAL, n_layers="1", pos_order_stretch="true")  # the parameter opens its section
    demo = permutation_demo(ModelConfig(n_layers=1), TOKENS, reorder(6, "reversed"))
    drawn = app_matrices(at)
    weights = [demo.attention[0, 0], demo.permuted_map(0, 0), demo.shuffled_attention[0, 0]]
    top = float(np.quantile(np.concatenate([w.ravel() for w in weights]), 0.99))
    assert drawn["perm_rerun"].view["legend"]["high"] == pytest.approx(top, rel=1e-5) and top < 1
    assert "colours stretched" in drawn["perm_typed"].title
    assert at.toggle(key="pos_order_stretch").value
    at.toggle(key="pos_order_stretch").set_value(False).run()
    assert_ok(at)
    assert app_matrices(at)["perm_rerun"].view["legend"]["high"] == 1.0


def test_reordering_control_and_encoder_decoder():
    at = open_page(POSITIONAL, arch="encoder-decoder", positional="none")
    captions = " ".join(c.value for c in at.caption)  # the decoder is causal, but the encoder is what is reordered
    assert "A causal mask still carries order" not in captions and "sees its source as a set" in captions
    at.radio(key="pos_order").set_value("rotated by one").run()
    assert_ok(at)
    assert any("cat sat on the mat the" in m.value for m in at.markdown)
    assert any("only moved the maps" in s.value for s in at.success)
    at.selectbox(key="positional").select("sinusoidal").run()
    assert any("sinusoidal encoding gives each token a position" in w.value for w in at.warning)


def test_maps_that_cannot_move_are_not_taken_for_a_model_blind_to_order():
    at = open_page(POSITIONAL, mask="padding", tokens="cat [PAD] [PAD] [PAD]", pos_open_order="true")
    assert not at.success  # the sinusoids give each token a position, though no map changed
    assert any("the model does see order" in i.value and "at most one key" in i.value for i in at.info)


def test_decoder_is_causal_even_without_positions():
    at = open_page(POSITIONAL, arch="decoder", positional="none")
    assert any("a decoder is always causal" in w.value for w in at.warning)
    captions = " ".join(c.value for c in at.caption)  # no caption may call this model blind to order
    assert "A causal mask still carries order" in captions and "no position signal" not in captions


def test_fewer_layers_after_picking_a_deep_layer():
    at = open_page(POSITIONAL, n_layers="3", pos_open_order="true")
    at.selectbox(key="pos_perm_layer").select(2).run()
    assert_ok(at)
    assert any(m.value.startswith("**Layer 2, head 0: does reordering") for m in at.markdown)
    at.number_input(key="n_layers").set_value(1).run()
    assert_ok(at)
    assert any(m.value.startswith("**Layer 0, head 0: does reordering") for m in at.markdown)


# ---- activations page ------------------------------------------------------------------------------------------


def depth_line(figure: dict, point: str, statistic: str) -> dict:
    """One line of the depth chart as drawn: the trace of `point` in the panel of `statistic` (make_subplots numbers
    the panels mean, std, rms, max_abs as y, y2, y3, y4)."""
    y_axis = ("y", "y2", "y3", "y4")[("mean", "std", "rms", "max_abs").index(statistic)]
    [line] = [t for t in figure["data"] if t["name"] == point and t.get("yaxis", "y") == y_axis]
    return line


def test_activations_default_shows_the_engine_statistics():
    at = open_page(ACTIVATIONS, **OPEN[ACTIVATIONS])
    assert not at.error
    trace = explorer.run(ModelConfig(), TOKENS)
    stats = layer_statistics(trace.first)
    depth = figure_titled(at, "Activation statistics over depth (encoder stack)")
    rms = depth_line(depth, "residual", "rms")
    np.testing.assert_array_equal(rms["x"], [-1, 0, 1])
    np.testing.assert_array_equal(rms["y"], stats[stats["point"] == "residual"]["rms"])
    assert any(i.value.startswith("Post-norm: every block ends with a LayerNorm") for i in at.info)
    layernorm = figure_titled(at, "What each LayerNorm receives and returns (encoder stack, post-norm)")
    drawn = [t for t in layernorm["data"] if t["name"] == "feed-forward LayerNorm input" and t["yaxis"] == "y2"]
    np.testing.assert_array_equal(drawn[0]["y"], stats[stats["point"] == "ffn LayerNorm in"]["max_abs"])
    norms = app_matrices(at)["act_token_norms"]
    assert "residual vector, layer by layer" in norms.title
    np.testing.assert_allclose(norms.values, token_norms(trace.first), rtol=1e-6)
    hist = figure_titled(at, "Distribution of values: residual, block 0")
    assert int(figure_trace(hist, "values")["y"].sum()) == 6 * 64
    maps = trace.first.self_attention
    drawn = app_matrices(at)
    assert drawn["act_distance"].title.startswith("Mean distance (positions)")
    np.testing.assert_allclose(drawn["act_distance"].values, head_grid(head_mean_distance(maps), "distance"), rtol=1e-6)
    np.testing.assert_allclose(drawn["act_sparsity"].values, head_grid(head_sparsity(maps), "sparsity"), rtol=1e-6)
    np.testing.assert_allclose(drawn["act_entropy"].values, head_grid(head_entropy(maps), "entropy"), rtol=1e-6)
    assert any(i.value == GRADIENT_OBJECTIVE for i in at.info)
    norms_by_parameter = gradient_norms(explorer.build_model(ModelConfig()), TOKENS)
    totals = layer_gradient_totals(norms_by_parameter)
    grad = figure_titled(at, "parameters (post-norm)")
    np.testing.assert_allclose(figure_trace(grad, "encoder blocks")["y"], totals["norm"], rtol=1e-5)
    assert grad["layout"]["yaxis"]["type"] == "log"
    heat = app_matrices(at)["act_grad"]
    assert heat.title.startswith("Gradient norm of each weight matrix and bias (encoder stack)")
    value = norms_by_parameter.query("layer == 1 and parameter == 'linear1.weight'")["norm"].item()
    assert heat.values[heat.y_labels.index("linear1.weight"), 1] == pytest.approx(np.log10(value), rel=1e-4)
    assert len(app_figures(at)) == 6  # every line and bar chart is Plotly (the shares on the largest |x| too)
    assert len(at.get("download_button")) == 9  # and the view as HTML
    assert not at.get("arrow_data_frame")  # the three tables only on request (they load a heavy script)


def test_activation_tables_on_request():
    at = open_page(ACTIVATIONS, **OPEN[ACTIVATIONS])
    for key in ("act_stats_table", "act_heads_table", "act_grads_table"):
        at.toggle(key=key).set_value(True)
    at.run()
    assert_ok(at)
    frames = [d.value for d in at.dataframe]
    assert len(frames) == 3
    stats = layer_statistics(explorer.run(ModelConfig(), TOKENS).first)
    np.testing.assert_array_equal(frames[0]["rms"], stats["rms"])


def test_activation_histogram_controls():
    at = open_page(ACTIVATIONS, act_open_histogram="true")
    at.selectbox(key="act_layer").select(1)
    at.selectbox(key="act_point").select("FFN hidden")
    at.toggle(key="act_log").set_value(True)
    at.run()
    assert_ok(at)
    hist = figure_titled(at, "Distribution of values: FFN hidden, block 1 (encoder stack)")
    hidden = explorer.run(ModelConfig(), TOKENS).first.activations["blocks.1.ffn.hidden"]
    bars = figure_trace(hist, "values")
    assert int(bars["y"].sum()) == hidden.size == 6 * 256
    counts = np.histogram(hidden.astype(np.float64), bins=60)[0]
    np.testing.assert_array_equal(bars["y"], counts[counts > 0])  # the log axis leaves the empty bins out
    assert hist["layout"]["yaxis"]["type"] == "log"
    assert f"{(hidden == 0).mean():.1%} exactly 0" in figure_title(hist)
    zeros = figure_trace(hist, "exactly 0")
    assert f"values exactly 0: {int((hidden == 0).sum()):,}" in zeros["hovertemplate"]


def test_the_histograms_token_count_says_how_many_are_pad():
    """Its values are of every token, [PAD] too: "4 tokens × 64 units" had counted two [PAD]s without a word."""
    at = open_page(ACTIVATIONS, tokens="the cat [PAD] [PAD]", mask="padding", act_open_histogram="true")
    hist = figure_titled(at, "Distribution of values: residual, block 0 (encoder stack)")
    assert "(4 tokens, 2 of them [PAD] × 64 units)" in figure_title(hist)
    plain = figure_titled(open_page(ACTIVATIONS, act_open_histogram="true"), "Distribution of values")
    assert "(6 tokens × 64 units)" in figure_title(plain)


@pytest.mark.parametrize(
    ("norm", "said"), [("pre", "what each sub-layer adds"), ("res-post", "before its output norm")]
)
def test_the_output_points_are_said_to_be_what_they_hold(norm, said):
    """Found by a review of the numbers: in res-post and peri the attention and FFN output lines are f(x) before the
    output norm (RMS 0.30 and 0.73 on this model) while the stream receives the norm's output (RMS 1.00), yet the chart
    and the Point help called them what each sub-layer adds."""
    at = open_page(ACTIVATIONS, norm=norm, act_open_histogram="true")
    assert_ok(at)
    stack = explorer.run(ModelConfig(norm=norm), TOKENS).first
    depth = figure_titled(at, "Activation statistics over depth")
    line = depth_line(depth, "attention output", "rms")["y"]
    out = stack.activations["blocks.0.attn.out"].astype(np.float64)
    assert line[0] == pytest.approx(np.sqrt((out**2).mean()), rel=1e-6)  # the line is attn.out, from block 0
    subtitle = depth["layout"]["title"]["subtitle"]["text"].replace("<br>", " ")
    assert said in subtitle and "divides by their number, N" in subtitle  # numpy's std, ddof 0
    std = depth_line(depth, "attention output", "std")["y"]
    assert std[0] == pytest.approx(out.std(ddof=0), rel=1e-6) and std[0] != pytest.approx(out.std(ddof=1), rel=1e-6)
    helped = at.selectbox(key="act_point").help
    assert ("before its output norm" in helped) == (norm == "res-post")
    if norm == "res-post":
        added = stack.activations["blocks.0.attn.out_ln_out"].astype(np.float64)
        assert np.sqrt((added**2).mean()) > 2 * line[0]  # what the stream receives is not what the line shows


def test_pre_norm_twelve_layers_tells_the_growing_stream():
    at = open_page(ACTIVATIONS, norm="pre", n_layers="12", d_model="512", n_heads="8", act_open_gradients="true")
    story = next(i.value for i in at.info if i.value.startswith("Pre-norm"))
    assert "rising in every block" in story
    depth = figure_titled(at, "Activation statistics over depth")
    rms = depth_line(depth, "residual", "rms")["y"]
    assert len(rms) == 13 and (np.diff(rms) > 0).all()
    grad = figure_trace(figure_titled(at, "parameters (pre-norm)"), "encoder blocks")
    assert len(grad["y"]) == 12 and np.isfinite(grad["y"]).all()


def test_encoder_decoder_activations_say_which_stack():
    at = open_page(ACTIVATIONS, arch="encoder-decoder", **OPEN[ACTIVATIONS])
    assert at.radio(key="act_stack").value == "encoder"
    at.radio(key="act_stack").set_value("decoder").run()
    assert_ok(at)
    assert any("**decoder** stack" in c.value for c in at.caption)
    depth = figure_titled(at, "Activation statistics over depth (decoder stack)")
    assert "cross-attention output" in {t["name"] for t in depth["data"]}
    assert "cross-attention output" in at.selectbox(key="act_point").options
    grads = app_matrices(at)["act_grad"]
    assert grads.title.startswith("Gradient norm of each weight matrix and bias (decoder stack)")
    assert "multihead_attn.in_proj_weight" in grads.y_labels
    totals = figure_titled(at, "Gradient norm of each block")
    assert [t["name"] for t in totals["data"]] == ["encoder blocks", "decoder blocks"]


def test_one_token_has_no_gradient_but_the_page_works():
    at = open_page(ACTIVATIONS, tokens="alone", act_open_gradients="true")
    assert any("at least two tokens" in w.value for w in at.warning)
    assert figure_titled(at, "Activation statistics over depth")
    assert not [f for f in app_figures(at) if "Gradient norm" in figure_title(f)]


def test_gelu_has_no_exact_zeros():
    at = open_page(ACTIVATIONS, activation="gelu", act_open_zeros="true")
    (zeros,) = figure_titled(at, "exactly 0 (encoder stack, gelu)")["data"]
    assert (zeros["y"] == 0).all()
    (relu,) = figure_titled(open_page(ACTIVATIONS, act_open_zeros="true"), "exactly 0 (encoder stack, relu)")["data"]
    trace = explorer.run(ModelConfig(), TOKENS).first
    expected = [(trace.activations[f"blocks.{i}.ffn.hidden"] == 0).mean() for i in range(2)]
    np.testing.assert_allclose(relu["y"], expected)
    assert (relu["y"] > 0.2).all()


# ---- anatomy page ----------------------------------------------------------------------------------------------


def test_anatomy_default_numbers_are_the_engine_numbers():
    at = open_page(ANATOMY)
    cfg = ModelConfig()
    model = explorer.build_model(cfg)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Total parameters"] == f"{sum(p.numel() for p in model.parameters()):,}"
    assert metrics["In one encoder block"] == f"{sum(p.numel() for p in model.encoder.layers[0].parameters()):,}"
    assert metrics["Multiply-adds, one forward pass"] == f"{int(multiply_adds(cfg, 6)['multiply_adds'].sum()):,}"
    steps = table_as_read(at, "step")
    assert steps.equals(forward_steps(cfg, 6).rename(columns={"size": "size for this input"}))
    assert "+ sinusoidal positions" in set(steps["step"])  # as written, not a Markdown bullet
    macs = table_as_read(at, "formula")
    assert macs.equals(multiply_adds(cfg, 6).rename(columns={"multiply_adds": "multiply-adds"}))
    modules = next(d.value for d in at.dataframe if "module" in d.value.columns)
    assert modules.equals(parameter_counts(model))
    (diagram,) = at.get("graphviz_chart")
    assert diagram.proto.spec == block_diagram(cfg)
    assert len(at.get("download_button")) == 5  # and the view as HTML


def test_anatomy_follows_the_sidebar():
    at = open_page(ANATOMY, arch="encoder-decoder", norm="pre", target="x y z")
    diagrams = [d.proto.spec for d in at.get("graphviz_chart")]
    cfg = ModelConfig(arch="encoder-decoder", norm="pre")
    assert diagrams == [block_diagram(cfg.replace(arch="encoder"), length="S"), block_diagram(cfg)]
    assert "[S, d_model]" in diagrams[0] and "[T, d_model]" in diagrams[1]  # the steps table's letters
    steps = table_as_read(at, "step")
    assert "[4, 3, 6]" in set(steps[steps["shape"] == "[heads, T, S]"]["size for this input"])
    metrics = {m.label for m in at.metric}
    assert {"In one encoder block", "In one decoder block"} <= metrics
    at.number_input(key="n_layers").set_value(3).run()
    assert_ok(at)
    counts = next(d.value for d in at.dataframe if "module" in d.value.columns)
    assert counts["parameters"].sum() == sum(
        p.numel() for p in explorer.build_model(cfg.replace(n_layers=3)).parameters()
    )


# ---- every page ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("page", "sections"), [(POSITIONAL, POSITIONAL_SECTIONS), (ACTIVATIONS, ACTIVATION_SECTIONS)])
def test_a_page_builds_its_first_chart_and_each_section_below_when_opened(page, sections):
    at = open_page(page)
    assert len(app_figures(at)) == 1 and not app_boards(at)  # the first screen's chart; nothing below is computed
    folded = {e.proto.query_param_key: e.proto.expanded for e in at.expander if e.proto.query_param_key}
    assert folded == dict.fromkeys(sections, False)  # each closed, each opened by its own URL parameter
    opened = open_page(page, **OPEN[page])
    assert {e.proto.query_param_key: e.proto.expanded for e in opened.expander if e.proto.query_param_key} == dict(
        folded, **dict.fromkeys(sections, True)
    )


@pytest.mark.parametrize("page", [POSITIONAL, ACTIVATIONS, ANATOMY])
@pytest.mark.parametrize(("params", "message"), [({"d_model": "30"}, "divisible"), ({"tokens": ""}, "empty")])
def test_bad_sidebar_settings_give_a_message_not_a_traceback(page, params, message):
    at = open_page(page, **params)
    assert message in errors(at)
    assert at.info and not app_figures(at) and not app_boards(at) and not at.get("graphviz_chart")


@pytest.mark.parametrize("page", [POSITIONAL, ACTIVATIONS, ANATOMY])
def test_html_in_tokens_is_shown_as_text(page):
    """Plotly reads the HTML in its labels and hover text, so a token reaches it escaped ("&lt;b&gt;", shown as typed);
    the matrix view draws labels as text, so a token reaches it as typed, never escaped (which would show "&lt;b&gt;").
    test_browser_positional_activations_anatomy hovers one."""
    at = open_page(page, tokens="<b>bold</b> x", **OPEN.get(page, {}))
    assert not at.error
    labels = []
    for figure in app_figures(at):
        assert not any("<b>bold" in text for text in plotly_strings(figure))  # the tag never reaches Plotly as a tag
    for board in app_boards(at).values():  # matrix views: labels travel as typed
        assert "&lt;" not in json.dumps(board, default=lambda raw: None)  # its text: pictures and arrays are bytes
        labels += [label for panel in board["panels"] if panel["kind"] == "matrix" for label in panel["x_labels"]]
    assert ("<b>bold</b>" in labels) == (page != ANATOMY)


@pytest.mark.parametrize(
    ("page", "params", "key"),
    [
        (POSITIONAL, {"pos_metric": "banana"}, "pos_metric=banana"),
        (POSITIONAL, {"pos_max": "lots"}, "pos_max=lots"),
        (POSITIONAL, {"pos_perm_layer": "top"}, "pos_perm_layer=top"),
        (ACTIVATIONS, {"act_point": "nowhere"}, "act_point=nowhere"),
        (ACTIVATIONS, {"act_layer": "deep"}, "act_layer=deep"),
    ],
)
def test_junk_page_params_in_the_url_are_named(page, params, key):
    at = open_page(page, **params)
    assert any(key in w.value and "ignored" in w.value for w in at.warning)
    assert app_figures(at)  # the page still draws, with the default in place of the junk


def test_a_number_in_the_url_that_is_not_whole_is_said_to_be_read_as_the_control_reads_it():
    at = open_page(POSITIONAL, pos_max="12.7")
    assert at.number_input(key="pos_max").value == 12  # Streamlit's number input truncates it
    assert any("pos_max=12.7` is not a whole number: using 12." in w.value for w in at.warning)
    assert not any("using the default" in w.value for w in at.warning)
    huge = open_page(POSITIONAL, pos_max="99999999999999999999999")
    assert any("pos_max=99999999999999999999999" in w.value and "too large" in w.value for w in huge.warning)
    assert huge.number_input(key="pos_max").value == 64
    written_with_a_point = open_page(POSITIONAL, pos_max="24.0")  # a whole number: nothing to say
    assert written_with_a_point.number_input(key="pos_max").value == 24
    assert not any("pos_max" in w.value for w in written_with_a_point.warning)


@pytest.mark.parametrize(
    ("page", "params", "selector", "said"),
    [
        (
            POSITIONAL,
            {"pos_perm_layer": "7"},
            "pos_perm_layer",
            "no layer 7 here (2 layers): showing the last, 1",
        ),
        (
            POSITIONAL,
            {"pos_offset_head": "-2"},
            "pos_offset_head",
            "no head -2 here (4 heads): showing the first, 0",
        ),
        (ACTIVATIONS, {"act_layer": "9"}, "act_layer", "no block 9 here (2 blocks): showing the last, 1"),
    ],
)
def test_a_layer_or_head_beyond_the_model_shows_the_nearest(page, params, selector, said):
    at = open_page(page, **params)
    assert any(said in w.value for w in at.warning), [w.value for w in at.warning]
    assert not any("ignored" in w.value for w in at.warning)  # one sentence, not a second contradicting it
    assert at.selectbox(key=selector).value == (0 if said.endswith("0") else 1)


def test_activations_say_so_when_no_query_has_a_key_instead_of_printing_nan():
    at = open_page(ACTIVATIONS, tokens="[PAD] [PAD] [PAD]", mask="padding", act_open_heads="true")
    assert any("No query of the encoder stack has an allowed key" in i.value for i in at.info)
    assert not any("nan" in c.value for c in at.caption)


def test_activations_gradients_say_they_are_the_whole_models_when_heads_are_removed():
    at = open_page(ACTIVATIONS, ablate="L0H1", act_open_gradients="true")
    assert any("These gradients are the whole model's" in c.value and "L0H1" in c.value for c in at.caption)
    plain = open_page(ACTIVATIONS, act_open_gradients="true")
    assert not any("whole model's" in c.value for c in plain.caption)


def test_the_module_table_says_a_row_is_the_modules_own_parameters():
    """Was: MiniLM's encoder.layers.0.self_attn row read 443,520, its Q, K and V alone, beside no word that out_proj's
    147,840 sit in a row of their own, so the attention's 591,360 were easy to misread."""
    at = open_page(ANATOMY, model="minilm-l6", ana_open_params="true")
    assert any("Each module's own parameters, not its children's" in c.value for c in at.caption)
    table = at.dataframe[-1].value
    rows = dict(zip(table["module"], table["parameters"], strict=True))
    assert rows["encoder.layers.0.self_attn"] == 3 * (384 * 384 + 384)  # W_Q, W_K, W_V and their biases
    assert rows["encoder.layers.0.self_attn.out_proj"] == 384 * 384 + 384
