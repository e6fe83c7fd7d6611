"""Charts of the activations page: they draw the engine's numbers, labelled, and stay light."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.activations import ffn_zero_fraction, layer_statistics, token_norms, value_histogram
from explorer.gradients import gradient_norms, layer_gradient_totals
from explorer.position_analysis import (
    offset_scores,
    similarity_to,
    wavelengths,
)
from explorer.positional import sinusoidal
from explorer.stats import head_grid, head_sparsity
from pictures.activation_charts import (
    CIVIDIS,
    depth_figure,
    gradient_heatmap,
    gradient_totals_figure,
    head_grid_panel,
    histogram_figure,
    layernorm_figure,
    token_norm_heatmap,
    zero_fraction_figure,
)
from pictures.boards import decode_floats
from pictures.positional_charts import (
    CURVE_POINTS,
    encoding_curves,
    offset_profile_figure,
    similarity_profile,
    wavelength_figure,
)
from pictures.style import Ramp
from tests.drawn import figure_json, figure_title, panel_matrix, views

TOKENS = "the cat sat on the mat".split()


def all_layers(spec: dict) -> list[dict]:
    """Every layer of every view of a chart (a view without layers counts as one)."""
    found = []
    for view in views(spec):
        found += view.get("layer") or [view]
    return found


def marks(spec: dict, kind: str) -> list[dict]:
    return [layer for layer in all_layers(spec) if layer.get("mark", {}).get("type") == kind]


def axis_title(layer: dict, channel: str) -> str | None:
    return layer["encoding"][channel]["axis"]["title"]


def tooltip_titles(layer: dict) -> list[str]:
    return [row.get("title", row["field"]) for row in layer["encoding"]["tooltip"]]


def light(spec: dict, most: int = 2 * CURVE_POINTS + 4096) -> None:
    """Marks stay few enough for the browser: rows over all tables drawn (each row is one mark or two)."""
    rows = sum(len(t) for t in spec.get("datasets", {}).values())
    assert rows <= most, rows
    json.dumps({k: v for k, v in spec.items() if k != "datasets"})  # the rest is plain JSON


STATS = ("mean", "std", "rms", "max_abs")


@pytest.fixture(scope="module")
def trace() -> explorer.Trace:
    return explorer.run(explorer.ModelConfig(n_layers=3, norm="pre"), TOKENS)


def depth_values(spec: dict, table: str, series_column: str, series: str, statistic: str) -> pd.DataFrame:
    frame = spec["datasets"][table]
    return frame[(frame[series_column] == series) & (frame["statistic"] == statistic)].sort_values("layer")


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "none"])
def test_what_the_captions_say_of_the_input_row_holds(positional):
    """A repeated word ("the" at 0 and 4) has the same input row exactly when no position is added to it."""
    stack = explorer.run(explorer.ModelConfig(positional=positional), TOKENS).first
    norms = token_norms(stack)
    [panel] = token_norm_heatmap(norms, TOKENS, "encoder", positional)["panels"]
    depth_subtitle = depth_figure(layer_statistics(stack), "encoder", positional)["title"]["subtitle"]
    same_input = bool(np.array_equal(stack.residual[0, 0], stack.residual[0, 4]))
    assert same_input == (positional in ("rope", "none"))
    assert ("a repeated word has the same input row" in panel["subtitle"]) == same_input
    assert ("embedding + position" in "".join(depth_subtitle)) == (not same_input)


def test_depth_figure_draws_each_statistic_per_point(trace):
    stats = layer_statistics(trace.first)
    spec = depth_figure(stats, "encoder", "sinusoidal")
    residual_rms = depth_values(spec, "act_depth", "point", "residual", "rms")
    expected = stats[stats["point"] == "residual"].sort_values("layer")
    np.testing.assert_array_equal(residual_rms["value"], expected["rms"])
    assert residual_rms["layer"].tolist() == [-1, 0, 1, 2]
    panels = views(spec)
    assert [p["title"]["text"] for p in panels] == ["mean", "standard deviation", "RMS", "max |x|"]
    assert [p["transform"][0]["filter"] for p in panels] == [f"datum.statistic == '{s}'" for s in STATS]
    line = panels[0]["layer"][0]
    assert "'input'" in line["encoding"]["x"]["axis"]["labelExpr"]  # block -1 is labelled input
    assert line["encoding"]["color"]["scale"]["domain"] == ["residual", "attention output", "FFN hidden", "FFN output"]
    assert "LayerNorm" not in " ".join(spec["datasets"]["act_depth"]["point"].unique())


def test_layernorm_figure_pairs_input_and_output(trace):
    stats = layer_statistics(trace.first)
    spec = layernorm_figure(stats, "encoder", "pre")
    assert set(spec["datasets"]["act_layernorm"]["series"]) == {
        "self-attention LayerNorm input",
        "self-attention LayerNorm output",
        "feed-forward LayerNorm input",
        "feed-forward LayerNorm output",
    }
    out = depth_values(spec, "act_layernorm", "series", "feed-forward LayerNorm output", "rms")
    np.testing.assert_allclose(out["value"], 1.0, atol=0.01)  # LayerNorm with gain 1 returns RMS about 1
    line = views(spec)[0]["layer"][0]
    dashes = dict(zip(line["encoding"]["strokeDash"]["scale"]["domain"], line["encoding"]["strokeDash"]["scale"]
                      ["range"], strict=True))  # fmt: skip
    assert dashes["feed-forward LayerNorm output"] != dashes["feed-forward LayerNorm input"] == [1, 0]


def test_token_norms_heatmap(trace):
    norms = token_norms(trace.first)
    [panel] = token_norm_heatmap(norms, TOKENS, "encoder", "sinusoidal")["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values, norms.astype(np.float32))
    assert panel["rows"] * panel["cell_h"] >= 24 * 4  # rows tall enough for their labels
    assert drawn.y_labels == ["input", "after block 0", "after block 1", "after block 2"]
    assert drawn.x_labels == ["the", "cat", "sat", "on", "the·4", "mat"]
    assert (drawn.x_title, drawn.y_title) == ("token", "layer")


def test_histogram_counts_every_value_and_calls_out_zeros(trace):
    hidden = trace.first.activations["blocks.0.ffn.hidden"]
    bins = value_histogram(hidden, bins=40)
    spec = histogram_figure(bins, "FFN hidden", "summary", log_count=True)
    frame = spec["datasets"]["act_histogram"]
    assert int(frame["count"].sum()) == hidden.size
    np.testing.assert_array_equal(frame["left"], bins["left"])
    bars = marks(spec, "rect")[0]
    assert bars["encoding"]["y"]["scale"]["type"] == "log" and axis_title(bars, "y") == "count (log scale)"
    assert axis_title(bars, "x") == "activation value"
    assert tooltip_titles(bars) == ["from", "to", "values"]
    (zero_line,) = marks(spec, "rule")  # a line at 0 marks ReLU's exact zeros
    assert zero_line["data"]["values"] == [{"left": 0.0, "zeros": int((hidden == 0).sum())}]
    linear = histogram_figure(bins, "FFN hidden", "summary")
    assert "type" not in marks(linear, "rect")[0]["encoding"]["y"]["scale"]


def test_zero_fraction_and_head_grids(trace):
    zeros = ffn_zero_fraction(trace.first)
    figure = figure_json(zero_fraction_figure(zeros, "encoder", "relu"))
    (bars,) = figure["data"]
    np.testing.assert_array_equal(bars["x"], zeros["layer"])
    np.testing.assert_array_equal(bars["y"], zeros["zero_fraction"])
    assert bars["text"] == [f"{share:.0%}" for share in zeros["zero_fraction"]]  # the share written on each bar
    assert "ReLU" in figure_title(figure)
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


def test_gradient_figures():
    cfg = explorer.ModelConfig(arch="encoder-decoder", n_layers=2, d_model=16, n_heads=2, d_ff=32)
    norms = gradient_norms(explorer.build_model(cfg), "a b c", "x y z")
    totals = layer_gradient_totals(norms)
    spec = gradient_totals_figure(totals, "post")
    frame = spec["datasets"]["act_grad_totals"]
    assert list(dict.fromkeys(frame["series"])) == ["encoder blocks", "decoder blocks"]
    np.testing.assert_array_equal(
        frame[frame["stack"] == "decoder"]["norm"], totals[totals["stack"] == "decoder"]["norm"]
    )
    assert marks(spec, "line")[0]["encoding"]["y"]["scale"]["type"] == "log"
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


def test_only_marks_with_a_tooltip_answer_hover(trace):
    """Streamlit turns tooltips on for every mark: a line would show its first point, an image its PNG."""
    table = sinusoidal(300, 64).numpy()
    stats = layer_statistics(trace.first)
    specs = [
        encoding_curves(table, [0, 1], TOKENS, "sinusoidal"),
        wavelength_figure(wavelengths(64), 64, 300),
        similarity_profile(similarity_to(table, 5, "cosine"), 5, "cosine"),
        offset_profile_figure(offset_scores(explorer.ModelConfig(arch="decoder"), "a", 10)),
        depth_figure(stats, "encoder", "sinusoidal"),
        layernorm_figure(stats, "encoder", "pre"),
        histogram_figure(value_histogram(trace.first.activations["blocks.0.ffn.hidden"]), "FFN hidden", "s"),
    ]
    for spec in specs:
        for layer in all_layers(spec):
            if "mark" in layer:
                assert "tooltip" in layer.get("encoding", {}) or layer["mark"]["tooltip"] is None, layer["mark"]
    curves = specs[0]
    assert marks(curves, "line")[0]["mark"]["tooltip"] is None and marks(curves, "rect")[0]["mark"]["tooltip"] is None
