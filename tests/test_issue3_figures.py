"""Figures of the positional and activations pages: they draw the engine's numbers, labelled, and stay light."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.activation_figures import (
    depth_figure,
    gradient_heatmap,
    gradient_totals_figure,
    head_grid_figure,
    histogram_figure,
    layernorm_figure,
    token_norm_heatmap,
    zero_fraction_figure,
)
from explorer.activations import ffn_zero_fraction, layer_statistics, token_norms, value_histogram
from explorer.gradients import gradient_norms, layer_gradient_totals
from explorer.position_analysis import (
    encoding_table,
    offset_scores,
    permutation_demo,
    rope_angle_table,
    similarity,
    similarity_to,
    wavelengths,
)
from explorer.positional import sinusoidal
from explorer.positional_figures import (
    MAX_SIDE,
    encoding_curves,
    encoding_heatmap,
    every_nth,
    ordinal,
    pair_name,
    permutation_figure,
    rope_angle_heatmap,
    similarity_heatmap,
    similarity_profile,
    wavelength_figure,
)
from explorer.positional_figures import offset_scores_figure as offset_figure
from explorer.stats import head_grid, head_sparsity

TOKENS = "the cat sat on the mat".split()


def axis_titles(fig) -> tuple[str, str]:
    return fig.layout.xaxis.title.text, fig.layout.yaxis.title.text


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


def test_encoding_curves_draw_the_table_and_mark_the_typed_positions():
    table = sinusoidal(64, 16).numpy()
    fig = encoding_curves(table, [0, 1, 6], ["<b>", "cat"], "sinusoidal")
    lines = [t for t in fig.data if t.mode == "lines"]
    marks = [t for t in fig.data if t.mode == "markers"]
    assert [t.name for t in lines] == ["dim 0 (sin of pair 0)", "dim 1 (cos of pair 0)", "dim 6 (sin of pair 3)"]
    np.testing.assert_array_equal(lines[2].y, table[:, 6])
    np.testing.assert_allclose(lines[0].y, np.sin(np.arange(64)), atol=1e-6)  # pair 0: sin(p)
    assert list(marks[0].x) == [0, 1] and list(marks[0].customdata) == ["&lt;b&gt;", "cat"]  # escaped tokens
    assert lines[0].line.color == lines[1].line.color and lines[1].line.dash == "dot"  # a pair shares a colour
    assert axis_titles(fig) == ("position", "value added to that dimension")
    assert "typed tokens" in fig.layout.title.text


def test_encoding_heatmap_is_the_table_and_thins_long_tables():
    model = explorer.build_model(explorer.ModelConfig(d_model=32, n_heads=2, positional="learned"))
    table = encoding_table(model, 40)
    fig = encoding_heatmap(table, TOKENS, "learned")
    np.testing.assert_array_equal(fig.data[0].z, table)
    assert "untrained" in fig.layout.title.text.lower()
    assert axis_titles(fig) == ("dimension", "position")
    outline = fig.layout.shapes[0]
    assert (outline.y0, outline.y1) == (-0.5, 5.5)  # the six typed positions
    big = encoding_heatmap(sinusoidal(4096, 16).numpy(), TOKENS, "sinusoidal")
    assert np.asarray(big.data[0].z).shape == (512, 16)
    assert list(big.data[0].y[:2]) == [0, 8]
    assert "every 8th position drawn (512 of 4,096)" in big.layout.title.text
    assert (big.data[0].zmin, big.data[0].zmax) == (-1.0, 1.0)


def test_wavelengths_on_a_log_axis_with_the_max_position():
    fig = wavelength_figure(wavelengths(64), 64, 100)
    np.testing.assert_allclose(fig.data[0].y, 2 * math.pi * 10000 ** (np.arange(0, 64, 2) / 64))
    assert fig.layout.yaxis.type == "log"
    assert list(fig.data[1].y) == [100, 100] and "100" in fig.data[1].name
    assert fig.data[0].customdata[3] == "6, 7"
    assert axis_titles(fig) == ("pair i (dimensions 2i and 2i+1)", "wavelength (positions, log scale)")


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_similarity_heatmap_and_profile(metric):
    table = sinusoidal(30, 16).numpy()
    positions = every_nth(30)
    sim = similarity(table[positions], metric)
    fig = similarity_heatmap(sim, positions, metric, 6, "sinusoidal")
    np.testing.assert_allclose(fig.data[0].z, sim.astype(np.float32))
    if metric == "cosine":
        assert (fig.data[0].zmin, fig.data[0].zmax) == (-1.0, 1.0)
    else:
        assert fig.data[0].zmax == pytest.approx(np.abs(sim).max(), rel=1e-6)
    assert axis_titles(fig) == ("position", "position")
    row = similarity_to(table, 5, metric)
    np.testing.assert_allclose(row, sim[5], rtol=1e-12, atol=1e-12)
    profile = similarity_profile(row, 5, metric)
    np.testing.assert_allclose(profile.data[0].y, sim[5].astype(np.float32))
    assert profile.layout.shapes[0].x0 == 5


def test_rope_angles_are_wrapped_to_degrees_with_radians_on_hover():
    angles = rope_angle_table(20, 8)
    fig = rope_angle_heatmap(angles, 3)
    np.testing.assert_allclose(fig.data[0].z, np.degrees(np.mod(angles, 2 * np.pi)), rtol=1e-5)
    np.testing.assert_array_equal(fig.data[0].customdata, angles)
    assert fig.data[0].z[7, 0] == pytest.approx(math.degrees(7 - 2 * math.pi), rel=1e-5)  # 7 rad, one turn off
    assert fig.layout.xaxis.title.text.startswith("pair i")


def test_offset_scores_figure_shows_masked_keys_as_gaps_and_says_what_it_found():
    rope = offset_scores(explorer.ModelConfig(positional="rope", arch="decoder"), "a", 10)
    fig = offset_figure(rope, "rope")
    z = np.asarray(fig.data[0].z)
    assert np.isnan(z[0, 1]) and not np.isnan(z[1, 0])
    assert "depends on the offset only" in fig.layout.title.text
    np.testing.assert_allclose(fig.data[-1].y, rope.by_offset.astype(np.float32))
    sinusoidal_fig = offset_figure(offset_scores(explorer.ModelConfig(), "a", 10), "sinusoidal")
    assert "diagonals vary" in sinusoidal_fig.layout.title.text


def test_permutation_figure_panels():
    demo = permutation_demo(explorer.ModelConfig(positional="none"), "I love AI you")
    fig = permutation_figure(demo, 1, 2)
    assert len(fig.data) == 3
    np.testing.assert_array_equal(fig.data[0].z, demo.attention[1, 2])
    np.testing.assert_array_equal(fig.data[1].z, demo.permuted_attention[1, 2])
    np.testing.assert_array_equal(fig.data[2].z, demo.shuffled_attention[1, 2])
    assert list(fig.data[0].x) == ["I", "love", "AI", "you"] and list(fig.data[2].x) == ["you", "AI", "love", "I"]
    assert "② and ③ agree" in fig.layout.title.text
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1
    moved = permutation_figure(permutation_demo(explorer.ModelConfig(), "I love AI you"), 0, 0)
    assert "② and ③ differ" in moved.layout.title.text


@pytest.fixture(scope="module")
def trace() -> explorer.Trace:
    return explorer.run(explorer.ModelConfig(n_layers=3, norm="pre"), TOKENS)


def test_depth_figure_draws_each_statistic_per_point(trace):
    stats = layer_statistics(trace.first)
    fig = depth_figure(stats, "encoder")
    residual_rms = [t for t in fig.data if t.name == "residual" and t.yaxis == "y3"][0]
    expected = stats[stats["point"] == "residual"].sort_values("layer")
    np.testing.assert_allclose(residual_rms.y, expected["rms"])
    assert list(residual_rms.x) == [-1, 0, 1, 2]
    assert fig.layout.xaxis.ticktext[0] == "input"
    assert {a.text for a in fig.layout.annotations} == {"mean", "standard deviation", "RMS", "max |x|"}
    assert sum(t.showlegend is not False for t in fig.data) == 4  # one legend entry per point


def test_layernorm_figure_pairs_input_and_output(trace):
    stats = layer_statistics(trace.first)
    fig = layernorm_figure(stats, "encoder", "pre")
    names = {t.name for t in fig.data}
    assert names == {
        "self-attention LayerNorm input",
        "self-attention LayerNorm output",
        "feed-forward LayerNorm input",
        "feed-forward LayerNorm output",
    }
    out = [t for t in fig.data if t.name == "feed-forward LayerNorm output" and t.xaxis == "x"][0]
    np.testing.assert_allclose(out.y, 1.0, atol=0.01)  # LayerNorm with gain 1 returns RMS about 1
    assert out.line.dash == "dash"


def test_token_norms_heatmap(trace):
    norms = token_norms(trace.first)
    fig = token_norm_heatmap(norms, TOKENS, "encoder")
    np.testing.assert_allclose(fig.data[0].z, norms.astype(np.float32))
    assert list(fig.data[0].y) == ["input", "after block 0", "after block 1", "after block 2"]
    assert list(fig.data[0].x) == ["the", "cat", "sat", "on", "the·4", "mat"]
    assert axis_titles(fig) == ("token", "layer")


def test_histogram_counts_every_value_and_calls_out_zeros(trace):
    hidden = trace.first.activations["blocks.0.ffn.hidden"]
    bins = value_histogram(hidden, bins=40)
    fig = histogram_figure(bins, "FFN hidden", "summary", log_count=True)
    assert int(np.sum(fig.data[0].y)) == hidden.size
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.title.text == "count (log scale)"
    assert fig.layout.shapes  # a line at 0 marks ReLU's exact zeros
    assert axis_titles(fig)[0] == "activation value"


def test_zero_fraction_and_head_grids(trace):
    zeros = ffn_zero_fraction(trace.first)
    fig = zero_fraction_figure(zeros, "encoder", "relu")
    np.testing.assert_allclose(fig.data[0].y, zeros["zero_fraction"])
    assert "ReLU" in fig.layout.title.text
    grid = head_grid(head_sparsity(trace.first.self_attention), "sparsity")
    heads = head_grid_figure(grid, "Sparsity", "sub", "sparsity", 0.0, 1.0)
    np.testing.assert_allclose(heads.data[0].z, grid.astype(np.float32))
    assert list(heads.data[0].x) == ["H0", "H1", "H2", "H3"] and list(heads.data[0].y) == ["L0", "L1", "L2"]
    assert axis_titles(heads) == ("head", "layer")


def test_gradient_figures():
    cfg = explorer.ModelConfig(arch="encoder-decoder", n_layers=2, d_model=16, n_heads=2, d_ff=32)
    norms = gradient_norms(explorer.build_model(cfg), "a b c", "x y z")
    totals = layer_gradient_totals(norms)
    fig = gradient_totals_figure(totals, "post")
    assert [t.name for t in fig.data] == ["encoder blocks", "decoder blocks"]
    np.testing.assert_allclose(fig.data[1].y, totals[totals["stack"] == "decoder"]["norm"])
    assert fig.layout.yaxis.type == "log"
    heat = gradient_heatmap(norms, "decoder")
    decoder = norms[norms["stack"] == "decoder"]
    assert list(heat.data[0].y) == list(dict.fromkeys(decoder["parameter"]))
    assert "multihead_attn.in_proj_weight" in heat.data[0].y
    value = decoder.query("layer == 1 and parameter == 'linear2.weight'")["norm"].item()
    row = list(heat.data[0].y).index("linear2.weight")
    assert heat.data[0].customdata[row][1] == pytest.approx(value, rel=1e-6)
    assert heat.data[0].z[row][1] == pytest.approx(math.log10(value), rel=1e-5)
    assert axis_titles(heat) == ("block", "parameter")


def test_gradient_heatmap_survives_a_zero_gradient():
    norms = pd.DataFrame(
        {"stack": "encoder", "layer": pd.array([0, 0, 1, 1], dtype="Int64"), "parameter": ["a", "b"] * 2}
    ).assign(norm=[0.0, 0.5, 2.0, 0.0])
    heat = gradient_heatmap(norms, "encoder")
    z = np.asarray(heat.data[0].z, dtype=float)
    assert np.isnan(z[0, 0]) and z[1, 0] == pytest.approx(math.log10(0.5))
