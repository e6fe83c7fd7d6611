"""The dashboard through streamlit.testing: what is drawn matches explorer.run on the same settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.stats import head_average
from explorer.config import ModelConfig
from pictures.attention_panels import WEIGHTS
from tests.drawn import DrawnMatrix, app_boards, app_matrices, sheet_maps

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
TOKENS = "the cat sat on the mat"
AVERAGE = "average of heads"


@pytest.fixture
def at() -> AppTest:
    """AppTest of the dashboard. Pages live in views/, not pages/: with a pages/ folder AppTest (and a fresh
    server's first deep link) takes Streamlit's old multipage path and runs a page without dashboard.py."""
    return AppTest.from_file(APP, default_timeout=60)


def main_heatmap(at: AppTest) -> DrawnMatrix:
    """The big heatmap: the matrix named "map"."""
    found = app_matrices(at)
    assert "map" in found, list(found)
    return found["map"]


def grid_sheet(at: AppTest) -> dict:
    """The sheet of every layer x head's small map, on the board of the page's maps."""
    [sheet] = [p for p in app_boards(at)["maps"]["panels"] if p["kind"] == "sheet"]
    return sheet


def grid(at: AppTest) -> pd.DataFrame:
    """The grid: one row per small map (its title, what a click on it picks, whether it is framed)."""
    sheet = grid_sheet(at)
    return pd.DataFrame(
        [
            {"title": t, **pick, "outlined": i == sheet["picked"]}
            for i, (t, pick) in enumerate(zip(sheet["titles"], sheet["picks"], strict=True))
        ]
    )


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def test_default_view_draws_the_engine_weights(at):
    at.run()
    assert_ok(at)
    assert not at.error and not at.warning
    expected = explorer.run(ModelConfig(), TOKENS).attention_maps()["self-attention"]
    spec = main_heatmap(at)
    np.testing.assert_array_equal(spec.values, expected.weights[0, 0])
    assert spec.x_labels == ["the", "cat", "sat", "on", "the·4", "mat"]
    assert spec.x_title == "key"
    assert spec.y_title == "query"
    maps = grid(at)
    assert maps["title"].tolist() == [f"L{layer} H{head}" for layer in range(2) for head in range(4)]
    assert maps[["layer", "head"]].values.tolist() == [[layer, head] for layer in range(2) for head in range(4)]
    thumbnails = sheet_maps(grid_sheet(at))
    for layer, head in [(0, 0), (1, 2)]:  # each small map is coloured from its own head's weights
        drawn = thumbnails[f"L{layer} H{head}"]
        np.testing.assert_array_equal(drawn, WEIGHTS.rgb(expected.weights[layer, head]))
    assert maps.loc[maps["outlined"], "title"].tolist() == ["L0 H0"]  # the map shown large
    assert len(at.get("download_button")) == 3  # CSV, JSON, and the view as HTML


def test_a_long_input_sends_the_grid_at_its_drawn_size(at):
    """240 tokens: 2 x 4 maps of 240 x 240 cells, each drawn on fewer pixels than that. The browser gets each small
    map at its drawn size, every pixel the largest weight of the 2 x 2 cells it covers, and the big map whole."""
    tokens = " ".join(f"w{i}" for i in range(240))
    at.query_params["tokens"] = tokens
    at.run()
    assert_ok(at)
    assert [p["name"] for p in app_boards(at)["maps"]["panels"]] == ["map", "entropy", "grid"]
    sheet = grid_sheet(at)
    assert (sheet["rows"], sheet["cols"]) == (120, 120)  # 196 px a map (grid_map_px for 4 heads): every 2nd cell
    assert "2 × 2 cells it covers" in sheet["subtitle"]
    expected = explorer.run(ModelConfig(), tokens).attention_maps()["self-attention"].weights  # [L, H, 240, 240]
    block_max = expected.reshape(2, 4, 120, 2, 120, 2).max(axis=(3, 5))  # [L, H, 120, 120]
    drawn = sheet_maps(sheet)
    for layer, head in [(0, 1), (1, 3)]:
        np.testing.assert_array_equal(drawn[f"L{layer} H{head}"], WEIGHTS.rgb(block_max[layer, head]))
    assert main_heatmap(at).values.shape == (240, 240)


def test_layer_head_and_average_selectors(at):
    at.run()
    expected = explorer.run(ModelConfig(), TOKENS).attention_maps()["self-attention"]
    at.selectbox(key="layer").select(1)
    at.selectbox(key="head").select(3)
    at.run()
    assert_ok(at)
    np.testing.assert_array_equal(main_heatmap(at).values, expected.weights[1, 3])
    assert grid(at).loc[grid(at)["outlined"], "title"].tolist() == ["L1 H3"]
    at.selectbox(key="head").select(AVERAGE)
    at.run()
    spec = main_heatmap(at)
    np.testing.assert_array_equal(spec.values, head_average(expected, 1))
    assert "average of 4 heads" in spec.title
    assert any("average" in i.value for i in at.info)
    assert not grid(at)["outlined"].any()  # an average is no map of the grid


@pytest.mark.parametrize(
    ("name", "value"),
    [("n_heads", 2), ("norm", "pre"), ("positional", "learned"), ("seed", 7), ("n_layers", 3), ("activation", "gelu")],
)
def test_each_control_changes_the_drawing(at, name, value):
    at.run()
    before = main_heatmap(at).values
    widget = at.number_input(key=name) if isinstance(value, int) else at.selectbox(key=name)
    widget.set_value(value).run()
    assert_ok(at)
    cfg = ModelConfig().replace(**{name: value})
    expected = explorer.run(cfg, TOKENS).attention_maps()["self-attention"]
    after = main_heatmap(at).values
    np.testing.assert_array_equal(after, expected.weights[0, 0])
    if name not in ("activation", "n_layers"):  # layer 0's attention does not depend on these
        assert not np.array_equal(before, after)
    titles = grid(at)["title"].tolist()
    assert len(titles) == cfg.n_layers * cfg.n_heads


def test_entropy_table_on_request_holds_each_heads_entropy(at):
    at.query_params["mask"] = "causal"
    at.run()
    assert not at.dataframe  # the table only on request: it loads a heavy script
    at.toggle(key="entropy_table").set_value(True).run()
    assert_ok(at)
    (table,) = [d.value for d in at.dataframe]
    attention = explorer.run(ModelConfig(mask="causal"), TOKENS).attention.astype(np.float64)  # [L, H, T, T]
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(attention > 0, attention * np.log(attention), 0.0).sum(axis=-1).mean(axis=-1)  # [L, H]
    uniform = np.log(np.arange(1, attention.shape[-1] + 1)).mean()  # causal: query i may see i + 1 keys
    assert list(zip(table["layer"], table["head"], strict=True)) == [
        (layer, head) for layer in range(2) for head in range(4)
    ]
    np.testing.assert_allclose(table["entropy"], entropy.ravel(), rtol=1e-5)
    np.testing.assert_allclose(table["max_entropy"], uniform, rtol=1e-6)
    np.testing.assert_allclose(table["peakedness"], 1 - entropy.ravel() / uniform, rtol=1e-5)
    np.testing.assert_allclose(app_matrices(at)["entropy"].values, entropy, rtol=1e-5)  # the board shows the same


def test_causal_mask_greys_the_upper_triangle(at):
    at.run()
    at.selectbox(key="mask").select("causal").run()
    assert_ok(at)
    spec = main_heatmap(at)
    z = spec.values
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    assert np.isnan(z[upper]).all() and not np.isnan(z[~upper]).any()
    np.testing.assert_array_equal(spec.masked, upper)  # drawn grey, not as a weight of 0
    assert "grey = masked" in spec.title
    expected = explorer.run(ModelConfig(mask="causal"), TOKENS).attention_maps()["self-attention"]
    np.testing.assert_array_equal(z[~upper], expected.weights[0, 0][~upper])


def test_decoder_is_causal(at):
    at.run()
    at.selectbox(key="arch").select("decoder").run()
    assert_ok(at)
    z = main_heatmap(at).values
    assert np.isnan(z[np.triu(np.ones((6, 6), dtype=bool), 1)]).all()
    assert any("always causal" in c.value for c in at.sidebar.caption)
    summary = at.main.caption[0].value  # the line under the title says what the map shows, not the control
    assert "mask causal (a decoder is always causal)" in summary and "mask none" not in summary


def test_stretch_colours_for_a_long_input(at):
    """60 tokens spread attention thin: the page says so, and the toggle (kept in the URL) stretches the colours."""
    tokens = " ".join(f"w{i}" for i in range(60))
    at.query_params["tokens"] = tokens
    at.run()
    assert_ok(at)
    top = float(np.quantile(explorer.run(ModelConfig(), tokens).attention[0, 0], 0.99))
    assert "so cells are pale: turn on Stretch colours" in main_heatmap(at).title
    assert main_heatmap(at).view["legend"]["high"] == 1.0
    at.toggle(key="stretch").set_value(True).run()
    assert_ok(at)
    assert main_heatmap(at).view["legend"]["high"] == pytest.approx(top)
    assert "colours stretched" in main_heatmap(at).title
    shared = AppTest.from_file(APP, default_timeout=60)  # a shared link with the toggle on draws the same
    shared.query_params.update({"tokens": tokens, "stretch": "true"})
    shared.run()
    assert main_heatmap(shared).view["legend"]["high"] == pytest.approx(top)


def test_padding_flags_the_empty_row(at):
    at.query_params["mask"] = "causal+padding"
    at.query_params["tokens"] = "[PAD] a b [PAD]"
    at.run()
    assert_ok(at)
    assert at.selectbox(key="mask").value == "causal+padding"
    spec = main_heatmap(at)
    assert spec.y_labels[0].startswith("⊘")
    assert any("no key to attend to" in w.value for w in at.warning)


def test_encoder_decoder_shows_cross_attention(at):
    at.run()
    at.selectbox(key="arch").select("encoder-decoder").run()
    assert_ok(at)
    target = at.text_input(key="target")
    assert target.value
    assert at.radio(key="kind").value == "cross-attention"
    assert at.radio(key="kind").options == ["encoder self-attention", "decoder self-attention", "cross-attention"]
    trace = explorer.run(ModelConfig(arch="encoder-decoder"), TOKENS, target.value)
    spec = main_heatmap(at)
    assert spec.x_labels == ["the", "cat", "sat", "on", "the·4", "mat"]
    assert spec.y_labels[:2] == target.value.split()[:2]
    np.testing.assert_array_equal(spec.values, trace.attention_maps()["cross-attention"].weights[0, 0])
    at.radio(key="kind").set_value("decoder self-attention").run()
    z = main_heatmap(at).values
    assert np.isnan(z[np.triu(np.ones(z.shape, dtype=bool), 1)]).all()


def test_empty_target_is_an_error(at):
    at.query_params.update({"arch": "encoder-decoder", "target": ""})
    at.run()
    assert_ok(at)
    assert any("target" in e.value for e in at.error)
    at.text_input(key="target").input("le chat").run()
    assert_ok(at)
    assert main_heatmap(at).y_labels == ["le", "chat"]


def test_target_only_shown_for_encoder_decoder(at):
    at.run()
    assert not [t for t in at.text_input if t.key == "target"]


@pytest.mark.parametrize(
    ("tokens", "message"),
    [("", "empty"), ("   ", "empty"), (" ".join(["w"] * 5000), "5,000 tokens")],
)
def test_bad_tokens_give_an_error_not_a_traceback(at, tokens, message):
    at.run()
    at.text_input(key="tokens").input(tokens).run()
    assert_ok(at)
    assert any(message in e.value for e in at.error)
    assert not app_boards(at)
    at.text_input(key="tokens").input("a b c").run()  # the page recovers
    assert_ok(at)
    assert not at.error
    assert main_heatmap(at).x_labels == ["a", "b", "c"]


def test_impossible_config_is_an_error_and_page_stays_usable(at):
    at.run()
    at.number_input(key="d_model").set_value(30).run()
    assert_ok(at)
    assert any("divisible" in e.value and "30" in e.value for e in at.error)
    assert at.info and not app_boards(at)
    at.number_input(key="n_heads").set_value(3).run()
    assert_ok(at)
    assert not at.error
    assert len(grid(at)) == 2 * 3


def test_url_params_set_the_controls(at):
    at.query_params.update({"n_heads": "2", "mask": "causal", "norm": "pre", "tokens": "a b a", "layer": "1"})
    at.run()
    assert_ok(at)
    assert not at.warning
    assert at.number_input(key="n_heads").value == 2
    assert at.selectbox(key="norm").value == "pre"
    assert at.selectbox(key="layer").value == 1
    cfg = ModelConfig(n_heads=2, mask="causal", norm="pre")
    expected = explorer.run(cfg, "a b a").attention_maps()["self-attention"]
    spec = main_heatmap(at)
    assert spec.x_labels == ["a", "b", "a·2"]
    z = spec.values
    allowed = expected.allowed
    np.testing.assert_array_equal(z[allowed], expected.weights[1, 0][allowed])


@pytest.mark.parametrize(
    ("param", "raw", "used"),
    [("n_heads", "abc", "4"), ("norm", "sideways", "post"), ("n_layers", "999", "2"), ("seed", "-1", "0")],
)
def test_junk_url_params_warn_and_fall_back(at, param, raw, used):
    at.query_params[param] = raw
    at.run()
    assert_ok(at)
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and param in warnings[0] and raw in warnings[0] and f"`{used}`" in warnings[0]
    assert str(at.session_state[param]) == used
    assert main_heatmap(at)
    at.run()  # the note survives a rerun, although Streamlit has stripped the value from the URL
    assert any(param in w.value for w in at.warning)


def test_junk_url_value_is_shown_safe_and_short(at):
    at.query_params["norm"] = "`side`\nways" + "x" * 60  # a backtick would end the code span, a newline the line
    at.run()
    assert_ok(at)
    (warning,) = [w.value for w in at.warning]
    shown = warning.split("`norm=", 1)[1].split("`", 1)[0]
    assert shown == ("'side' ways" + "x" * 60)[:40] + "…"
    assert warning.count("`") % 2 == 0


def test_a_sidebar_number_that_is_not_whole_is_said_to_be_read_as_the_control_reads_it(at):
    at.query_params["n_heads"] = "2.5"
    at.run()
    assert_ok(at)
    assert at.number_input(key="n_heads").value == 2
    assert any("n_heads=2.5` is not a whole number: using 2." in w.value for w in at.warning)
    written_with_a_point = AppTest.from_file(APP, default_timeout=60)
    written_with_a_point.query_params["d_model"] = "128.0"  # a whole number: nothing to say
    written_with_a_point.run()
    assert written_with_a_point.number_input(key="d_model").value == 128 and not written_with_a_point.warning


def test_junk_view_params_warn(at):
    at.query_params.update({"head": "two", "layer": "x", "stretch": "maybe"})
    at.run()
    assert_ok(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "head=two" in warnings and "layer=x" in warnings and "stretch=maybe" in warnings
    assert main_heatmap(at)


def test_a_layer_or_head_beyond_the_model_shows_the_nearest_and_says_so(at):
    at.query_params.update({"n_layers": "4", "head": "9"})  # 4 heads by default
    at.run()
    assert_ok(at)
    assert at.selectbox(key="head").value == 3  # the last head, not Streamlit's silent jump to the first
    assert any("no head 9" in w.value and "the last, 3" in w.value for w in at.warning)
    at.selectbox(key="layer").set_value(3).run()
    at.number_input(key="n_layers").set_value(2).run()  # the teacher takes layers away while showing layer 3
    assert_ok(at)
    assert at.selectbox(key="layer").value == 1
    assert any("no layer 3" in w.value and "the last, 1" in w.value for w in at.warning)
    expected = explorer.run(ModelConfig(n_layers=2), "the cat sat on the mat").attention[1, 3]  # [T, T]
    np.testing.assert_array_equal(main_heatmap(at).values, expected)
    at.selectbox(key="layer").set_value(0).run()
    assert not any("no layer 3" in w.value for w in at.warning)  # the note goes once the user picks a layer


def test_url_mask_with_plus_read_as_space_is_understood(at):
    at.query_params["mask"] = "causal padding"  # what ?mask=causal+padding decodes to
    at.run()
    assert_ok(at)
    assert at.selectbox(key="mask").value == "causal+padding"
    assert not at.warning


def test_url_param_for_an_impossible_combination(at):
    at.query_params["d_model"] = "30"
    at.run()
    assert_ok(at)
    assert any("divisible" in e.value for e in at.error)


def test_share_hint_holds_exactly_the_changed_settings(at):
    at.query_params.update({"n_heads": "2", "norm": "pre", "tokens": "a b c"})
    at.run()
    assert_ok(at)
    links = [m.value for m in at.sidebar.markdown if "n_heads=" in m.value]
    assert len(links) == 1
    query = links[0].strip("`").split("?", 1)[1]
    assert sorted(query.split("&")) == ["n_heads=2", "norm=pre", "tokens=a%20b%20c"]


def test_big_maps_keep_hover_and_offer_a_zoom_window(at):
    words = " ".join(f"w{i}" for i in range(130))
    at.query_params.update({"tokens": words, "n_layers": "1", "n_heads": "1"})
    at.run()
    assert_ok(at)
    expected = explorer.run(ModelConfig(n_layers=1, n_heads=1), words).attention[0, 0]  # [130, 130]
    whole = main_heatmap(at)
    np.testing.assert_array_equal(whole.values, expected)  # every cell of the whole map hovers
    at.toggle(key="zoom").set_value(True).run()
    at.slider(key="zoom_query").set_value(2).run()
    assert_ok(at)
    drawn = main_heatmap(at)
    assert drawn.values.shape == (40, 40) and drawn.view["cell_px"] > whole.view["cell_px"]
    np.testing.assert_array_equal(drawn.values, expected[2:42, 0:40])
    assert drawn.y_labels[0] == "w2"
    assert len(drawn.view["y_ticks"]) == len(drawn.view["x_ticks"]) == 40  # every token of the window labelled
    small = AppTest.from_file(APP, default_timeout=60)
    small.run()
    assert not [t for t in small.toggle if t.key == "zoom"]


def test_a_shared_link_reproduces_the_zoom_window(at):
    words = " ".join(f"w{i}" for i in range(130))
    at.query_params.update(
        {"tokens": words, "n_layers": "1", "n_heads": "1", "zoom": "true", "zoom_query": "2", "zoom_key": "1"}
    )
    at.run()
    assert_ok(at)
    drawn = main_heatmap(at)
    assert (drawn.y_labels[0], drawn.x_labels[0]) == ("w2", "w1")
    expected = explorer.run(ModelConfig(n_layers=1, n_heads=1), words).attention[0, 0]  # [130, 130]
    np.testing.assert_array_equal(drawn.values, expected[2:42, 1:41])


def test_the_summary_line_reads_as_english_for_one_of_anything(at):
    at.query_params.update({"n_layers": "1", "n_heads": "1", "positional": "none", "tokens": "hello"})
    at.run()
    assert_ok(at)
    summary = at.main.caption[0].value
    assert "1 layer × 1 head" in summary and "no positions" in summary and "encoder 1 token." in summary
    assert "layers" not in summary and "none positions" not in summary
