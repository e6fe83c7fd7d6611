"""Charts of the activations page: they draw the engine's numbers, labelled, with a hover label on every value."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

import explorer
from explorer.analysis.activations import ffn_zero_fraction, layer_statistics, token_norms, value_histogram
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.analysis.stats import head_grid, head_sparsity
from explorer.numbers import readable
from pictures import notebook_figures
from pictures.activation_boards import CIVIDIS, gradient_heatmap, head_grid_panel
from pictures.activation_charts import (
    NORM_POINT,
    STAT_TITLES,
    depth_figure,
    gradient_totals_figure,
    norm_figure,
    token_norm_heatmap,
)
from pictures.activation_histograms import ZERO_COLOUR, histogram_figure, zero_fraction_figure
from pictures.boards import decode_floats
from pictures.log_axes import LOG_SPAN, panel_scale
from pictures.style import VIRIDIS, Ramp
from tests.drawn import figure_json, figure_title, figure_trace, panel_matrix

TOKENS = "the cat sat on the mat".split()
STATS = ("mean", "std", "rms", "max_abs")
PANEL_AXES = ("y", "y2", "y3", "y4")  # make_subplots numbers the 2 x 2 panels row by row: mean, std, rms, max |x|


@pytest.fixture(scope="module")
def trace() -> explorer.Trace:
    return explorer.run(explorer.ModelConfig(n_layers=3, norm="pre"), TOKENS)


def panel_lines(figure: dict, y_axis: str) -> dict[str, dict]:
    """The lines of one panel of a figure, by name."""
    return {line["name"]: line for line in figure["data"] if line.get("yaxis", "y") == y_axis}


def annotation_texts(figure: dict) -> list[str]:
    return [note["text"] for note in figure["layout"].get("annotations", [])]


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "none"])
def test_what_the_captions_say_of_the_input_row_holds(positional):
    """A repeated word ("the" at 0 and 4) has the same input row exactly when no position is added to it."""
    stack = explorer.run(explorer.ModelConfig(positional=positional), TOKENS).first
    norms = token_norms(stack)
    [panel] = token_norm_heatmap(norms, TOKENS, "encoder", positional)["panels"]
    depth_title = figure_title(figure_json(depth_figure(layer_statistics(stack), "encoder", positional)))
    same_input = bool(np.array_equal(stack.residual[0, 0], stack.residual[0, 4]))
    assert same_input == (positional in ("rope", "none"))
    assert ("a repeated word has the same input row" in panel["subtitle"]) == same_input
    assert ("input = embedding + position" in depth_title) == (not same_input)


def test_depth_figure_draws_each_statistic_per_point(trace):
    stats = layer_statistics(trace.first)
    figure = figure_json(depth_figure(stats, "encoder", "sinusoidal"))
    points = ["residual", "attention output", "FFN hidden", "FFN output"]  # no LayerNorm: it has a figure of its own
    for statistic, y_axis in zip(STATS, PANEL_AXES, strict=True):
        lines = panel_lines(figure, y_axis)
        assert list(lines) == points
        for point, line in lines.items():
            expected = stats[stats["point"] == point].sort_values("layer")
            np.testing.assert_array_equal(line["x"], expected["layer"])
            np.testing.assert_array_equal(line["y"], expected[statistic])
            assert f"{STAT_TITLES[statistic]} %{{y:.4g}}" in line["hovertemplate"]
            assert line["showlegend"] == (y_axis == "y")  # one legend entry per point, not four
    residual = panel_lines(figure, "y3")["residual"]
    np.testing.assert_array_equal(residual["x"], [-1, 0, 1, 2])
    assert residual["customdata"] == ["input", "0", "1", "2"]  # hover: block -1 is the input
    assert residual["line"]["width"] > panel_lines(figure, "y3")["FFN output"]["line"]["width"]  # residual thicker
    assert annotation_texts(figure) == ["mean", "standard deviation", "RMS", "max |x|"]  # the panels' titles
    layout = figure["layout"]
    for x_axis in ("xaxis", "xaxis2", "xaxis3", "xaxis4"):
        assert layout[x_axis]["tickvals"][:2] == [-1, 0] and layout[x_axis]["ticktext"][:2] == ["input", "0"]
    assert [layout[x]["title"]["text"] for x in ("xaxis3", "xaxis4")] == ["block", "block"]
    assert "Activation statistics over depth (encoder stack)" in figure_title(figure)


def test_depth_figure_labels_few_enough_blocks_to_stay_level_in_a_narrow_panel():
    stats = layer_statistics(explorer.run(explorer.ModelConfig(n_layers=24, d_model=16, n_heads=2), TOKENS).first)
    axis = figure_json(depth_figure(stats, "encoder", "sinusoidal"))["layout"]["xaxis3"]
    assert len(axis["tickvals"]) <= 8 and axis["tickvals"][0] == -1 and axis["ticktext"][0] == "input"
    assert axis["range"][0] < -1 and axis["range"][1] > 23  # every block inside the frame


def test_norm_figure_pairs_input_and_output_and_names_the_norm(trace):
    stats = layer_statistics(trace.first)
    figure = figure_json(norm_figure(stats, "encoder", "pre"))
    names = [
        "self-attention LayerNorm input",
        "self-attention LayerNorm output",
        "feed-forward LayerNorm input",
        "feed-forward LayerNorm output",
    ]
    for statistic, y_axis in (("rms", "y"), ("max_abs", "y2")):
        lines = panel_lines(figure, y_axis)
        assert list(lines) == names
        for point, name in zip(["attn LayerNorm in", "attn LayerNorm out", "ffn LayerNorm in", "ffn LayerNorm out"],
                               names, strict=True):  # fmt: skip
            expected = stats[stats["point"] == point]
            np.testing.assert_array_equal(lines[name]["x"], expected["layer"])
            np.testing.assert_array_equal(lines[name]["y"], expected[statistic])
            assert f"{STAT_TITLES[statistic]} %{{y:.4g}}" in lines[name]["hovertemplate"]
    lines = panel_lines(figure, "y")
    np.testing.assert_allclose(lines["feed-forward LayerNorm output"]["y"], 1.0, atol=0.01)  # gain 1: RMS about 1
    for sub in ("self-attention", "feed-forward"):
        into, out = lines[f"{sub} LayerNorm input"], lines[f"{sub} LayerNorm output"]
        assert into["line"]["color"] == out["line"]["color"]  # one colour per sub-layer
        assert (into["line"]["dash"], into["marker"]["symbol"]) == ("solid", "circle")
        assert (out["line"]["dash"], out["marker"]["symbol"]) == ("dash", "diamond")
    assert (
        lines["self-attention LayerNorm input"]["line"]["color"]
        != lines["feed-forward LayerNorm input"]["line"]["color"]
    )
    layout = figure["layout"]
    assert annotation_texts(figure) == ["RMS", "max |x|"]
    assert layout["yaxis"]["rangemode"] == layout["yaxis2"]["rangemode"] == "tozero"
    assert layout["xaxis"]["title"]["text"] == "block"
    assert "input (solid, circles)" in figure_title(figure) and "output (dashed, diamonds)" in figure_title(figure)
    assert figure_title(figure).startswith("What each LayerNorm receives and returns (encoder stack, pre-norm)")
    assert "its gain is 1 and its bias 0" in figure_title(figure)
    rms = figure_json(norm_figure(stats, "decoder", "pre", "RMSNorm"))  # a Llama's norms, as anatomy.norm_name says
    assert [t["name"] for t in rms["data"][:2]] == ["self-attention RMSNorm input", "self-attention RMSNorm output"]
    assert figure_title(rms).startswith("What each RMSNorm receives and returns (decoder stack, pre-norm)")
    assert "a trained RMSNorm" in figure_title(rms) and "bias" not in figure_title(rms)  # an RMSNorm has no bias
    assert "LayerNorm" not in json.dumps(rms, default=str)


def test_token_norms_heatmap(trace):
    norms = token_norms(trace.first)
    [panel] = token_norm_heatmap(norms, TOKENS, "encoder", "sinusoidal")["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values, norms.astype(np.float32))
    assert panel["rows"] * panel["cell_h"] >= 24 * 4  # rows tall enough for their labels
    assert drawn.y_labels == ["input", "after block 0", "after block 1", "after block 2"]
    assert drawn.x_labels == ["the", "cat", "sat", "on", "the·4", "mat"]
    assert (drawn.x_title, drawn.y_title) == ("token", "layer")


def test_stretched_token_norms_leave_a_massive_token_out_of_the_colour_range():
    rng = np.random.default_rng(0)
    norms = rng.uniform(2.0, 60.0, size=(31, 512))  # [L + 1, T]: SmolLM2's 30 blocks on 512 pieces
    norms[12:, 0] = 26_900.0  # one massive token after block 11, as SmolLM2's first piece: 19 of 15,872 values
    tokens = [f"t{i}" for i in range(512)]
    plain, stretched = (
        panel_matrix(token_norm_heatmap(norms, tokens, "decoder", "rope", stretch=on)["panels"][0]) for on in (0, 1)
    )
    top = float(np.quantile(norms, 0.99))  # the massive cells are 0.12 % of the values: the top 1 % is ordinary
    assert top < 60.0
    assert plain.view["legend"]["high"] == pytest.approx(26_900.0) and "try Stretch colours" in plain.title
    assert "the largest (26,900)" in plain.title  # a number as a student reads it, never 2.69e+04
    assert stretched.view["legend"]["high"] == pytest.approx(top) and "colours stretched" in stretched.title
    for drawn in (plain, stretched):  # hover keeps the true values either way
        np.testing.assert_array_equal(drawn.values, norms.astype(np.float32))
    ordinary = np.s_[:12]  # [rows before the massive token appears, every token]
    shades = [len(np.unique(d.image[ordinary].reshape(-1, 3), axis=0)) for d in (plain, stretched)]
    assert shades[0] <= 4 and shades[1] > 100  # all one dark colour on the full range; the whole ramp stretched
    brightest = Ramp(VIRIDIS, 0.0, 1.0).rgb(np.array([1.0]))[0]  # the ramp's last colour
    assert (stretched.image[12:, 0] == brightest).all()  # the massive cells: brightest, as anything over the top


def test_histogram_counts_every_value_and_calls_out_zeros(trace):
    hidden = trace.first.activations["blocks.0.ffn.hidden"]  # [T, d_ff] after ReLU: many exact zeros
    zeros = int((hidden == 0).sum())
    bins = value_histogram(hidden, bins=40)
    figure = figure_json(histogram_figure(bins, "FFN hidden", "summary", log_count=True))
    bars = figure_trace(figure, "values")
    filled = bins[bins["count"] > 0]  # a log axis has no place for 0: the empty bins are left out
    np.testing.assert_array_equal(bars["y"], filled["count"])
    assert int(bars["y"].sum()) == hidden.size
    np.testing.assert_array_equal(bars["customdata"], filled[["left", "right"]])  # hover: each bin's edges
    np.testing.assert_allclose(bars["x"], (filled["left"] + filled["right"]) / 2)
    np.testing.assert_allclose(bars["width"], filled["right"] - filled["left"])  # the bars tile the values
    assert "values: %{y:,}" in bars["hovertemplate"] and "customdata[0]" in bars["hovertemplate"]
    said = [text for text in bars["text"] if text]  # the bin holding 0 also says how many are exactly 0
    assert said == [f"<br>of which exactly 0: {zeros:,}"] and bars["textposition"] == "none"
    layout = figure["layout"]
    assert layout["yaxis"]["type"] == "log" and layout["yaxis"]["title"]["text"] == "count (log scale)"
    assert layout["yaxis"]["range"][0] < math.log10(1) < layout["yaxis"]["range"][1]  # a bin of 1 value shows
    assert layout["xaxis"]["title"]["text"] == "activation value"
    line = figure_trace(figure, "exactly 0")  # a red dotted line at 0 ...
    assert set(line["x"]) == {0.0} and (line["line"]["color"], line["line"]["dash"]) == (ZERO_COLOUR, "dot")
    assert f"values exactly 0: {zeros:,}" in line["hovertemplate"]  # ... that says how many on hover
    assert layout[line["yaxis"].replace("y", "yaxis")]["range"] == [0, 1]  # an axis of its own: the plot's height
    assert (line["y"].min(), line["y"].max()) == (0, 1)
    assert f"{zeros:,} exactly 0" in annotation_texts(figure)
    assert figure_title(figure) == "Distribution of values: FFN hidden summary"


def test_histogram_on_a_linear_axis_keeps_every_bin_and_has_no_line_without_zeros(trace):
    residual = trace.first.residual[1]  # [T, D]: no value is exactly 0
    bins = value_histogram(residual)
    figure = figure_json(histogram_figure(bins, "residual", "summary"))
    (bars,) = figure["data"]  # no line at 0: nothing is exactly 0
    np.testing.assert_array_equal(bars["y"], bins["count"])
    assert not any(bars["text"])
    layout = figure["layout"]
    assert layout["yaxis"].get("type") != "log" and layout["yaxis"]["title"]["text"] == "count"
    assert layout["yaxis"]["range"][0] == 0


def test_zero_fraction_and_head_grids(trace):
    zeros = ffn_zero_fraction(trace.first)
    figure = figure_json(zero_fraction_figure(zeros, "encoder", "relu"))
    (bars,) = figure["data"]
    np.testing.assert_array_equal(bars["x"], zeros["layer"])
    np.testing.assert_array_equal(bars["y"], zeros["zero_fraction"])
    assert bars["text"] == [f"{share:.1%}" for share in zeros["zero_fraction"]]  # the share written on each bar
    assert "ReLU" in figure_title(figure)
    for gated in ("swiglu", "silu"):  # a Llama's gated unit, as its config and as its files name it: not GELU's note
        said = figure_title(figure_json(zero_fraction_figure(zeros, "decoder", gated)))
        assert "SwiGLU" in said and "GELU" not in said and "ReLU" not in said
    assert figure["layout"]["xaxis"]["title"]["text"] == "block"
    assert figure["layout"]["yaxis"]["title"]["text"] == "share of units × tokens"
    grid = head_grid(head_sparsity(trace.first.self_attention), "sparsity")
    heads = head_grid_panel(grid, "Sparsity", "sub", "sparsity", 0.0, 1.0, colours=CIVIDIS, name="act_sparsity")
    drawn = panel_matrix(heads)
    np.testing.assert_array_equal(drawn.values, grid.astype(np.float32))
    assert drawn.x_labels == ["H0", "H1", "H2", "H3"] and drawn.y_labels == ["L0", "L1", "L2"]
    assert (drawn.x_title, drawn.y_title) == ("head", "layer")
    np.testing.assert_array_equal(drawn.image, Ramp(CIVIDIS, 0.0, 1.0).rgb(grid.astype(np.float32)))  # CIVIDIS, 0-1
    missing = grid.copy()
    missing[1, 2] = np.nan  # a head whose queries all had no allowed key
    drawn = panel_matrix(head_grid_panel(missing, "Sparsity", "sub", "sparsity", 0.0, 1.0))
    assert drawn.masked[1, 2] and drawn.masked.sum() == 1


@pytest.mark.parametrize(("n_layers", "n_heads"), [(30, 9), (6, 12), (2, 4)])  # SmolLM2, MiniLM, the default
def test_a_head_grid_labels_only_what_it_has_room_for_and_a_deep_one_grows_down(n_layers, n_heads):
    grid = np.arange(n_layers * n_heads, dtype=np.float64).reshape(n_layers, n_heads) / (n_layers * n_heads)
    panel = head_grid_panel(grid, "Entropy", "sub", "nats", 0.0, 1.0)
    width, height = panel["cols"] * panel["cell_px"], panel["rows"] * panel["cell_h"]
    assert panel["cell_px"] == panel["cell_h"] and width <= 150  # square cells, three grids to a row
    assert panel["cell_px"] >= 10  # SmolLM2's 30 layers: cells of 10 px, where 150 px down gave 5
    for ticks, cell in ((panel["y_ticks"], panel["cell_h"]), (panel["x_ticks"], panel["cell_px"])):
        assert ticks[0] == 0 and min(np.diff(ticks)) * cell >= 14  # labels 14 px high never overlap
    assert height <= 300


def test_gradient_figures():
    cfg = explorer.ModelConfig(arch="encoder-decoder", n_layers=2, d_model=16, n_heads=2, d_ff=32)
    norms = gradient_norms(explorer.build_model(cfg), "a b c", "x y z")
    totals = layer_gradient_totals(norms)
    figure = figure_json(gradient_totals_figure(totals, "post"))
    assert [line["name"] for line in figure["data"]] == ["encoder blocks", "decoder blocks"]
    for stack in ("encoder", "decoder"):
        line = figure_trace(figure, f"{stack} blocks")
        np.testing.assert_array_equal(line["x"], totals[totals["stack"] == stack]["layer"])
        np.testing.assert_array_equal(line["y"], totals[totals["stack"] == stack]["norm"])
        assert "gradient norm %{y:.4g}" in line["hovertemplate"]
    layout = figure["layout"]
    assert layout["yaxis"]["type"] == "log" and layout["yaxis"]["title"]["text"] == "gradient norm (log scale)"
    assert layout["xaxis"]["title"]["text"] == "block" and layout["xaxis"]["tickvals"] == [0, 1]
    assert "Gradient norm of each block's parameters (post-norm)" in figure_title(figure)
    [panel] = gradient_heatmap(norms, "decoder")["panels"]
    drawn = panel_matrix(panel)
    decoder = norms[norms["stack"] == "decoder"]
    assert drawn.y_labels == list(dict.fromkeys(decoder["parameter"]))
    assert "multihead_attn.in_proj_weight" in drawn.y_labels
    assert panel["label_chars"] >= len("multihead_attn.out_proj.weight")  # parameter names stay whole on the axis
    value = decoder.query("layer == 1 and parameter == 'linear2.weight'")["norm"].item()
    row = drawn.y_labels.index("linear2.weight")
    assert drawn.values[row, 1] == pytest.approx(math.log10(value), rel=1e-5)  # colour: log10 of the norm
    [norm] = panel["extra"]
    assert (norm["title"], norm["digits"]) == ("gradient norm", None)  # hover: the norm itself, 4 significant digits
    shown = decode_floats(norm["values"], drawn.values.shape)[row, 1]
    assert shown == pytest.approx(value, rel=1e-6)
    assert (drawn.x_title, drawn.y_title) == ("block", "parameter")
    legend = panel["legend"]
    assert all(t == int(t) and legend["low"] < t < legend["high"] for t in legend["ticks"])  # whole decades


def test_gradient_heatmap_survives_a_zero_gradient():
    norms = pd.DataFrame(
        {"stack": "encoder", "layer": pd.array([0, 0, 1, 1], dtype="Int64"), "parameter": ["a", "b"] * 2}
    ).assign(norm=[0.0, 0.5, 2.0, 0.0])
    drawn = panel_matrix(gradient_heatmap(norms, "encoder")["panels"][0])
    assert drawn.masked[0, 0] and drawn.masked[1, 1] and not drawn.masked[1, 0]  # a zero has no logarithm: grey
    assert drawn.values[1, 0] == pytest.approx(math.log10(0.5))


@pytest.mark.parametrize(("norms", "dtick"), [([0.12, 0.5, 1.3, 0.0], "D2"), ([0.001, 0.5, 60.0, 0.0], None)])
def test_the_log_axis_labels_1_2_5_of_each_decade_only_within_two_decades(norms, dtick):
    """SmolLM2's blocks (0.12 to 1.3) had every digit from 0.1 to 1 labelled, the top ones running into each other;
    across more decades Plotly labels the powers of ten, which stay apart."""
    totals = pd.DataFrame({"stack": "decoder", "layer": [0, 1, 2, 3], "norm": norms})
    assert figure_json(gradient_totals_figure(totals, "pre"))["layout"]["yaxis"].get("dtick") == dtick


def test_a_zero_gradient_norm_is_left_out_of_the_log_axis():
    totals = pd.DataFrame({"stack": "encoder", "layer": [0, 1, 2], "norm": [0.5, 0.0, 2.0]})
    (line,) = figure_json(gradient_totals_figure(totals, "pre"))["data"]
    np.testing.assert_array_equal(line["x"], [0, 2])
    np.testing.assert_array_equal(line["y"], [0.5, 2.0])


def test_every_trace_with_values_has_its_own_hover_label(trace):
    """Each trace names what it shows in its hover label, never Plotly's default "(x, y) trace 3"."""
    stats = layer_statistics(trace.first)
    norms = gradient_norms(explorer.build_model(explorer.ModelConfig()), TOKENS)
    figures = [
        depth_figure(stats, "encoder", "sinusoidal"),
        norm_figure(stats, "encoder", "pre"),
        histogram_figure(value_histogram(trace.first.activations["blocks.0.ffn.hidden"]), "FFN hidden", "s"),
        histogram_figure(value_histogram(trace.first.residual[0]), "residual", "s", log_count=True),
        zero_fraction_figure(ffn_zero_fraction(trace.first), "encoder", "relu"),
        gradient_totals_figure(layer_gradient_totals(norms), "post"),
    ]
    for figure in map(figure_json, figures):
        for drawn in figure["data"]:
            assert drawn["hovertemplate"].endswith("<extra></extra>"), (figure_title(figure), drawn["name"])
            assert "%{y" in drawn["hovertemplate"] or drawn["name"] == "exactly 0"  # the line at 0 says its count


def test_the_notebook_draws_the_pages_depth_and_gradient_figures():
    """explorer.depth_figure and explorer.gradient_figure (and so the page's HTML download) are the page's charts."""
    cfg = explorer.ModelConfig(arch="encoder-decoder", norm="pre", positional="rope")
    run = explorer.run(cfg, "a b c d", target="x y z")
    page = depth_figure(layer_statistics(run.stacks[1]), "decoder", "rope")
    assert notebook_figures.depth_figure(run, 1).to_json() == page.to_json()
    model = explorer.build_model(cfg)
    totals = layer_gradient_totals(gradient_norms(model, "a b c d", "x y z"))
    drawn = notebook_figures.gradient_figure(model, "a b c d", "x y z")
    assert drawn.to_json() == gradient_totals_figure(totals, "pre", notebook_figures.GRADIENT_OBJECTIVE).to_json()
    assert [line.name for line in drawn.data] == ["encoder blocks", "decoder blocks"]


def test_depth_figure_puts_a_panel_spanning_orders_of_magnitude_on_a_log_axis(trace):
    """SmolLM2's residual RMS runs from 0.1 to 340: on a linear axis from 0 its first blocks lay flat at zero. A panel
    whose values span more than LOG_SPAN goes logarithmic and the subtitle says which and by how much; the mean, with
    values below 0, and panels within LOG_SPAN stay linear."""
    stats = layer_statistics(trace.first)
    linear = figure_json(depth_figure(stats, "encoder", "sinusoidal"))["layout"]
    assert [linear[f"yaxis{n}"].get("type") for n in ("", "2", "3", "4")] == [None] * 4  # a random model's span
    assert "log scale" not in figure_title({"layout": linear})
    wide = stats.copy()
    last = wide["layer"] == wide["layer"].max()
    for stat in ("rms", "mean"):  # the last block's values 1,000 times the others', as a massive activation makes them
        wide.loc[last, stat] *= 1000
    drawn = figure_json(depth_figure(wide, "encoder", "sinusoidal"))["layout"]
    assert drawn["yaxis3"]["type"] == "log"  # RMS
    assert [drawn[f"yaxis{n}"].get("type") for n in ("", "2", "4")] == [None] * 3  # mean has values < 0; the rest fit
    rms = wide.loc[~wide["point"].str.contains("LayerNorm"), "rms"]
    title = figure_title({"layout": drawn})
    assert f"over {LOG_SPAN:.0f} times the smallest: RMS (×{readable(rms.max() / rms.min())})" in title


def test_a_bert_checkpoints_input_row_is_said_normalised(minilm_model):
    stats = layer_statistics(explorer.run(minilm_model, "the cat sat").first)
    title = figure_title(figure_json(depth_figure(stats, "encoder", "learned", "bert")))
    assert "input = embedding + position + token type, then the embedding LayerNorm" in title
    assert minilm_model.embed_norm is not None and minilm_model.token_type is not None  # what Transformer.embed adds


def test_the_mean_panel_stays_linear_even_when_rounding_spans_orders_of_magnitude():
    """A post-norm stream's mean is 0 up to float32 rounding (6e-9 with this seed), which against the rest spanned
    x1e8 and put the mean panel on a log axis of noise. The rounding's sign is the machine's (one CPU gave 9e-10 and
    -4e-9, another two positive values): taken here as its size, which every machine's float32 gives."""
    stats = layer_statistics(explorer.run(explorer.ModelConfig(seed=4, n_layers=2), "the cat sat").first)
    stats["mean"] = stats["mean"].abs()  # [rows]: rounding of either sign, the same orders of magnitude
    drawn = stats[~stats["point"].str.contains(NORM_POINT)]  # the points the chart draws
    assert panel_scale(drawn["mean"].to_numpy(dtype=np.float64)).log  # auto would have gone logarithmic
    figure = figure_json(depth_figure(stats, "encoder", "sinusoidal"))
    assert figure["layout"]["yaxis"].get("type") != "log" and "mean (×" not in figure_title(figure)


def test_gelus_few_exact_zeros_are_labelled_as_the_hover_gives_them():
    zeros = pd.DataFrame({"layer": [0, 1], "zero_fraction": [0.0034, 0.0]})  # MiniLM's block 1: 68 of 19,968
    figure = figure_json(zero_fraction_figure(zeros, "encoder", "gelu"))
    assert list(figure["data"][0]["text"]) == ["0.3%", "0.0%"]  # was "0%": one decimal, as the page writes shares
    assert "below about −5.5" in figure_title(figure) and "stays at 0%" not in figure_title(figure)


def test_the_gelu_note_names_the_rounding_that_makes_its_zeros_not_an_underflow():
    """Was "below about −5.5, where x·Φ(x) underflows to 0": x·Φ(x) is −1.0e-7 at −5.5, some 1e31 times float32's
    smallest positive number; the zero comes from erf(x/√2) rounding to −1, so 1 + erf is 0."""
    x = torch.tensor([-5.6, -6.0, -8.0])
    assert (torch.nn.functional.gelu(x) == 0).all()  # [3] exact zeros in float32
    exact = x.double() * 0.5 * torch.special.erfc(-x.double() / math.sqrt(2))  # [3] x·Φ(x), erfc keeps the tail
    assert (exact.abs() > torch.finfo(torch.float32).tiny).all()  # representable: no underflow
    assert (torch.erf(x / math.sqrt(2)) == -1).all()  # [3] the rounding that makes them 0
    note = figure_title(
        figure_json(zero_fraction_figure(pd.DataFrame({"layer": [0], "zero_fraction": [0.0]}), "e", "gelu"))
    )
    assert "underflow" not in note and "erf(x/√2) rounds to −1" in note


def test_the_depth_subtitle_says_pad_is_included_only_where_there_is_pad():
    """The statistics are over every token, [PAD] too: the subtitle had said '(padding included)' on every text,
    SmolLM2's and an unpadded one's alike."""
    model = explorer.build_model(explorer.ModelConfig(mask="padding"))
    plain = figure_title(figure_json(notebook_figures.depth_figure(explorer.run(model, "the cat sat"))))
    padded = figure_title(figure_json(notebook_figures.depth_figure(explorer.run(model, "the cat [PAD]"))))
    assert "over all tokens and units" in plain and "PAD" not in plain and "padding" not in plain
    assert "over all tokens ([PAD] included) and units" in padded


def test_thirty_blocks_of_no_zero_write_it_once_and_many_bars_stand_their_labels_upright():
    """SmolLM2's 30 blocks hold no exact zero: 30 labels of "0.0%" ran into each other at 1024 px."""
    none = figure_json(
        zero_fraction_figure(pd.DataFrame({"layer": range(30), "zero_fraction": 0.0}), "decoder", "silu")
    )
    [bars] = none["data"]
    assert "text" not in bars and "no unit is exactly 0 in any of the 30 blocks" in figure_title(none)
    some = np.linspace(0.0, 0.004, 30)  # [30] shares, one 0
    many = figure_json(zero_fraction_figure(pd.DataFrame({"layer": range(30), "zero_fraction": some}), "decoder", "x"))
    assert len(many["data"][0]["text"]) == 30 and many["data"][0]["textangle"] == -90
    few = figure_json(zero_fraction_figure(pd.DataFrame({"layer": range(6), "zero_fraction": some[:6]}), "enc", "gelu"))
    assert few["data"][0]["textangle"] == 0 and "in any of" not in figure_title(few)


def test_thirty_blocks_of_gradients_stay_narrow_enough_for_their_names_on_a_projector():
    """SmolLM2's 30 blocks at 21 px a column made the board about 870 px wide with its names and legend; a 1024 px
    window drew it at 0.6, its parameter names at 7 px. The map takes at most 14 px a block now (about 650 px in all),
    and a short stack keeps its 240 px."""
    parameters = ["self_attn.in_proj_weight", "linear1.weight"]
    rows = [(layer, p) for layer in range(30) for p in parameters]
    norms = pd.DataFrame({"stack": "decoder", "layer": pd.array([r[0] for r in rows], dtype="Int64"),
                          "parameter": [r[1] for r in rows], "norm": 1.0})  # fmt: skip
    [panel] = gradient_heatmap(norms, "decoder")["panels"]
    assert panel["cols"] * panel["cell_px"] <= 30 * 14
    [short] = gradient_heatmap(norms[norms["layer"] < 2], "decoder")["panels"]
    assert short["cols"] * short["cell_px"] == 240


def labelled_log_ticks(dtick: str, low: float, high: float) -> list[float]:
    """The values a Plotly log axis labels between low and high for dtick "D1" (every digit of each decade) or "D2"
    (1, 2 and 5), as Chromium drew them."""
    digits = {"D1": range(1, 10), "D2": (1, 2, 5)}[dtick]
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    return [d * 10.0**k for k in decades for d in digits if low <= d * 10.0**k <= high]


@pytest.mark.parametrize(
    "norms",
    [[2.2, 3.1, 4.9], [0.12, 0.5, 1.3], [0.6, 0.9, 5.5], [1.5, 1.9], [0.001, 0.5, 60.0]],
    ids=["within 2-5", "SmolLM2", "one decade", "within 1-2", "five decades"],
)
def test_a_log_axis_labels_at_least_two_values_within_its_data(norms):
    """An encoder-decoder's gradient norms, 2.2 to 4.9, had one label ("5": only 1, 2 and 5 of each decade), so no
    value of the encoder's line could be read off the axis."""
    totals = pd.DataFrame({"stack": "decoder", "layer": list(range(len(norms))), "norm": norms})
    dtick = figure_json(gradient_totals_figure(totals, "pre"))["layout"]["yaxis"].get("dtick")
    if dtick is None:  # Plotly's own: within a decade it labels steps such as 1.5, 1.6 (seen in Chromium)
        assert max(norms) < 10 * min(norms) or max(norms) >= 100 * min(norms)
    else:
        assert len(labelled_log_ticks(dtick, min(norms), max(norms))) >= 2, dtick
