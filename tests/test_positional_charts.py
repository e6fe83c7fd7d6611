"""Charts of the positional page: they draw the engine's numbers, labelled, and stay light."""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.io
import pytest

import explorer
from explorer.analysis.position_analysis import (
    encoding_table,
    offset_scores,
    permutation_demo,
    rope_angle_table,
    similarity,
    similarity_to,
    wavelengths,
)
from explorer.positional import sinusoidal
from explorer.tasks import make_task
from pictures.attention_panels import WEIGHTS
from pictures.boards import decode_floats
from pictures.notebook_figures import positional_figure
from pictures.position_demo_charts import (
    offset_profile_figure,
    offset_scores_panel,
    offset_verdict,
    permutation_figure,
    permutation_verdict,
)
from pictures.positional_charts import (
    CURVE_POINTS,
    HEATMAP_PX,
    MAX_SIDE,
    TWILIGHT,
    TYPED_COLOUR,
    encoding_curves,
    encoding_heatmap,
    every_nth,
    extremes,
    ordinal,
    pair_name,
    rope_angle_heatmap,
    similarity_heatmap,
    similarity_profile,
    wavelength_figure,
)
from pictures.style import RDBU, SUBTITLE_CHARS, Ramp
from tests.drawn import figure_json, figure_title, figure_trace, panel_matrix

TOKENS = "the cat sat on the mat".split()


def strings(node) -> list[str]:
    """Every string a figure holds (titles, names, hover templates, custom data), however deep."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in strings(value)]
    if isinstance(node, list | tuple) or (isinstance(node, np.ndarray) and node.dtype == object):
        return [s for value in node for s in strings(value)]
    return []


def points(figure: dict) -> int:
    """Points over all traces of a figure: what the browser draws and hovers."""
    return sum(len(trace["x"]) for trace in figure["data"])


def hovers_its_values(figure: dict) -> None:
    """Every trace carries a hover template that writes its y (no trace falls back to Plotly's default label)."""
    for trace in figure["data"]:
        assert "%{y" in trace.get("hovertemplate", ""), trace.get("name")
        assert trace["hovertemplate"].endswith("<extra></extra>")


def test_long_subtitles_wrap_instead_of_being_cut():
    figure = figure_json(wavelength_figure(wavelengths(64), 64, 100))
    lines = figure["layout"]["title"]["subtitle"]["text"].split("<br>")
    assert len(lines) > 1 and all(len(html.unescape(line)) <= SUBTITLE_CHARS for line in lines)
    assert [html.unescape(line) for line in lines] == [  # broken at its separator, which no line starts with
        "pair i repeats every 2π·10000^(2i/d_model) positions: from 6.3 (pair 0) to 47,117 (pair 31)",
        "pairs above the dashed line do not complete one period within the positions shown",
    ]


def test_every_nth_and_ordinals():
    assert every_nth(10).tolist() == list(range(10))
    thinned = every_nth(4096)
    assert len(thinned) == MAX_SIDE and thinned[1] == 8 and thinned[-1] == 4088
    assert len(every_nth(1000)) <= MAX_SIDE
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 112)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "101st",
        "112th",
    ]
    assert pair_name(7, "sinusoidal") == "dim 7 (cos of pair 3)" and pair_name(7, "learned") == "dim 7"


def test_extremes_keep_every_point_while_they_fit_and_each_stretchs_extremes_beyond():
    curve = np.sin(np.arange(4096))  # [P] far denser than a screen
    assert extremes(curve, 5000).tolist() == list(range(4096))
    kept = extremes(curve, 512)
    assert len(kept) <= 512 + 2 and kept[0] == 0 and kept[-1] == 4095 and (np.diff(kept) > 0).all()
    for start in range(0, 4096, 16):  # stretches of 16 positions: both extremes of each are drawn
        stretch = curve[start : start + 16]
        assert start + int(np.argmin(stretch)) in kept and start + int(np.argmax(stretch)) in kept


def test_encoding_curves_draw_the_table_and_mark_the_typed_positions():
    table = sinusoidal(64, 16).numpy()  # [P, D]
    figure = figure_json(encoding_curves(table, [0, 1, 6], ["<b>x</b>", "cat"], "sinusoidal"))
    names = ["dim 0 (sin of pair 0)", "dim 1 (cos of pair 0)", "dim 6 (sin of pair 3)"]
    assert [trace["name"] for trace in figure["data"]] == [*names, "typed tokens"]  # typed last: it wins a hover tie
    dim6 = figure_trace(figure, names[2])
    np.testing.assert_array_equal(dim6["x"], np.arange(64))
    np.testing.assert_array_equal(dim6["y"], table[:, 6])
    np.testing.assert_allclose(figure_trace(figure, names[0])["y"], np.sin(np.arange(64)), atol=1e-6)  # sin(p)
    typed = figure_trace(figure, "typed tokens")
    np.testing.assert_array_equal(typed["x"], [0, 1, 0, 1, 0, 1])  # the two typed positions on each curve
    np.testing.assert_array_equal(typed["y"], table[:2, [0, 1, 6]].T.ravel())
    assert [list(row) for row in typed["customdata"][:2]] == [[names[0], "&lt;b&gt;x&lt;/b&gt;"], [names[0], "cat"]]
    assert "token: %{customdata[1]}" in typed["hovertemplate"] and "value: %{y:.4f}" in typed["hovertemplate"]
    assert typed["mode"] == "markers" and typed["marker"]["color"] == TYPED_COLOUR
    assert typed["marker"]["size"] <= 6  # no larger than a curve point, or the curve takes its hover (in Chromium)
    assert dim6["hovertemplate"].startswith(names[2]) and "value: %{y:.4f}" in dim6["hovertemplate"]
    colours = {name: figure_trace(figure, name)["line"]["color"] for name in names}
    dashes = {name: figure_trace(figure, name)["line"]["dash"] for name in names}
    assert colours[names[0]] == colours[names[1]] != colours[names[2]]  # a pair shares a colour ...
    assert dashes[names[1]] == "dot" and dashes[names[0]] == dashes[names[2]] == "solid"  # ... its cosine dotted
    assert TYPED_COLOUR not in colours.values()  # red means the typed tokens
    layout = figure["layout"]
    assert layout["xaxis"]["title"]["text"] == "position"
    assert layout["yaxis"]["title"]["text"] == "value added to that dimension"
    assert layout["xaxis"]["range"] == [-0.5, 63] and layout["legend"]["title"]["text"] == "dimension"
    [shade] = layout["shapes"]  # the typed positions shaded red
    assert (shade["x0"], shade["x1"], shade["fillcolor"]) == (-0.5, 1.5, TYPED_COLOUR)
    assert "red: the 2 typed tokens' positions 0–1" in figure_title(figure)
    hovers_its_values(figure)
    every = strings(figure)
    assert not any("<b>x" in s for s in every) and "&lt;b&gt;x&lt;/b&gt;" in every  # a token is text, never bold
    assert points(figure) == 3 * 64 + 6


def test_long_curves_stay_light_and_say_how_they_were_drawn():
    table = sinusoidal(4096, 64).numpy()
    built = encoding_curves(table, list(range(16)), TOKENS, "sinusoidal")
    figure = figure_json(built)
    curves = [trace for trace in figure["data"] if trace["name"] != "typed tokens"]
    assert len(curves) == 16 and sum(len(c["x"]) for c in curves) <= CURVE_POINTS + 2 * 16
    dim0 = figure_trace(figure, "dim 0 (sin of pair 0)")
    np.testing.assert_array_equal(dim0["y"], table[dim0["x"], 0])  # every point drawn is exact
    assert dim0["y"].min() < -0.999 and dim0["y"].max() > 0.999  # the band of a fast sine is whole
    assert (dim0["x"].dtype, dim0["y"].dtype) == (np.int32, np.float32)  # sent as 4-byte arrays
    assert "lowest and highest value of each stretch of 4,096 positions drawn" in figure_title(figure)
    assert len(plotly.io.to_json(built)) < 200_000  # what the browser downloads for this chart
    short = figure_json(encoding_curves(table[:64], [0], TOKENS, "sinusoidal"))
    plot_px = [f["layout"]["height"] - f["layout"]["margin"]["t"] - f["layout"]["margin"]["b"] for f in (figure, short)]
    assert plot_px[0] == plot_px[1]  # the legend's rows go under the plot: 16 curves leave it as tall as one does
    assert figure["layout"]["legend"]["orientation"] == "h"  # beside it, a phone's plot was left 116 px of 358
    assert "long curves" not in figure_title(short)


def test_encoding_heatmap_is_the_table_and_thins_long_tables():
    model = explorer.build_model(explorer.ModelConfig(d_model=32, n_heads=2, positional="learned"))
    table = encoding_table(model, 40)  # [40, 32]
    (panel,) = encoding_heatmap(table, TOKENS, "learned")["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values, table)
    assert "untrained" in drawn.title.lower()
    assert (drawn.x_title, drawn.y_title) == ("dimension", "position")
    assert drawn.y_labels[:3] == ["0", "1", "2"] and drawn.x_labels[-1] == "31"
    assert panel["frame"] == [0, 0, 6, 32]  # the six typed positions, every dimension
    assert panel["cell_px"] * 32 == pytest.approx(HEATMAP_PX) and panel["cell_h"] * 40 == pytest.approx(400)
    (big,) = encoding_heatmap(sinusoidal(4096, 64).numpy(), TOKENS, "sinusoidal")["panels"]
    drawn = panel_matrix(big)
    assert drawn.values.shape == (512, 64) and "values" in big  # 32,768 cells, and every one hovers
    assert drawn.y_labels[:2] == ["0", "8"]
    assert "every 8th position drawn (512 of 4,096)" in drawn.title and "hover" not in drawn.title
    assert (big["legend"]["low"], big["legend"]["high"]) == (-1.0, 1.0)
    assert big["subtitle"].startswith("even dimensions sin, odd cos")
    (wide,) = encoding_heatmap(sinusoidal(64, 1024).numpy(), TOKENS, "sinusoidal")["panels"]  # every 2nd dimension
    columns = [int(label) for label in panel_matrix(wide).x_labels]
    assert all(c % 2 == 0 for c in columns) and wide["subtitle"].startswith("only even dimensions (the sines) drawn")


@pytest.mark.slow
def test_stretched_colours_on_minilms_table_are_not_set_by_its_one_outlier(minilm_model):
    table = minilm_model.positional.table.detach().numpy()[:64]  # [64, 384], the page's default 64 positions
    largest = float(np.abs(table).max())  # 1.87, at position 0, dimension 99: one entry of 24,576
    white = np.array(Ramp(RDBU, -1.0, 1.0).rgb(np.zeros((1, 1), np.float32))[0, 0], dtype=int)  # the ramp's middle

    def coloured(panel: dict) -> float:
        """The share of cells drawn visibly away from the ramp's white middle (more than 40 of 255 in a channel)."""
        return float((np.abs(panel_matrix(panel).image.astype(int) - white).max(axis=-1) > 40).mean())

    (off,) = encoding_heatmap(table, TOKENS, "learned", True)["panels"]  # the default: Stretch colours off
    assert (off["legend"]["low"], off["legend"]["high"]) == pytest.approx((-largest, largest))  # the full range
    assert "99 % of the values lie within ±0.068" in off["subtitle"] and "try Stretch colours" in off["subtitle"]
    assert coloured(off) < 0.01  # almost white: what the issue saw (1 cell in 8,000 is coloured)
    (on,) = encoding_heatmap(table, TOKENS, "learned", True, stretch=True)["panels"]
    top = on["legend"]["high"]
    assert on["legend"]["low"] == -top and top == pytest.approx(np.quantile(np.abs(table), 0.99), rel=1e-6)
    assert top < largest / 10  # the 99th percentile, 0.068, is 27 times below the outlier: no longer set by it
    assert "colours stretched: darkest = ±0.068 or more" in on["subtitle"]
    assert coloured(on) > 0.25  # about half the cells now show colour (52 %); a quarter leaves room for rounding
    np.testing.assert_array_equal(panel_matrix(on).values, table)  # stretching changes the colours, not the values


def test_wavelengths_on_a_log_axis_with_the_max_position():
    figure = figure_json(wavelength_figure(wavelengths(64), 64, 100))
    line = figure_trace(figure, "wavelength of the pair")
    np.testing.assert_array_equal(line["x"], np.arange(32))
    np.testing.assert_allclose(line["y"], 2 * math.pi * 10000 ** (np.arange(0, 64, 2) / 64))
    assert line["customdata"][3] == "6, 7"
    for part in ("pair %{x}", "dimensions: %{customdata}", "wavelength (positions): %{y:,.1f}"):
        assert part in line["hovertemplate"]
    rule = figure_trace(figure, "positions shown (100)")  # drawn for scale, across every pair
    assert list(rule["x"]) == [0, 31] and list(rule["y"]) == [100, 100] and rule["line"]["dash"] == "dash"
    layout = figure["layout"]
    assert layout["yaxis"]["type"] == "log"
    assert layout["xaxis"]["title"]["text"] == "pair i (dimensions 2i and 2i+1)"
    assert layout["yaxis"]["title"]["text"] == "wavelength (positions, log scale)"
    assert figure_title(figure).startswith("Wavelength of each pair (d_model = 64)")
    hovers_its_values(figure)
    rope = figure_json(wavelength_figure(wavelengths(16, 100_000.0), 16, 64, "d_head", 100_000.0))
    np.testing.assert_allclose(figure_trace(rope, "wavelength of the pair")["y"], wavelengths(16, 100_000.0))
    assert "Wavelength of each pair (d_head = 16)" in figure_title(rope)
    assert "2π·100000^(2i/d_head)" in figure_title(rope)
    assert rope["layout"]["xaxis"]["dtick"] == 1  # 8 pairs: whole-number ticks, never a pair 0.5
    assert figure_trace(rope, "wavelength of the pair")["customdata"][1] == "2, 3"  # the paper's pairs (2i, 2i+1)
    half = figure_json(wavelength_figure(wavelengths(16), 16, 64, "d_head", layout="half"))
    assert [figure_trace(half, "wavelength of the pair")["customdata"][i] for i in (0, 7)] == ["0, 8", "7, 15"]
    assert half["layout"]["xaxis"]["title"]["text"] == "pair i (dimensions i and i + d_head/2)"


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_similarity_heatmap_and_profile(metric):
    table = sinusoidal(30, 16).numpy()
    positions = every_nth(30)
    sim = similarity(table[positions], metric)
    (panel,) = similarity_heatmap(sim, positions, metric, 6, "sinusoidal")["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values, sim.astype(np.float32))
    top = 1.0 if metric == "cosine" else np.abs(sim).max()
    legend = panel["legend"]
    assert legend["low"] == pytest.approx(-top, rel=1e-6) and legend["high"] == pytest.approx(top, rel=1e-6)
    assert (drawn.x_title, drawn.y_title) == ("position", "position")
    assert panel["hover_titles"] == ["row position", "column position"]  # both axes are "position"
    assert panel["frame"] == [0, 0, 6, 6]  # the typed tokens' positions
    row = similarity_to(table, 5, metric)
    np.testing.assert_allclose(row, sim[5], rtol=1e-12, atol=1e-12)
    profile = figure_json(similarity_profile(row, 5, metric, "the last typed token"))
    (line,) = profile["data"]
    np.testing.assert_array_equal(line["x"], np.arange(30))
    np.testing.assert_array_equal(line["y"], sim[5].astype(np.float32))
    assert f"{metric} with position 5: %{{y:.4f}}" in line["hovertemplate"]
    assert line["mode"] == "lines+markers"  # 30 points: each one shown
    [rule] = profile["layout"]["shapes"]  # the reference position, marked
    assert (rule["x0"], rule["x1"], rule["line"]["color"]) == (5, 5, TYPED_COLOUR)
    assert profile["layout"]["yaxis"]["title"]["text"] == metric
    what = "Cosine similarity" if metric == "cosine" else "Dot product"
    assert figure_title(profile).startswith(f"{what} of position 5 (the last typed token) with each position")
    hovers_its_values(profile)


def markers_cut_at_the_axis_ends(figure: dict) -> list[str]:
    """The traces whose markers sit on an end of a fixed x range and would be drawn half (Plotly clips them there
    unless the trace sets cliponaxis to false)."""
    low, high = figure["layout"]["xaxis"]["range"]
    cut = []
    for trace in figure["data"]:
        if "markers" in trace.get("mode", "") and trace.get("cliponaxis", True):
            x = np.asarray(trace["x"], dtype=np.float64)
            if np.isclose(x, low).any() or np.isclose(x, high).any():
                cut.append(trace["name"])
    return cut


def test_markers_on_the_ends_of_a_whole_number_axis_are_drawn_whole():
    table = sinusoidal(6, 8).numpy()
    figures = {
        "wavelengths": wavelength_figure(wavelengths(16), 16, 64, "d_head"),
        "curves with every position typed": encoding_curves(table, [0, 1], list("abcdef"), "sinusoidal"),
        "similarity profile": similarity_profile(similarity_to(table, 2, "cosine"), 2, "cosine"),
        "offset profile": offset_profile_figure(offset_scores(explorer.ModelConfig(positional="rope"), "a", 8)),
    }
    for what, figure in figures.items():
        drawn = figure_json(figure)
        assert drawn["layout"]["xaxis"]["range"][1] == max(drawn["data"][-1]["x"]), what  # a marker on the end
        assert markers_cut_at_the_axis_ends(drawn) == [], what


def test_rope_angles_are_wrapped_to_degrees_with_radians_on_hover():
    angles = rope_angle_table(20, 8)  # [P, K/2]
    [panel] = rope_angle_heatmap(angles, 3)["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_allclose(drawn.values, np.degrees(np.mod(angles, 2 * np.pi)), rtol=1e-5)
    [radians] = panel["extra"]
    assert (radians["title"], radians["digits"]) == ("angle (rad)", 4)
    np.testing.assert_array_equal(decode_floats(radians["values"], (20, 4)), angles.astype(np.float32))
    assert drawn.values[7, 0] == pytest.approx(math.degrees(7 - 2 * math.pi), rel=1e-5)  # 7 rad, one turn off
    assert drawn.x_title.startswith("pair i") and panel["hover_titles"] == ["position", "pair"]
    assert panel["frame"] == [0, 0, 3, 4]  # the typed tokens' positions, every pair
    legend = panel["legend"]
    assert legend["colours"] == list(TWILIGHT) and TWILIGHT[0] == TWILIGHT[-1]  # cyclic: 0° and 360° look alike
    assert (legend["low"], legend["high"], legend["ticks"]) == (0.0, 360.0, [90.0, 180.0, 270.0])


def diagonal_range(scores: np.ndarray, offset: int) -> tuple[float, float]:
    """Lowest and highest score over the pairs (query m, key m - offset) whose key is allowed."""
    values = [scores[m, m - offset] for m in range(len(scores)) if 0 <= m - offset < len(scores)]
    finite = [v for v in values if np.isfinite(v)]
    return min(finite), max(finite)


def test_offset_scores_show_masked_keys_grey_and_say_what_they_found():
    rope = offset_scores(explorer.ModelConfig(positional="rope", arch="decoder"), "a", 10)
    [panel] = offset_scores_panel(rope)["panels"]
    drawn = panel_matrix(panel)
    assert drawn.masked[0, 1] and not drawn.masked[1, 0]  # causal: key 1 is masked for query 0
    finite = np.isfinite(rope.scores)
    np.testing.assert_array_equal(drawn.values[finite], rope.scores[finite])
    assert "depends on the offset only" in offset_verdict(rope, "rope")
    profile = figure_json(offset_profile_figure(rope))
    mean = figure_trace(profile, "mean score at this offset")
    low, high = figure_trace(profile, "lowest"), figure_trace(profile, "range over the diagonal")
    np.testing.assert_array_equal(mean["x"], np.arange(0, 10))  # causal: offsets below 0 have no score at all
    np.testing.assert_allclose(mean["y"], rope.by_offset[9:].astype(np.float32))
    expected = np.array([diagonal_range(rope.scores, k) for k in range(10)], dtype=np.float32)  # [offsets, 2]
    np.testing.assert_array_equal(np.stack([low["y"], high["y"]], axis=1), expected)
    np.testing.assert_array_equal(np.asarray(mean["customdata"], dtype=np.float32), expected)  # on hover too
    assert high["fill"] == "tonexty" and list(low["x"]) == list(high["x"]) == list(mean["x"])
    assert (expected[:, 1] - expected[:, 0]).max() < 1e-4  # rope: each diagonal constant, up to rounding
    assert profile["layout"]["xaxis"]["range"] == [0, 9]  # the x axis spans the offsets that have scores
    assert profile["layout"]["yaxis"]["title"]["text"] == "score q·k / √d_head"
    for part in ("offset %{x}", "mean score: %{y:.4f}", "lowest: %{customdata[0]:.4f}", "highest: %{customdata[1]"):
        assert part in mean["hovertemplate"]
    hovers_its_values(profile)
    sinusoidal = offset_scores(explorer.ModelConfig(), "a", 10)
    assert "diagonals vary" in offset_verdict(sinusoidal, "sinusoidal")
    both_ways = figure_json(offset_profile_figure(sinusoidal))
    np.testing.assert_array_equal(figure_trace(both_ways, "mean score at this offset")["x"], np.arange(-9, 10))
    assert both_ways["layout"]["xaxis"]["range"] == [-9, 9]
    flat = offset_scores(explorer.ModelConfig(positional="none"), "a", 10)
    assert float(np.ptp(flat.scores)) < 1e-5  # no positions, one token everywhere: every score equal
    verdict = offset_verdict(flat, "none")  # not "depends on the offset", which would teach a position signal
    assert "depends on neither the positions nor the offset" in verdict and "offset only" not in verdict
    no_positions = offset_scores_panel(flat)
    legend = no_positions["panels"][0]["legend"]
    assert legend["high"] > legend["low"]  # all scores equal: still a colour scale that works


def test_permutation_maps_grey_the_masked_cells_as_the_attention_page_does():
    """A padding mask hides the [PAD] key in every run: its column is grey, not a weight of 0.00, in all three."""
    cfg = explorer.ModelConfig(positional="rope", mask="causal+padding")
    demo = permutation_demo(cfg, "where is the station [PAD]")
    drawn = {p["name"]: panel_matrix(p) for p in permutation_figure(demo, 0, 0)["panels"]}
    typed_allowed = explorer.run(cfg, "where is the station [PAD]").first.self_attention.allowed
    shuffled_allowed = explorer.run(cfg, demo.shuffled).first.self_attention.allowed
    np.testing.assert_array_equal(drawn["perm_typed"].masked, ~typed_allowed)
    np.testing.assert_array_equal(drawn["perm_rerun"].masked, ~shuffled_allowed)
    np.testing.assert_array_equal(drawn["perm_moved"].masked, ~typed_allowed[demo.order][:, demo.order])
    assert drawn["perm_typed"].masked[:, 4].all()  # the [PAD] key, hidden from every query


def test_permutation_figure_panels():
    demo = permutation_demo(explorer.ModelConfig(positional="none"), "I love AI you")
    panels = permutation_figure(demo, 1, 2)["panels"]
    drawn = {p["name"]: panel_matrix(p) for p in panels}
    assert list(drawn) == ["perm_typed", "perm_moved", "perm_rerun"]
    np.testing.assert_array_equal(drawn["perm_typed"].values, demo.attention[1, 2])
    np.testing.assert_array_equal(drawn["perm_moved"].values, demo.permuted_attention[1, 2])
    np.testing.assert_array_equal(drawn["perm_rerun"].values, demo.shuffled_attention[1, 2])
    assert drawn["perm_typed"].x_labels == ["I", "love", "AI", "you"]
    assert drawn["perm_rerun"].x_labels == ["you", "AI", "love", "I"]
    assert "② and ③ agree" in permutation_verdict(demo, 1, 2)
    assert [p["legend"] is not None for p in panels] == [False, False, True]  # one weight scale, one legend ...
    assert (panels[2]["legend"]["low"], panels[2]["legend"]["high"]) == (0.0, 1.0)  # ... from 0 to 1
    for shown in drawn.values():  # every map coloured on that one scale
        np.testing.assert_array_equal(shown.image, WEIGHTS.rgb(shown.values))
    moved = permutation_demo(explorer.ModelConfig(), "I love AI you")
    assert "② and ③ differ" in permutation_verdict(moved, 0, 0)


def test_a_long_texts_reordering_maps_are_pale_until_stretched_onto_one_scale():
    words = " ".join(f"w{i % 40}" for i in range(160))  # 160 tokens: each row spread over about 1/160 per key
    demo = permutation_demo(explorer.ModelConfig(positional="none", n_layers=1), words)
    plain, stretched = (permutation_figure(demo, 0, 0, stretch=on)["panels"] for on in (False, True))
    weights = [demo.attention[0, 0], demo.permuted_map(0, 0), demo.shuffled_attention[0, 0]]  # no mask: all shown
    top = float(np.quantile(np.concatenate([w.ravel() for w in weights]), 0.99))
    assert top < 0.2 and plain[2]["legend"]["high"] == 1.0 and "turn on Stretch colours" in plain[0]["subtitle"]
    assert stretched[2]["legend"]["high"] == pytest.approx(top) and "colours stretched" in stretched[0]["subtitle"]
    for before, after in zip(plain, stretched, strict=True):  # the same weights, hover included; more shades drawn
        np.testing.assert_array_equal(panel_matrix(after).values, panel_matrix(before).values)
        shades = [len(np.unique(panel_matrix(p).image.reshape(-1, 3), axis=0)) for p in (before, after)]
        assert shades[1] > 2 * shades[0]


def test_long_rope_tables_are_thinned_and_still_hover_every_cell_drawn():
    angles = rope_angle_table(4096, 128)  # [4096, 64]: thinned to 512 rows
    [panel] = rope_angle_heatmap(angles, 6)["panels"]
    drawn = panel_matrix(panel)
    assert drawn.values.shape == (512, 64) and not np.isnan(drawn.values).any()
    assert "every 8th position drawn" in drawn.title
    np.testing.assert_allclose(drawn.values[1], np.degrees(np.mod(angles[8], 2 * np.pi)), rtol=1e-4)


def test_a_trained_learned_table_is_not_called_untrained():
    table = encoding_table(explorer.build_model(explorer.ModelConfig(positional="learned")), 12)
    for trained in (False, True):
        texts = [
            figure_title(figure_json(encoding_curves(table, [0], TOKENS, "learned", trained))),
            panel_matrix(encoding_heatmap(table, TOKENS, "learned", trained)["panels"][0]).title,
            panel_matrix(
                similarity_heatmap(similarity(table), np.arange(12), "cosine", 6, "learned", trained)["panels"][0]
            ).title,
        ]
        assert all(("untrained" in text) != trained for text in texts), texts


def test_the_notebook_draws_the_pages_curves():
    """positional_figure is the page's chart of the model's own table: the same figure, string for string."""
    cfg = explorer.ModelConfig(positional="learned", d_model=32, n_heads=2)
    model = explorer.build_model(cfg)
    table = encoding_table(model, 20)  # [20, 32]
    notebook = plotly.io.to_json(positional_figure(model, 20, [0, 5], TOKENS))
    assert notebook == plotly.io.to_json(encoding_curves(table, [0, 5], TOKENS, "learned", trained=False))
    plain = figure_json(positional_figure(model, 20))  # no tokens: no red marks; the page's spread of pairs
    assert [t["name"] for t in plain["data"]] == [f"dim {d}" for d in (0, 1, 4, 5, 8, 9, 16, 17)]
    assert not plain["layout"].get("shapes") and "(untrained)" in figure_title(plain)
    trained = explorer.train(cfg, make_task("copy", 6), steps=3).model
    assert "(trained)" in figure_title(figure_json(positional_figure(trained, 20)))
    with pytest.raises(ValueError, match="Dimension 32 does not exist"):
        positional_figure(model, 20, [32])


def test_the_rope_map_says_how_many_typed_tokens_its_frame_holds_and_how_many_lie_beyond():
    """497 typed pieces on a map of 64 positions: its subtitle had said "red frame: the typed tokens" as if the frame
    held them all, where the page's other charts say how many lie beyond."""
    angles = rope_angle_table(64, 8)  # [P, K/2]
    beyond = rope_angle_heatmap(angles, 497)["panels"][0]["subtitle"]
    assert "red frame: the typed tokens' positions 0–63 (433 typed tokens lie beyond)" in beyond
    within = rope_angle_heatmap(angles, 3)["panels"][0]["subtitle"]
    assert "red frame: the 3 typed tokens' positions 0–2" in within and "beyond" not in within
