"""The Mixing figures: the matrix-view boards (pictures.mixing_boards) and the Plotly figures (pictures.mixing_charts)
draw explorer's rollout and flow, read back the way the browser gets them."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.analysis.mixing import attention_flow, attention_flow_rows, attention_rollout, mixed_maps
from explorer.analysis.stats import head_average
from explorer.config import ModelConfig
from pictures.mixing_boards import last_block_board, layer_board, reachable
from pictures.mixing_charts import flow_figure, reach_figure, rollout_figure
from pictures.style import MAX_TICKS
from tests.drawn import figure_json, figure_title, panel_matrix

TOKENS = "the cat sat on the mat"


@pytest.fixture(scope="module")
def trace() -> explorer.Trace:
    return explorer.run(ModelConfig(n_layers=3), TOKENS)


@pytest.fixture(scope="module")
def causal() -> explorer.Trace:
    return explorer.run(ModelConfig(arch="decoder"), TOKENS)


def heatmaps(figure) -> list[dict]:
    return [trace for trace in figure_json(figure)["data"] if trace["type"] == "heatmap"]


def test_reachable_adds_each_token_itself_to_the_allowed_keys():
    allowed = np.array([[True, False, False], [True, True, False], [False, False, False]])
    np.testing.assert_array_equal(reachable(allowed), allowed | np.eye(3, dtype=bool))


def test_the_last_block_board_draws_raw_rollout_and_flow_on_one_scale(trace):
    rollout, flow = attention_rollout(trace), attention_flow_rows(trace)
    maps = trace.first.self_attention
    panels = last_block_board(maps, rollout, flow, 0.5)["panels"]
    assert [p["name"] for p in panels] == ["mix_raw", "mix_rollout", "mix_flow"]
    drawn = [panel_matrix(p) for p in panels]
    np.testing.assert_allclose(drawn[0].values, head_average(maps, 2), atol=1e-7)
    np.testing.assert_allclose(drawn[1].values, rollout[2], atol=1e-7)
    np.testing.assert_allclose(drawn[2].values, flow, atol=1e-7)
    assert [p["legend"] is not None for p in panels] == [False, False, True]  # one legend for the shared scale
    assert (panels[2]["legend"]["low"], panels[2]["legend"]["high"]) == (0.0, 1.0)
    assert panels[2]["legend"]["title"] == "value, all 3 maps"  # not "max flow": the raw and rollout maps use it too
    without_flow = last_block_board(maps, rollout, None, 0.5)["panels"]
    assert [p["name"] for p in without_flow] == ["mix_raw", "mix_rollout"] and without_flow[1]["legend"]
    assert without_flow[1]["legend"]["title"] == "value, both maps"
    assert [p["value_title"] for p in panels] == ["mean weight", "rollout", "max flow"]  # each map's hover says its own


def test_a_long_texts_maps_are_pale_until_stretched_and_then_share_one_stretched_scale():
    words = " ".join(f"w{i % 40}" for i in range(160))  # rollout rows spread over 160 tokens: about 1/160 each
    long = explorer.run(ModelConfig(n_layers=2), words)
    maps, rollout = long.first.self_attention, attention_rollout(long)
    plain = last_block_board(maps, rollout, None, 0.5)["panels"]
    stretched = last_block_board(maps, rollout, None, 0.5, stretch=True)["panels"]
    unmasked = np.concatenate([head_average(maps, 1)[maps.allowed], rollout[1][reachable(maps.allowed)]])
    top = float(np.quantile(unmasked, 0.99))
    assert top < 0.2  # pale on the 0-to-1 scale, which the first map's subtitle says
    assert plain[1]["legend"]["high"] == 1.0 and "turn on Stretch colours" in plain[0]["subtitle"]
    assert stretched[1]["legend"]["high"] == pytest.approx(top) and "colours stretched" in stretched[0]["subtitle"]
    for before, after in zip(plain, stretched, strict=True):  # the same values, hover included; more shades drawn
        np.testing.assert_array_equal(panel_matrix(after).values, panel_matrix(before).values)
        shades = [len(np.unique(panel_matrix(p).image.reshape(-1, 3), axis=0)) for p in (before, after)]
        assert shades[1] > 2 * shades[0]
    short = explorer.run(ModelConfig(n_layers=2), TOKENS)
    first = last_block_board(short.first.self_attention, attention_rollout(short), None, 0.5)["panels"][0]
    assert "Stretch colours" not in first["subtitle"]  # six tokens: dark enough on the 0-to-1 scale, no hint


def test_the_notebook_maps_stretch_their_colours_as_the_pages_board_does():
    words = " ".join(f"w{i % 40}" for i in range(160))  # 160 tokens: pale on 0 to 1, as on the board above
    long = explorer.run(ModelConfig(n_layers=2), words)
    maps, rollout = long.first.self_attention, attention_rollout(long)
    board = last_block_board(maps, rollout, None, 0.5, stretch=True)["panels"]
    plain, stretched = (figure_json(rollout_figure(long, stretch=on)) for on in (False, True))
    assert [h["zmax"] for h in plain["data"]] == [1.0, 1.0] and "turn on Stretch colours" in figure_title(plain)
    top = board[1]["legend"]["high"]  # the page's stretched scale for the same two maps
    assert top < 0.2 and [h["zmax"] for h in stretched["data"]] == pytest.approx([top, top])
    assert "colours stretched" in figure_title(stretched)
    for before, after in zip(plain["data"], stretched["data"], strict=True):  # the values drawn are the same
        np.testing.assert_array_equal(np.asarray(after["z"], dtype=float), np.asarray(before["z"], dtype=float))
    flows = figure_json(flow_figure(explorer.run(ModelConfig(n_layers=2), TOKENS), stretch=True))
    assert flows["data"][0]["zmax"] < 1 and flows["data"][1]["zmax"] == 1  # rollout stretched, flow kept 0 to 1


def words_and_flow(n_tokens: int) -> tuple[explorer.Trace, np.ndarray]:
    words = " ".join(f"w{i}" for i in range(n_tokens))
    long = explorer.run(ModelConfig(n_layers=2), words)
    return long, attention_flow_rows(long)


def test_stretch_colours_stretches_raw_and_rollout_and_leaves_flow_on_0_to_1():
    """Found by a review: flow's top 1 % is about 1 (each value is its own max flow), so one scale stretched over all
    three maps stayed near 0 to 1 and Stretch colours did nothing on the last block's board."""
    long, flow = words_and_flow(24)
    maps, rollout = long.first.self_attention, attention_rollout(long)
    raw_and_rollout = np.concatenate([head_average(maps, 1).ravel(), rollout[1].ravel()])  # no mask: every cell
    top = float(np.quantile(raw_and_rollout, 0.99))
    assert top < 0.5 < np.quantile(np.concatenate([raw_and_rollout, flow.ravel()]), 0.99)  # flow would undo it
    panels = last_block_board(maps, rollout, flow, 0.5, stretch=True)["panels"]
    assert panels[1]["legend"]["high"] == pytest.approx(top) and panels[1]["legend"]["title"] == "value, both maps"
    assert (panels[2]["legend"]["low"], panels[2]["legend"]["high"]) == (0.0, 1.0)
    assert panels[2]["legend"]["title"] == "max flow"
    assert "top 1 % of raw and rollout values" in panels[0]["subtitle"] and "flow keeps 0 to 1" in panels[0]["subtitle"]
    shades = np.unique(panel_matrix(panels[2]).image.reshape(-1, 3), axis=0)  # flow's colours on 0 to 1, unstretched
    plain = last_block_board(maps, rollout, flow, 0.5)["panels"]
    np.testing.assert_array_equal(panel_matrix(plain[2]).image, panel_matrix(panels[2]).image)
    assert len(shades) > 1


def test_the_notebook_flow_maps_name_each_colour_bar_by_what_it_holds():
    """The figure's one colour bar was titled "share", under flow's values too, which are not shares."""
    long, flow = words_and_flow(24)
    rollout = attention_rollout(long)[-1]
    stretched = figure_json(flow_figure(long, stretch=True))
    rolled, flows = stretched["data"]
    assert rolled["zmax"] == pytest.approx(np.quantile(rollout.ravel(), 0.99)) and flows["zmax"] == 1.0
    assert [(h["showscale"], h["colorbar"]["title"]["text"]) for h in (rolled, flows)] == [
        (True, "rollout"),
        (True, "max flow"),
    ]
    assert rolled["colorbar"]["x"] < flows["colorbar"]["x"]  # the rollout bar stands between the two maps
    plain = figure_json(flow_figure(long))["data"]  # one scale, 0 to 1: one bar, named for both maps
    assert [h.get("showscale") for h in plain] == [False, True] and plain[1]["colorbar"]["title"]["text"] == "value"
    assert "share" not in str([h.get("colorbar") for h in plain + stretched["data"]])
    np.testing.assert_allclose(np.asarray(flows["z"], dtype=float), flow, atol=1e-6)


def test_the_layer_board_draws_rollout_after_that_block(trace):
    rollout = attention_rollout(trace)
    raw, rolled = (panel_matrix(p) for p in layer_board(trace.first.self_attention, rollout, 1, 0.5)["panels"])
    np.testing.assert_allclose(rolled.values, rollout[1], atol=1e-7)
    np.testing.assert_allclose(raw.values, head_average(trace.first.self_attention, 1), atol=1e-7)
    assert "after block 1" in rolled.title and "layer 1" in raw.title
    board = layer_board(trace.first.self_attention, rollout, 1, 0.5)["panels"]
    assert board[0]["legend"] is None and board[1]["legend"]["title"] == "value, both maps"


def test_rollout_figure_shows_the_raw_average_beside_rollout(trace):
    raw, rolled = heatmaps(rollout_figure(trace))
    np.testing.assert_allclose(rolled["z"], attention_rollout(trace)[-1], atol=1e-6)
    np.testing.assert_allclose(raw["z"], head_average(trace.first.self_attention, 2), atol=1e-6)
    assert rolled["x"] == ["the", "cat", "sat", "on", "the·4", "mat"]
    _, first = heatmaps(rollout_figure(trace, layer=0, residual=0.3))
    np.testing.assert_allclose(first["z"], attention_rollout(trace, 0.3)[0], atol=1e-6)
    assert "after block 0" in figure_title(figure_json(rollout_figure(trace, layer=0)))
    for layer, got in [(3, "got 3"), (1.7, "got 1.7"), (-1, "got -1")]:  # 1.7 had drawn block 1
        with pytest.raises(explorer.ConfigError, match=f"layer is a whole number from 0 to 2; {got}"):
            rollout_figure(trace, layer=layer)


def test_flow_figure_of_every_row_is_masked_where_no_path_reaches(causal):
    rolled, flow = heatmaps(flow_figure(causal))
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    expected = attention_flow_rows(causal)
    z = np.asarray(flow["z"], dtype=np.float64)
    assert np.isnan(z[upper]).all() and (expected[upper] == 0).all()
    np.testing.assert_allclose(z[~upper], expected[~upper], atol=1e-6)
    np.testing.assert_allclose(np.asarray(rolled["z"], dtype=np.float64)[~upper], attention_rollout(causal)[-1][~upper],
                               atol=1e-6)  # fmt: skip


def test_flow_figure_of_the_last_position_is_what_reaches_the_prediction(causal):
    figure = figure_json(flow_figure(causal, query=-1))
    assert "reach the prediction" in figure_title(figure)
    bars = {trace["name"]: np.asarray(trace["y"]) for trace in figure["data"]}
    np.testing.assert_allclose(bars["flow after the last block"], attention_flow(causal, 5), atol=1e-9)
    np.testing.assert_allclose(bars["rollout after the last block"], attention_rollout(causal)[-1, 5], atol=1e-7)
    np.testing.assert_allclose(bars["last layer, average of heads"], causal.attention[-1].mean(axis=0)[5], atol=1e-6)


def test_flow_figure_of_an_encoders_position(trace):
    figure = figure_json(flow_figure(trace, query=2))
    assert "reach position 2" in figure_title(figure)
    flow = next(t for t in figure["data"] if t["name"] == "flow after the last block")
    np.testing.assert_allclose(flow["y"], attention_flow(trace, 2), atol=1e-9)
    for query in (6, -7, 2.5):  # 2.5 had drawn position 2
        with pytest.raises(explorer.ConfigError, match=f"query is a whole number from -6 to 5; got {query}"):
            flow_figure(trace, query=query)


def test_a_long_input_names_at_most_max_ticks_positions_on_the_reach_bars_and_every_one_in_hover():
    """Plotly measures every tick label it is given: 512 of them on three panels took 15 s of the page's load."""
    tokens = [f"w{i}" for i in range(512)]
    figure = figure_json(reach_figure(tokens, "t", {"raw": np.full(512, 1 / 512), "rollout": np.full(512, 1 / 512)}))
    axis = figure["layout"]["xaxis"]
    assert 2 <= len(axis["tickvals"]) <= MAX_TICKS
    assert [axis["ticktext"][i] for i in range(len(axis["tickvals"]))] == [tokens[v] for v in axis["tickvals"]]
    assert figure["data"][0]["customdata"] == tokens  # hover names every position


def test_the_notebooks_rollout_figure_averages_a_removed_head_as_rollout_does():
    trace = explorer.run(explorer.ModelConfig(n_heads=2), "a b c d", ablate="L1H1")
    raw, rolled = heatmaps(rollout_figure(trace))
    np.testing.assert_allclose(raw["z"], trace.attention[1, 0] / 2, atol=1e-6)  # head 1 counted as zero
    np.testing.assert_allclose(rolled["z"], attention_rollout(trace)[-1], atol=1e-6)


def test_a_head_removed_by_its_mean_under_a_causal_mask_draws_what_reaches_later_tokens():
    """Found by a review: a head replaced by its mean weighs each key by its mean over all queries, so position 0
    receives later tokens (0.076 of rollout's row 0 here); those cells were grey, "no path from this token (0)"."""
    trace = explorer.run(ModelConfig(arch="decoder"), TOKENS, ablate="L0H1", ablate_with="mean")
    weights = trace.attention.astype(np.float64)  # [L, H, T, T], as each head computed them
    weights[0, 1] = weights[0, 1].mean(axis=0)  # the removed head as it acted: its mean row for every query
    mean = weights.mean(axis=1)  # [L, T, T]
    mixing = 0.5 * np.eye(6) + 0.5 * mean  # rows already sum to 1
    rollout = mixing[1] @ mixing[0]  # [T, T]
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    assert rollout[0, upper[0]].sum() > 0.05 and (mean[0][upper] > 0).all()
    maps = mixed_maps(trace)
    panels = last_block_board(maps, attention_rollout(trace), attention_flow_rows(trace), 0.5)["panels"]
    drawn = {p["name"]: panel_matrix(p) for p in panels}
    np.testing.assert_allclose(drawn["mix_rollout"].values, rollout, atol=1e-6)
    for name, expected in (("mix_rollout", rollout), ("mix_flow", attention_flow_rows(trace))):
        np.testing.assert_array_equal(drawn[name].masked, expected == 0)  # grey only where nothing arrives
    layer0 = panel_matrix(layer_board(maps, attention_rollout(trace), 0, 0.5)["panels"][0])  # layer 0's raw average
    np.testing.assert_allclose(layer0.values, mean[0], atol=1e-6)
    assert not layer0.masked.any()  # the removed head's mean row reaches every key


def test_without_a_mean_removal_the_masked_cells_stay_grey(causal):
    panels = last_block_board(mixed_maps(causal), attention_rollout(causal), None, 0.5)["panels"]
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    assert [panel_matrix(p).masked.tolist() for p in panels] == [upper.tolist()] * 2


def test_the_reach_bars_of_a_long_text_touch_name_their_axes_and_say_flow_only_when_drawn():
    """At about 500 pieces each bar is under a pixel: with gaps the rollout's 0.997 on one token could not be seen;
    the subtitle described a flow panel the page had not computed, and no axis said what the bars measure."""
    tokens = [f"w{i}" for i in range(497)]
    rollout = np.zeros(497)
    rollout[0] = 1.0
    long = figure_json(reach_figure(tokens, "t", {"raw": np.full(497, 1 / 497), "rollout": rollout, "flow": None}))
    assert long["layout"]["bargap"] == 0 and all(bar["marker"]["line"]["width"] == 0 for bar in long["data"])
    assert "flow" not in long["layout"]["title"]["subtitle"]["text"]
    assert [long["layout"][y]["title"]["text"] for y in ("yaxis", "yaxis2")] == ["weight", "share"]
    assert long["layout"]["xaxis2"]["title"]["text"] == "input token"
    short = figure_json(reach_figure(tokens[:6], "t", {"raw": np.full(6, 1 / 6), "flow": np.ones(6)}))
    assert short["layout"]["bargap"] == 0.25 and "max flow, at most 1" in short["layout"]["title"]["subtitle"]["text"]
    assert short["layout"]["yaxis2"]["title"]["text"] == "max flow"
