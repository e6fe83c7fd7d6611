"""The Compare page through streamlit.testing: what it draws matches explorer's numbers for the same A and B."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest

import explorer
import explorer.flip_story
import views.caches
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.compare import (
    PER_LAYER,
    attention_difference,
    default_b,
    head_ranking,
    layer_values,
    model_for_b,
    per_layer_comparison,
    reorder_maps,
)
from explorer.config import ModelConfig
from explorer.tasks import make_task
from explorer.trace import AttentionMaps
from explorer.training import train
from pictures.boards import decode_floats
from pictures.compare_lines_chart import STATISTIC_TITLES
from pictures.style import BLUES
from tests.drawn import DrawnMatrix, app_boards, app_figures, figure_titled, panel_matrix, rgb
from tests.test_compare_charts import layer_panels
from views.compare_lines import GRADIENT_PIECES, GRADIENTS_KEY
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGE = "views/compare.py"
TOKENS = "the cat sat on the mat"
BOARDS = ("pair_maps", "difference_map", "ranking_map")  # the page's matrix views, by key


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


def sides(at: AppTest) -> dict[str, DrawnMatrix]:
    """The A | B maps as drawn, by side ("A", "B"): values NaN where grey (masked)."""
    return {p["name"]: panel_matrix(p) for p in app_boards(at)["pair_maps"]["panels"]}


def side_titles(at: AppTest) -> list[str]:
    return [p["title"] for p in app_boards(at)["pair_maps"]["panels"]]


def shown(maps: AttentionMaps, layer: int = 0, head: int = 0) -> np.ndarray:
    """What a map of these weights must draw: the weights, NaN where masked."""
    return np.where(maps.allowed, maps.weights[layer, head], np.nan)


def difference_panel(at: AppTest) -> dict | None:
    board = app_boards(at).get("difference_map")
    return board["panels"][0] if board is not None else None


def drawn_difference(at: AppTest) -> np.ndarray:
    """A − B as drawn: [Tq, Tk], NaN where the cell is grey (masked in both)."""
    return panel_matrix(difference_panel(at)).values


def hover_values(panel: dict, title: str) -> np.ndarray:
    """The values of one extra hover row of a panel (e.g. "A" on the A − B map)."""
    (found,) = [e for e in panel["extra"] if e["title"] == title]
    return decode_floats(found["values"], (panel["rows"], panel["cols"]))


def ranking_panel(at: AppTest) -> dict | None:
    board = app_boards(at).get("ranking_map")
    return board["panels"][0] if board is not None else None


def ranking_cells(at: AppTest) -> pd.DataFrame | None:
    """The ranking heatmap as drawn: one row per cell, its layer (row) and head (column), the JS divergence it is
    coloured by and the largest |A − B| its hover gives."""
    panel = ranking_panel(at)
    if panel is None:
        return None
    values = panel_matrix(panel).values  # [L, H]
    largest = hover_values(panel, "max |A − B|")  # [L, H]
    layer, head = np.meshgrid(np.arange(values.shape[0]), np.arange(values.shape[1]), indexing="ij")
    return pd.DataFrame(
        {"layer": layer.ravel(), "head": head.ravel(), "value": values.ravel(), "max_abs_difference": largest.ravel()}
    )


def lines_chart(at: AppTest) -> dict:
    """The per-layer lines: the page's one Plotly figure."""
    return figure_titled(at, "Per-layer statistics")


def lines_table(at: AppTest) -> pd.DataFrame:
    """Every point the per-layer lines draw: statistic (read from its panel's title), layer, model (the line's name)
    and value."""
    statistics = {title: statistic for statistic, title in STATISTIC_TITLES.items()}
    rows = [
        pd.DataFrame({"statistic": statistics[title], "layer": line["x"], "model": line["name"], "value": line["y"]})
        for title, panel in layer_panels(lines_chart(at)).items()
        for line in panel["traces"]
    ]
    return pd.concat(rows, ignore_index=True)


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
    """The link in "Share this comparison", opened (its code block is drawn only once the box is open)."""
    at.session_state["share_box"] = True
    at.run()
    links = [c.value for c in at.main.code if "tokens=" in c.value]
    assert len(links) == 1
    return dict(parse_qsl(urlsplit(links[0]).query))


def test_default_is_post_vs_pre_on_the_same_weights(at):
    open_compare(at)
    a = ModelConfig()
    assert shown_config(at, "b_") == default_b(a) == a.replace(norm="pre")
    assert not at.error and not at.warning
    assert any("very weights" in s.value and "norm (post → pre)" in s.value for s in at.success)
    maps_a, maps_b = traces_for(a, default_b(a))
    drawn = sides(at)
    np.testing.assert_array_equal(drawn["A"].values, shown(maps_a))
    np.testing.assert_array_equal(drawn["B"].values, shown(maps_b))
    assert drawn["A"].y_labels == drawn["B"].y_labels == ["the", "cat", "sat", "on", "the·4", "mat"]
    assert side_titles(at) == ["A · layer 0 · head 0", "B · layer 0 · head 0"]
    difference = drawn_difference(at)
    expected = attention_difference(maps_a, maps_b)[0, 0]
    np.testing.assert_array_equal(difference, expected)
    assert np.abs(difference).max() > 1e-3  # norm placement alone changes the map
    np.testing.assert_array_equal(hover_values(difference_panel(at), "A"), maps_a.weights[0, 0])  # both weights
    np.testing.assert_array_equal(hover_values(difference_panel(at), "B"), maps_b.weights[0, 0])
    assert len(at.get("download_button")) == 4  # JSON, two CSVs, and the view as HTML
    # Three matrix views, one Plotly chart (the per-layer lines) and nothing else that pulls a large script into
    # the browser on the first paint.
    assert sorted(app_boards(at)) == sorted(BOARDS)
    assert len(app_figures(at)) == 1 and lines_chart(at)
    assert not at.dataframe and not at.main.code


def test_per_layer_lines_draw_the_engine_statistics_of_a_and_b(at):
    open_compare(at, b_mask="causal")
    a = ModelConfig()
    b = default_b(a).replace(mask="causal")
    model_a = explorer.build_model(a)
    model_b = model_for_b(model_a, b)
    table = per_layer_comparison(
        *(
            layer_values(explorer.run(model, TOKENS).first, layer_gradient_totals(gradient_norms(model, TOKENS)))
            for model in (model_a, model_b)
        )
    )
    lines = lines_table(at)
    assert set(lines["statistic"]) == set(PER_LAYER)
    for statistic in PER_LAYER:
        rows = table[table["statistic"] == statistic].sort_values("layer")
        for column, name in (("a", "A"), ("b", "B")):
            drawn = lines[(lines["statistic"] == statistic) & (lines["model"] == name)]
            np.testing.assert_array_equal(drawn["layer"].to_numpy(), rows["layer"].to_numpy())
            np.testing.assert_array_equal(drawn["value"].to_numpy(), rows[column].to_numpy())
    assert not np.array_equal(table["a"], table["b"])  # B's norm and mask change what it computes


def test_b_equal_to_a_shows_exactly_zero(at):
    open_compare(at, b_norm="post")
    assert shown_config(at, "b_") == ModelConfig()
    assert any("identical to A" in i.value for i in at.info)
    assert (drawn_difference(at) == 0).all()
    assert difference_panel(at)["subtitle"].startswith("identical: every difference is exactly 0")
    drawn = sides(at)
    np.testing.assert_array_equal(drawn["A"].values, drawn["B"].values)
    ranking = ranking_cells(at)
    assert (ranking["value"] == 0).all() and (ranking["max_abs_difference"] == 0).all()
    assert any("attend identically in every head" in i.value for i in at.info)
    lines = lines_table(at)  # every per-layer statistic of B lies exactly on A's
    a_lines = lines[lines["model"] == "A"].sort_values(["statistic", "layer"])
    b_lines = lines[lines["model"] == "B"].sort_values(["statistic", "layer"])
    assert len(a_lines) == len(b_lines) > 0
    np.testing.assert_array_equal(a_lines["value"].to_numpy(), b_lines["value"].to_numpy())


def test_every_head_and_the_ranking_match_the_engine(at):
    open_compare(at, n_layers="3", mask="causal")
    a = ModelConfig(n_layers=3, mask="causal")
    maps_a, maps_b = traces_for(a, default_b(a))
    expected = head_ranking(maps_a, maps_b)
    drawn = ranking_cells(at).set_index(["layer", "head"])  # each head in row = its layer, column = its head
    order = list(zip(expected["layer"], expected["head"], strict=True))
    np.testing.assert_array_equal(drawn.loc[order, "value"], expected["js_divergence"].astype(np.float32))
    np.testing.assert_array_equal(
        drawn.loc[order, "max_abs_difference"], expected["max_abs_difference"].astype(np.float32)
    )
    assert ranking_panel(at)["subtitle"].startswith("shown above: layer 0, head 0")
    assert not at.dataframe  # the table only when asked for
    at.toggle(key="ranking_table").set_value(True).run()
    assert_ok(at)
    shown = at.dataframe[0].value
    np.testing.assert_array_equal(shown["rank"], np.arange(1, 13))
    np.testing.assert_array_equal(shown["layer"], expected["layer"])
    np.testing.assert_array_equal(shown["head"], expected["head"])
    np.testing.assert_array_equal(shown["js_divergence"], expected["js_divergence"])
    assert len(ranking_cells(at)) == 12  # the heatmap stays, next to the table
    for layer, head in [(1, 2), (2, 3)]:
        at.selectbox(key="layer").select(layer)
        at.selectbox(key="head").select(head)
        at.run()
        assert_ok(at)
        drawn = drawn_difference(at)
        difference = attention_difference(maps_a, maps_b)[layer, head]
        allowed = maps_a.allowed | maps_b.allowed
        np.testing.assert_array_equal(drawn[allowed], difference[allowed])
        assert np.isnan(drawn[~allowed]).all()  # masked in both: grey, not a difference of 0
        assert ranking_panel(at)["subtitle"].startswith(f"shown above: layer {layer}, head {head}")


def test_ranking_heatmap_is_clickable(at):
    open_compare(at, n_layers="3")
    panel = ranking_panel(at)
    assert panel["pick"] == "cell"  # a click hands the page {"row": layer, "col": head} (the browser test clicks)
    drawn = panel_matrix(panel)
    assert (drawn.y_title, drawn.x_title) == ("layer", "head")
    assert drawn.values.shape == (3, 4) and drawn.y_labels == ["L0", "L1", "L2"]


def test_most_changed_head_button_jumps_to_it(at):
    open_compare(at, n_layers="3")
    ranking = ranking_cells(at)
    top = ranking.loc[ranking["value"].idxmax()]  # the hottest cell of the heatmap
    layer, head = int(top["layer"]), int(top["head"])
    assert (layer, head) != (0, 0)
    at.button(key="most_changed").click().run()
    assert_ok(at)
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (layer, head)
    assert difference_panel(at)["title"] == f"A − B · layer {layer} · head {head}"


def test_both_configurations_round_trip_through_the_url(at):
    query = {"norm": "pre", "n_layers": "3", "tokens": "a b c d", "b_mask": "causal", "b_seed": "3"}
    open_compare(at, **query)
    a = shown_config(at, "")
    b = shown_config(at, "b_")
    assert a == ModelConfig(norm="pre", n_layers=3)
    assert b == a.replace(norm="post", mask="causal", seed=3)
    assert any("different seeds" in w.value for w in at.warning)
    assert any("A − B mixes the settings you changed" in c.value for c in at.caption)
    link = share_query(at)
    assert link == query  # no b_norm: post is B's default when A is pre (B = A with the norm flipped)
    again = open_compare(AppTest.from_file(APP, default_timeout=120), **link)
    assert shown_config(again, "") == a and shown_config(again, "b_") == b
    assert share_query(again) == link
    np.testing.assert_array_equal(sides(again)["B"].values, sides(at)["B"].values)
    at.selectbox(key="layer").set_value(2)
    at.toggle(key="stretch").set_value(True)
    assert share_query(at) == query | {"layer": "2", "stretch": "true"}  # and the view shown


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


def test_swap_updates_the_sidebar_and_b(at):
    open_compare(at, b_mask="causal", b_n_layers="3")
    before_b = sides(at)["B"]
    at.button(key="swap").click().run()
    assert_ok(at)
    assert shown_config(at, "") == ModelConfig(norm="pre", mask="causal", n_layers=3)
    assert shown_config(at, "b_") == ModelConfig()
    np.testing.assert_array_equal(sides(at)["A"].values, before_b.values)
    np.testing.assert_array_equal(sides(at)["A"].masked, before_b.masked)
    assert before_b.masked.sum() == 15  # B was causal
    at.button(key="swap").click().run()
    assert shown_config(at, "") == ModelConfig()
    assert shown_config(at, "b_") == ModelConfig(norm="pre", mask="causal", n_layers=3)


def test_reset_b(at):
    open_compare(at, b_mask="causal", b_seed="4")
    at.button(key="reset_b").click().run()
    assert_ok(at)
    assert shown_config(at, "b_") == default_b(ModelConfig())


def test_shape_change_says_so_and_compares_like_for_like(at):
    open_compare(at, b_n_heads="8")
    warnings = " ".join(w.value for w in at.warning)
    assert "n_heads (4 vs 8)" in warnings and "cannot be shared" in warnings
    assert difference_panel(at) is None
    assert any("heads" in i.value and "No A − B map" in i.value for i in at.info)
    assert ranking_cells(at) is None  # no ranking without maps of the same shape
    drawn = sides(at)
    assert drawn["A"].values.shape == drawn["B"].values.shape == (6, 6)
    assert at.selectbox(key="head").options == [str(h) for h in range(8)]
    at.selectbox(key="head").select(6).run()
    assert_ok(at)
    assert side_titles(at) == ["B · layer 0 · head 6"]  # A has no such map: only B's is drawn ...
    assert any(i.value == "A: A has no head 6 (it has 4)" for i in at.info)  # ... and the page says why
    a = ModelConfig()
    _, maps_b = traces_for(a, default_b(a).replace(n_heads=8))
    np.testing.assert_array_equal(sides(at)["B"].values, shown(maps_b, 0, 6))
    assert len(lines_table(at))


def test_different_width_still_subtracts_maps_with_a_caveat(at):
    open_compare(at, b_d_model="128")
    assert any("d_model (64 vs 128)" in w.value and "cannot be shared" in w.value for w in at.warning)
    assert any("A − B mixes the settings you changed" in c.value for c in at.caption)
    a = ModelConfig()
    maps_a, maps_b = traces_for(a, default_b(a).replace(d_model=128))
    np.testing.assert_array_equal(drawn_difference(at), attention_difference(maps_a, maps_b)[0, 0])


def test_more_layers_run_on_a_weights_and_subtract_the_layers_both_have(at):
    open_compare(at, b_n_layers="4", b_norm="post")  # B is A with two more blocks: nothing else differs
    success = " ".join(s.value for s in at.success)
    assert "B runs on A's very weights" in success and "encoder blocks 2 and 3, drawn from B's seed" in success
    assert not at.warning
    maps_a, maps_b = traces_for(ModelConfig(), ModelConfig(n_layers=4))
    np.testing.assert_array_equal(drawn_difference(at), maps_a.weights[0, 0] - maps_b.weights[0, 0])
    assert (drawn_difference(at) == 0).all()  # the same weights and placement: layer 0 is A's exactly
    assert any(c.value.startswith("No head ranking: A has 2 layers and B 4") for c in at.caption)
    at.selectbox(key="layer").select(3).run()
    assert_ok(at)
    assert difference_panel(at) is None
    assert any("No A − B map" in i.value and "A has 2 layers and B 4" in i.value for i in at.info)


def test_different_layer_counts_compare_the_common_layers(at):
    open_compare(at, b_n_layers="4")
    assert any("A has 2 layers and B 4" in i.value and "0 to 1" in i.value for i in at.info)
    lines = lines_table(at)
    rms = lines[lines["statistic"] == "residual RMS"]
    assert sorted(rms.loc[rms["model"] == "A", "layer"]) == [-1, 0, 1]
    assert sorted(rms.loc[rms["model"] == "B", "layer"]) == [-1, 0, 1, 2, 3]
    first_panel = layer_panels(lines_chart(at))["Residual stream RMS"]
    assert [(s["x0"], s["x1"]) for s in first_panel["shapes"]] == [(1.5, 3.5)]  # B's blocks 2 and 3 shaded


def test_impossible_b_is_an_error_not_a_traceback(at):
    open_compare(at, b_d_model="30", stretch="true")
    assert any(e.value.startswith("B: ") and "divisible" in e.value for e in at.error)
    maps_a = explorer.run(ModelConfig(), TOKENS).attention_maps()["self-attention"]
    np.testing.assert_array_equal(sides(at)["A"].values, shown(maps_a))
    # Nothing said of B may describe A or an absent kind of attention: B is simply not drawn.
    text = [m.value for m in at.markdown] + [i.value for i in at.info] + [h.value for h in at.subheader]
    assert any(t.startswith("**A** ·") and "**B** · not drawn" in t for t in text)
    assert not any("B has no" in t or "only A has" in t for t in text)
    assert "Attention in A (B is not drawn)" in text and "Per layer: A alone (B is not drawn)" in text
    scale = [c.value for c in at.caption if "colours stretched" in c.value]
    assert len(scale) == 1 and scale[0].startswith("A: ")  # the colour scale is A's alone, not "A and B"
    at.number_input(key="b_d_model").set_value(64).run()
    assert_ok(at)
    assert not at.error and difference_panel(at) is not None
    assert any(c.value.startswith("A and B: colours stretched") for c in at.caption)  # both drawn: one scale for both


@pytest.mark.parametrize(("raw", "message"), [("abc", "not a whole number"), ("999", "outside 1 to 64")])
def test_junk_b_url_param_warns_and_falls_back(at, raw, message):
    open_compare(at, b_n_heads=raw)
    warnings = [w.value for w in at.warning]
    assert any(f"b_n_heads={raw}" in w and message in w for w in warnings)
    assert at.number_input(key="b_n_heads").value == 4
    assert difference_panel(at) is not None


def test_b_mask_with_plus_read_as_space(at):
    open_compare(at, b_mask="causal padding")
    assert at.selectbox(key="b_mask").value == "causal+padding"
    assert not at.warning


def test_two_inputs_on_the_same_model(at):
    open_compare(at, compare="input", tokens="I love AI", positional="none")
    assert at.text_input(key="b_tokens").value == "AI love I"
    assert any("same model" in s.value for s in at.success)
    assert at.toggle(key="align").value is True
    model = explorer.build_model(ModelConfig(positional="none"))
    maps_a = explorer.run(model, "I love AI").attention_maps()["self-attention"]
    maps_b = explorer.run(model, "AI love I").attention_maps()["self-attention"]
    aligned = reorder_maps(maps_b, [2, 1, 0], [2, 1, 0])
    drawn = drawn_difference(at)
    np.testing.assert_array_equal(drawn, attention_difference(maps_a, aligned)[0, 0])
    assert np.abs(drawn).max() < 1e-6  # no positions: the same words attend the same way, in any order
    verdict = difference_panel(at)["subtitle"].split(" · ")[0]
    assert verdict.endswith("float32 rounding, A and B agree") or verdict.endswith("exactly 0")
    at.toggle(key="align").set_value(False).run()
    np.testing.assert_array_equal(drawn_difference(at), attention_difference(maps_a, maps_b)[0, 0])
    at.selectbox(key="positional").select("sinusoidal").run()  # A's (and so B's) positions
    at.toggle(key="align").set_value(True).run()
    assert_ok(at)
    assert np.abs(drawn_difference(at)).max() > 1e-3


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
    assert difference_panel(at) is None
    assert any("6 × 6 tokens" in i.value and "2 × 2" in i.value for i in at.info)
    at.text_input(key="b_tokens").input("").run()
    assert_ok(at)
    assert any(e.value.startswith("B: ") and "empty" in e.value for e in at.error)


def test_encoder_decoder_pairs_every_kind(at):
    open_compare(at, arch="encoder-decoder")
    kinds = at.radio(key="kind")
    assert kinds.options == ["encoder self-attention", "decoder self-attention", "cross-attention"]
    assert kinds.value == "cross-attention"  # the Attention page opens on it too
    kinds.set_value("decoder self-attention").run()
    kinds.set_value("cross-attention").run()
    assert_ok(at)
    a = ModelConfig(arch="encoder-decoder")
    model_a = explorer.build_model(a)
    target = at.text_input(key="target").value
    maps_a = explorer.run(model_a, TOKENS, target).attention_maps()["cross-attention"]
    maps_b = explorer.run(model_for_b(model_a, default_b(a)), TOKENS, target).attention_maps()["cross-attention"]
    np.testing.assert_array_equal(drawn_difference(at), attention_difference(maps_a, maps_b)[0, 0])
    drawn = panel_matrix(difference_panel(at))
    assert (drawn.x_title, drawn.y_title) == ("key (source)", "query (target)")
    assert drawn.x_labels == TOKENS.split()[:4] + ["the·4", "mat"] and drawn.y_labels[0] == target.split()[0]
    assert at.radio(key="stack").options == ["encoder", "decoder"]
    kinds.set_value("encoder self-attention").run()
    at.selectbox(key="layer").set_value(1)
    link = share_query(at)  # the kind shown is in the link: it would otherwise open on cross-attention
    assert (link["kind"], link["layer"]) == ("encoder self-attention", "1")


def test_a_encoder_b_encoder_decoder(at):
    open_compare(at, b_arch="encoder-decoder")
    assert any(
        "A is an encoder and B an encoder-decoder" in w.value and "cannot be shared" in w.value for w in at.warning
    )
    labels = at.radio(key="kind").options
    assert labels[0] == "self-attention (A) vs encoder self-attention (B)"
    at.radio(key="kind").set_value("cross-attention").run()
    assert_ok(at)
    assert any("only B has cross-attention" in i.value for i in at.info)


def test_a_error_gives_a_message(at):
    open_compare(at, d_model="30")
    assert any("divisible" in e.value for e in at.error)
    assert any("Fix configuration A" in i.value for i in at.info)
    assert not app_boards(at) and not at.get("plotly_chart")


def test_long_input_hovers_every_cell_of_every_map(at):
    words = " ".join(f"w{i}" for i in range(40))  # 1600 cells a map
    open_compare(at, tokens=words)
    a = ModelConfig()
    maps_a, maps_b = traces_for(a, default_b(a), words)
    drawn = sides(at)  # A's and B's maps carry every weight for hover, not only a picture
    np.testing.assert_array_equal(drawn["A"].values, shown(maps_a))
    np.testing.assert_array_equal(drawn["B"].values, shown(maps_b))
    assert not any("without hover" in c.value for c in at.caption)
    panel = difference_panel(at)  # A − B hovers with both weights
    np.testing.assert_array_equal(hover_values(panel, "A"), maps_a.weights[0, 0])
    np.testing.assert_array_equal(hover_values(panel, "B"), maps_b.weights[0, 0])


def test_a_trained_model_gets_its_own_head_ranking():
    """The ranking is cached by configuration and text: a session's trained model must not get the ranking of the
    shared random model with the same configuration (or another session's)."""
    probe = "A B C D E F G H"
    a = ModelConfig(positional="learned")
    trained = TrainedModel(train(a, make_task("reverse", 8), steps=30).model, None, "30 steps")
    random_model = open_compare(AppTest.from_file(APP, default_timeout=180), positional="learned", tokens=probe)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[STATE_KEY] = AppState(trained=trained)
    open_compare(at, tokens=probe)
    model = trained.model
    maps_a = explorer.run(model, probe).attention_maps()["self-attention"]
    maps_b = explorer.run(model_for_b(model, default_b(a)), probe).attention_maps()["self-attention"]
    expected = head_ranking(maps_a, maps_b).set_index(["layer", "head"])["js_divergence"]
    drawn = ranking_cells(at).set_index(["layer", "head"])["value"]
    np.testing.assert_allclose(drawn.loc[expected.index], expected, rtol=1e-6)
    assert not np.allclose(drawn, ranking_cells(random_model).set_index(["layer", "head"])["value"].loc[drawn.index])


def test_stretch_colours_puts_a_and_b_on_one_stretched_scale(at):
    """100 tokens spread attention thin: stretched, A and B share one scale up to the top 1 % of both maps' weights."""
    tokens = " ".join(f"w{i}" for i in range(100))
    open_compare(at, tokens=tokens)
    assert any("so cells are pale: turn on Stretch colours" in c.value for c in at.caption)
    at.toggle(key="stretch").set_value(True).run()
    assert_ok(at)
    maps_a, maps_b = traces_for(ModelConfig(), default_b(ModelConfig()), tokens)
    both = np.concatenate([maps_a.weights[0, 0].ravel(), maps_b.weights[0, 0].ravel()])
    top = float(np.quantile(both, 0.99))
    drawn = sides(at)
    assert drawn["B"].view["legend"]["high"] == pytest.approx(top)  # the one legend, right of the last map
    for side in drawn.values():  # both maps coloured on it: the cells at or above it are the darkest blue
        darkest = (side.image == rgb(BLUES[-1])).all(axis=-1)
        assert darkest[side.values >= top].all() and not darkest[side.values < 0.95 * top].any()


def test_a_layer_beyond_both_models_shows_the_last_and_says_so(at):
    open_compare(at, layer="5", b_n_layers="3")  # A has 2 layers, B 3
    assert at.selectbox(key="layer").value == 2
    assert any("no layer 5 here (3 layers): showing the last, 2" in w.value for w in at.warning)
    assert not any("ignored" in w.value for w in at.warning)


def test_junk_view_switches_in_the_url_are_named():
    at = open_compare(AppTest.from_file(APP, default_timeout=120), compare="bogus", align="maybe", stretch="TRUE")
    warnings = " ".join(w.value for w in at.warning)
    assert "compare=bogus" in warnings and "align=maybe" in warnings
    assert "stretch" not in warnings and at.toggle(key="stretch").value is True  # any case of true is true


def test_the_y_axes_follow_the_url_and_a_junk_value_is_named(at):
    """?axes=log draws every panel of the default pair on a log scale (all its values are positive) and says so;
    picking linear draws them from 0; a junk value is named and auto is used (the default pair spans less than ×100:
    linear)."""
    open_compare(at, axes="log")
    figure = lines_chart(at)
    assert {figure["layout"][k].get("type") for k in figure["layout"] if k.startswith("yaxis")} == {"log"}
    assert any(c.value.startswith("Log scale, as picked, on Residual stream RMS") for c in at.caption)
    at.radio(key="axes").set_value("linear").run()
    assert_ok(at)
    figure = lines_chart(at)
    assert {figure["layout"][k].get("rangemode") for k in figure["layout"] if k.startswith("yaxis")} == {"tozero"}
    junk = open_compare(AppTest.from_file(APP, default_timeout=120), axes="maybe")
    assert any("`axes=maybe` was ignored" in w.value for w in junk.warning)
    assert junk.radio(key="axes").value == "auto"
    assert not any(k for k, v in lines_chart(junk)["layout"].items() if k.startswith("yaxis") and v.get("type"))


def test_a_checkpoint_on_a_long_text_takes_gradient_norms_only_when_asked(at, minilm_model):
    """Over GRADIENT_PIECES pieces a real model's backward pass (2.2 GB for SmolLM2 at 512) waits for the toggle; the
    other statistics are drawn at once, and the toggle's link brings the gradients with it."""
    text = " ".join(["cat"] * (GRADIENT_PIECES + 10))  # one piece a word, plus [CLS] and [SEP]
    open_compare(at, model="minilm-l6", tokens=text)
    drawn = lines_table(at).dropna(subset=["value"])
    assert "gradient norm" not in set(drawn["statistic"]) and "residual RMS" in set(drawn["statistic"])
    assert any("No gradient norms yet" in c.value for c in at.caption)
    said = [note["text"] for note in lines_chart(at)["layout"]["annotations"]]
    assert "not computed yet:<br>turn on Gradient norms above" in said and "not available" not in said  # deferred
    assert not at.toggle(key=GRADIENTS_KEY).value
    at.toggle(key=GRADIENTS_KEY).set_value(True).run()
    assert_ok(at)
    assert not [n for n in lines_chart(at)["layout"]["annotations"] if n["text"].startswith("not ")]  # all drawn
    asked = lines_table(at).query("statistic == 'gradient norm'").dropna(subset=["value"])
    assert set(asked["model"]) == {"A", "B"} and (asked["value"] > 0).all()
    linked = open_compare(AppTest.from_file(APP, default_timeout=120), model="minilm-l6", tokens=text, grads="true")
    np.testing.assert_array_equal(
        lines_table(linked).query("statistic == 'gradient norm'").dropna(subset=["value"])["value"], asked["value"]
    )


def test_a_checkpoints_norm_flip_ranks_its_heads_once_for_the_sentence_and_the_maps(at, minilm_model, monkeypatch):
    """The sentence on a flipped checkpoint and the ranking under the maps rank the same pair: one computation
    (2.3 s each for SmolLM2's 270 heads on 512 pieces), and the sentence names the head the ranking puts first."""
    ranked = []

    def counted(a, b):
        ranked.append(a.weights.shape)
        return head_ranking(a, b)

    monkeypatch.setattr(views.caches, "head_ranking", counted)
    monkeypatch.setattr(explorer.flip_story, "head_ranking", counted)
    views.caches.ranking_of.clear()  # another test of this process may have ranked the same pair
    open_compare(at, model="minilm-l6", tokens="a flipped norm moves the heads of a real model")
    at.toggle(key="ranking_table").set_value(True).run()
    assert_ok(at)
    assert len(ranked) == 1
    top = at.dataframe[0].value.iloc[0]
    most = f"the most changed is layer {int(top['layer'])} head {int(top['head'])}"
    assert any(most in i.value for i in at.info), [i.value for i in at.info]


def made_downloads(monkeypatch) -> dict[str, object]:
    """The callable each download button of the next run is handed, by the file name it offers."""
    made: dict[str, object] = {}
    original = DeltaGenerator.download_button

    def recorded(self, label, data, file_name=None, *args, **kwargs):
        made[file_name] = data
        return original(self, label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", recorded)
    monkeypatch.setattr(st, "download_button", lambda *a, **k: recorded(st._main, *a, **k))  # st.download_button too
    return made


def test_two_checkpoints_each_state_their_own_gradient_objective(at, smollm_model, minilm_model, monkeypatch):
    """SmolLM2 (A) beside MiniLM (B): SmolLM2's read-out is its token table, MiniLM (BERT) has no next-piece head at
    all, so the objective is said once for each, in the expander and in the JSON, whose note does not call a real
    model's objective a dummy one."""
    assert smollm_model.head.weight is smollm_model.embedding.weight  # tied: the two are one tensor
    assert minilm_model.config.family == "bert" and minilm_model.head is None
    made = made_downloads(monkeypatch)
    open_compare(at, model="smollm2-135m", b_model="minilm-l6", tokens="the cat sat on the mat")
    (said,) = [m.value for m in at.markdown if "predicts the next piece" in m.value]
    a_line, b_line = said.split("\n\n")
    assert a_line.startswith("A: Objective:") and "the two are one tensor" in a_line and "BERT" not in a_line
    assert b_line.startswith("B: Objective:") and "BERT" in b_line and "one tensor" not in b_line
    data = json.loads(made["comparison.json"]())
    assert data["gradient_objective"] == said
    assert "dummy" not in data["note"]


@pytest.mark.slow
@pytest.mark.parametrize(("b_norm", "noise"), [("res-post", True), ("peri", False)])
def test_b_gradient_norms_float32_cannot_resolve_are_called_noise(at, smollm_model, b_norm, noise):
    """SmolLM2's weights run res-post: a 1e-6 move of the input changes B's block gradient norms x23 (float64 gives
    other numbers, README); run peri, under 1 %. Only the first is said to be rounding, under B's lines."""
    b_model = f"A with {b_norm}-norm"  # a checkpoint's B: its very weights with another placement
    open_compare(at, model="smollm2-135m", b_model=b_model, tokens="The cat sat on the mat because it was tired.")
    assert at.radio(key="b_model").value == b_model
    said = [c.value for c in at.caption if "float32 rounding, not a measurement" in c.value]
    assert len(said) == (1 if noise else 0)
    if noise:
        assert "B's gradient norms" in said[0] and "one part in a million" in said[0]


@pytest.mark.parametrize(
    ("mode", "said"), [("configuration", "do not take removed heads"), ("heads", "B's would be A's")]
)
def test_each_gradient_note_is_said_once_and_only_where_it_applies(at, mode, said):
    """Heads removed in the sidebar: gradients are the whole model's. With B = A's model without heads, B has none,
    and that note replaces the other (one branch or the other, never both)."""
    open_compare(at, ablate="L0H1", compare=mode, b_ablate="L1H0")
    phrases = ("do not take removed heads", "B's would be A's")
    notes = [phrase for c in at.caption for phrase in phrases if phrase in c.value]
    assert notes == [said]


def test_the_ranking_says_padding_queries_are_averaged_when_the_text_is_padded(at):
    """A padding mask hides [PAD] keys but a [PAD] query still sees the real tokens: its row enters every head's
    mean divergence (on MiniLM with 4 [PAD]s, flipped, one head's by 0.16 bit), so the caption says so."""
    padded = open_compare(at, tokens="the cat [PAD] [PAD]", mask="padding", norm="pre")
    assert any("[PAD] queries included" in c.value for c in padded.caption)
    plain = open_compare(AppTest.from_file(APP, default_timeout=120), tokens="the cat sat", norm="pre")
    assert not any("[PAD] queries included" in c.value for c in plain.caption)


def test_a_head_b_removes_is_titled_removed_and_its_weights_said_to_mix_nothing(at):
    """B = A without L1H2, the head shown: B's map is the weights the head still computes, the same as A's, and had
    nothing saying the head was gone; the ranking found A and B identical in every head without saying why a removed
    head changes nothing there (it is in the last layer, and it still computes its weights)."""
    open_compare(at, compare="heads", b_ablate="L1H2", layer="1", head="2")
    drawn = sides(at)
    assert drawn["B"].title.startswith("B · layer 1 · head 2 · removed")
    assert "removed" not in drawn["A"].title
    np.testing.assert_array_equal(drawn["A"].values, drawn["B"].values)  # the weights it still computes
    captions = " ".join(c.value for c in at.caption)
    assert "**B: L1H2 is removed (output set to zero).**" in captions and "adds nothing to the stream" in captions
    assert "Removed heads (B: L1H2) still compute their weights" in captions
    [identical] = [i.value for i in at.info if "attend identically" in i.value]
    assert "L1H2 is in the last layer" in identical


def test_a_head_removed_in_a_lower_layer_is_not_said_to_be_in_the_last_one(at):
    open_compare(at, compare="heads", b_ablate="L0H1", b_ablate_with="mean", layer="1", head="2")
    assert not any("attend identically" in i.value for i in at.info)  # layer 1 reads a changed stream
    captions = " ".join(c.value for c in at.caption)
    assert "Removed heads (B: L0H1) still compute their weights" in captions
    assert "is removed" not in captions  # the head shown, L1H2, is kept on both sides
    assert not any("removed" in m.title for m in sides(at).values())


def test_with_heads_removed_and_no_gradient_norms_nothing_is_said_of_them_but_why(at):
    """One token has no next one to predict, so there are no gradient norms; with a head removed the page still said
    "The gradient norms are the model's with every head", of norms it did not draw."""
    open_compare(at, tokens="cat", ablate="L0H1")
    said = [c.value for c in at.caption]
    assert any(s.startswith("No gradient norms: they need at least two tokens") for s in said), said
    assert not any("The gradient norms are the model's with every head" in s for s in said), said
    drawn = open_compare(AppTest.from_file(APP, default_timeout=120), tokens="the cat", ablate="L0H1")
    assert any("The gradient norms are the model's with every head" in c.value for c in drawn.caption)
