"""The Compare page through streamlit.testing: what it draws matches explorer's numbers for the same A and B."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.compare import attention_difference, b_from_query, default_b, head_ranking, model_for_b, reorder_maps
from explorer.config import ModelConfig

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGE = "views/compare.py"
TOKENS = "the cat sat on the mat"


@pytest.fixture
def at() -> AppTest:
    return AppTest.from_file(APP, default_timeout=120)


def open_compare(at: AppTest, **query: str) -> AppTest:
    at.query_params.update(query)
    at.switch_page(PAGE)
    at.run()
    assert_ok(at)
    return at


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def specs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def pair_spec(at: AppTest) -> dict:
    """The A | B figure: the one whose heatmaps share a colour axis."""
    found = [s for s in specs(at) if "coloraxis" in s["layout"]]
    assert len(found) == 1
    return found[0]


def difference_spec(at: AppTest) -> dict | None:
    found = [s for s in specs(at) if s["data"] and s["data"][0].get("name") == "A − B"]
    assert len(found) <= 1
    return found[0] if found else None


def lines_spec(at: AppTest) -> dict:
    found = [s for s in specs(at) if s["data"] and s["data"][0].get("type") == "scatter"]
    assert len(found) == 1
    return found[0]


def side_weights(spec: dict, side: str, plotly_array) -> np.ndarray:
    traces = [t for t in spec["data"] if t.get("name") == side and t["type"] == "heatmap"]
    assert len(traces) == 1
    return plotly_array(traces[0]["z"])


def traces_for(a: ModelConfig, b: ModelConfig, tokens: str = TOKENS):
    """A's and B's self-attention as the page must compute them: B on model_for_b(A's model, B)."""
    model_a = explorer.build_model(a)
    maps_a = explorer.run(model_a, tokens).attention_maps()["self-attention"]
    maps_b = explorer.run(model_for_b(model_a, b), tokens).attention_maps()["self-attention"]
    return maps_a, maps_b


def shown_config(at: AppTest, prefix: str) -> ModelConfig:
    """The configuration the widgets hold: the sidebar's (prefix "") or B's (prefix "b_")."""
    fields = {}
    for name in ("arch", "norm", "positional", "mask", "activation"):
        fields[name] = at.selectbox(key=prefix + name).value
    for name in ("n_layers", "n_heads", "d_model", "d_ff", "seed"):
        fields[name] = at.number_input(key=prefix + name).value
    return ModelConfig(**fields)


def share_query(at: AppTest) -> dict[str, str]:
    links = [c.value for c in at.main.code if "tokens=" in c.value]
    assert len(links) == 1
    return dict(parse_qsl(urlsplit(links[0]).query))


def test_default_is_post_vs_pre_on_the_same_weights(at, plotly_array):
    open_compare(at)
    a = ModelConfig()
    assert shown_config(at, "b_") == default_b(a) == a.replace(norm="pre")
    assert not at.error and not at.warning
    assert any("very weights" in s.value and "norm (post → pre)" in s.value for s in at.success)
    maps_a, maps_b = traces_for(a, default_b(a))
    pair = pair_spec(at)
    np.testing.assert_array_equal(side_weights(pair, "A", plotly_array), maps_a.weights[0, 0])
    np.testing.assert_array_equal(side_weights(pair, "B", plotly_array), maps_b.weights[0, 0])
    drawn = plotly_array(difference_spec(at)["data"][0]["z"])
    expected = attention_difference(maps_a, maps_b)[0, 0]
    np.testing.assert_array_equal(drawn, expected)
    assert np.abs(drawn).max() > 1e-3  # norm placement alone changes the map
    assert len(at.get("download_button")) == 3


def test_b_equal_to_a_shows_exactly_zero(at, plotly_array):
    open_compare(at, b_norm="post")
    assert shown_config(at, "b_") == ModelConfig()
    assert any("identical to A" in i.value for i in at.info)
    spec = difference_spec(at)
    assert (plotly_array(spec["data"][0]["z"]) == 0).all()
    assert "exactly 0" in spec["layout"]["title"]["text"]
    pair = pair_spec(at)
    np.testing.assert_array_equal(side_weights(pair, "A", plotly_array), side_weights(pair, "B", plotly_array))
    ranking = at.dataframe[0].value
    assert (ranking["js_divergence"] == 0).all() and (ranking["max_abs_difference"] == 0).all()
    lines = lines_spec(at)  # every per-layer statistic of B lies exactly on A's
    a_lines = [t for t in lines["data"] if t["name"] == "A"]
    b_lines = [t for t in lines["data"] if t["name"] == "B"]
    for ta, tb in zip(a_lines, b_lines, strict=True):
        np.testing.assert_array_equal(plotly_array(ta["y"]), plotly_array(tb["y"]))


def test_every_head_and_the_ranking_match_the_engine(at, plotly_array):
    open_compare(at, n_layers="3", mask="causal")
    a = ModelConfig(n_layers=3, mask="causal")
    maps_a, maps_b = traces_for(a, default_b(a))
    expected = head_ranking(maps_a, maps_b)
    shown = at.dataframe[0].value
    np.testing.assert_array_equal(shown["layer"], expected["layer"])
    np.testing.assert_array_equal(shown["head"], expected["head"])
    np.testing.assert_array_equal(shown["js_divergence"], expected["js_divergence"])
    for layer, head in [(1, 2), (2, 3)]:
        at.selectbox(key="layer").select(layer)
        at.selectbox(key="head").select(head)
        at.run()
        assert_ok(at)
        drawn = plotly_array(difference_spec(at)["data"][0]["z"])
        difference = attention_difference(maps_a, maps_b)[layer, head]
        allowed = maps_a.allowed | maps_b.allowed
        np.testing.assert_array_equal(drawn[allowed], difference[allowed])
        assert np.isnan(drawn[~allowed]).all()  # masked in both: grey, not a difference of 0


def test_most_changed_head_button_jumps_to_it(at):
    open_compare(at, n_layers="3")
    ranking = at.dataframe[0].value
    layer, head = int(ranking["layer"].iloc[0]), int(ranking["head"].iloc[0])
    assert (layer, head) != (0, 0)
    at.button(key="most_changed").click().run()
    assert_ok(at)
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (layer, head)
    spec = difference_spec(at)
    assert f"layer {layer} · head {head}" in spec["layout"]["title"]["text"]


def test_both_configurations_round_trip_through_the_url(at, plotly_array):
    query = {"norm": "pre", "n_layers": "3", "tokens": "a b c d", "b_mask": "causal", "b_seed": "3"}
    open_compare(at, **query)
    a = shown_config(at, "")
    b = shown_config(at, "b_")
    assert a == ModelConfig(norm="pre", n_layers=3)
    assert b == a.replace(norm="post", mask="causal", seed=3) == b_from_query(query, a)
    assert any("different seeds" in w.value for w in at.warning)
    assert any("A − B mixes the settings you changed" in c.value for c in at.caption)
    link = share_query(at)
    assert link == query  # no b_norm: post is B's default when A is pre (B = A with the norm flipped)
    again = open_compare(AppTest.from_file(APP, default_timeout=120), **link)
    assert shown_config(again, "") == a and shown_config(again, "b_") == b
    assert share_query(again) == link
    np.testing.assert_array_equal(
        side_weights(pair_spec(again), "B", plotly_array), side_weights(pair_spec(at), "B", plotly_array)
    )


def test_b_follows_a_until_the_user_changes_it(at):
    open_compare(at)
    at.selectbox(key="mask").select("causal").run()  # A's mask in the sidebar; B's was never touched
    assert_ok(at)
    assert at.selectbox(key="b_mask").value == "causal"
    at.selectbox(key="b_positional").select("rope").run()  # B's own choice
    at.selectbox(key="positional").select("learned").run()
    assert_ok(at)
    assert at.selectbox(key="b_positional").value == "rope"
    at.selectbox(key="norm").select("pre").run()
    assert at.selectbox(key="b_norm").value == "post"  # B stays "A with the norm flipped"


def test_swap_updates_the_sidebar_and_b(at, plotly_array):
    open_compare(at, b_mask="causal", b_n_layers="3")
    before_b = pair_spec(at)
    at.button(key="swap").click().run()
    assert_ok(at)
    assert shown_config(at, "") == ModelConfig(norm="pre", mask="causal", n_layers=3)
    assert shown_config(at, "b_") == ModelConfig()
    np.testing.assert_array_equal(
        side_weights(pair_spec(at), "A", plotly_array), side_weights(before_b, "B", plotly_array)
    )
    at.button(key="swap").click().run()
    assert shown_config(at, "") == ModelConfig()
    assert shown_config(at, "b_") == ModelConfig(norm="pre", mask="causal", n_layers=3)


def test_reset_b(at):
    open_compare(at, b_mask="causal", b_seed="4")
    at.button(key="reset_b").click().run()
    assert_ok(at)
    assert shown_config(at, "b_") == default_b(ModelConfig())


def test_shape_change_says_so_and_compares_like_for_like(at, plotly_array):
    open_compare(at, b_n_heads="8")
    warnings = " ".join(w.value for w in at.warning)
    assert "n_heads (4 vs 8)" in warnings and "cannot be shared" in warnings
    assert difference_spec(at) is None
    assert any("heads" in i.value and "No A − B map" in i.value for i in at.info)
    assert not at.dataframe  # no ranking without maps of the same shape
    pair = pair_spec(at)
    assert side_weights(pair, "A", plotly_array).shape == side_weights(pair, "B", plotly_array).shape == (6, 6)
    assert at.selectbox(key="head").options == [str(h) for h in range(8)]
    at.selectbox(key="head").select(6).run()
    assert_ok(at)
    titles = [a["text"] for a in pair_spec(at)["layout"]["annotations"]]
    assert "A: A has no head 6 (it has 4)" in titles
    assert lines_spec(at)


def test_different_width_still_subtracts_maps_with_a_caveat(at, plotly_array):
    open_compare(at, b_d_model="128")
    assert any("d_model (64 vs 128)" in w.value and "cannot be shared" in w.value for w in at.warning)
    assert any("A − B mixes the settings you changed" in c.value for c in at.caption)
    a = ModelConfig()
    maps_a, maps_b = traces_for(a, default_b(a).replace(d_model=128))
    drawn = plotly_array(difference_spec(at)["data"][0]["z"])
    np.testing.assert_array_equal(drawn, attention_difference(maps_a, maps_b)[0, 0])


def test_different_layer_counts_compare_the_common_layers(at, plotly_array):
    open_compare(at, b_n_layers="4")
    assert any("A has 2 layers and B 4" in i.value and "0 to 1" in i.value for i in at.info)
    rms_a, rms_b = lines_spec(at)["data"][:2]  # the residual RMS panel: A, then B
    assert (rms_a["name"], rms_b["name"]) == ("A", "B")
    assert list(plotly_array(rms_a["x"])) == [-1, 0, 1] and list(plotly_array(rms_b["x"])) == [-1, 0, 1, 2, 3]


def test_impossible_b_is_an_error_not_a_traceback(at, plotly_array):
    open_compare(at, b_d_model="30")
    assert any(e.value.startswith("B: ") and "divisible" in e.value for e in at.error)
    pair = pair_spec(at)
    maps_a = explorer.run(ModelConfig(), TOKENS).attention_maps()["self-attention"]
    np.testing.assert_array_equal(side_weights(pair, "A", plotly_array), maps_a.weights[0, 0])
    at.number_input(key="b_d_model").set_value(64).run()
    assert_ok(at)
    assert not at.error and difference_spec(at) is not None


@pytest.mark.parametrize(("raw", "message"), [("abc", "not a whole number"), ("999", "outside 1 to 64")])
def test_junk_b_url_param_warns_and_falls_back(at, raw, message):
    open_compare(at, b_n_heads=raw)
    warnings = [w.value for w in at.warning]
    assert any(f"b_n_heads={raw}" in w and message in w for w in warnings)
    assert at.number_input(key="b_n_heads").value == 4
    assert difference_spec(at) is not None


def test_b_mask_with_plus_read_as_space(at):
    open_compare(at, b_mask="causal padding")
    assert at.selectbox(key="b_mask").value == "causal+padding"
    assert not at.warning


def test_two_inputs_on_the_same_model(at, plotly_array):
    open_compare(at, compare="input", tokens="I love AI", positional="none")
    assert at.text_input(key="b_tokens").value == "AI love I"
    assert any("same model" in s.value for s in at.success)
    assert at.toggle(key="align").value is True
    model = explorer.build_model(ModelConfig(positional="none"))
    maps_a = explorer.run(model, "I love AI").attention_maps()["self-attention"]
    maps_b = explorer.run(model, "AI love I").attention_maps()["self-attention"]
    aligned = reorder_maps(maps_b, [2, 1, 0], [2, 1, 0])
    drawn = plotly_array(difference_spec(at)["data"][0]["z"])
    np.testing.assert_array_equal(drawn, attention_difference(maps_a, aligned)[0, 0])
    assert np.abs(drawn).max() < 1e-6  # no positions: the same words attend the same way, in any order
    at.toggle(key="align").set_value(False).run()
    drawn = plotly_array(difference_spec(at)["data"][0]["z"])
    np.testing.assert_array_equal(drawn, attention_difference(maps_a, maps_b)[0, 0])
    at.selectbox(key="positional").select("sinusoidal").run()  # A's (and so B's) positions
    at.toggle(key="align").set_value(True).run()
    assert_ok(at)
    assert np.abs(plotly_array(difference_spec(at)["data"][0]["z"])).max() > 1e-3


def test_two_inputs_swap_and_reset(at):
    open_compare(at, compare="input", tokens="I love AI", b_tokens="AI I love")
    assert any("reads `I love AI`" in m.value and "reads `AI I love`" in m.value for m in at.markdown)
    at.button(key="swap").click().run()
    assert_ok(at)
    assert at.text_input(key="tokens").value == "AI I love"
    assert at.text_input(key="b_tokens").value == "I love AI"
    at.button(key="reset_b").click().run()
    assert at.text_input(key="b_tokens").value == "love I AI"  # A's tokens reversed
    at.text_input(key="tokens").input("a b c").run()  # B's tokens follow A's while left at the default
    assert at.text_input(key="b_tokens").value == "c b a"


def test_two_inputs_of_different_lengths(at):
    open_compare(at, compare="input", b_tokens="a b")
    assert difference_spec(at) is None
    assert any("6 × 6 tokens" in i.value and "2 × 2" in i.value for i in at.info)
    at.text_input(key="b_tokens").input("").run()
    assert_ok(at)
    assert any(e.value.startswith("B: ") and "empty" in e.value for e in at.error)


def test_encoder_decoder_pairs_every_kind(at, plotly_array):
    open_compare(at, arch="encoder-decoder")
    kinds = at.radio(key="kind")
    assert kinds.options == ["encoder self-attention", "decoder self-attention", "cross-attention"]
    kinds.set_value("cross-attention").run()
    assert_ok(at)
    a = ModelConfig(arch="encoder-decoder")
    model_a = explorer.build_model(a)
    target = at.text_input(key="target").value
    maps_a = explorer.run(model_a, TOKENS, target).attention_maps()["cross-attention"]
    maps_b = explorer.run(model_for_b(model_a, default_b(a)), TOKENS, target).attention_maps()["cross-attention"]
    drawn = plotly_array(difference_spec(at)["data"][0]["z"])
    np.testing.assert_array_equal(drawn, attention_difference(maps_a, maps_b)[0, 0])
    assert at.radio(key="stack").options == ["encoder", "decoder"]


def test_a_encoder_b_encoder_decoder(at):
    open_compare(at, b_arch="encoder-decoder")
    assert any("arch (encoder vs encoder-decoder)" in w.value for w in at.warning)
    labels = at.radio(key="kind").options
    assert labels[0] == "self-attention (A) vs encoder self-attention (B)"
    at.radio(key="kind").set_value("cross-attention").run()
    assert_ok(at)
    assert any("only B has cross-attention" in i.value for i in at.info)


def test_a_error_gives_a_message(at):
    open_compare(at, d_model="30")
    assert any("divisible" in e.value for e in at.error)
    assert any("Fix configuration A" in i.value for i in at.info)
    assert not at.get("plotly_chart")
