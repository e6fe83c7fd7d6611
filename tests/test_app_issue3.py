"""The positional, activations and anatomy pages through streamlit.testing: what they draw is what the engine
computes for the sidebar's settings, page controls change it, and bad input gives a sentence, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.activations import layer_statistics, token_norms
from explorer.anatomy import block_diagram, forward_steps, multiply_adds, parameter_counts
from explorer.config import ModelConfig
from explorer.gradients import GRADIENT_OBJECTIVE, gradient_norms, layer_gradient_totals
from explorer.position_analysis import encoding_table, permutation_demo, reorder, similarity
from explorer.stats import head_grid, head_mean_distance, head_sparsity

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
TOKENS = "the cat sat on the mat"
POSITIONAL, ACTIVATIONS, ANATOMY = "views/positional.py", "views/activations.py", "views/anatomy.py"


def open_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update(params)
    at.switch_page(page).run()
    assert_ok(at)
    return at


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def specs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def chart(at: AppTest, words: str) -> dict:
    """The one Plotly chart whose title contains `words`."""
    found = [s for s in specs(at) if words in s["layout"].get("title", {}).get("text", "")]
    assert len(found) == 1, [s["layout"].get("title", {}).get("text", "")[:60] for s in specs(at)]
    return found[0]


def errors(at: AppTest) -> str:
    return " ".join(e.value for e in at.error)


# ---- positional page -------------------------------------------------------------------------------------------


def test_positional_default_draws_the_sinusoids(plotly_array):
    at = open_page(POSITIONAL)
    assert not at.error
    model = explorer.build_model(ModelConfig())
    table = encoding_table(model, 64)  # what the model adds, for the default max position
    curves = chart(at, "value against position")
    dim0 = next(t for t in curves["data"] if t["name"] == "dim 0 (sin of pair 0)")
    np.testing.assert_allclose(plotly_array(dim0["y"]), table[:, 0])
    np.testing.assert_allclose(plotly_array(dim0["y"]), np.sin(np.arange(64)), atol=1e-6)
    typed = next(t for t in curves["data"] if t["name"] == "dim 0 (sin of pair 0), typed tokens")
    assert list(typed["customdata"]) == TOKENS.split()
    heat = chart(at, "whole [position, dimension] matrix")
    np.testing.assert_array_equal(plotly_array(heat["data"][0]["z"]), table)
    assert heat["layout"]["xaxis"]["title"]["text"] == "dimension"
    sim = chart(at, "Cosine similarity between")
    np.testing.assert_allclose(plotly_array(sim["data"][0]["z"]), similarity(table, "cosine"), atol=1e-6)
    assert chart(at, "Wavelength of each pair (d_model = 64)")
    assert chart(at, "fills all 48 positions")
    assert len(at.get("download_button")) == 4
    assert not any("Untrained" in w.value for w in at.warning)  # only the learned table is untrained


def test_positional_page_controls_change_the_drawing(plotly_array):
    at = open_page(POSITIONAL)
    at.number_input(key="pos_max").set_value(200)
    at.text_input(key="pos_dims").input("2, 5-6")
    at.radio(key="pos_metric").set_value("dot")
    at.run()
    assert_ok(at)
    assert not at.error
    curves = chart(at, "value against position")
    names = [t["name"] for t in curves["data"] if t["mode"] == "lines"]
    assert names == ["dim 2 (sin of pair 1)", "dim 5 (cos of pair 2)", "dim 6 (sin of pair 3)"]
    assert len(plotly_array(curves["data"][0]["y"])) == 200
    table = encoding_table(explorer.build_model(ModelConfig()), 200)
    sim = chart(at, "Dot product between")
    np.testing.assert_allclose(plotly_array(sim["data"][0]["z"]), similarity(table, "dot"), rtol=1e-5, atol=1e-5)
    assert at.number_input(key="pos_max").value == 200


def test_positional_url_params_set_the_page_controls(plotly_array):
    at = open_page(POSITIONAL, pos_max="32", pos_dims="4", pos_metric="dot")
    assert at.number_input(key="pos_max").value == 32
    assert at.text_input(key="pos_dims").value == "4"
    curves = chart(at, "value against position")
    assert [t["name"] for t in curves["data"] if t["mode"] == "lines"] == ["dim 4 (sin of pair 2)"]
    assert chart(at, "Dot product between")


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
    at = open_page(POSITIONAL, **params)
    assert message in errors(at)
    assert chart(at, "does reordering the tokens only move the map")  # the rest of the page still works
    assert at.get("plotly_chart")


def test_positional_recovers_from_a_bad_dimension():
    at = open_page(POSITIONAL, pos_dims="99")
    assert "Dimension 99 does not exist" in errors(at)
    at.text_input(key="pos_dims").input("3").run()
    assert_ok(at)
    assert not at.error
    assert chart(at, "value against position")


def test_learned_positions_are_labelled_untrained(plotly_array):
    at = open_page(POSITIONAL, positional="learned", pos_max="20")
    assert any("Untrained" in w.value for w in at.warning)
    heat = chart(at, "Learned position embedding (untrained, random init)")
    table = encoding_table(explorer.build_model(ModelConfig(positional="learned")), 20)
    np.testing.assert_array_equal(plotly_array(heat["data"][0]["z"]), table)
    assert not [s for s in specs(at) if "Wavelength" in s["layout"]["title"]["text"]]


def test_rope_shows_angles_and_offset_only_scores():
    at = open_page(POSITIONAL, positional="rope")
    assert chart(at, "Rotary encoding")
    assert chart(at, "Wavelength of each pair (d_head = 16)")
    assert "depends on the offset only" in chart(at, "fills all 48 positions")["layout"]["title"]["text"]
    assert at.text_input(key="pos_dims").disabled


def test_no_positions_and_no_causal_mask_only_move_the_maps(plotly_array):
    at = open_page(POSITIONAL, positional="none")
    assert any("only moved the maps" in s.value for s in at.success)
    cfg = ModelConfig(positional="none")
    demo = permutation_demo(cfg, TOKENS, reorder(6, "reversed"))
    assert float(at.metric[0].value) == pytest.approx(demo.max_difference, abs=1e-9)
    assert float(at.metric[0].value) < 1e-6
    fig = chart(at, "does reordering the tokens only move the map")
    np.testing.assert_allclose(plotly_array(fig["data"][1]["z"]), plotly_array(fig["data"][2]["z"]), atol=1e-6)
    at.selectbox(key="mask").select("causal").run()
    assert_ok(at)
    warning = " ".join(w.value for w in at.warning)
    assert "causal mask also carries position" in warning and "encoding gives" not in warning
    assert float(at.metric[0].value) > 0.01


def test_reordering_control_and_encoder_decoder():
    at = open_page(POSITIONAL, arch="encoder-decoder", positional="none")
    at.radio(key="pos_order").set_value("rotated by one").run()
    assert_ok(at)
    assert any("cat sat on the mat the" in m.value for m in at.markdown)
    assert any("only moved the maps" in s.value for s in at.success)
    at.selectbox(key="positional").select("sinusoidal").run()
    assert any("sinusoidal encoding gives each token a position" in w.value for w in at.warning)


def test_decoder_is_causal_even_without_positions():
    at = open_page(POSITIONAL, arch="decoder", positional="none")
    assert any("a decoder is always causal" in w.value for w in at.warning)


def test_fewer_layers_after_picking_a_deep_layer():
    at = open_page(POSITIONAL, n_layers="3")
    at.selectbox(key="pos_perm_layer").select(2).run()
    assert_ok(at)
    assert "Layer 2, head 0" in chart(at, "does reordering")["layout"]["title"]["text"]
    at.number_input(key="n_layers").set_value(1).run()
    assert_ok(at)
    assert "Layer 0, head 0" in chart(at, "does reordering")["layout"]["title"]["text"]


# ---- activations page ------------------------------------------------------------------------------------------


def test_activations_default_shows_the_engine_statistics(plotly_array):
    at = open_page(ACTIVATIONS)
    assert not at.error
    trace = explorer.run(ModelConfig(), TOKENS)
    stats = layer_statistics(trace.first)
    depth = chart(at, "Activation statistics over depth (encoder stack)")
    rms = next(t for t in depth["data"] if t["name"] == "residual" and t["yaxis"] == "y3")
    np.testing.assert_allclose(plotly_array(rms["y"]), stats[stats["point"] == "residual"]["rms"], rtol=1e-6)
    assert any(i.value.startswith("Post-norm: every block ends with a LayerNorm") for i in at.info)
    norms = chart(at, "residual vector, layer by layer")
    np.testing.assert_allclose(plotly_array(norms["data"][0]["z"]), token_norms(trace.first), rtol=1e-6)
    hist = chart(at, "Distribution of values: residual, block 0")
    assert int(np.sum(plotly_array(hist["data"][0]["y"]))) == 6 * 64
    maps = trace.first.self_attention
    distance = chart(at, "Mean distance (positions)")
    np.testing.assert_allclose(
        plotly_array(distance["data"][0]["z"]), head_grid(head_mean_distance(maps), "distance"), rtol=1e-6
    )
    sparsity = chart(at, "Sparsity")
    np.testing.assert_allclose(
        plotly_array(sparsity["data"][0]["z"]), head_grid(head_sparsity(maps), "sparsity"), rtol=1e-6
    )
    assert chart(at, "Entropy (nats)")
    assert any(i.value == GRADIENT_OBJECTIVE for i in at.info)
    totals = layer_gradient_totals(gradient_norms(explorer.build_model(ModelConfig()), TOKENS))
    grad = chart(at, "parameters (post-norm)")
    np.testing.assert_allclose(plotly_array(grad["data"][0]["y"]), totals["norm"], rtol=1e-5)
    assert len(at.get("download_button")) == 7


def test_activation_histogram_controls(plotly_array):
    at = open_page(ACTIVATIONS)
    at.selectbox(key="act_layer").select(1)
    at.selectbox(key="act_point").select("FFN hidden")
    at.toggle(key="act_log").set_value(True)
    at.run()
    assert_ok(at)
    hist = chart(at, "Distribution of values: FFN hidden, block 1 (encoder stack)")
    assert int(np.sum(plotly_array(hist["data"][0]["y"]))) == 6 * 256
    assert hist["layout"]["yaxis"]["type"] == "log"
    hidden = explorer.run(ModelConfig(), TOKENS).first.activations["blocks.1.ffn.hidden"]
    assert f"{(hidden == 0).mean():.1%} exactly 0" in hist["layout"]["title"]["text"]


def test_pre_norm_twelve_layers_tells_the_growing_stream(plotly_array):
    at = open_page(ACTIVATIONS, norm="pre", n_layers="12", d_model="512", n_heads="8")
    story = next(i.value for i in at.info if i.value.startswith("Pre-norm"))
    assert "rising in every block" in story
    depth = chart(at, "Activation statistics over depth")
    rms = plotly_array(next(t for t in depth["data"] if t["name"] == "residual" and t["yaxis"] == "y3")["y"])
    assert len(rms) == 13 and (np.diff(rms) > 0).all()
    grad = chart(at, "parameters (pre-norm)")
    assert np.isfinite(plotly_array(grad["data"][0]["y"])).all()


def test_encoder_decoder_activations_say_which_stack(plotly_array):
    at = open_page(ACTIVATIONS, arch="encoder-decoder")
    assert at.radio(key="act_stack").value == "encoder"
    at.radio(key="act_stack").set_value("decoder").run()
    assert_ok(at)
    assert any("**decoder** stack" in c.value for c in at.caption)
    depth = chart(at, "Activation statistics over depth (decoder stack)")
    assert "cross-attention output" in {t["name"] for t in depth["data"]}
    assert "cross-attention output" in at.selectbox(key="act_point").options
    grads = chart(at, "Gradient norm of each weight matrix and bias (decoder stack)")
    assert "multihead_attn.in_proj_weight" in grads["data"][0]["y"]
    totals = chart(at, "Gradient norm of each block")
    assert [t["name"] for t in totals["data"]] == ["encoder blocks", "decoder blocks"]


def test_one_token_has_no_gradient_but_the_page_works():
    at = open_page(ACTIVATIONS, tokens="alone")
    assert any("at least two tokens" in w.value for w in at.warning)
    assert chart(at, "Activation statistics over depth")


def test_gelu_has_no_exact_zeros(plotly_array):
    at = open_page(ACTIVATIONS, activation="gelu")
    zeros = chart(at, "exactly 0 (encoder stack, gelu)")
    assert (plotly_array(zeros["data"][0]["y"]) == 0).all()
    relu = chart(open_page(ACTIVATIONS), "exactly 0 (encoder stack, relu)")
    assert (plotly_array(relu["data"][0]["y"]) > 0.2).all()


# ---- anatomy page ----------------------------------------------------------------------------------------------


def test_anatomy_default_numbers_are_the_engine_numbers():
    at = open_page(ANATOMY)
    cfg = ModelConfig()
    model = explorer.build_model(cfg)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Total parameters"] == f"{sum(p.numel() for p in model.parameters()):,}"
    assert metrics["In one encoder block"] == f"{sum(p.numel() for p in model.encoder.layers[0].parameters()):,}"
    assert metrics["Multiply-adds, one forward pass"] == f"{int(multiply_adds(cfg, 6)['multiply_adds'].sum()):,}"
    frames = [d.value for d in at.dataframe]
    steps = next(f for f in frames if "step" in f.columns)
    assert steps.equals(forward_steps(cfg, 6))
    modules = next(f for f in frames if "module" in f.columns)
    assert modules.equals(parameter_counts(model))
    (diagram,) = at.get("graphviz_chart")
    assert diagram.proto.spec == block_diagram(cfg)
    assert len(at.get("download_button")) == 4


def test_anatomy_follows_the_sidebar():
    at = open_page(ANATOMY, arch="encoder-decoder", norm="pre", target="x y z")
    diagrams = [d.proto.spec for d in at.get("graphviz_chart")]
    cfg = ModelConfig(arch="encoder-decoder", norm="pre")
    assert diagrams == [block_diagram(cfg.replace(arch="encoder")), block_diagram(cfg)]
    steps = next(d.value for d in at.dataframe if "step" in d.value.columns)
    assert "[4, 3, 6]" in set(steps[steps["shape"] == "[heads, T, S]"]["size"])
    metrics = {m.label for m in at.metric}
    assert {"In one encoder block", "In one decoder block"} <= metrics
    at.number_input(key="n_layers").set_value(3).run()
    assert_ok(at)
    counts = next(d.value for d in at.dataframe if "module" in d.value.columns)
    assert counts["parameters"].sum() == sum(
        p.numel() for p in explorer.build_model(cfg.replace(n_layers=3)).parameters()
    )


# ---- every page ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", [POSITIONAL, ACTIVATIONS, ANATOMY])
@pytest.mark.parametrize(("params", "message"), [({"d_model": "30"}, "divisible"), ({"tokens": ""}, "empty")])
def test_bad_sidebar_settings_give_a_message_not_a_traceback(page, params, message):
    at = open_page(page, **params)
    assert message in errors(at)
    assert at.info and not at.get("plotly_chart") and not at.get("graphviz_chart")


@pytest.mark.parametrize("page", [POSITIONAL, ACTIVATIONS, ANATOMY])
def test_html_in_tokens_is_shown_as_text(page):
    at = open_page(page, tokens="<b>bold</b> x")
    assert not at.error
    for spec in specs(at):
        assert "<b>bold" not in json.dumps(spec)


@pytest.mark.parametrize(
    ("page", "params", "key"),
    [
        (POSITIONAL, {"pos_metric": "banana"}, "pos_metric=banana"),
        (POSITIONAL, {"pos_max": "lots"}, "pos_max=lots"),
        (POSITIONAL, {"pos_perm_layer": "7"}, "pos_perm_layer=7"),
        (ACTIVATIONS, {"act_point": "nowhere"}, "act_point=nowhere"),
        (ACTIVATIONS, {"act_layer": "9"}, "act_layer=9"),
    ],
)
def test_junk_page_params_in_the_url_are_named(page, params, key):
    at = open_page(page, **params)
    assert any(key in w.value and "ignored" in w.value for w in at.warning)
    assert at.get("plotly_chart")
